// POSIX file plumbing for the NumPy file functions: an owned file descriptor, a file
// written atomically (a temporary next to the target, fsync'ed, renamed over it), and reading
// a .npz from memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tapegrad::detail::files {

// "save_npy(\"/tmp/w.npy\")": how every message of the file functions begins, so that it names
// the function and the path.
std::string describe_call(const char* function, const std::string& path);

// The system's text for errno `error_number` ("No such file or directory").
std::string system_error_text(int error_number);

// Owns a file descriptor: closed by the destructor (the value -1 owns nothing).
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int descriptor) : descriptor_(descriptor) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor(FileDescriptor&& other) noexcept;
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  ~FileDescriptor();

  int get() const { return descriptor_; }
  bool is_open() const { return descriptor_ >= 0; }
  // Closes now, returning close()'s errno (0 on success): a write's last error can surface
  // only here, so a writer must check it.
  int close_checked();

 private:
  int descriptor_ = -1;
};

// A regular file opened for reading, with its size. Throws InvalidArgument starting with
// `call` (describe_call) when it cannot be opened or is not a regular file.
struct InputFile {
  FileDescriptor descriptor;
  std::uint64_t size = 0;
};
InputFile open_input_file(const std::string& path, const std::string& call);

// Reads up to `count` bytes, retrying short reads: fewer than `count` only at the end of the
// file. Throws InvalidArgument starting with `call` on a read error.
std::size_t read_fully(int descriptor, void* buffer, std::size_t count, const std::string& call);

// A new file that replaces `target` only when commit() succeeds. The constructor creates an
// unused temporary name in the target's folder (O_EXCL, mode 0666 & ~umask, as a plain
// create would); the destructor removes the temporary unless it was committed, so a failed
// save leaves the old target untouched and no stray file behind.
class AtomicFile {
 public:
  AtomicFile(const std::string& target, std::string call);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  const std::string& temporary_path() const { return temporary_path_; }
  // Writes to the open temporary. Throws InvalidArgument on a write error (a full disk).
  void write(const void* bytes, std::size_t count);
  // The open temporary, for a writer that writes at offsets (the .npz archive's sink).
  int descriptor() const { return descriptor_.get(); }
  // fsync()s the temporary, renames it over the target and fsyncs the folder so that the
  // rename itself survives a crash.
  void commit();

 private:
  std::string target_;
  std::string call_;
  std::string temporary_path_;
  FileDescriptor descriptor_;
  bool committed_ = false;
};

// The whole of a regular file, for a reader that works from memory (Checkpoint::restore
// across MPI ranks). Throws InvalidArgument starting with `call` as open_input_file does.
std::vector<char> read_whole_file(const std::string& path, const std::string& call);

// load_npz of a .npz file's bytes already in memory; messages name `path` as load_npz's do.
std::vector<std::pair<std::string, Tensor>> load_npz_bytes(const std::vector<char>& bytes,
                                                           const std::string& path);

}  // namespace tapegrad::detail::files
