#include "files/zip_file_sink.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tapegrad::detail::files {
namespace {

// Pending bytes are written once they reach this size, and a larger write goes straight to
// the file: a few large writes instead of libzip's 4 KB stdio ones.
constexpr std::size_t kWriteSize = std::size_t{1} << 20;

}  // namespace

ZipFileSink::ZipFileSink(int descriptor) : descriptor_(descriptor) {
  zip_error_init(&error_);
  pending_.reserve(kWriteSize);
}

ZipFileSink::~ZipFileSink() { zip_error_fini(&error_); }

zip_source_t* ZipFileSink::make_source(zip_error_t* error) {
  return zip_source_function_create(&ZipFileSink::callback, this, error);
}

zip_int64_t ZipFileSink::callback(void* self, void* data, zip_uint64_t length,
                                  zip_source_cmd_t command) {
  return static_cast<ZipFileSink*>(self)->handle(data, length, command);
}

zip_int64_t ZipFileSink::fail(int zip_code, int system_code) {
  zip_error_set(&error_, zip_code, system_code);
  return -1;
}

bool ZipFileSink::write_at(const char* bytes, std::size_t count, std::uint64_t offset) {
  while (count > 0) {
    const ssize_t written = ::pwrite(descriptor_, bytes, count, static_cast<off_t>(offset));
    if (written < 0) {
      if (errno == EINTR) continue;
      zip_error_set(&error_, ZIP_ER_WRITE, errno);
      return false;
    }
    bytes += written;
    count -= static_cast<std::size_t>(written);
    offset += static_cast<std::uint64_t>(written);
  }
  return true;
}

bool ZipFileSink::flush() {
  if (pending_.empty()) return true;
  const bool written = write_at(pending_.data(), pending_.size(), pending_offset_);
  pending_.clear();
  return written;
}

// Nothrow: libzip is C, so errors go back as -1 with error_ set, never as exceptions.
zip_int64_t ZipFileSink::handle(void* data, zip_uint64_t length, zip_source_cmd_t command) {
  switch (command) {
    case ZIP_SOURCE_SUPPORTS:
      return zip_source_make_command_bitmap(
          ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR,
          ZIP_SOURCE_FREE, ZIP_SOURCE_SEEK, ZIP_SOURCE_TELL, ZIP_SOURCE_SUPPORTS,
          ZIP_SOURCE_BEGIN_WRITE, ZIP_SOURCE_COMMIT_WRITE, ZIP_SOURCE_ROLLBACK_WRITE,
          ZIP_SOURCE_WRITE, ZIP_SOURCE_SEEK_WRITE, ZIP_SOURCE_TELL_WRITE, ZIP_SOURCE_REMOVE, -1);
    case ZIP_SOURCE_STAT:
      // The archive does not exist yet: libzip starts a new one without reading anything.
      return fail(ZIP_ER_READ, ENOENT);
    case ZIP_SOURCE_ERROR:
      return zip_error_to_data(&error_, data, length);
    case ZIP_SOURCE_OPEN:
    case ZIP_SOURCE_CLOSE:
    case ZIP_SOURCE_FREE:
    case ZIP_SOURCE_SEEK:
    case ZIP_SOURCE_REMOVE:
      return 0;
    case ZIP_SOURCE_READ:
    case ZIP_SOURCE_TELL:
      return 0;  // nothing to read: the archive is only ever written
    case ZIP_SOURCE_BEGIN_WRITE:
      pending_.clear();
      pending_offset_ = position_ = end_ = 0;
      if (::ftruncate(descriptor_, 0) != 0) return fail(ZIP_ER_WRITE, errno);
      return 0;
    case ZIP_SOURCE_WRITE: {
      const char* bytes = static_cast<const char*>(data);
      const bool continues_pending = position_ == pending_offset_ + pending_.size();
      if (!pending_.empty() && !continues_pending && !flush()) return -1;
      if (pending_.empty()) pending_offset_ = position_;
      if (pending_.empty() && length >= kWriteSize) {
        if (!write_at(bytes, length, position_)) return -1;
      } else {
        pending_.insert(pending_.end(), bytes, bytes + length);
        if (pending_.size() >= kWriteSize && !flush()) return -1;
      }
      position_ += length;
      if (position_ > end_) end_ = position_;
      return static_cast<zip_int64_t>(length);
    }
    case ZIP_SOURCE_SEEK_WRITE: {
      const auto* seek = ZIP_SOURCE_GET_ARGS(zip_source_args_seek_t, data, length, &error_);
      if (seek == nullptr) return -1;
      std::int64_t base = 0;
      if (seek->whence == SEEK_CUR) base = static_cast<std::int64_t>(position_);
      if (seek->whence == SEEK_END) base = static_cast<std::int64_t>(end_);
      if (seek->whence != SEEK_SET && seek->whence != SEEK_CUR && seek->whence != SEEK_END) {
        return fail(ZIP_ER_INVAL, 0);
      }
      const std::int64_t target = base + seek->offset;
      if (target < 0) return fail(ZIP_ER_INVAL, 0);
      position_ = static_cast<std::uint64_t>(target);
      return 0;
    }
    case ZIP_SOURCE_TELL_WRITE:
      return static_cast<zip_int64_t>(position_);
    case ZIP_SOURCE_COMMIT_WRITE:
      return flush() ? 0 : -1;
    case ZIP_SOURCE_ROLLBACK_WRITE:
      pending_.clear();
      return 0;
    default:
      return fail(ZIP_ER_OPNOTSUPP, 0);
  }
}

}  // namespace tapegrad::detail::files
