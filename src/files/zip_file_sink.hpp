// A libzip source that writes an archive straight into an open file: large writes at the
// offsets libzip asks for, no temporary file of libzip's own (the caller's AtomicFile is the
// temporary, and the caller commits it).
#pragma once

#include <zip.h>

#include <cstdint>
#include <vector>

namespace tapegrad::detail::files {

class ZipFileSink {
 public:
  // Writes into `descriptor` (open for writing, empty); the sink does not own it.
  explicit ZipFileSink(int descriptor);
  ZipFileSink(const ZipFileSink&) = delete;
  ZipFileSink& operator=(const ZipFileSink&) = delete;
  ~ZipFileSink();

  // A source for zip_open_from_source(..., ZIP_CREATE | ZIP_TRUNCATE, ...) that writes through
  // this sink, which must outlive the archive. nullptr (with `error` set) when libzip cannot
  // make one.
  zip_source_t* make_source(zip_error_t* error);

 private:
  static zip_int64_t callback(void* self, void* data, zip_uint64_t length,
                              zip_source_cmd_t command);
  zip_int64_t handle(void* data, zip_uint64_t length, zip_source_cmd_t command);
  bool flush();
  bool write_at(const char* bytes, std::size_t count, std::uint64_t offset);
  zip_int64_t fail(int zip_code, int system_code);

  int descriptor_;
  std::vector<char> pending_;  // bytes not yet written, for the file at pending_offset_
  std::uint64_t pending_offset_ = 0;
  std::uint64_t position_ = 0;  // where the next write goes
  std::uint64_t end_ = 0;       // the archive's size so far
  zip_error_t error_;
};

}  // namespace tapegrad::detail::files
