// ba: bundle adjustment's reprojection residuals for every observation at once, each row of
// the [p, 15] inputs (11 camera, 3 point, 1 weight) giving its own 2 residuals, so the
// Jacobian is a batch Jacobian: two backward passes over the whole batch, one per residual
// column. The arithmetic runs on one tensor per component, as the reference's formulas: the
// timed functions take them as contiguous [1, p] rows (gathered from transposed copies made
// when the input is read); ba_residuals, for the tests, as [p, 1] columns of [p, 15].
#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>

#include <xtensor/xstorage.hpp>

#include "evals/evals.hpp"

namespace tapegrad::gradbench {

namespace {

// A [p, 3] quantity as three [p, 1] columns: per-component arithmetic on columns, so the only
// slicing of the inputs is one split (whose gradient is one concat, not a zero-padded [p, 15]
// array per slice).
struct Columns3 {
  Tensor x, y, z;
};

Columns3 cross(const Columns3& a, const Columns3& b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}

// Rodrigues' rotation of each point by its angle-axis (angle > 0 on every row).
Columns3 rotate_by_angle(const Columns3& r, const Tensor& angle, const Columns3& point) {
  const Columns3 axis{r.x / angle, r.y / angle, r.z / angle};
  const Tensor cos_angle = cos(angle), sin_angle = sin(angle);
  const Tensor along_axis =
      (axis.x * point.x + axis.y * point.y + axis.z * point.z) * (1.0 - cos_angle);
  const Columns3 axis_cross = cross(axis, point);
  const auto component = [&](const Tensor& p, const Tensor& c, const Tensor& a) {
    return p * cos_angle + c * sin_angle + a * along_axis;
  };
  return {component(point.x, axis_cross.x, axis.x), component(point.y, axis_cross.y, axis.y),
          component(point.z, axis_cross.z, axis.z)};
}

// Rodrigues' rotation of each point by its angle-axis; X + r × X where the angle is zero. The
// second branch and its selects are built only when some angle is zero (as the reference's
// per-observation `if`): usually none is, and then they would be a quarter of the ops. The
// function variant always builds them: a branch on a value would make its trace run eagerly.
Columns3 rotate(const Columns3& r, const Columns3& point) {
  const Tensor squared_angle = square(r.x) + square(r.y) + square(r.z);
  if (!function_variant() && reduce_min(squared_angle).item<double>() > 0.0) {
    return rotate_by_angle(r, sqrt(squared_angle), point);
  }
  const Tensor nonzero = greater(squared_angle, zeros_like(squared_angle));
  // The zero-angle rows take the other branch; a safe angle keeps NaN out of their gradient.
  const Tensor angle = sqrt(where(nonzero, squared_angle, ones_like(squared_angle)));
  const Columns3 rotated = rotate_by_angle(r, angle, point), small_cross = cross(r, point);
  return {where(nonzero, rotated.x, point.x + small_cross.x),
          where(nonzero, rotated.y, point.y + small_cross.y),
          where(nonzero, rotated.z, point.z + small_cross.z)};
}

}  // namespace

std::array<Tensor, 2> ba_residual_columns(const std::vector<Tensor>& c,
                                          const std::vector<Tensor>& feature) {
  const Columns3 rotation{c[0], c[1], c[2]};
  const Columns3 relative{c[11] - c[3], c[12] - c[4], c[13] - c[5]};
  const Tensor &focal = c[6], &u0 = c[7], &v0 = c[8], &k1 = c[9], &k2 = c[10], &weight = c[14];
  const Columns3 camera_point = rotate(rotation, relative);
  const Tensor x = camera_point.x / camera_point.z, y = camera_point.y / camera_point.z;
  const Tensor radius_squared = square(x) + square(y);
  const Tensor scale = (1.0 + k1 * radius_squared + k2 * square(radius_squared)) * focal;
  return {weight * (x * scale + u0 - feature[0]), weight * (y * scale + v0 - feature[1])};
}

Tensor ba_residuals(const Tensor& inputs, const Tensor& features) {
  const std::array<Tensor, 2> r = ba_residual_columns(split(inputs, 15, 1), split(features, 2, 1));
  return concat({r[0], r[1]}, 1);
}

BaProblem::BaProblem(const json& input)
    : cameras(input["n"].get<std::int64_t>()),
      points(input["m"].get<std::int64_t>()),
      observations(input["p"].get<std::int64_t>()) {
  const auto camera = input["cam"].get<std::vector<double>>();
  const auto point = input["x"].get<std::vector<double>>();
  const auto feature = input["feat"].get<std::vector<double>>();
  const double w = input["w"].get<double>();
  const auto n = static_cast<std::size_t>(cameras), m = static_cast<std::size_t>(points),
             p = static_cast<std::size_t>(observations);
  std::vector<double> camera_values, point_values, feature_values, weight_values(p, w);
  std::vector<double> camera_of(p), point_of(p);
  for (std::size_t i = 0; i < n; ++i)
    camera_values.insert(camera_values.end(), camera.begin(), camera.end());
  for (std::size_t i = 0; i < m; ++i)
    point_values.insert(point_values.end(), point.begin(), point.end());
  for (std::size_t i = 0; i < p; ++i) {
    feature_values.insert(feature_values.end(), feature.begin(), feature.end());
    camera_of[i] = static_cast<double>(i % n);
    point_of[i] = static_cast<double>(i % m);
  }
  camera_parameters = from_values(camera_values, {n, 11}, DType::Float64);
  point_positions = from_values(point_values, {m, 3}, DType::Float64);
  weights = from_values(weight_values, {p, 1}, DType::Float64);
  features = from_values(feature_values, {p, 2}, DType::Float64);
  camera_index = cast(from_values(camera_of, {p}, DType::Float64), DType::Int64);
  point_index = cast(from_values(point_of, {p}, DType::Float64), DType::Int64);
  // Transposed copies, contiguous (a transpose alone is a strided view).
  const auto by_rows = [](const std::vector<double>& values, std::size_t count, std::size_t width) {
    std::vector<double> rows(values.size());
    for (std::size_t i = 0; i < count; ++i)
      for (std::size_t k = 0; k < width; ++k) rows[k * count + i] = values[i * width + k];
    return from_values(rows, {width, count}, DType::Float64);
  };
  camera_rows = by_rows(camera_values, n, 11);
  point_rows = by_rows(point_values, m, 3);
  weight_row = from_values(weight_values, {1, p}, DType::Float64);
  feature_rows = by_rows(feature_values, p, 2);
}

std::vector<Tensor> BaProblem::observation_rows() const {
  std::vector<Tensor> rows = split(gather(camera_rows, camera_index, 1), 11, 0);
  for (Tensor& row : split(gather(point_rows, point_index, 1), 3, 0)) rows.push_back(row);
  rows.push_back(weight_row);
  return rows;
}

Tensor BaProblem::observation_inputs() const {
  return concat(
      {gather(camera_parameters, camera_index), gather(point_positions, point_index), weights}, 1);
}

EvalFunctions ba_functions() {
  const auto parse = [](const json& input) { return BaProblem(input); };
  return {
      {"objective",
       make_function(parse,
                     [](const BaProblem& problem) -> Output {
                       const std::array<Tensor, 2> residuals = ba_residual_columns(
                           problem.observation_rows(), split(problem.feature_rows, 2, 0));
                       const Tensor weight_error = 1.0 - square(problem.weights);
                       const std::int64_t p = problem.observations;
                       return finish_output(
                           {residuals[0], residuals[1], weight_error},
                           [p](const std::vector<Tensor>& t) -> Output {
                             return [p, x = t[0], y = t[1], weight_error = t[2]] {
                               // Observation 0's two residuals, the first element of each row.
                               const json first = {to_vector(x)[0], to_vector(y)[0]};
                               return json{
                                   {"reproj_error", {{"elements", first}, {"repeated", p}}},
                                   {"w_err",
                                    {{"element", to_vector(weight_error)[0]}, {"repeated", p}}}};
                             };
                           });
                     })},
      {"jacobian",
       make_function(
           parse,
           [](const BaProblem& problem) -> Output {
             // Each observation's residuals read only its own inputs, so the gradient of a
             // residual row's sum with respect to an input row is that entry of every
             // observation's Jacobian: two backward passes give the [p, 2, 15] blocks as 30
             // [1, p] rows. Watching the rows themselves spares the backward the [15, p]
             // concatenation a batch Jacobian of the inputs would build (and its
             // transpose to [p, 2, 15]); the CSR values below are written row by row from them.
             const std::vector<Tensor> columns = problem.observation_rows();
             GradientTape tape(/*persistent=*/true);
             for (const Tensor& column : columns) tape.watch(column);
             const std::array<Tensor, 2> residuals =
                 ba_residual_columns(columns, split(problem.feature_rows, 2, 0));
             tape.end_recording();
             std::vector<Tensor> results;
             for (const Tensor& residual : residuals) {
               // x's residual does not read v0, nor y's u0: zeros there.
               for (Tensor& derivative :
                    tape.gradient(residual, columns, UnconnectedGradients::Zero))
                 results.push_back(std::move(derivative));
             }
             results.push_back(-2.0 * problem.weights);  // [p, 1]: the weight rows
             const auto p = static_cast<std::size_t>(problem.observations);
             const auto n = static_cast<std::size_t>(problem.cameras),
                        m = static_cast<std::size_t>(problem.points);
             return finish_output(
                 std::move(results), [p, n, m](const std::vector<Tensor>& t) -> Output {
                   // The CSR matrix, built as a user would (timed): the values of residual row
                   // 2i + r are d r / d column j of observation i, j = 0..14, then the weight
                   // rows' one value each; then 15 column indices in each residual row and one in
                   // each weight row.
                   std::array<const double*, 30> derivative{};
                   for (std::size_t k = 0; k < 30; ++k) derivative[k] = t[k].array<double>().data();
                   const double* weight_derivative = t[30].array<double>().data();
                   // Buffers whose elements the loops below write first: no zeroing pass (a
                   // std::vector's would write the 12 MB of ba1's CSR once more). From the
                   // buffer cache, as the tool's arrays: from malloc, glibc mapped them afresh
                   // (and then grew and trimmed its heap) at each of the first evaluates.
                   xt::uvector<double, buffer_allocator<double>> values(31 * p);
                   double* value = values.data();
                   for (std::size_t i = 0; i < p; ++i, value += 30) {
                     for (std::size_t k = 0; k < 30; ++k) value[k] = derivative[k][i];
                   }
                   std::copy(weight_derivative, weight_derivative + p, value);
                   // 32-bit indices, as GradBench's own C++ tools keep them (half the bytes to
                   // write).
                   if (11 * n + 3 * m + 31 * p >
                       static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
                     throw std::invalid_argument("ba: the CSR indices would overflow 32 bits");
                   xt::uvector<std::int32_t, buffer_allocator<std::int32_t>> rows(3 * p + 1),
                       columns(31 * p);
                   for (std::size_t r = 0; r <= 2 * p; ++r)
                     rows[r] = static_cast<std::int32_t>(15 * r);
                   for (std::size_t r = 1; r <= p; ++r)
                     rows[2 * p + r] = static_cast<std::int32_t>(30 * p + r);
                   const auto weight_column = static_cast<std::int32_t>(11 * n + 3 * m);
                   std::int32_t* column = columns.data();
                   for (std::size_t i = 0, camera = 0, point = 0; i < p; ++i, column += 30) {
                     // Observation i's two rows have the same 15 columns.
                     const auto camera_column = static_cast<std::int32_t>(11 * camera);
                     const auto point_column = static_cast<std::int32_t>(11 * n + 3 * point);
                     for (std::int32_t c = 0; c < 11; ++c)
                       column[c] = column[15 + c] = camera_column + c;
                     for (std::int32_t c = 0; c < 3; ++c)
                       column[11 + c] = column[26 + c] = point_column + c;
                     column[14] = column[29] = weight_column + static_cast<std::int32_t>(i);
                     if (++camera == n) camera = 0;
                     if (++point == m) point = 0;
                   }
                   for (std::size_t i = 0; i < p; ++i)
                     column[i] = weight_column + static_cast<std::int32_t>(i);
                   return [v = std::move(values), rows = std::move(rows),
                           columns = std::move(columns)] {
                     // GradBench compares the first 30 entries of each array and the last.
                     const auto head = [](const auto& all) {
                       const auto count =
                           static_cast<std::ptrdiff_t>(std::min<std::size_t>(30, all.size()));
                       std::vector<typename std::decay_t<decltype(all)>::value_type> out(
                           all.begin(), all.begin() + count);
                       out.push_back(all.back());
                       return out;
                     };
                     return json{{"rows", head(rows)}, {"cols", head(columns)}, {"vals", head(v)}};
                   };
                 });
           })},
  };
}

}  // namespace tapegrad::gradbench
