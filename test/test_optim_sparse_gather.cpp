// Sparse optimizer updates fed by gather's IndexedSlices gradient (needs the gather op).
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

Tensor int64_ids(const std::vector<double>& ids) {
  return from_values(ids, {ids.size()}, DType::Int64);
}

}  // namespace

TEST_CASE("TF's sparse SGD case: embedding [1000, 512], ids all 1, loss 1 - E[ids], lr 0.1",
          "[optim][sparse][gather]") {
  // loss = 1 - gather(E, ids) with ids = eight 1s is a [8, 512] target, not reduced: gradient()
  // sums it, so each gathered row gets -1, and row 1's summed gradient is -8 per element.
  // SGD with lr 0.1 therefore raises row 1 by 0.1 * 8 = 0.8 (reduce_mean would give 0.8/4096).
  Variable embedding(random_tensor({1000, 512}, 61), true, "embedding");
  const auto before = values(embedding.peek());
  const Tensor ids = int64_ids(std::vector<double>(8, 1.0));
  GradientValue grad;
  {
    GradientTape tape;
    Tensor e = embedding.value();
    Tensor loss = 1.0 - gather(e, ids);
    grad = tape.gradient_values({loss}, {e})[0];
  }
  REQUIRE(grad.is_sparse());
  CHECK(grad.sparse().dense_shape == Shape{1000, 512});
  CHECK(grad.sparse().indices.size() == 8);

  SGD sgd(0.1);
  sgd.apply_gradients(std::vector<std::pair<GradientValue, Variable>>{{grad, embedding}});
  const auto after = values(embedding.peek());
  std::size_t changed_elsewhere = 0;
  for (std::size_t k = 0; k < after.size(); ++k) {
    if (k / 512 == 1) {
      REQUIRE(after[k] == Approx(before[k] + 0.8).margin(1e-12));
    } else if (after[k] != before[k]) {
      ++changed_elsewhere;
    }
  }
  CHECK(changed_elsewhere == 0);
}

TEST_CASE("gather's sparse gradient through Adam equals the dense gradient through Adam",
          "[optim][sparse][gather][adam]") {
  Tensor initial = random_tensor({6, 4}, 62);
  Variable sparse_table(initial, true, "sparse_table");
  Variable dense_table(initial, true, "dense_table");
  Adam sparse_adam(0.05), dense_adam(0.05);
  const Tensor ids = int64_ids({4, 0, 4, 2});
  const Tensor weights = random_tensor({4, 4}, 63);
  for (int step = 0; step < 3; ++step) {
    GradientValue sparse_grad;
    {
      GradientTape tape;
      Tensor e = sparse_table.value();
      Tensor loss = reduce_sum(square(gather(e, ids)) * weights);
      sparse_grad = tape.gradient_values({loss}, {e})[0];
    }
    REQUIRE(sparse_grad.is_sparse());
    sparse_adam.apply_gradients(
        std::vector<std::pair<GradientValue, Variable>>{{sparse_grad, sparse_table}});
    auto [loss, dense_grads] = implicit_value_and_gradients(
        [&] { return reduce_sum(square(gather(dense_table.value(), ids)) * weights); });
    dense_adam.apply_gradients(dense_grads);
    require_close(sparse_table.peek(), {6, 4}, values(dense_table.peek()), 1e-14);
  }
}
