// save_npy and load_npy: one tensor to and from a .npy file on disk.
#include <string>
#include <utility>

#include "files/file_io.hpp"
#include "files/npy_format.hpp"
#include "tapegrad/files.hpp"

namespace tapegrad {
namespace {

// A .npy file on disk as read_npy's input.
class FileSource final : public detail::npy::ByteSource {
 public:
  FileSource(int descriptor, std::string call) : descriptor_(descriptor), call_(std::move(call)) {}
  std::size_t read(void* buffer, std::size_t count) override {
    return detail::files::read_fully(descriptor_, buffer, count, call_);
  }

 private:
  int descriptor_;
  std::string call_;
};

}  // namespace

void save_npy(const std::string& path, const Tensor& tensor) {
  const std::string call = detail::files::describe_call("save_npy", path);
  // Everything that can be refused is checked before the file is created.
  const detail::npy::ElementBytes elements = detail::npy::element_bytes(tensor, call);
  const std::string header = detail::npy::format_header(tensor.dtype(), tensor.shape());
  detail::files::AtomicFile file(path, call);
  file.write(header.data(), header.size());
  file.write(elements.data, elements.size);
  file.commit();
}

Tensor load_npy(const std::string& path) {
  const std::string call = detail::files::describe_call("load_npy", path);
  detail::files::InputFile file = detail::files::open_input_file(path, call);
  FileSource source(file.descriptor.get(), call);
  return detail::npy::read_npy(source, file.size, call);
}

}  // namespace tapegrad
