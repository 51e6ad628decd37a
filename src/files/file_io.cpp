// POSIX file plumbing for the NumPy file functions (see file_io.hpp).
#include "files/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "tapegrad/errors.hpp"

namespace tapegrad::detail::files {

std::string describe_call(const char* function, const std::string& path) {
  return std::string(function) + "(\"" + path + "\")";
}

std::string system_error_text(int error_number) {
  // strerror is not thread-safe and strerror_r has two incompatible signatures; std::strerror
  // of a valid errno returns a constant string on glibc, which is all that is needed here.
  return std::strerror(error_number);
}

FileDescriptor::FileDescriptor(FileDescriptor&& other) noexcept
    : descriptor_(std::exchange(other.descriptor_, -1)) {}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    close_checked();
    descriptor_ = std::exchange(other.descriptor_, -1);
  }
  return *this;
}

FileDescriptor::~FileDescriptor() { close_checked(); }

int FileDescriptor::close_checked() {
  if (descriptor_ < 0) return 0;
  // Linux releases the descriptor even when close fails (EINTR included): never retry.
  const int result = ::close(std::exchange(descriptor_, -1));
  return result == 0 ? 0 : errno;
}

InputFile open_input_file(const std::string& path, const std::string& call) {
  InputFile file;
  file.descriptor = FileDescriptor(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file.descriptor.is_open()) {
    throw InvalidArgument(call + ": cannot open the file: " + system_error_text(errno));
  }
  struct stat status {};
  if (::fstat(file.descriptor.get(), &status) != 0) {
    throw InvalidArgument(call + ": cannot read the file's size: " + system_error_text(errno));
  }
  // A folder opens for reading on Linux, and a pipe has no size to check a header against.
  if (!S_ISREG(status.st_mode)) {
    throw InvalidArgument(call + ": not a regular file" +
                          (S_ISDIR(status.st_mode) ? std::string(" (a folder)") : std::string()));
  }
  file.size = static_cast<std::uint64_t>(status.st_size);
  return file;
}

std::size_t read_fully(int descriptor, void* buffer, std::size_t count, const std::string& call) {
  auto* bytes = static_cast<unsigned char*>(buffer);
  std::size_t done = 0;
  while (done < count) {
    const ssize_t got = ::read(descriptor, bytes + done, count - done);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw InvalidArgument(call + ": cannot read the file: " + system_error_text(errno));
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

std::vector<char> read_whole_file(const std::string& path, const std::string& call) {
  InputFile file = open_input_file(path, call);
  std::vector<char> bytes(static_cast<std::size_t>(file.size));
  const std::size_t got = read_fully(file.descriptor.get(), bytes.data(), bytes.size(), call);
  // A file that shrank while it was read: what was read is all there is (the parser refuses a
  // torn archive).
  bytes.resize(got);
  return bytes;
}

namespace {

// The folder part of a path ("." for a bare name), for the folder's fsync after the rename.
std::string folder_of(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// A suffix no other writer of the same target is using: the process id tells processes apart,
// the counter threads and calls, and the random part survives pid reuse after a crash left a
// temporary behind (O_EXCL refuses a clash anyway; this only makes one unlikely).
std::string temporary_suffix() {
  static std::atomic<std::uint64_t> counter{0};
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)) + "-" +
         std::to_string(generator() % 1000000007ULL);
}

}  // namespace

AtomicFile::AtomicFile(const std::string& target, std::string call)
    : target_(target), call_(std::move(call)) {
  if (target.empty()) throw InvalidArgument(call_ + ": the path is empty");
  // A target that is a folder would fail only at the rename, after the whole write: say so now.
  struct stat status {};
  if (::stat(target.c_str(), &status) == 0 && S_ISDIR(status.st_mode)) {
    throw InvalidArgument(call_ + ": the path is a folder");
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string candidate = target + temporary_suffix();
    // 0666 & ~umask, like numpy.save's open(): O_EXCL never reuses a file another writer made.
    descriptor_ =
        FileDescriptor(::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
    if (descriptor_.is_open()) {
      temporary_path_ = std::move(candidate);
      return;
    }
    if (errno != EEXIST) {
      throw InvalidArgument(call_ + ": cannot create a file in the folder " + folder_of(target) +
                            ": " + system_error_text(errno));
    }
  }
  throw InvalidArgument(call_ + ": no unused temporary name next to the path after 100 tries");
}

AtomicFile::~AtomicFile() {
  if (!committed_ && !temporary_path_.empty()) {
    descriptor_.close_checked();
    ::unlink(temporary_path_.c_str());  // best effort: the error being reported matters more
  }
}

void AtomicFile::write(const void* bytes, std::size_t count) {
  const auto* data = static_cast<const unsigned char*>(bytes);
  while (count > 0) {
    const ssize_t written = ::write(descriptor_.get(), data, count);
    if (written < 0) {
      if (errno == EINTR) continue;
      throw InvalidArgument(call_ + ": cannot write the file: " + system_error_text(errno));
    }
    data += written;
    count -= static_cast<std::size_t>(written);
  }
}

void AtomicFile::commit() {
  // Without the fsync, a crash soon after the rename could leave the new name with no data
  // (the rename reaches the disk before the contents on some file systems).
  if (::fsync(descriptor_.get()) != 0) {
    throw InvalidArgument(call_ + ": cannot flush the file to disk: " + system_error_text(errno));
  }
  if (const int error = descriptor_.close_checked(); error != 0) {
    throw InvalidArgument(call_ + ": cannot close the file: " + system_error_text(error));
  }
  if (::rename(temporary_path_.c_str(), target_.c_str()) != 0) {
    throw InvalidArgument(call_ + ": cannot replace the file: " + system_error_text(errno));
  }
  committed_ = true;
  // The rename is durable once the folder is: best effort, because the new file is already in
  // place and some file systems refuse a folder's fsync (failing the save now would be wrong).
  FileDescriptor folder(::open(folder_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (folder.is_open()) ::fsync(folder.get());
}

}  // namespace tapegrad::detail::files
