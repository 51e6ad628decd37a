#include "functional/identity_rows.hpp"

#include <cstring>
#include <string>
#include <utility>

#include "ops/internal_ops.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/linalg.hpp"
#include "tapegrad/ops/math.hpp"

namespace tapegrad::detail {
namespace {

std::vector<std::int64_t> dims(const Shape& shape) {
  return std::vector<std::int64_t>(shape.begin(), shape.end());
}

bool same(const char* a, const char* b) { return std::strcmp(a, b) == 0; }

// The fused activation gradient named `name` (ops/internal_ops.hpp), or null. Each is F(y, g) =
// g s(y), linear in g: with y constant and g diagonal (row b is e_b d[b]), row b of the
// output is e_b F(y, d)[b], so F of the diagonal is the output's diagonal.
using FusedGradient = Tensor (*)(const Tensor& y, const Tensor& g);
FusedGradient fused_gradient_named(const char* name) {
  static constexpr std::pair<const char*, FusedGradient> kFused[] = {
      {"TanhGrad", tanh_grad_op},
      {"SigmoidGrad", sigmoid_grad_op},
      {"ReluGrad", relu_grad_op},
      {"SoftplusGrad", softplus_grad_op},
      {"EluGrad", elu_grad_op},
      {"GeluGrad", gelu_grad_op},
      {"GeluTanhGrad", gelu_tanh_grad_op},
      {"ReciprocalGrad", reciprocal_grad_op},
      {"SqrtGrad", sqrt_grad_op},
      {"RsqrtGrad", rsqrt_grad_op},
  };
  for (const auto& [fused_name, fused] : kFused) {
    if (same(name, fused_name)) return fused;
  }
  return nullptr;
}

// A constant that broadcasts into `shape` without changing it.
bool fits_into(const Tensor& c, const Shape& shape) {
  if (c.rank() > shape.size()) return false;
  const std::size_t lead = shape.size() - c.rank();
  for (std::size_t i = 0; i < c.rank(); ++i) {
    if (c.shape()[i] != 1 && c.shape()[i] != shape[lead + i]) return false;
  }
  return true;
}

// A matrix product with one operand constant (a matrix) and the other diagonal whose
// effective operand (after its transpose flag) is a column [k, 1] (right) or a row [1, k]
// (left): row b of the result is d[b] times column b of op(a) (right), or row b of op(b)
// (left), laid out as the output.
std::optional<std::vector<Tensor>> matmul_diagonal(const Attrs* attrs,
                                                   const std::vector<ReplayValue>& v,
                                                   const std::vector<Tensor>& c,
                                                   const Shape& out_example) {
  if (attrs == nullptr) return std::nullopt;
  const bool ta = attrs->get_bool("transpose_a");
  const bool tb = attrs->get_bool("transpose_b");
  Shape out{0};
  out.insert(out.end(), out_example.begin(), out_example.end());
  if (v[1].is_diagonal() && c[0].defined() && c[0].rank() == 2) {
    const Tensor& d = v[1].diagonal;
    const Shape& s = d.shape();
    const bool column = s.size() == 2 && (tb ? s[0] == 1 : s[1] == 1);
    if (!column) return std::nullopt;
    const std::size_t k = d.size();
    out[0] = k;
    // out[b, i] = op(a)[i, b] d[b]: the rows of op(a)^T scaled.
    const Tensor a_t = ta ? c[0] : transpose(c[0]);
    const Tensor scaled = multiply(a_t, reshape(d, {static_cast<std::int64_t>(k), 1}));
    return std::vector<Tensor>{reshape(scaled, dims(out))};
  }
  if (v[0].is_diagonal() && c[1].defined() && c[1].rank() == 2) {
    const Tensor& d = v[0].diagonal;
    const Shape& s = d.shape();
    const bool row = s.size() == 2 && (ta ? s[1] == 1 : s[0] == 1);
    if (!row) return std::nullopt;
    const std::size_t k = d.size();
    out[0] = k;
    // out[b, j] = d[b] op(b)[b, j]: the rows of op(b) scaled.
    const Tensor b_op = tb ? transpose(c[1]) : c[1];
    const Tensor scaled = multiply(b_op, reshape(d, {static_cast<std::int64_t>(k), 1}));
    return std::vector<Tensor>{reshape(scaled, dims(out))};
  }
  return std::nullopt;
}

}  // namespace

Tensor dense_of_diagonal(const Tensor& d, const Shape& shape) {
  return diagonal_blocks(d, d.size(), shape);
}

Tensor dense_of_diagonal(const Tensor& d) {
  Shape shape{d.size()};
  shape.insert(shape.end(), d.shape().begin(), d.shape().end());
  return dense_of_diagonal(d, shape);
}

std::optional<std::vector<Tensor>> diagonal_outputs(const OpDefinition& op, const Attrs*,
                                                    const std::vector<ReplayValue>& values,
                                                    const std::vector<Tensor>& constants,
                                                    const std::vector<Shape>& output_shapes) {
  const char* name = op.name;
  if (name == nullptr) return std::nullopt;
  // Dense batched inputs mixed in: no structure to keep.
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!constants[i].defined() && !values[i].is_diagonal()) return std::nullopt;
  }
  const auto diag = [&](std::size_t i) -> const Tensor& { return values[i].diagonal; };
  const auto is_diag = [&](std::size_t i) { return values[i].is_diagonal(); };
  const Shape& out = output_shapes.empty() ? Shape{} : output_shapes[0];

  if (same(name, "Identity") || same(name, "Reshape")) {
    Tensor d = same(name, "Reshape") ? reshape(diag(0), dims(out)) : diag(0);
    return std::vector<Tensor>{std::move(d)};
  }
  if (same(name, "Neg")) return std::vector<Tensor>{negative(diag(0))};
  if (same(name, "Add") || same(name, "Sub")) {
    if (!is_diag(0) || !is_diag(1) || diag(0).shape() != out || diag(1).shape() != out) {
      return std::nullopt;
    }
    return std::vector<Tensor>{same(name, "Add") ? add(diag(0), diag(1))
                                                 : subtract(diag(0), diag(1))};
  }
  if (same(name, "Mul")) {
    if (is_diag(0) && is_diag(1)) {
      if (diag(0).shape() != out || diag(1).shape() != out) return std::nullopt;
      return std::vector<Tensor>{multiply(diag(0), diag(1))};
    }
    const std::size_t v = is_diag(0) ? 0 : 1;
    if (diag(v).shape() != out || !fits_into(constants[1 - v], out)) return std::nullopt;
    return std::vector<Tensor>{v == 0 ? multiply(diag(0), constants[1])
                                      : multiply(constants[0], diag(1))};
  }
  if (same(name, "RealDiv")) {
    if (!is_diag(0) || is_diag(1) || diag(0).shape() != out || !fits_into(constants[1], out)) {
      return std::nullopt;
    }
    return std::vector<Tensor>{divide(diag(0), constants[1])};
  }
  if (const FusedGradient fused = fused_gradient_named(name)) {
    if (is_diag(0) || !is_diag(1) || constants[0].shape() != diag(1).shape()) return std::nullopt;
    return std::vector<Tensor>{fused(constants[0], diag(1))};
  }
  return std::nullopt;
}

std::optional<std::vector<Tensor>> diagonal_matmul(const OpDefinition& op, const Attrs* attrs,
                                                   const std::vector<ReplayValue>& values,
                                                   const std::vector<Tensor>& constants,
                                                   const std::vector<Shape>& output_shapes) {
  if (!same(op.name, "MatMul")) return std::nullopt;
  return matmul_diagonal(attrs, values, constants, output_shapes[0]);
}

}  // namespace tapegrad::detail
