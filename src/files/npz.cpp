// save_npz and load_npz: named tensors to and from a .npz file (a zip archive of .npy
// members), through libzip.
#include <zip.h>

#include <array>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "files/file_io.hpp"
#include "files/npy_format.hpp"
#include "files/zip_file_sink.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/files.hpp"

namespace tapegrad {
namespace {

// libzip's handles, released by their owners' destructors.
struct ArchiveDiscard {
  // Frees an archive without writing it: the error paths, and every archive opened to read.
  void operator()(zip_t* archive) const { zip_discard(archive); }
};
using Archive = std::unique_ptr<zip_t, ArchiveDiscard>;
struct SourceFree {
  void operator()(zip_source_t* source) const { zip_source_free(source); }
};
using Source = std::unique_ptr<zip_source_t, SourceFree>;
struct MemberClose {
  void operator()(zip_file_t* member) const { zip_fclose(member); }
};
using Member = std::unique_ptr<zip_file_t, MemberClose>;

constexpr char kSuffix[] = ".npy";
constexpr std::size_t kSuffixSize = 4;

// The entry's name as a message shows it: control characters (a NUL would end what()) as
// \xNN; other bytes, UTF-8 included, as they are.
std::string entry_context(const std::string& call, const std::string& name) {
  std::string shown;
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      shown += "\\x";
      shown += kHex[byte >> 4];
      shown += kHex[byte & 0xf];
    } else {
      shown += c;
    }
  }
  return call + ", entry \"" + shown + "\"";
}

// A libzip error record, released by its destructor; text() is libzip's message for it.
class ZipError {
 public:
  ZipError() { zip_error_init(&error_); }
  explicit ZipError(int code) { zip_error_init_with_code(&error_, code); }
  ZipError(const ZipError&) = delete;
  ZipError& operator=(const ZipError&) = delete;
  ~ZipError() { zip_error_fini(&error_); }
  zip_error_t* get() { return &error_; }
  std::string text() { return zip_error_strerror(&error_); }

 private:
  zip_error_t error_;
};

// libzip's text for an error code from zip_open.
std::string zip_error_text(int code) { return ZipError(code).text(); }

// A member of an open archive as read_npy's input.
class MemberSource final : public detail::npy::ByteSource {
 public:
  MemberSource(zip_file_t* member, std::string context)
      : member_(member), context_(std::move(context)) {}
  std::size_t read(void* buffer, std::size_t count) override {
    auto* bytes = static_cast<unsigned char*>(buffer);
    std::size_t done = 0;
    while (done < count) {
      const zip_int64_t got = zip_fread(member_, bytes + done, count - done);
      // libzip reports a member whose data do not match its recorded size or CRC-32 here.
      if (got < 0) {
        throw InvalidArgument(context_ + ": cannot read the entry: " + zip_file_strerror(member_));
      }
      if (got == 0) break;
      done += static_cast<std::size_t>(got);
    }
    return done;
  }

 private:
  zip_file_t* member_;
  std::string context_;
};

// Deflate cannot shrink data by more than about 1032:1; a member that claims more than that
// from its compressed size is lying, and must not get an array of its claimed size.
constexpr std::uint64_t kDeflateRatio = 1032;

Tensor read_member(zip_t* archive, zip_uint64_t index, const zip_stat_t& status,
                   std::uint64_t archive_size, const std::string& context) {
  constexpr zip_uint64_t kNeeded =
      ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
  if ((status.valid & kNeeded) != kNeeded) {
    throw InvalidArgument(context + ": the archive does not record the entry's sizes");
  }
  if (status.encryption_method != ZIP_EM_NONE) {
    throw InvalidArgument(context + ": the entry is encrypted");
  }
  if (status.comp_size > archive_size) {
    throw InvalidArgument(context + ": the entry claims " + std::to_string(status.comp_size) +
                          " compressed bytes, more than the archive's " +
                          std::to_string(archive_size) + " (corrupt)");
  }
  if (status.comp_method == ZIP_CM_STORE) {
    if (status.size != status.comp_size) {
      throw InvalidArgument(context + ": a stored entry of " + std::to_string(status.comp_size) +
                            " bytes claims " + std::to_string(status.size) + " (corrupt)");
    }
  } else if (status.comp_method == ZIP_CM_DEFLATE) {
    if (status.size / kDeflateRatio > status.comp_size) {
      throw InvalidArgument(context + ": a deflated entry of " + std::to_string(status.comp_size) +
                            " bytes claims " + std::to_string(status.size) +
                            " uncompressed (corrupt)");
    }
  } else {
    // NumPy writes stored (savez) or deflated (savez_compressed) members only.
    throw InvalidArgument(context + ": compression method " + std::to_string(status.comp_method) +
                          " (tapegrad reads stored and deflated entries, as NumPy writes them)");
  }
  Member member(zip_fopen_index(archive, index, 0));
  if (!member) {
    throw InvalidArgument(context + ": cannot open the entry: " + zip_strerror(archive));
  }
  MemberSource source(member.get(), context);
  Tensor tensor = detail::npy::read_npy(source, status.size, context);
  // read_npy stopped at the size the archive records; reading on to the member's end is what
  // makes libzip compare the CRC-32 (a corrupt member would otherwise pass unnoticed).
  unsigned char extra = 0;
  if (source.read(&extra, 1) != 0) {
    throw InvalidArgument(context + ": the entry holds more bytes than the archive records");
  }
  return tensor;
}

// Every member of an open archive, in the archive's order.
std::vector<std::pair<std::string, Tensor>> read_members(zip_t* archive, std::uint64_t archive_size,
                                                         const std::string& call) {
  const zip_int64_t count = zip_get_num_entries(archive, 0);
  if (count < 0) throw InvalidArgument(call + ": cannot count the archive's entries");

  std::vector<std::pair<std::string, Tensor>> tensors;
  std::set<std::string> seen;
  for (zip_int64_t index = 0; index < count; ++index) {
    const auto member_index = static_cast<zip_uint64_t>(index);
    zip_stat_t status;
    zip_stat_init(&status);
    if (zip_stat_index(archive, member_index, 0, &status) != 0 ||
        (status.valid & ZIP_STAT_NAME) == 0 || status.name == nullptr) {
      throw InvalidArgument(call + ": cannot read entry " + std::to_string(index) + ": " +
                            zip_strerror(archive));
    }
    std::string name = status.name;
    // A folder entry (some zip tools add them for "conv1/...") holds no array.
    if (!name.empty() && name.back() == '/') continue;
    // NumPy's own naming: array "w" is member "w.npy"; another member keeps its name.
    if (name.size() >= kSuffixSize &&
        name.compare(name.size() - kSuffixSize, kSuffixSize, kSuffix) == 0) {
      name.resize(name.size() - kSuffixSize);
    }
    const std::string context = entry_context(call, name);
    if (!seen.insert(name).second) {
      throw InvalidArgument(context + ": the name appears twice in the archive");
    }
    tensors.emplace_back(name, read_member(archive, member_index, status, archive_size, context));
  }
  return tensors;
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> load_npz(const std::string& path) {
  const std::string call = detail::files::describe_call("load_npz", path);
  // Opened first for a clear message (missing, a folder) and the size that bounds members.
  const std::uint64_t archive_size = detail::files::open_input_file(path, call).size;
  int error_code = 0;
  // Without ZIP_CHECKCONS: its archive-wide check would refuse a lying member before its name
  // is known; each member's sizes and CRC-32 are checked as it is read instead, so that the
  // message can name the entry.
  Archive archive(zip_open(path.c_str(), ZIP_RDONLY, &error_code));
  if (!archive) {
    throw InvalidArgument(call + ": not a readable zip archive: " + zip_error_text(error_code));
  }
  return read_members(archive.get(), archive_size, call);
}

namespace detail::files {

std::vector<std::pair<std::string, Tensor>> load_npz_bytes(const std::vector<char>& bytes,
                                                           const std::string& path) {
  const std::string call = describe_call("load_npz", path);
  ZipError error;
  Source source(zip_source_buffer_create(bytes.data(), bytes.size(), 0, error.get()));
  Archive archive(source ? zip_open_from_source(source.get(), ZIP_RDONLY, error.get()) : nullptr);
  if (!archive) throw InvalidArgument(call + ": not a readable zip archive: " + error.text());
  source.release();  // the archive owns it now
  return read_members(archive.get(), bytes.size(), call);
}

}  // namespace detail::files

void save_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  const std::string call = detail::files::describe_call("save_npz", path);
  // Everything that can be refused is checked before the file is created.
  std::set<std::string> seen;
  std::vector<detail::npy::ElementBytes> elements;
  std::vector<std::string> headers;
  elements.reserve(tensors.size());
  headers.reserve(tensors.size());  // no reallocation: libzip keeps pointers into the headers
  for (const auto& [name, tensor] : tensors) {
    const std::string context = entry_context(call, name);
    if (name.empty()) throw InvalidArgument(context + ": the name is empty");
    // libzip takes names as C strings: a NUL would cut the name short.
    if (name.find('\0') != std::string::npos) {
      throw InvalidArgument(context + ": the name contains a NUL character");
    }
    if (!seen.insert(name).second) throw InvalidArgument(context + ": the name is given twice");
    elements.push_back(detail::npy::element_bytes(tensor, context));
    headers.push_back(detail::npy::format_header(tensor.dtype(), tensor.shape()));
  }

  detail::files::AtomicFile file(path, call);
  if (tensors.empty()) {
    // libzip deletes an archive left with no members instead of writing it, so the empty
    // archive numpy.savez() writes (only the 22-byte end-of-central-directory record: its
    // signature "PK\5\6", then zero counts, sizes, offsets and comment length) is written here.
    const unsigned char empty_archive[22] = {'P', 'K', 5, 6};
    file.write(empty_archive, sizeof empty_archive);
    file.commit();
    return;
  }
  // libzip writes the archive into the temporary through a sink of ours (large writes, no
  // temporary of libzip's own); commit() then fsyncs it and renames it over the target, so the
  // target is only ever replaced whole.
  detail::files::ZipFileSink sink(file.descriptor());
  ZipError error;
  Source sink_source(sink.make_source(error.get()));
  Archive archive(
      sink_source ? zip_open_from_source(sink_source.get(), ZIP_CREATE | ZIP_TRUNCATE, error.get())
                  : nullptr);
  if (!archive) throw InvalidArgument(call + ": cannot create the archive: " + error.text());
  sink_source.release();  // the archive owns it now
  // Each member's bytes as two fragments, the header and the tensor's own storage, so the
  // elements are not copied. libzip only reads them (the fragment type is not const-qualified).
  // The headers, the tensors and these descriptions all outlive the archive, which reads
  // them at zip_close (whether libzip copies the descriptions is not documented).
  std::vector<std::array<zip_buffer_fragment_t, 2>> fragments(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string& name = tensors[i].first;
    const std::string context = entry_context(call, name);
    fragments[i][0] = {reinterpret_cast<zip_uint8_t*>(headers[i].data()), headers[i].size()};
    fragments[i][1] = {const_cast<zip_uint8_t*>(static_cast<const zip_uint8_t*>(elements[i].data)),
                       elements[i].size};
    // An empty tensor's storage may be a null pointer, which libzip refuses even for 0 bytes.
    const zip_uint64_t fragment_count = elements[i].size > 0 ? 2 : 1;
    Source source(
        zip_source_buffer_fragment(archive.get(), fragments[i].data(), fragment_count, 0));
    if (!source) {
      throw InvalidArgument(context + ": cannot add the entry: " + zip_strerror(archive.get()));
    }
    const std::string member_name = name + kSuffix;
    const zip_int64_t index = zip_file_add(archive.get(), member_name.c_str(), source.get(), 0);
    if (index < 0) {
      throw InvalidArgument(context + ": cannot add the entry: " + zip_strerror(archive.get()));
    }
    source.release();  // the archive owns it now
    // Stored, as numpy.savez writes (savez_compressed's deflate is not offered).
    if (zip_set_file_compression(archive.get(), static_cast<zip_uint64_t>(index), ZIP_CM_STORE,
                                 0) != 0) {
      throw InvalidArgument(context + ": cannot store the entry: " + zip_strerror(archive.get()));
    }
  }
  if (zip_close(archive.get()) != 0) {
    throw InvalidArgument(call + ": cannot write the archive: " + zip_strerror(archive.get()));
  }
  archive.release();  // zip_close freed it
  file.commit();
}

}  // namespace tapegrad
