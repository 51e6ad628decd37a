// ht: ADBench's hand tracking. 26 pose parameters rotate the 22 bones of a skinned hand
// mesh; each residual is a data point minus a posed vertex (simple) or a barycentric point of
// a posed triangle (complicated). The Jacobian is tall (3N × 26): forward mode
// (`jacobian_forward`, one vectorized pass carrying the 26 tangents); the barycentric columns
// are a `batch_jacobian` (each residual row reads only its own two coordinates).
#include <cmath>

#include "evals/evals.hpp"

namespace tapegrad::gradbench {

namespace {

constexpr std::size_t kBones = 22;

Tensor int64_tensor(const std::vector<std::int64_t>& values) {
  std::vector<double> as_double(values.begin(), values.end());
  return cast(from_values(as_double, {values.size()}, DType::Float64), DType::Int64);
}

// [rows, 4, 4] from a JSON list of row-major 4×4 matrices.
Tensor matrices_from_json(const json& list) {
  std::vector<double> flat;
  for (const auto& matrix : list)
    for (const auto& row : matrix)
      for (const auto& x : row) flat.push_back(x.get<double>());
  return from_values(flat, {list.size(), 4, 4}, DType::Float64);
}

// Stacks 9 [b] tensors (row-major entries) into [b, 3, 3].
Tensor matrices_3x3(const std::vector<Tensor>& entries) {
  const auto b = static_cast<std::int64_t>(entries[0].size());
  return reshape(stack(entries, 1), {b, 3, 3});
}

// R = Rz·Ry·Rx of each bone's angles; a bone's pose column is (x, z, y).
Tensor euler_rotations(const Tensor& angles /*[bones, 3]*/) {
  const Tensor tx = reshape(slice(angles, {0, 0}, {-1, 1}), {-1});
  const Tensor tz = reshape(slice(angles, {0, 1}, {-1, 1}), {-1});
  const Tensor ty = reshape(slice(angles, {0, 2}, {-1, 1}), {-1});
  const Tensor zero = zeros_like(tx), one = ones_like(tx);
  const Tensor rx =
      matrices_3x3({one, zero, zero, zero, cos(tx), negative(sin(tx)), zero, sin(tx), cos(tx)});
  const Tensor ry =
      matrices_3x3({cos(ty), zero, sin(ty), zero, one, zero, negative(sin(ty)), zero, cos(ty)});
  const Tensor rz =
      matrices_3x3({cos(tz), negative(sin(tz)), zero, sin(tz), cos(tz), zero, zero, zero, one});
  return matmul(matmul(rz, ry), rx);
}

// The rotation of an angle-axis vector [3] (the identity below 1e-4, as the reference). The
// function variant selects with `where` instead of branching on the norm's value, which would
// make its trace run eagerly; a norm of 1 stands in below 1e-4, so that the unused rotation
// has no NaN to pass to the gradient.
Tensor angle_axis_rotation(const Tensor& angle_axis) {
  const Tensor identity = constant({{1.0, 0.0, 0.0}, {0.0, 1.0, 0.0}, {0.0, 0.0, 1.0}});
  Tensor norm = sqrt(reduce_sum(square(angle_axis)));
  Tensor small;
  if (function_variant()) {
    small = less(norm, 1e-4);
    norm = where(small, ones_like(norm), norm);
  } else if (norm.item<double>() < 1e-4) {
    return identity;
  }
  const auto axis = split(angle_axis / norm, 3, 0);
  const Tensor &x = axis[0], &y = axis[1], &z = axis[2];
  const Tensor s = sin(norm), c = cos(norm), one_minus_c = 1.0 - c;
  const std::vector<Tensor> entries{
      x * x + (1.0 - x * x) * c,   x * y * one_minus_c - z * s, x * z * one_minus_c + y * s,
      x * y * one_minus_c + z * s, y * y + (1.0 - y * y) * c,   y * z * one_minus_c - x * s,
      x * z * one_minus_c - y * s, z * y * one_minus_c + x * s, z * z + (1.0 - z * z) * c};
  const Tensor rotation = reshape(concat(entries, 0), {3, 3});
  return small.defined() ? where(small, identity, rotation) : rotation;
}

}  // namespace

HandModel::HandModel(const json& input) {
  const json& model = input["data"]["model"];
  parents = model["parents"].get<std::vector<int>>();
  if (parents.size() != kBones) throw std::invalid_argument("ht: the model must have 22 bones");
  base_relatives = matrices_from_json(model["base_relatives"]);
  inverse_base_absolutes = matrices_from_json(model["inverse_base_absolutes"]);
  base_positions = transpose(matrix_from_json(model["base_positions"]));    // [4, V]
  weights = expand_dims(transpose(matrix_from_json(model["weights"])), 1);  // [22, 1, V]
  const auto vertex_count = static_cast<std::int64_t>(base_positions.shape()[1]);
  weighted_positions = transpose(
      reshape(expand_dims(base_positions, 0) * weights, {4 * std::int64_t{kBones}, vertex_count}));
  mirrored = model["is_mirrored"].get<bool>();
  points = matrix_from_json(input["data"]["points"]);  // [N, 3]
  const auto correspondences = input["data"]["correspondences"].get<std::vector<std::int64_t>>();
  const auto triangles = model["triangles"].get<std::vector<std::vector<std::int64_t>>>();
  complicated = !input["us"].empty();
  if (complicated) {
    std::vector<std::int64_t> a, b, c;
    for (auto t : correspondences) {
      a.push_back(triangles[static_cast<std::size_t>(t)][0]);
      b.push_back(triangles[static_cast<std::size_t>(t)][1]);
      c.push_back(triangles[static_cast<std::size_t>(t)][2]);
    }
    vertex_a = int64_tensor(a), vertex_b = int64_tensor(b), vertex_c = int64_tensor(c);
    us = matrix_from_json(input["us"]);  // [N, 2]
  } else {
    vertex_a = int64_tensor(correspondences);
  }
  // Where each bone's (x, z, y) angle comes from in [0, θ...]: 0 is a zero angle. Bones 0, 1
  // and the finger tips do not move; each finger's first bone takes two angles, the next two
  // one each.
  std::vector<std::int64_t> source(kBones * 3, 0);
  std::int64_t next_theta = 6;
  std::size_t bone = 2;
  for (int finger = 0; finger < 5; ++finger) {
    for (int joint = 0; joint < 3; ++joint, ++bone) {
      source[bone * 3 + 0] = 1 + next_theta++;
      if (joint == 0) source[bone * 3 + 1] = 1 + next_theta++;
    }
    ++bone;  // the tip
  }
  angle_source = int64_tensor(source);
}

Tensor HandModel::residuals(const Tensor& theta, const Tensor& barycentric) const {
  // Each bone's posed relative transform: base_relative · [R 0; 0 1].
  const Tensor angles = reshape(gather(concat({zeros({1}), theta}, 0), angle_source), {kBones, 3});
  const Tensor rotations = euler_rotations(angles);                            // [22, 3, 3]
  const Tensor rotation_rows = concat({rotations, zeros({kBones, 3, 1})}, 2);  // [22, 3, 4]
  const Tensor last_row = constant({{0.0, 0.0, 0.0, 1.0}});
  const Tensor posed = concat({rotation_rows, tile(expand_dims(last_row, 0), {kBones, 1, 1})}, 1);
  const std::vector<Tensor> relatives = split(matmul(base_relatives, posed), kBones, 0);
  // Absolutes down the tree (parents come first), then the skinning transforms.
  std::vector<Tensor> absolutes(kBones);
  for (std::size_t i = 0; i < kBones; ++i)
    absolutes[i] = parents[i] < 0
                       ? relatives[i]
                       : matmul(absolutes[static_cast<std::size_t>(parents[i])], relatives[i]);
  const Tensor transforms = matmul(concat(absolutes, 0), inverse_base_absolutes);  // [22, 4, 4]
  // Skinned vertices: Σ_bones (transform · weight · base position), first three rows; one gemm
  // of the model's weighted positions with the [3, 22·4] transform rows, never [22, 3, V].
  // Vertices are rows ([V, 3]), as the residuals are: no transpose of anything N- or V-sized.
  const Tensor transform_rows =
      reshape(transpose(slice(transforms, {0, 0, 0}, {-1, 3, -1}), {1, 0, 2}),
              {3, 4 * std::int64_t{kBones}});
  Tensor vertices = matmul(weighted_positions, transform_rows, false, true);  // [V, 3]
  if (mirrored) vertices = vertices * from_values({-1.0, 1.0, 1.0}, {1, 3}, DType::Float64);
  const Tensor global_rotation = angle_axis_rotation(slice(theta, {0}, {3}));
  vertices =
      matmul(vertices, global_rotation, false, true) + reshape(slice(theta, {3}, {3}), {1, 3});

  Tensor model_points;
  if (complicated) {
    const Tensor u0 = slice(barycentric, {0, 0}, {-1, 1});  // [N, 1]
    const Tensor u1 = slice(barycentric, {0, 1}, {-1, 1});
    model_points = u0 * gather(vertices, vertex_a) + u1 * gather(vertices, vertex_b) +
                   (1.0 - u0 - u1) * gather(vertices, vertex_c);
  } else {
    model_points = gather(vertices, vertex_a);
  }
  return points - model_points;  // [N, 3]: residual 3i + j is row i, column j
}

Tensor HandModel::jacobian(const Tensor& theta) const {
  const std::vector<Tensor> blocks = jacobian_blocks(theta);
  return blocks.size() == 1 ? blocks[0] : concat(blocks, 1);
}

std::vector<Tensor> HandModel::jacobian_blocks(const Tensor& theta) const {
  const Tensor barycentric = us;
  const auto rows = static_cast<std::int64_t>(points.shape()[0] * 3);
  // Tall: forward mode, [N, 3, 26] -> [3N, 26].
  const Tensor theta_columns =
      reshape(jacobian_forward([&](const Tensor& t) { return residuals(t, barycentric); }, theta),
              {rows, 26});
  if (!complicated) return {theta_columns};
  // Each residual row reads only its own (u0, u1): a batch Jacobian, [N, 3, 2].
  GradientTape tape;
  tape.watch(barycentric);
  const Tensor per_point = tape.batch_jacobian(residuals(theta, barycentric), barycentric);
  return {reshape(per_point, {rows, 2}), theta_columns};
}

EvalFunctions ht_functions() {
  const auto parse = [](const json& input) {
    return std::make_pair(std::make_shared<HandModel>(input), vector_from_json(input["theta"]));
  };
  return {
      {"objective", make_function(parse,
                                  [](const auto& in) {
                                    return list_output(
                                        in.first->residuals(in.second, in.first->us));
                                  })},
      {"jacobian", make_function(parse,
                                 [](const auto& in) {
                                   return joined_rows_output(in.first->jacobian_blocks(in.second));
                                 })},
  };
}

}  // namespace tapegrad::gradbench
