// GradientTape::jacobian and batch_jacobian (TF: GradientTape.jacobian / batch_jacobian).
//
// Vectorized (JacobianOptions::vectorize, the default): the backward walk, as a function of
// the target's output gradient u, is vectorized_map-ped over the rows of the identity (every
// op the walk runs on u is traced, then replayed once with the ops' batching rules:
// derivatives/vectorize.hpp), in passes of parallel_iterations rows. Otherwise a loop over
// target elements: one backward run per row, seeded with a one-hot output gradient. Either way
// the walk is planned once (detail::plan_backward) and re-run, so the pruning, the use counts
// and the validation are not redone for every row. The rows are
// stacked by an internal op whose gradient unstacks (detail::pack_rows,
// src/ops/array/array_rows.cpp), so a Jacobian computed under an outer tape is itself
// differentiable.
#include <algorithm>

#include "derivatives/vectorize.hpp"
#include "kernels/dispatch.hpp"
#include "ops/internal_ops.hpp"
#include "runtime/imperative_grad.hpp"
#include "runtime/recording.hpp"
#include "runtime/tape.hpp"
#include "runtime/unconnected_check.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/tape.hpp"

namespace tapegrad {
namespace {

// Row r's output gradient: ones at flat positions r + k * stride, k < count, else zeros.
Tensor row_seed(const Tensor& target, std::size_t r, std::size_t count, std::size_t stride) {
  return detail::dispatch_floating("jacobian", target.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> a = xt::zeros<T>(target.shape());
    for (std::size_t k = 0; k < count; ++k) a.data()[r + k * stride] = T(1);
    return Tensor(std::move(a));
  });
}

// For each source, the gradient rows of `n_rows` seeded backward runs (undefined rows where
// a source got no gradient).
std::vector<std::vector<Tensor>> gradient_rows(detail::TapeImpl& tape, const Tensor& target,
                                               const detail::BackwardPlan& plan, std::size_t n_rows,
                                               std::size_t seed_count, std::size_t seed_stride) {
  std::vector<std::vector<Tensor>> rows(plan.sources.size(), std::vector<Tensor>(n_rows));
  if (!is_floating(target.dtype())) return rows;
  const std::vector<Tensor> targets{target};
  std::vector<Tensor> seeds(1);
  for (std::size_t r = 0; r < n_rows; ++r) {
    seeds[0] = row_seed(target, r, seed_count, seed_stride);
    const bool last = r + 1 == n_rows;
    std::vector<GradientValue> grads = detail::run_backward(
        tape, plan, targets, seeds, UnconnectedGradients::None, last && !tape.persistent());
    for (std::size_t k = 0; k < grads.size(); ++k) {
      if (grads[k].defined()) rows[k][r] = grads[k].to_dense();
    }
  }
  return rows;
}

// [rows] ++ target.shape: row r's output gradient has ones at flat positions r + k * stride,
// k < count (the loop's row_seed for every r at once).
Tensor all_row_seeds(const Tensor& target, std::size_t rows, std::size_t count,
                     std::size_t stride) {
  Shape shape{rows};
  shape.insert(shape.end(), target.shape().begin(), target.shape().end());
  return detail::dispatch_floating("jacobian", target.dtype(), [&](auto zero) {
    using T = decltype(zero);
    xt::xarray<T> a = xt::zeros<T>(shape);
    const std::size_t row_size = target.size();
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t k = 0; k < count; ++k) a.data()[r * row_size + r + k * stride] = T(1);
    }
    return Tensor(std::move(a));
  });
}

// The backward walk as a function of the target's output gradient.
detail::BatchFunction backward_walk(detail::TapeImpl& tape, const Tensor& target,
                                    const detail::BackwardPlan& plan) {
  return [&tape, &plan, targets = std::vector<Tensor>{target}](const std::vector<Tensor>& seed) {
    const std::vector<GradientValue> grads = detail::run_backward(
        tape, plan, targets, seed, UnconnectedGradients::None, /*release_entries=*/false);
    std::vector<Tensor> dense;
    dense.reserve(grads.size());
    for (const GradientValue& g : grads) dense.push_back(g.defined() ? g.to_dense() : Tensor());
    return dense;
  };
}

detail::VectorizeOptions vectorize_options(std::size_t rows_per_pass, const char* caller) {
  detail::VectorizeOptions options;
  options.rows_per_pass = rows_per_pass;
  options.caller = std::string("GradientTape::") + caller;
  return options;
}

// batch_jacobian's `n_rows` gradient rows as one tensor [n_rows] ++ source.shape (undefined
// when the source gets no gradient): the walk vectorized over the seeds.
Tensor vectorized_batch_rows(detail::TapeImpl& tape, const Tensor& target,
                             const detail::BackwardPlan& plan, std::size_t n_rows,
                             std::size_t seed_count, std::size_t seed_stride,
                             std::size_t rows_per_pass) {
  return detail::vectorize(backward_walk(tape, target, plan),
                           {all_row_seeds(target, n_rows, seed_count, seed_stride)},
                           vectorize_options(rows_per_pass, "batch_jacobian"))[0];
}

// The rows of one source stacked into `shape`; undefined or zeros when no row has a gradient.
Tensor assemble(std::vector<Tensor>& rows, const Shape& shape, const detail::TensorMeta& source,
                bool connected, UnconnectedGradients unconnected) {
  const bool any_row =
      std::any_of(rows.begin(), rows.end(), [](const Tensor& t) { return t.defined(); });
  if (!any_row) {
    // With no rows at all (an empty target) a connected source still has a (empty) Jacobian.
    if (unconnected == UnconnectedGradients::None && !(rows.empty() && connected)) return {};
    return zeros(shape, source.dtype);
  }
  for (Tensor& row : rows) {
    if (!row.defined()) row = zeros(source.shape, source.dtype);
  }
  return detail::pack_rows(rows, shape);
}

detail::TensorMeta meta_of(const Tensor& t, const char* op, const char* what) {
  if (!t.defined()) {
    throw InvalidArgument(std::string("GradientTape::") + op + ": " + what + " is undefined");
  }
  return detail::TensorMeta{t.id(), t.dtype(), t.shape()};
}

Shape concatenated(const Shape& a, const Shape& b) {
  Shape out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace

Tensor GradientTape::jacobian(const Tensor& target, const Tensor& source,
                              UnconnectedGradients unconnected) {
  JacobianOptions options;
  options.unconnected = unconnected;
  return jacobian(target, std::vector<Tensor>{source}, options)[0];
}

std::vector<Tensor> GradientTape::jacobian(const Tensor& target, const std::vector<Tensor>& sources,
                                           UnconnectedGradients unconnected) {
  JacobianOptions options;
  options.unconnected = unconnected;
  return jacobian(target, sources, options);
}

Tensor GradientTape::jacobian(const Tensor& target, const Tensor& source,
                              const JacobianOptions& options) {
  return jacobian(target, std::vector<Tensor>{source}, options)[0];
}

std::vector<Tensor> GradientTape::jacobian(const Tensor& target, const std::vector<Tensor>& sources,
                                           const JacobianOptions& options) {
  const UnconnectedGradients unconnected = options.unconnected;
  detail::require_valid_unconnected("GradientTape::jacobian", unconnected);
  meta_of(target, "jacobian", "the target");
  std::vector<detail::TensorMeta> metas;
  metas.reserve(sources.size());
  for (const auto& s : sources) metas.push_back(meta_of(s, "jacobian", "a source"));

  // As gradient(): one call consumes a non-persistent tape, whose recording stops first. The
  // rows all run inside this one call, on entries kept until the last row.
  std::shared_ptr<detail::TapeImpl> tape = begin_backward("jacobian");
  BackwardScope scope{*this};

  const detail::BackwardPlan plan = detail::plan_backward(*tape, {target}, metas);
  const std::size_t n_rows = target.size();
  std::vector<Tensor> result;
  result.reserve(sources.size());
  if (options.vectorize && n_rows > 0 && is_floating(target.dtype())) {
    // The seeds are the rows of the identity: vectorized over it without building it.
    std::vector<Shape> shapes;
    for (const detail::TensorMeta& meta : metas)
      shapes.push_back(concatenated(target.shape(), meta.shape));
    const std::vector<Tensor> stacked = detail::vectorize_over_identity(
        backward_walk(*tape, target, plan), target.shape(), target.dtype(), shapes,
        vectorize_options(options.parallel_iterations, "jacobian"));
    for (std::size_t k = 0; k < sources.size(); ++k) {
      const Shape& shape = shapes[k];
      if (stacked[k].defined()) {
        result.push_back(stacked[k]);
      } else if (unconnected == UnconnectedGradients::Zero) {
        result.push_back(zeros(shape, metas[k].dtype));
      } else {
        result.emplace_back();
      }
    }
    return result;
  }
  std::vector<std::vector<Tensor>> rows = gradient_rows(*tape, target, plan, n_rows, 1, 0);
  for (std::size_t k = 0; k < sources.size(); ++k) {
    const bool connected = plan.source_slots[k] != detail::BackwardPlan::kNoSlot;
    result.push_back(assemble(rows[k], concatenated(target.shape(), metas[k].shape), metas[k],
                              connected, unconnected));
  }
  return result;
}

Tensor GradientTape::batch_jacobian(const Tensor& target, const Tensor& source,
                                    UnconnectedGradients unconnected) {
  JacobianOptions options;
  options.unconnected = unconnected;
  return batch_jacobian(target, source, options);
}

Tensor GradientTape::batch_jacobian(const Tensor& target, const Tensor& source,
                                    const JacobianOptions& options) {
  // Zeros either way, as TF; the value is still validated.
  detail::require_valid_unconnected("GradientTape::batch_jacobian", options.unconnected);
  const detail::TensorMeta source_meta = meta_of(source, "batch_jacobian", "the source");
  meta_of(target, "batch_jacobian", "the target");
  live_tape("batch_jacobian");
  if (target.rank() < 2 || source.rank() < 2 || target.shape()[0] != source.shape()[0]) {
    throw InvalidArgument("GradientTape::batch_jacobian: the target (shape " +
                          shape_to_string(target.shape()) + ") and the source (shape " +
                          shape_to_string(source.shape()) +
                          ") must both have rank 2 or more and the same first (batch) dimension");
  }

  std::shared_ptr<detail::TapeImpl> tape = begin_backward("batch_jacobian");
  BackwardScope scope{*this};

  const std::size_t batch = target.shape()[0];
  const std::size_t row_size = batch == 0 ? 0 : target.size() / batch;
  const Shape result_shape =
      concatenated(target.shape(), Shape(source.shape().begin() + 1, source.shape().end()));
  const auto result_dims = std::vector<std::int64_t>(result_shape.begin(), result_shape.end());

  const detail::BackwardPlan plan = detail::plan_backward(*tape, {target}, {source_meta});
  const std::size_t source_row = batch == 0 ? 0 : source.size() / batch;
  // Row r seeds target[b, r] for every b at once: rows of different examples are independent
  // (the documented assumption of batch_jacobian), so one run gives all b of them.
  // Up to two rows per example the loop is the cheaper: a vectorized walk traces two rows
  // (which are the answer already) before it could replay them.
  if (options.vectorize && batch > 0 && row_size > 2 && is_floating(target.dtype())) {
    const Tensor stacked = vectorized_batch_rows(*tape, target, plan, row_size, batch, row_size,
                                                 options.parallel_iterations);
    if (!stacked.defined()) return zeros(result_shape, source.dtype());
    // [row, b, x...] -> [b, row, x...] -> [b, y..., x...], with differentiable ops; the
    // reshapes copy, so only where the shapes differ (not for a rank-2 target and source).
    const Shape rows_shape{row_size, batch, source_row};
    const Tensor rows = stacked.shape() == rows_shape
                            ? stacked
                            : reshape(stacked, {static_cast<std::int64_t>(row_size),
                                                static_cast<std::int64_t>(batch),
                                                static_cast<std::int64_t>(source_row)});
    const Tensor swapped = transpose(rows, {1, 0, 2});
    return swapped.shape() == result_shape ? swapped : reshape(swapped, result_dims);
  }
  std::vector<Tensor> rows = batch == 0
                                 ? std::vector<Tensor>(row_size)
                                 : gradient_rows(*tape, target, plan, row_size, batch, row_size)[0];

  const bool any_row =
      std::any_of(rows.begin(), rows.end(), [](const Tensor& t) { return t.defined(); });
  if (!any_row) return zeros(result_shape, source.dtype());
  for (Tensor& row : rows) {
    if (!row.defined()) row = zeros(source.shape(), source.dtype());
  }
  // Row r's [b, x...] gradient read as b blocks of x, laid out as [b, row, x...] (that is,
  // [b, y..., x...]) in one differentiable pass.
  return detail::pack_rows(rows, result_shape, batch);
}

}  // namespace tapegrad
