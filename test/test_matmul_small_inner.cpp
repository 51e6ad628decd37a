// matmul with an inner dimension of at most 5 (points times a 3x3 rotation, batches of 3x3
// products, as the hand-tracking eval's vertices): it must equal the product summed term by
// term, for every combination of transposes, both float dtypes, single matrices and batches
// with a broadcast operand. (A plain-loop kernel for k <= 4 was measured against gemm here and
// lost: OpenBLAS is at memory speed on these shapes; these cases guard any such kernel.)
#include <catch2/catch.hpp>

#include "support.hpp"
#include "tapegrad/tapegrad.hpp"

using namespace tapegrad;
using tapegrad::testing::random_tensor;
using tapegrad::testing::require_close;
using tapegrad::testing::values;

namespace {

// op(a) op(b) for one [rows, cols] matrix each, summed in the order p = 0..k-1.
std::vector<double> reference_product(const std::vector<double>& a, const std::vector<double>& b,
                                      std::size_t m, std::size_t n, std::size_t k, bool ta,
                                      bool tb) {
  std::vector<double> c(m * n, 0.0);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (std::size_t p = 0; p < k; ++p) {
        const double aip = ta ? a[p * m + i] : a[i * k + p];
        const double bpj = tb ? b[j * k + p] : b[p * n + j];
        sum += aip * bpj;
      }
      c[i * n + j] = sum;
    }
  }
  return c;
}

Shape operand_shape(std::size_t batch, std::size_t rows, std::size_t cols, bool transposed) {
  Shape s{transposed ? cols : rows, transposed ? rows : cols};
  if (batch > 0) s.insert(s.begin(), batch);
  return s;
}

}  // namespace

TEST_CASE("matmul with a small inner dimension equals the term-by-term product",
          "[linalg][matmul]") {
  unsigned seed = 900;
  for (const std::size_t k : {1u, 2u, 3u, 4u, 5u}) {
    for (const auto& mn :
         std::vector<std::pair<std::size_t, std::size_t>>{{2, 3}, {7, 5}, {33, 2}, {3, 19}}) {
      for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
          for (const std::size_t batch : {0u, 3u}) {
            for (const DType dtype : {DType::Float64, DType::Float32}) {
              const auto [m, n] = mn;
              INFO("k " << k << " m " << m << " n " << n << " ta " << ta << " tb " << tb
                        << " batch " << batch << " " << dtype_name(dtype));
              const Tensor a64 = random_tensor(operand_shape(batch, m, k, ta), ++seed);
              const Tensor b64 = random_tensor(operand_shape(batch == 0 ? 0 : 1, k, n, tb), ++seed);
              // b is one matrix for single products and [1, k, n] (broadcast) for batches.
              const Tensor a = cast(a64, dtype), b = cast(b64, dtype);
              const Tensor product = matmul(a, b, ta, tb);
              REQUIRE(product.dtype() == dtype);
              const std::vector<double> va = values(cast(a, DType::Float64));
              const std::vector<double> vb = values(cast(b, DType::Float64));
              std::vector<double> expected;
              for (std::size_t t = 0; t < std::max<std::size_t>(batch, 1); ++t) {
                const std::vector<double> block(
                    va.begin() + static_cast<std::ptrdiff_t>(t * m * k),
                    va.begin() + static_cast<std::ptrdiff_t>((t + 1) * m * k));
                for (double v : reference_product(block, vb, m, n, k, ta, tb))
                  expected.push_back(v);
              }
              Shape out{m, n};
              if (batch > 0) out.insert(out.begin(), batch);
              require_close(cast(product, DType::Float64), out, expected,
                            dtype == DType::Float64 ? 1e-14 : 1e-5);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("matmul with a small inner dimension: exact values and its gradients",
          "[linalg][matmul]") {
  // [[1, 2, 3], [4, 5, 6]] · [[1, 0], [0, 1], [1, 1]] = [[4, 5], [10, 11]]
  const Tensor a = constant({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  const Tensor b = constant({{1.0, 0.0}, {0.0, 1.0}, {1.0, 1.0}});
  require_close(matmul(a, b), {2, 2}, {4.0, 5.0, 10.0, 11.0}, 0.0);
  require_close(matmul(b, a, true, true), {2, 2}, {4.0, 10.0, 5.0, 11.0}, 0.0);
  // d/da of sum(a b) is 1 b^T (each row: b's row sums), d/db is a^T 1 (a's column sums).
  GradientTape tape;
  tape.watch(a);
  tape.watch(b);
  const Tensor y = reduce_sum(matmul(a, b));
  const auto g = tape.gradient(y, {a, b});
  require_close(g[0], {2, 3}, {1.0, 1.0, 2.0, 1.0, 1.0, 2.0}, 0.0);
  require_close(g[1], {3, 2}, {5.0, 5.0, 7.0, 7.0, 9.0, 9.0}, 0.0);
}
