// Every built-in op's forward rule (OpDefinition::forward_rule) against TF's generic fallback
// (the transpose of the op's gradient rule): on one small example per op, the output tangents
// of both agree to 1e-10 along two random tangent directions. The table below names every op
// that has a rule; the first test fails when an op gains a rule without an example here.
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "support.hpp"

#include "ops/internal_ops.hpp"
#include "ops/math/math_special.hpp"
#include "ops/nn/conv_ops.hpp"
#include "ops/reduce/reduce_support.hpp"
#include "runtime/forward_context.hpp"
#include "runtime/op_registry.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

using Outputs = std::vector<Tensor>;

// Fixed float64 inputs (and integer ones where the op takes indices) and the public op on them.
struct Example {
  std::vector<Tensor> inputs;
  std::function<Outputs(const std::vector<Tensor>&)> run;
};

Tensor positive(const Shape& shape, unsigned seed) { return random_tensor(shape, seed, 0.5, 2.0); }

const std::map<std::string, Example>& examples() {
  static const std::map<std::string, Example> table = [] {
    std::map<std::string, Example> t;
    const Tensor a = random_tensor({2, 3}, 1);
    const Tensor b = random_tensor({2, 3}, 2);
    const Tensor row = random_tensor({3}, 3);
    const Tensor p = positive({2, 3}, 4);
    auto unary = [&](Tensor (*f)(const Tensor&), const Tensor& x) {
      return Example{{x}, [f](const std::vector<Tensor>& in) { return Outputs{f(in[0])}; }};
    };
    auto binary = [&](Tensor (*f)(const Tensor&, const Tensor&), const Tensor& x, const Tensor& y) {
      return Example{{x, y},
                     [f](const std::vector<Tensor>& in) { return Outputs{f(in[0], in[1])}; }};
    };
    // math_unary.cpp
    t["Abs"] = unary(tapegrad::abs, a);
    t["Sign"] = unary(tapegrad::sign, a);
    t["Square"] = unary(tapegrad::square, a);
    t["Sqrt"] = unary(tapegrad::sqrt, p);
    t["Exp"] = unary(tapegrad::exp, a);
    t["Log"] = unary(tapegrad::log, p);
    t["Log1p"] = unary(tapegrad::log1p, p);
    t["Sin"] = unary(tapegrad::sin, a);
    t["Cos"] = unary(tapegrad::cos, a);
    t["Expm1"] = unary(tapegrad::expm1, a);
    t["Rsqrt"] = unary(tapegrad::rsqrt, p);
    t["SqrtGrad"] = binary(detail::sqrt_grad_op, tapegrad::sqrt(p), b);
    t["RsqrtGrad"] = binary(detail::rsqrt_grad_op, tapegrad::rsqrt(p), b);
    // math_trig.cpp (a is in [-1, 1): scaled into asin's and atanh's open domain)
    const Tensor inside = multiply(a, scalar(0.8, DType::Float64));
    t["Tan"] = unary(tapegrad::tan, a);
    t["Asin"] = unary(tapegrad::asin, inside);
    t["Acos"] = unary(tapegrad::acos, inside);
    t["Atan"] = unary(tapegrad::atan, a);
    t["Sinh"] = unary(tapegrad::sinh, a);
    t["Cosh"] = unary(tapegrad::cosh, a);
    t["Asinh"] = unary(tapegrad::asinh, a);
    t["Acosh"] = unary(tapegrad::acosh, add(p, scalar(1.0, DType::Float64)));
    t["Atanh"] = unary(tapegrad::atanh, inside);
    // math_rounding.cpp
    t["Floor"] = unary(tapegrad::floor, a);
    t["Ceil"] = unary(tapegrad::ceil, a);
    t["Round"] = unary(tapegrad::round, a);
    t["Tanh"] = unary(tapegrad::tanh, a);
    t["TanhGrad"] = binary(detail::tanh_grad_op, tapegrad::tanh(a), b);
    t["Reciprocal"] = unary(tapegrad::reciprocal, p);
    t["ReciprocalGrad"] = binary(detail::reciprocal_grad_op, tapegrad::reciprocal(p), b);
    // math.cpp: the broadcasting ones with a row operand on either side.
    t["Add"] = binary(tapegrad::add, a, row);
    t["Sub"] = binary(tapegrad::subtract, row, a);
    t["Mul"] = binary(tapegrad::multiply, a, row);
    t["RealDiv"] = binary(tapegrad::divide, row, p);
    t["Neg"] = unary(tapegrad::negative, a);
    t["Pow"] = binary(tapegrad::pow, p, a);
    t["Maximum"] = binary(tapegrad::maximum, a, row);
    t["Minimum"] = binary(tapegrad::minimum, row, b);
    // nn.cpp
    t["Relu"] = unary(tapegrad::relu, a);
    t["ReluGrad"] = binary(detail::relu_grad_op, tapegrad::relu(a), b);
    t["Sigmoid"] = unary(tapegrad::sigmoid, a);
    t["SigmoidGrad"] = binary(detail::sigmoid_grad_op, tapegrad::sigmoid(a), b);
    t["Softplus"] = unary(tapegrad::softplus, a);
    t["SoftplusGrad"] = binary(detail::softplus_grad_op, a, b);
    t["Softmax"] = Example{{a}, [](const auto& in) { return Outputs{softmax(in[0], 0)}; }};
    t["LogSoftmax"] = Example{{a}, [](const auto& in) { return Outputs{log_softmax(in[0], -1)}; }};
    t["SoftmaxCrossEntropyWithLogits"] =
        binary(tapegrad::softmax_cross_entropy_with_logits, softmax(b, -1), a);
    t["SigmoidCrossEntropyWithLogits"] =
        binary(tapegrad::sigmoid_cross_entropy_with_logits, tapegrad::sigmoid(b), a);
    // reduce.cpp, reduce_extrema.cpp: over one axis kept, over all dropped; Prod also with
    // one zero in a group (the zero-aware partials), Max with a tie.
    const Tensor with_zero = from_values({0.0, 1.5, -0.5, 2.0, 0.7, 1.2}, {2, 3});
    const Tensor with_tie = from_values({0.3, 0.9, 0.9, -1.0, 0.2, 0.1}, {2, 3});
    t["Sum"] = Example{{a}, [](const auto& in) { return Outputs{reduce_sum(in[0], {1}, true)}; }};
    t["Mean"] = Example{{a}, [](const auto& in) { return Outputs{reduce_mean(in[0])}; }};
    t["Prod"] = Example{{with_zero}, [](const auto& in) {
                          return Outputs{reduce_prod(in[0], {1}), reduce_prod(in[0], {0}, true)};
                        }};
    t["ReduceLogSumExp"] =
        Example{{a}, [](const auto& in) { return Outputs{reduce_logsumexp(in[0], {0})}; }};
    t["Max"] = Example{{with_tie}, [](const auto& in) {
                         return Outputs{reduce_max(in[0], {1}), reduce_max(in[0])};
                       }};
    t["Min"] = Example{{a}, [](const auto& in) { return Outputs{reduce_min(in[0], {0}, true)}; }};
    // Max's gradient op, with a tie in the first row: linear in g, nothing through x or y.
    t["ExtremumGrad"] = Example{
        {with_tie, from_values({0.9, 0.2}, {2}), random_tensor({2}, 26)},
        [](const auto& in) { return Outputs{detail::extremum_grad(in[0], in[1], in[2], {1})}; }};
    // array*.cpp: the linear ones. SliceGrad and JacobianUnpack run as the gradients of
    // slice and pack_rows, with the watched output gradient as their input.
    const Tensor ids = from_values({1.0, 0.0, 1.0}, {3}, DType::Int64);
    t["Reshape"] = Example{{a}, [](const auto& in) { return Outputs{reshape(in[0], {3, 2})}; }};
    t["Transpose"] = Example{{a}, [](const auto& in) { return Outputs{transpose(in[0])}; }};
    t["BroadcastTo"] = Example{{row}, [](const auto& in) {
                                 return Outputs{broadcast_to(in[0], {2, 3})};
                               }};
    t["GatherV2"] =
        Example{{a, ids}, [](const auto& in) { return Outputs{gather(in[0], in[1], 1)}; }};
    t["UnsortedSegmentSum"] = Example{{random_tensor({3, 2}, 5), ids}, [](const auto& in) {
                                        return Outputs{unsorted_segment_sum(in[0], in[1], 3)};
                                      }};
    t["ConcatV2"] = Example{{a, b, row}, [](const auto& in) {
                              return Outputs{concat({in[0], in[1], reshape(in[2], {1, 3})}, 0)};
                            }};
    t["Split"] = Example{{a}, [](const auto& in) { return split(in[0], 3, 1); }};
    t["Slice"] = Example{{a}, [](const auto& in) { return Outputs{slice(in[0], {1, 1}, {1, 2})}; }};
    t["SliceGrad"] = Example{{random_tensor({1, 2}, 6)}, [a](const auto& in) {
                               GradientTape tape;
                               tape.watch(a);
                               const Tensor y = slice(a, {1, 1}, {1, 2});
                               return tape.gradient({y}, {a}, {in[0]});
                             }};
    t["Tile"] = Example{{a}, [](const auto& in) { return Outputs{tile(in[0], {2, 1})}; }};
    // End to end, and interleaved as 3 blocks of 1 ([3, 2]: out[o, r] = rows[r][o]).
    t["JacobianPack"] = Example{{row, random_tensor({3}, 7)}, [](const auto& in) {
                                  return Outputs{detail::pack_rows({in[0], in[1]}, {2, 3}),
                                                 detail::pack_rows({in[0], in[1]}, {3, 2}, 3)};
                                }};
    t["JacobianUnpack"] =
        Example{{b}, [row](const auto& in) {
                  const Tensor other = random_tensor({3}, 8);
                  GradientTape tape;
                  tape.watch(row);
                  tape.watch(other);
                  const Tensor packed = detail::pack_rows({row, other}, {2, 3});
                  const Tensor interleaved = detail::pack_rows({row, other}, {3, 2}, 3);
                  return tape.gradient({packed, interleaved}, {row, other},
                                       {in[0], reshape(in[0], {3, 2})});
                }};
    // ---- vectorize2: the vectorized Jacobian's dense diagonal (2 blocks of 3) and its inverse.
    t["JacobianDiagonal"] = Example{{random_tensor({2, 3}, 9)}, [](const auto& in) {
                                      return Outputs{detail::diagonal_blocks(in[0], 3, {2, 3, 3})};
                                    }};
    t["JacobianDiagonalPart"] = Example{
        {random_tensor({2, 3, 3}, 10)},
        [](const auto& in) { return Outputs{detail::diagonal_blocks_part(in[0], 3, {6})}; }};
    // ---- end vectorize2
    // compare.cpp, cast.cpp
    const Tensor mask = greater(a, b);
    t["SelectV2"] =
        Example{{mask, a, row}, [](const auto& in) { return Outputs{where(in[0], in[1], in[2])}; }};
    t["Cast"] = Example{{a}, [](const auto& in) { return Outputs{cast(in[0], DType::Float32)}; }};
    // linalg.cpp, linalg_lapack.cpp: well-conditioned matrices (the identity plus a bit),
    // a symmetric positive definite one for cholesky.
    const Tensor eye3 = from_values({1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0}, {3, 3});
    const Tensor m = add(eye3, multiply(random_tensor({3, 3}, 9), scalar(0.3, DType::Float64)));
    const Tensor batch = random_tensor({2, 3, 3}, 10);
    t["MatMul"] = Example{{a, random_tensor({2, 4}, 11)}, [](const auto& in) {
                            return Outputs{matmul(in[0], in[1], true, false)};
                          }};
    t["BatchMatMulV2"] = Example{
        {batch, m}, [](const auto& in) { return Outputs{matmul(in[0], in[1], false, true)}; }};
    t["MatrixInverse"] = unary(tapegrad::matrix_inverse, m);
    t["MatrixDeterminant"] = unary(tapegrad::matrix_determinant, m);
    t["MatrixSolve"] = binary(tapegrad::solve, m, random_tensor({3, 2}, 12));
    t["Cholesky"] = unary(tapegrad::cholesky, add(matmul(m, m, false, true), eye3));
    // ---- issue 11, linalg additions: linalg_structure.cpp, linalg_solve.cpp,
    // linalg_decompose.cpp, linalg_svd.cpp (multi-output ops give every output's tangent).
    t["MatrixDiag"] = unary(tapegrad::diag, a);
    t["MatrixDiagPart"] = unary(tapegrad::diag_part, random_tensor({2, 4, 3}, 13));
    t["MatrixBandPart"] =
        Example{{batch}, [](const auto& in) { return Outputs{band_part(in[0], 1, 0)}; }};
    t["Cross"] = binary(tapegrad::cross, a, b);
    t["MatrixTriangularSolve"] =
        Example{{m, random_tensor({3, 2}, 14)},
                [](const auto& in) { return Outputs{triangular_solve(in[0], in[1], true, true)}; }};
    t["LogMatrixDeterminant"] = Example{{m}, [](const auto& in) {
                                          const auto r = slogdet(in[0]);
                                          return Outputs{r.sign, r.log_abs_det};
                                        }};
    t["SelfAdjointEigV2"] = Example{{add(m, transpose(m))}, [](const auto& in) {
                                      const auto r = eigh(in[0]);
                                      return Outputs{r.eigenvalues, r.eigenvectors};
                                    }};
    t["Svd"] = Example{{random_tensor({4, 3}, 15)}, [](const auto& in) {
                         const auto r = svd(in[0]);
                         return Outputs{r.s, r.u, r.v};
                       }};
    t["Qr"] = Example{{random_tensor({3, 4}, 16)}, [](const auto& in) {
                        const auto r = qr(in[0]);
                        return Outputs{r.q, r.r};
                      }};
    // ---- end of the issue 11 linalg block
    // random.cpp: the same seed in both runs, so the same mask.
    t["Dropout"] = Example{{a}, [](const auto& in) {
                             Generator generator(42);
                             return Outputs{dropout(in[0], 0.5, generator)};
                           }};
    // ---- math_special.cpp (ops-special) ----
    t["Erf"] = unary(tapegrad::erf, a);
    t["Erfc"] = unary(tapegrad::erfc, a);
    t["Lgamma"] = unary(tapegrad::lgamma, p);
    t["Digamma"] = unary(tapegrad::digamma, p);
    t["Polygamma"] =
        Example{{p}, [](const auto& in) { return Outputs{detail::polygamma(2, in[0])}; }};
    t["Atan2"] = binary(tapegrad::atan2, a, row);
    t["FloorMod"] = binary(tapegrad::floormod, a, positive({3}, 13));
    t["ClipByValue"] =
        Example{{a, from_values({-0.5, -0.2, 0.1}, {3}), from_values({0.6}, {1})},
                [](const auto& in) { return Outputs{clip_by_value(in[0], in[1], in[2])}; }};
    t["SquaredDifference"] = binary(tapegrad::squared_difference, a, row);
    // ---- end math_special.cpp ----
    // ---- nn_activations.cpp (ops-special) ----
    t["LeakyRelu"] = Example{{a}, [](const auto& in) { return Outputs{leaky_relu(in[0], 0.1)}; }};
    t["Elu"] = unary(tapegrad::elu, a);
    t["EluGrad"] = binary(detail::elu_grad_op, tapegrad::elu(a), b);
    t["Selu"] = unary(tapegrad::selu, a);
    t["Gelu"] = Example{{a}, [](const auto& in) { return Outputs{gelu(in[0], false)}; }};
    t["GeluTanh"] = Example{{a}, [](const auto& in) { return Outputs{gelu(in[0], true)}; }};
    t["GeluGrad"] = binary(detail::gelu_grad_op, a, b);
    t["GeluTanhGrad"] = binary(detail::gelu_tanh_grad_op, a, b);
    t["Silu"] = unary(tapegrad::silu, a);
    t["LogSigmoid"] = unary(tapegrad::log_sigmoid, a);
    t["Softsign"] = unary(tapegrad::softsign, a);
    t["SparseSoftmaxCrossEntropyWithLogits"] =
        Example{{from_values({2, 0}, {2}, DType::Int32), a}, [](const auto& in) {
                  return Outputs{sparse_softmax_cross_entropy_with_logits(in[0], in[1])};
                }};
    // ---- end nn_activations.cpp ----
    // ---- issue 11, array and indexing ops (array_sort, array_scan, array_pad, array_scatter).
    // PutAlongAxis and MirrorPadGrad run as the gradients of sort and a mirror pad.
    const Tensor nd = from_values({1.0, 2.0, 0.0, 0.0}, {2, 2}, DType::Int64);
    t["TakeAlongAxis"] = Example{{a}, [](const auto& in) { return Outputs{sort(in[0], 0, true)}; }};
    t["PutAlongAxis"] = Example{{b}, [a](const auto& in) {
                                  GradientTape tape;
                                  tape.watch(a);
                                  return tape.gradient({sort(a, 1)}, {a}, {in[0]});
                                }};
    t["Cumsum"] =
        Example{{a}, [](const auto& in) { return Outputs{cumsum(in[0], 1, true, true)}; }};
    // the third with zeros in x: the exact partials instead of TF's division by x
    const Tensor holes = from_values({1, 0, 1, 0, 1, 1}, {2, 3});
    t["Cumprod"] = Example{{p}, [holes](const auto& in) {
                             return Outputs{cumprod(in[0], 1), cumprod(in[0], 0, true, true),
                                            cumprod(multiply(in[0], holes), 1, false, true)};
                           }};
    t["ReverseV2"] = Example{{a}, [](const auto& in) { return Outputs{reverse(in[0], {0, 1})}; }};
    t["PadV2"] = Example{{a}, [](const auto& in) {
                           return Outputs{pad(in[0], {{1, 0}, {0, 2}}, PadMode::Constant, 3)};
                         }};
    t["MirrorPad"] = Example{{a}, [](const auto& in) {
                               return Outputs{pad(in[0], {{1, 1}, {2, 1}}, PadMode::Reflect),
                                              pad(in[0], {{2, 0}, {0, 3}}, PadMode::Symmetric)};
                             }};
    t["MirrorPadGrad"] = Example{{random_tensor({4, 6}, 13)}, [a](const auto& in) {
                                   GradientTape tape;
                                   tape.watch(a);
                                   const Tensor y = pad(a, {{1, 1}, {2, 1}}, PadMode::Reflect);
                                   return tape.gradient({y}, {a}, {in[0]});
                                 }};
    t["GatherNd"] =
        Example{{a, nd}, [](const auto& in) { return Outputs{gather_nd(in[0], in[1])}; }};
    t["ScatterNd"] = Example{{nd, random_tensor({2}, 14)}, [](const auto& in) {
                               return Outputs{scatter_nd(in[0], in[1], {2, 3})};
                             }};
    t["TensorScatterUpdate"] = Example{
        {a, nd, random_tensor({2}, 15)},
        [](const auto& in) { return Outputs{tensor_scatter_nd_update(in[0], in[1], in[2])}; }};
    // ---- end of issue 11 array and indexing ops
    // ---- conv.cpp, pooling.cpp (issue 11: convolution and pooling) ----
    {
      const Tensor image = random_tensor({1, 5, 4, 2}, 20);
      const Tensor filters = random_tensor({3, 2, 2, 3}, 21);
      const Tensor conv_grad = random_tensor({1, 3, 2, 3}, 22);  // conv2d's output, stride 2 SAME
      const Shape image_shape = image.shape(), filter_shape = filters.shape();
      t["Conv2D"] = Example{{image, filters}, [](const auto& in) {
                              return Outputs{conv2d(in[0], in[1], {2, 2}, Padding::Same, {1, 1})};
                            }};
      t["Conv2DBackpropInput"] = Example{
          {conv_grad, filters}, [image_shape](const auto& in) {
            return Outputs{conv2d_transpose(in[0], in[1], image_shape, {2, 2}, Padding::Same)};
          }};
      t["Conv2DBackpropFilter"] = Example{{image, conv_grad}, [filter_shape](const auto& in) {
                                            return Outputs{detail::conv2d_backprop_filter(
                                                in[0], filter_shape, in[1], {2, 2}, Padding::Same)};
                                          }};
      t["MaxPool"] = Example{{image}, [](const auto& in) {
                               return Outputs{max_pool2d(in[0], {2, 2}, {2, 1}, Padding::Same)};
                             }};
      t["AvgPool"] = Example{{image}, [](const auto& in) {
                               return Outputs{avg_pool2d(in[0], {3, 2}, {2, 2}, Padding::Same)};
                             }};
      // x is an input too: its tangent must not reach the output (the maxima's positions are
      // piecewise constant in x).
      t["MaxPoolGrad"] = Example{
          {image, random_tensor({1, 3, 4, 2}, 24)}, [](const auto& in) {
            return Outputs{detail::max_pool_grad(in[0], in[1], {2, 2}, {2, 1}, Padding::Same)};
          }};
      t["MaxPoolGradGrad"] = Example{
          {image, random_tensor({1, 5, 4, 2}, 25)}, [](const auto& in) {
            return Outputs{detail::max_pool_grad_grad(in[0], in[1], {2, 2}, {2, 1}, Padding::Same)};
          }};
      t["AvgPoolGrad"] = Example{{random_tensor({1, 3, 2, 2}, 23)}, [image_shape](const auto& in) {
                                   return Outputs{detail::avg_pool_grad(in[0], image_shape, {3, 2},
                                                                        {2, 2}, Padding::Same)};
                                 }};
    }
    return t;
  }();
  return table;
}

// The outputs' tangents along `directions` (one per floating input), from the ops' forward
// rules or, with `fallback`, from the transpose of their gradients; zeros where unconnected.
Outputs output_tangents(const Example& example, const std::vector<Tensor>& directions,
                        bool fallback) {
  std::vector<Tensor> primals;
  std::vector<Tensor> tangents;
  for (std::size_t i = 0; i < example.inputs.size(); ++i) {
    if (!is_floating(example.inputs[i].dtype())) continue;
    primals.push_back(example.inputs[i]);
    tangents.push_back(directions[i]);
  }
  ForwardAccumulator accumulator(primals, tangents);
  std::optional<detail::ForceGenericForwardFallback> force;
  if (fallback) force.emplace();
  const Outputs outputs = example.run(example.inputs);
  Outputs result;
  for (const Tensor& y : outputs) result.push_back(accumulator.jvp(y, UnconnectedGradients::Zero));
  return result;
}

}  // namespace

TEST_CASE("every built-in op with a forward rule has an example here, and only those",
          "[forward]") {
  std::size_t with_rule = 0;
  for (const detail::OpDefinition* op : detail::builtin_ops()) {
    INFO(op->name);
    CHECK((op->forward_rule != nullptr) == (examples().count(op->name) == 1));
    if (op->forward_rule != nullptr) ++with_rule;
  }
  CHECK(with_rule == examples().size());
}

TEST_CASE("each built-in forward rule equals the transpose of the op's gradient", "[forward]") {
  for (const auto& [name, example] : examples()) {
    for (unsigned direction = 0; direction < 2; ++direction) {
      INFO(name << ", direction " << direction);
      std::vector<Tensor> directions;
      for (std::size_t i = 0; i < example.inputs.size(); ++i) {
        directions.push_back(random_tensor(example.inputs[i].shape(), 100 + 10 * direction + i));
      }
      const Outputs by_rule = output_tangents(example, directions, /*fallback=*/false);
      const Outputs by_fallback = output_tangents(example, directions, /*fallback=*/true);
      REQUIRE(by_rule.size() == by_fallback.size());
      for (std::size_t j = 0; j < by_rule.size(); ++j) {
        INFO("output " << j);
        REQUIRE(by_rule[j].dtype() == by_fallback[j].dtype());
        require_close(by_rule[j], by_fallback[j].shape(), values(by_fallback[j]), 1e-10);
      }
    }
  }
}
