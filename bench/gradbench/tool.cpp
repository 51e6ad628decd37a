#include "tool.hpp"

#include <atomic>
#include <chrono>
#include <stdexcept>

namespace tapegrad::gradbench {

RunResult run_function(const Prepare& prepare, const json& input) {
  using clock = std::chrono::steady_clock;
  const auto nanoseconds = [](clock::duration d) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  };
  const bool has_rule = input.is_object();
  const int min_runs = has_rule && input.contains("min_runs") ? input["min_runs"].get<int>() : 1;
  const double min_seconds =
      has_rule && input.contains("min_seconds") ? input["min_seconds"].get<double>() : 0.0;

  RunResult result;
  const auto prepare_start = clock::now();
  Compute compute = prepare(input);
  result.prepare_nanoseconds = nanoseconds(clock::now() - prepare_start);

  Output last;
  double total_seconds = 0;
  for (int run = 0; run < min_runs || total_seconds < min_seconds; ++run) {
    const auto start = clock::now();
    last = compute();
    const long long ns = nanoseconds(clock::now() - start);
    result.evaluate_nanoseconds.push_back(ns);
    total_seconds += static_cast<double>(ns) * 1e-9;
  }
  result.output = last();
  return result;
}

Tensor vector_from_json(const json& values) {
  const auto v = values.get<std::vector<double>>();
  return from_values(v, {v.size()}, DType::Float64);
}

Tensor matrix_from_json(const json& rows) {
  const std::size_t n = rows.size();
  const std::size_t m = n == 0 ? 0 : rows[0].size();
  std::vector<double> flat;
  flat.reserve(n * m);
  for (const auto& row : rows) {
    if (row.size() != m) throw std::invalid_argument("ragged matrix in the input");
    for (const auto& x : row) flat.push_back(x.get<double>());
  }
  return from_values(flat, {n, m}, DType::Float64);
}

std::vector<double> to_vector(const Tensor& t) {
  const Tensor as_double = t.dtype() == DType::Float64 ? t : cast(t, DType::Float64);
  const auto& a = as_double.array<double>();
  return std::vector<double>(a.begin(), a.end());
}

namespace {
json nested(const std::vector<double>& flat, const Shape& shape, std::size_t axis,
            std::size_t& position) {
  if (axis == shape.size()) return flat[position++];
  json list = json::array();
  for (std::size_t i = 0; i < shape[axis]; ++i)
    list.push_back(nested(flat, shape, axis + 1, position));
  return list;
}
}  // namespace

namespace {
std::atomic<bool> function_variant_on{false};
thread_local detail::OutputCapture* active_capture = nullptr;
}  // namespace

void set_function_variant(bool on) { function_variant_on.store(on); }
bool function_variant() { return function_variant_on.load(); }

detail::OutputCapture::OutputCapture() : previous_(active_capture) { active_capture = this; }
detail::OutputCapture::~OutputCapture() { active_capture = previous_; }

Output finish_output(std::vector<Tensor> tensors, Finish finish) {
  if (active_capture == nullptr) return finish(tensors);
  active_capture->captured = true;
  active_capture->tensors = std::move(tensors);
  active_capture->finish = std::move(finish);
  return Output();
}

Output number_output(const Tensor& t) {
  return finish_output({t}, [](const std::vector<Tensor>& r) -> Output {
    return [t = r[0]] { return json(t.item<double>()); };
  });
}
Output list_output(const Tensor& t) {
  return finish_output({t}, [](const std::vector<Tensor>& r) -> Output {
    return [t = r[0]] { return json(to_vector(t)); };
  });
}
Output nested_output(const Tensor& t) {
  return finish_output({t}, [](const std::vector<Tensor>& r) -> Output {
    return [t = r[0]] { return to_json(t); };
  });
}

Output joined_rows_output(std::vector<Tensor> column_blocks) {
  return finish_output(std::move(column_blocks), [](const std::vector<Tensor>& r) -> Output {
    return [blocks = r] {
      const std::size_t rows = blocks.empty() ? 0 : blocks[0].shape()[0];
      std::vector<std::vector<double>> flat;
      for (const Tensor& block : blocks) {
        if (block.rank() != 2 || block.shape()[0] != rows) {
          throw std::invalid_argument("joined_rows_output: the blocks are not [rows, width]");
        }
        flat.push_back(to_vector(block));
      }
      json out = json::array();
      for (std::size_t i = 0; i < rows; ++i) {
        json row = json::array();
        for (std::size_t k = 0; k < blocks.size(); ++k) {
          const std::size_t width = blocks[k].shape()[1];
          for (std::size_t j = 0; j < width; ++j) row.push_back(flat[k][i * width + j]);
        }
        out.push_back(std::move(row));
      }
      return out;
    };
  });
}

json to_json(const Tensor& t) {
  const auto flat = to_vector(t);
  std::size_t position = 0;
  return nested(flat, t.shape(), 0, position);
}

}  // namespace tapegrad::gradbench
