#include "runtime/operand_checks.hpp"

#include <string>

#include "kernels/shape_util.hpp"
#include "runtime/tensor_impl.hpp"
#include "tapegrad/errors.hpp"

namespace tapegrad::detail {

void require_defined(const char* op, const Tensor& x) {
  if (!x.defined()) throw InvalidArgument(std::string(op) + ": an argument is an undefined tensor");
  const TensorImpl& impl = impl_of(x);
  if (!impl.holds_elements) throw_variable_handle(op, impl);
}

void require_same_dtype(const char* op, const Tensor& x, const Tensor& y) {
  require_defined(op, x);
  require_defined(op, y);
  if (x.dtype() != y.dtype()) {
    throw InvalidArgument(describe(op, x, y) +
                          ": the dtypes differ (no implicit promotion; cast one)");
  }
}

}  // namespace tapegrad::detail
