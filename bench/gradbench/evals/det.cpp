// det: the determinant by expansion by minors along the first row, every one of the ell!
// products formed (GradBench's workload), as arrays: level r holds one partial product per
// choice of columns for rows 0..r-1, and each is multiplied by the signed entries of row r in
// the columns still free. Children of a node are contiguous, so a level is a broadcast
// multiply of the previous level by one gather from [A, -A] (the sign comes with the entry).
#include <xtensor/xarray.hpp>

#include "evals/evals.hpp"

namespace tapegrad::gradbench {

DeterminantPlan::DeterminantPlan(std::size_t ell) : ell(ell) {
  // The free columns of every node of the current level, ascending, `free` per node.
  std::vector<std::uint8_t> free_columns(ell);
  for (std::size_t c = 0; c < ell; ++c) free_columns[c] = static_cast<std::uint8_t>(c);
  std::size_t nodes = 1;
  for (std::size_t row = 0; row < ell; ++row) {
    const std::size_t free = ell - row;
    xt::xarray<std::int64_t> flat_index = xt::xarray<std::int64_t>::from_shape({nodes * free});
    for (std::size_t i = 0; i < nodes * free; ++i) {
      const std::size_t negated = (i % free) % 2 == 1 ? ell * ell : 0;
      flat_index(i) = static_cast<std::int64_t>(negated + row * ell + free_columns[i]);
    }
    levels.push_back({Tensor(std::move(flat_index)), static_cast<std::int64_t>(nodes),
                      static_cast<std::int64_t>(free)});
    if (free == 1) break;
    // Each child drops one of its parent's free columns.
    std::vector<std::uint8_t> next(nodes * free * (free - 1));
    std::size_t out = 0;
    for (std::size_t node = 0; node < nodes; ++node)
      for (std::size_t drop = 0; drop < free; ++drop)
        for (std::size_t j = 0; j < free; ++j)
          if (j != drop) next[out++] = free_columns[node * free + j];
    free_columns.swap(next);
    nodes *= free;
  }
}

Tensor det_by_minors(const Tensor& a, const DeterminantPlan& plan) {
  const Tensor flat = reshape(a, {-1});
  const Tensor signed_entries = concat({flat, -flat}, 0);
  Tensor products = ones({1});
  for (const auto& level : plan.levels) {
    const Tensor entries =
        reshape(gather(signed_entries, level.flat_index), {level.nodes, level.free});
    products = reshape(expand_dims(products, 1) * entries, {-1});
  }
  return reduce_sum(products);
}

EvalFunctions det_functions() {
  const auto parse = [](const json& input) {
    const std::size_t ell = input["ell"].get<std::size_t>();
    const auto values = input["A"].get<std::vector<double>>();
    return std::make_pair(from_values(values, {ell, ell}, DType::Float64), DeterminantPlan(ell));
  };
  return {
      {"primal", make_function(parse,
                               [](const auto& in) {
                                 return number_output(det_by_minors(in.first, in.second));
                               })},
      {"gradient", make_function(parse,
                                 [](const auto& in) {
                                   GradientTape tape;
                                   tape.watch(in.first);
                                   const Tensor value = det_by_minors(in.first, in.second);
                                   return list_output(tape.gradient(value, in.first));
                                 })},
  };
}

}  // namespace tapegrad::gradbench
