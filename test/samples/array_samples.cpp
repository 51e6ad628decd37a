// The array family's samples (src/ops/array/): reshapes, transposes, broadcasts, gathers and
// scatters, joins and splits, slices, pads, scans, sorts, the index ops (argmax, one_hot,
// boolean_mask's positions) and the Jacobian's internal pack and diagonal ops.
#include "ops/internal_ops.hpp"
#include "samples/op_sample.hpp"
#include "samples/sample_inputs.hpp"

namespace tapegrad::samples {
namespace {

// ---- samples --------------------------------------------------------------------------------

std::vector<OpSample> op_samples() {
  const Tensor a = random_tensor({2, 3}, 1);
  const Tensor b = random_tensor({2, 3}, 2);
  const Tensor row = random_tensor({3}, 3);
  const Tensor ids = from_values({1.0, 0.0, 1.0}, {3}, DType::Int64);
  const Tensor nd = from_values({1.0, 2.0, 0.0, 0.0}, {2, 2}, DType::Int64);
  const std::string linear = "linear: its second derivative is zero";
  const std::string positions = "its output is integer positions";
  std::vector<OpSample> s;
  // array.cpp
  s.push_back(
      with_integers(no_second_order(unary_sample("Identity", tapegrad::identity, a), linear)));
  s.push_back(
      with_integers(not_differentiable(unary_sample("StopGradient", tapegrad::stop_gradient, a),
                                       "it stops gradients by definition")));
  s.push_back(with_integers(no_second_order(sample("Reshape", {a},
                                                   [](const auto& in) {
                                                     return Outputs{reshape(in[0], {3, 2})};
                                                   }),
                                            linear)));
  s.push_back(with_integers(no_second_order(
      sample("Transpose", {a}, [](const auto& in) { return Outputs{transpose(in[0])}; }), linear)));
  s.push_back(with_integers(no_second_order(sample("BroadcastTo", {row},
                                                   [](const auto& in) {
                                                     return Outputs{broadcast_to(in[0], {2, 3})};
                                                   }),
                                            linear)));
  // array_gather.cpp
  s.push_back(with_integers(no_second_order(
      sample("GatherV2", {a, ids}, [](const auto& in) { return Outputs{gather(in[0], in[1], 1)}; }),
      linear)));
  s.push_back(with_integers(no_second_order(
      sample("UnsortedSegmentSum", {random_tensor({3, 2}, 5), ids},
             [](const auto& in) { return Outputs{unsorted_segment_sum(in[0], in[1], 3)}; }),
      linear)));
  // array_join.cpp, array_slice.cpp
  s.push_back(with_integers(
      no_second_order(sample("ConcatV2", {a, b, row},
                             [](const auto& in) {
                               return Outputs{concat({in[0], in[1], reshape(in[2], {1, 3})}, 0)};
                             }),
                      linear)));
  s.push_back(with_integers(no_second_order(
      sample("Split", {a}, [](const auto& in) { return split(in[0], 3, 1); }), linear)));
  s.push_back(with_integers(no_second_order(sample("Slice", {a},
                                                   [](const auto& in) {
                                                     return Outputs{slice(in[0], {1, 1}, {1, 2})};
                                                   }),
                                            linear)));
  // SliceGrad runs as slice's gradient, with the watched output gradient as its input.
  const std::string no_integer_gradient =
      "a tape gives an integer tensor no gradient (GradientTape::watch warns): the op is not "
      "reached";
  s.push_back(integers_unreached(no_second_order(sample("SliceGrad", {random_tensor({1, 2}, 6)},
                                                        [a64 = a](const auto& in) {
                                                          // a in the output gradient's dtype, for
                                                          // the other-dtype runs
                                                          const Tensor a = cast(a64, in[0].dtype());
                                                          GradientTape tape;
                                                          tape.watch(a);
                                                          const Tensor y = slice(a, {1, 1}, {1, 2});
                                                          return tape.gradient({y}, {a}, {in[0]});
                                                        }),
                                                 linear),
                                 no_integer_gradient));
  s.push_back(with_integers(no_second_order(sample("Tile", {a},
                                                   [](const auto& in) {
                                                     return Outputs{tile(in[0], {2, 1})};
                                                   }),
                                            linear)));
  // array_rows.cpp: end to end, and interleaved as 3 blocks of 1 ([3, 2]: out[o, r] =
  // rows[r][o]); JacobianUnpack runs as pack_rows's gradient.
  s.push_back(no_second_order(sample("JacobianPack", {row, random_tensor({3}, 7)},
                                     [](const auto& in) {
                                       return Outputs{detail::pack_rows({in[0], in[1]}, {2, 3}),
                                                      detail::pack_rows({in[0], in[1]}, {3, 2}, 3)};
                                     }),
                              linear));
  s.push_back(no_second_order(
      sample("JacobianUnpack", {b},
             [row64 = row](const auto& in) {
               // the rows in the output gradient's dtype, for the other-dtype runs
               const Tensor row = cast(row64, in[0].dtype());
               const Tensor other = cast(random_tensor({3}, 8), in[0].dtype());
               GradientTape tape;
               tape.watch(row);
               tape.watch(other);
               const Tensor packed = detail::pack_rows({row, other}, {2, 3});
               const Tensor interleaved = detail::pack_rows({row, other}, {3, 2}, 3);
               return tape.gradient({packed, interleaved}, {row, other},
                                    {in[0], reshape(in[0], {3, 2})});
             }),
      linear));
  // The vectorized Jacobian's dense diagonal (2 blocks of 3) and its inverse.
  s.push_back(no_second_order(sample("JacobianDiagonal", {random_tensor({2, 3}, 9)},
                                     [](const auto& in) {
                                       return Outputs{detail::diagonal_blocks(in[0], 3, {2, 3, 3})};
                                     }),
                              linear));
  s.push_back(no_second_order(
      sample("JacobianDiagonalPart", {random_tensor({2, 3, 3}, 10)},
             [](const auto& in) { return Outputs{detail::diagonal_blocks_part(in[0], 3, {6})}; }),
      linear));
  // array_sort.cpp, array_scan.cpp: PutAlongAxis runs as sort's gradient.
  s.push_back(with_integers(no_second_order(
      sample("TakeAlongAxis", {a}, [](const auto& in) { return Outputs{sort(in[0], 0, true)}; }),
      "piecewise linear (a permutation of x)")));
  s.push_back(integers_unreached(no_second_order(sample("PutAlongAxis", {b},
                                                        [a64 = a](const auto& in) {
                                                          // a in the output gradient's dtype, for
                                                          // the other-dtype runs
                                                          const Tensor a = cast(a64, in[0].dtype());
                                                          GradientTape tape;
                                                          tape.watch(a);
                                                          return tape.gradient({sort(a, 1)}, {a},
                                                                               {in[0]});
                                                        }),
                                                 linear),
                                 no_integer_gradient));
  s.push_back(with_integers(not_differentiable(
      sample("ArgSort", {a}, [](const auto& in) { return Outputs{argsort(in[0], -1)}; }),
      positions)));
  s.push_back(with_integers(no_second_order(
      sample("Cumsum", {a}, [](const auto& in) { return Outputs{cumsum(in[0], 1, true, true)}; }),
      linear)));
  // The third with zeros in x: the exact partials instead of TF's division by x.
  s.push_back(with_integers(sample("Cumprod", {positive({2, 3}, 4)}, [](const auto& in) {
    const Tensor holes = from_values({1, 0, 1, 0, 1, 1}, {2, 3}, in[0].dtype());
    return Outputs{cumprod(in[0], 1), cumprod(in[0], 0, true, true),
                   cumprod(multiply(in[0], holes), 1, false, true)};
  })));
  s.push_back(with_integers(no_second_order(sample("ReverseV2", {a},
                                                   [](const auto& in) {
                                                     return Outputs{reverse(in[0], {0, 1})};
                                                   }),
                                            linear)));
  // array_pad.cpp: MirrorPadGrad runs as a mirror pad's gradient.
  s.push_back(with_integers(
      no_second_order(sample("PadV2", {a},
                             [](const auto& in) {
                               return Outputs{pad(in[0], {{1, 0}, {0, 2}}, PadMode::Constant, 3)};
                             }),
                      linear)));
  s.push_back(with_integers(
      no_second_order(sample("MirrorPad", {a},
                             [](const auto& in) {
                               return Outputs{pad(in[0], {{1, 1}, {2, 1}}, PadMode::Reflect),
                                              pad(in[0], {{2, 0}, {0, 3}}, PadMode::Symmetric)};
                             }),
                      linear)));
  s.push_back(integers_unreached(
      no_second_order(sample("MirrorPadGrad", {random_tensor({4, 6}, 13)},
                             [a64 = a](const auto& in) {
                               // a in the output gradient's dtype, for the other-dtype runs
                               const Tensor a = cast(a64, in[0].dtype());
                               GradientTape tape;
                               tape.watch(a);
                               const Tensor y = pad(a, {{1, 1}, {2, 1}}, PadMode::Reflect);
                               return tape.gradient({y}, {a}, {in[0]});
                             }),
                      linear),
      no_integer_gradient));
  // array_scatter.cpp
  s.push_back(with_integers(no_second_order(
      sample("GatherNd", {a, nd}, [](const auto& in) { return Outputs{gather_nd(in[0], in[1])}; }),
      linear)));
  s.push_back(
      with_integers(no_second_order(sample("ScatterNd", {nd, random_tensor({2}, 14)},
                                           [](const auto& in) {
                                             return Outputs{scatter_nd(in[0], in[1], {2, 3})};
                                           }),
                                    linear)));
  s.push_back(with_integers(no_second_order(
      sample("TensorScatterUpdate", {a, nd, random_tensor({2}, 15)},
             [](const auto& in) { return Outputs{tensor_scatter_nd_update(in[0], in[1], in[2])}; }),
      linear)));
  // A duplicated index: the last of its updates stays, the others reach nothing (their
  // derivative is zero), for single slots and for rows.
  s.push_back(with_integers(no_second_order(
      named(sample("TensorScatterUpdate",
                   {a, from_values({1.0, 2.0, 0.0, 0.0, 1.0, 2.0, 1.0, 2.0}, {4, 2}, DType::Int64),
                    random_tensor({4}, 16)},
                   [](const auto& in) {
                     return Outputs{tensor_scatter_nd_update(in[0], in[1], in[2])};
                   }),
            "a slot written three times"),
      linear)));
  s.push_back(with_integers(no_second_order(
      named(
          sample("TensorScatterUpdate",
                 {a, from_values({1.0, 0.0, 1.0}, {3, 1}, DType::Int64), random_tensor({3, 3}, 17)},
                 [](const auto& in) {
                   return Outputs{tensor_scatter_nd_update(in[0], in[1], in[2])};
                 }),
          "a row written twice"),
      linear)));
  // boolean_mask records its mask's true positions (Where) before gathering them.
  s.push_back(float64_only(
      not_differentiable(
          sample("Where", {from_values({1, 0, 1}, {3}, DType::Bool)},
                 [a](const auto& in) { return Outputs{boolean_mask(transpose(a), in[0])}; }),
          "the mask's positions: its input is bool"),
      "no floating input to cast"));
  // array_create.cpp
  s.push_back(float64_only(
      not_differentiable(sample("OneHot", {from_values({2, 0, 1}, {3}, DType::Int64)},
                                [](const auto& in) { return Outputs{one_hot(in[0], 4)}; }),
                         "its input is integer indices"),
      "no floating input to cast"));
  s.push_back(with_integers(not_differentiable(
      sample("ArgMax", {a}, [](const auto& in) { return Outputs{argmax(in[0], 1)}; }), positions)));
  s.push_back(with_integers(not_differentiable(
      sample("ArgMin", {a}, [](const auto& in) { return Outputs{argmin(in[0], 0)}; }), positions)));
  return s;
}

// ---- batching ---------------------------------------------------------------------------------

std::vector<BatchCase> batch_cases() {
  std::vector<BatchCase> cases;
  for (const auto& [name, f] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&)>>{
           {"Identity", identity}, {"StopGradient", stop_gradient}}) {
    cases.push_back({name, {name}, unary(f), {batch_of({2, 3}, 21, 0.1, 0.9)}});
  }
  cases.push_back({"Reshape, expand_dims, squeeze",
                   {"Reshape"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{reshape(in[0], {3, -1}), expand_dims(in[0], 1),
                                                squeeze(expand_dims(in[0], 0))};
                   },
                   {batch_of({2, 3}, 32)}});
  cases.push_back({"Transpose",
                   {"Transpose"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{transpose(in[0]), transpose(in[0], {1, 0, 2})};
                   },
                   {batch_of({2, 3, 4}, 33)}});
  cases.push_back(
      {"BroadcastTo",
       {"BroadcastTo"},
       [](const std::vector<Tensor>& in) {
         return std::vector<Tensor>{broadcast_to(in[0], {4, 2, 3}), broadcast_to(in[1], {2, 3})};
       },
       {batch_of({3}, 34), batch_of({2, 1}, 35)}});

  const Tensor params = random_tensor({4, 5}, 36);
  const Tensor index = ints({3, 0, 3}, {3});
  cases.push_back({"GatherV2 params batched",
                   {"GatherV2"},
                   [index](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{gather(in[0], index, 0), gather(in[0], index, 1)};
                   },
                   {batch_of({4, 5}, 37)}});
  cases.push_back({"GatherV2 indices batched",
                   {"GatherV2"},
                   [params](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{gather(params, in[0], 0), gather(params, in[0], 1)};
                   },
                   {ints({0, 1, 3, 2, 2, 0}, {kBatch, 2})}});
  cases.push_back({"GatherV2 both batched",
                   {"GatherV2"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{gather(in[0], in[1], 0), gather(in[0], in[1], 1),
                                                gather(in[0], in[2], 1)};
                   },
                   {batch_of({4, 5}, 38), ints({0, 1, 3, 2, 2, 0}, {kBatch, 2}),
                    ints({1, 1, 1, 0, 2, 3, 3, 3, 3, 4, 4, 0}, {kBatch, 2, 2}, DType::Int32)}});

  const Tensor data = random_tensor({4, 2}, 39);
  const Tensor ids = ints({1, 0, 1, 2}, {4});
  cases.push_back({"UnsortedSegmentSum data batched",
                   {"UnsortedSegmentSum"},
                   [ids](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{unsorted_segment_sum(in[0], ids, 3)};
                   },
                   {batch_of({4, 2}, 40)}});
  cases.push_back({"UnsortedSegmentSum ids batched",
                   {"UnsortedSegmentSum"},
                   [data](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{unsorted_segment_sum(data, in[0], 3)};
                   },
                   {ints({0, 0, 1, 2, 2, 2, 1, 0, 1, 1, 1, 1}, {kBatch, 4})}});
  cases.push_back(
      {"UnsortedSegmentSum both batched",
       {"UnsortedSegmentSum"},
       [](const std::vector<Tensor>& in) {
         return std::vector<Tensor>{unsorted_segment_sum(in[0], in[1], 3)};
       },
       {batch_of({4, 2}, 41), ints({0, 0, 1, 2, 2, 2, 1, 0, 1, 1, 1, 1}, {kBatch, 4})}});

  const Tensor piece = random_tensor({2, 2}, 42);
  cases.push_back({"ConcatV2 and Split",
                   {"ConcatV2", "Split"},
                   [piece](const std::vector<Tensor>& in) {
                     std::vector<Tensor> out{concat({in[0], piece, in[1]}, 1),
                                             concat({piece, in[0]}, 0), stack({in[0], in[1]}, 1)};
                     for (const Tensor& part : split(in[0], 2, 1)) out.push_back(part);
                     return out;
                   },
                   {batch_of({2, 2}, 43), batch_of({2, 2}, 44)}});
  cases.push_back({"Slice and Tile",
                   {"Slice", "Tile"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{slice(in[0], {1, 0}, {2, -1}), tile(in[0], {2, 3})};
                   },
                   {batch_of({3, 4}, 45)}});
  cases.push_back({"SliceGrad",
                   {"SliceGrad"},
                   gradient_at(random_tensor({3, 4}, 46),
                               [](const Tensor& x) {
                                 return slice(x, {1, 1}, {2, 2});
                               }),
                   {batch_of({2, 2}, 47)}});
  // Scans, reversal, padding.
  cases.push_back({"Cumsum, Cumprod, ReverseV2",
                   {"Cumsum", "Cumprod", "ReverseV2"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{cumsum(in[0], 0),
                                                cumsum(in[0], -1, true, false),
                                                cumprod(in[0], 1, false, true),
                                                cumprod(in[0], 0, true, true),
                                                reverse(in[0], {0}),
                                                reverse(in[0], {-1, 0}),
                                                cumsum(in[1], 0),
                                                reverse(in[1], {0})};
                   },
                   {batch_of({2, 3}, 123), as_f32(batch_of({4}, 124))}});
  cases.push_back({"PadV2, MirrorPad",
                   {"PadV2", "MirrorPad"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         pad(in[0], {{1, 0}, {2, 1}}, PadMode::Constant, 2.5),
                         pad(in[0], {{1, 1}, {2, 0}}, PadMode::Reflect),
                         pad(in[0], {{0, 2}, {1, 3}}, PadMode::Symmetric), pad(in[1], {{2, 1}})};
                   },
                   {batch_of({3, 4}, 125), as_f32(batch_of({3}, 126))}});
  cases.push_back({"MirrorPadGrad, g batched",
                   {"MirrorPadGrad"},
                   gradient_at(random_tensor({3, 4}, 127),
                               [](const Tensor& x) {
                                 return pad(x, {{1, 1}, {2, 3}}, PadMode::Symmetric);
                               }),
                   {batch_of({5, 9}, 128)}});

  // N-d gather and scatter.
  const Tensor nd_params = random_tensor({3, 4, 2}, 129);
  const Tensor nd_index = ints({2, 1, 0, 3}, {2, 2});
  const Tensor nd_batched_index =
      ints({0, 1, 2, 3, 1, 0, 2, 2, 0, 0, 1, 3}, {kBatch, 2, 2}, DType::Int32);
  cases.push_back({"GatherNd",
                   {"GatherNd"},
                   [nd_params, nd_index](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         gather_nd(in[0], nd_index), gather_nd(nd_params, in[1]),
                         gather_nd(in[0], in[1]), gather_nd(in[0], ints({1}, {1}))};
                   },
                   {batch_of({3, 4, 2}, 130), nd_batched_index}});
  cases.push_back({"ScatterNd, TensorScatterUpdate",
                   {"ScatterNd", "TensorScatterUpdate"},
                   [nd_index](const std::vector<Tensor>& in) {
                     const Tensor fixed_updates = from_values({1, 2, 3, 4}, {2, 2});
                     const Tensor base = from_values(std::vector<double>(24, 0.5), {3, 4, 2});
                     return std::vector<Tensor>{
                         scatter_nd(nd_index, in[0], {3, 4, 2}),
                         scatter_nd(in[1], fixed_updates, {3, 4, 2}),
                         scatter_nd(in[1], in[0], {3, 4, 2}),
                         tensor_scatter_nd_update(in[2], nd_index, fixed_updates),
                         tensor_scatter_nd_update(base, in[1], in[0]),
                         tensor_scatter_nd_update(in[2], in[1], in[0])};
                   },
                   {batch_of({2, 2}, 131), nd_batched_index, batch_of({3, 4, 2}, 132)}});

  // Sorting: ArgSort's positions, then TakeAlongAxis (sort, top_k) and PutAlongAxis (their
  // gradients), with x batched (so are the positions) or only the output gradient batched.
  cases.push_back({"ArgSort, TakeAlongAxis, PutAlongAxis",
                   {"ArgSort", "TakeAlongAxis", "PutAlongAxis"},
                   [](const std::vector<Tensor>& in) {
                     GradientTape tape;
                     tape.watch(in[0]);
                     const Tensor sorted = sort(in[0], 0, true);
                     const TopK top = top_k(in[0], 2);
                     const Tensor loss = add(reduce_sum(multiply(sorted, sorted)),
                                             reduce_sum(multiply(top.values, top.values)));
                     return std::vector<Tensor>{sorted,      top.values,
                                                top.indices, argsort(in[0], -1),
                                                sort(in[1]), tape.gradient(loss, in[0])};
                   },
                   {batch_of({3, 4}, 133), as_f32(batch_of({5}, 134))}});
  cases.push_back(
      {"PutAlongAxis, g batched",
       {"PutAlongAxis"},
       gradient_at(random_tensor({3, 4}, 135), [](const Tensor& x) { return sort(x, 1); }),
       {batch_of({3, 4}, 136)}});
  cases.push_back({"ArgMax, ArgMin, OneHot",
                   {"ArgMax", "ArgMin", "OneHot"},
                   [](const std::vector<Tensor>& in) {
                     const Tensor best = argmax(in[0], 1);
                     return std::vector<Tensor>{best,
                                                argmin(in[0], 0),
                                                argmax(in[1], -1),
                                                one_hot(best, 5),
                                                one_hot(in[2], 3, DType::Float32),
                                                multiply(in[0], one_hot(argmin(in[0], -1), 4))};
                   },
                   {batch_of({3, 4}, 153), as_f32(batch_of({5}, 154)),
                    ints({0, 2, 1, 1, 2, 5}, {kBatch, 2}, DType::Int32)}});
  cases.push_back({"JacobianPack and JacobianUnpack",
                   {"JacobianPack", "JacobianUnpack"},
                   [](const std::vector<Tensor>& in) {
                     const Tensor fixed = random_tensor({2}, 71);
                     GradientTape tape;
                     tape.watch(in[0]);
                     tape.watch(fixed);
                     const Tensor packed = detail::pack_rows({in[0], fixed, in[0]}, {3, 2});
                     // Interleaved: each row read as 2 blocks of 1, out[o, r] = rows[r][o].
                     const Tensor interleaved = detail::pack_rows({in[0], fixed, in[0]}, {2, 3}, 2);
                     const Tensor seed = reshape(concat({in[0], in[0], fixed}, 0), {3, 2});
                     std::vector<Tensor> out = tape.gradient({packed, interleaved}, {in[0], fixed},
                                                             {seed, reshape(seed, {2, 3})});
                     out.push_back(packed);
                     out.push_back(interleaved);
                     return out;
                   },
                   {batch_of({2}, 72)}});
  // The vectorized Jacobian's dense diagonal (2 blocks of 3 per slice) and its inverse.
  cases.push_back({"JacobianDiagonal and JacobianDiagonalPart",
                   {"JacobianDiagonal", "JacobianDiagonalPart"},
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{detail::diagonal_blocks(in[0], 3, {2, 3, 3}),
                                                detail::diagonal_blocks_part(in[1], 3, {6})};
                   },
                   {batch_of({2, 3}, 73), batch_of({2, 3, 3}, 74)}});
  return cases;
}

// ---- structure --------------------------------------------------------------------------------

void attach_structure_cases(std::vector<OpSample>& s) {
  attach(s, "Identity",
         {{structure_d()}, {true}, std::nullopt, {3}, diagonal_matrix({0.5, -2, 3})});
  attach(s, "Reshape",
         {{f64({0.5, -2, 3, 0.25}, {2, 2})},
          {true},
          std::nullopt,
          {4},
          diagonal_matrix({0.5, -2, 3, 0.25})});
}

// ---- misuse -----------------------------------------------------------------------------------

MisuseCases array_misuse() {
  MisuseCases t;
  const Tensor x4 = f64({1, 2, 3, 4});
  const Tensor m = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const std::int64_t two62 = std::int64_t{1} << 62;

  misuse(t, "reshape: 4 elements into [3]", [x4] { reshape(x4, {3}); },
         {"reshape", "[4]", "[3]", "float64"});
  misuse(t, "reshape: two -1", [x4] { reshape(x4, {-1, -1}); }, {"reshape", "[4]", "-1"});
  misuse(t, "reshape: entry -2", [x4] { reshape(x4, {-2, 2}); }, {"reshape", "-2", "[4]"});
  misuse(t, "reshape: [2^62 + 1, 4] does not wrap to 4 elements",
         [=] {
           reshape(x4, {two62 + 1, 4});
         },
         {"reshape", "[4]", "[4611686018427387905, 4]", "2^63"});
  misuse(t, "reshape: [2^62, 2^62, 0] of 4 elements",
         [=] {
           reshape(x4, {two62, two62, 0});
         },
         {"reshape", "[4]", "[4611686018427387904, 4611686018427387904, 0]"});
  misuse(t, "reshape: -1 with a zero entry",
         [x4] {
           reshape(x4, {-1, 0});
         },
         {"reshape", "[4]", "[-1, 0]"});
  misuse(t, "reshape: a variable handle", [] { reshape(variable_handle(), {3}); },
         {"reshape", "variable handle"});
  defined(t, "reshape: empty tensor to [0, 5] and [5, -1]", [] {
    REQUIRE(reshape(zeros({0, 2}), {0, 5}).shape() == Shape{0, 5});
    REQUIRE(reshape(zeros({0, 2}), {5, -1}).shape() == Shape{5, 0});
  });

  misuse(t, "transpose: perm [0, 0]",
         [m] {
           transpose(m, {0, 0});
         },
         {"transpose", "[0, 0]", "[2, 3]"});
  misuse(t, "transpose: perm of the wrong length",
         [m] {
           transpose(m, {1, 0, 2});
         },
         {"transpose", "[1, 0, 2]", "[2, 3]"});
  misuse(t, "transpose: a variable handle", [] { transpose(variable_handle()); },
         {"transpose", "variable handle"});
  defined(t, "transpose: an empty [0, 3] gives [3, 0]", [] {
    REQUIRE(transpose(zeros({0, 3})).shape() == Shape{3, 0});
  });

  misuse(t, "concat: no values", [] { concat({}, 0); }, {"concat", "empty"});
  misuse(t, "concat: scalars",
         [] {
           concat({constant(1.0), constant(2.0)}, 0);
         },
         {"concat", "scalars", "[]"});
  misuse(t, "concat: dtypes differ",
         [] {
           concat({f64({1}), f32({1})}, 0);
         },
         {"concat", "float64", "float32"});
  misuse(t, "concat: other dimensions differ",
         [m] {
           concat({m, f64({1, 2}, {1, 2})}, 0);
         },
         {"concat", "[2, 3]", "[1, 2]"});
  misuse(t, "concat: axis 2 of rank 2", [m] { concat({m, m}, 2); }, {"concat", "axis 2", "[2, 3]"});
  misuse(t, "concat: a variable handle",
         [] {
           concat({variable_handle(), f64({1})}, 0);
         },
         {"concat", "variable handle"});
  defined(t, "concat: empties concatenate to the right shape", [] {
    REQUIRE(concat({zeros({0, 2}), zeros({3, 2})}, 0).shape() == Shape{3, 2});
    REQUIRE(concat({zeros({2, 0}), zeros({2, 0})}, 1).shape() == Shape{2, 0});
  });

  misuse(t, "stack: no values", [] { stack({}); }, {"stack", "empty"});
  misuse(t, "stack: shapes differ",
         [] {
           stack({f64({1, 2}), f64({1})});
         },
         {"stack", "[2]", "[1]"});
  misuse(t, "stack: axis 3 for rank 1",
         [] {
           stack({f64({1}), f64({2})}, 3);
         },
         {"stack", "axis 3", "[1]"});
  defined(t, "stack: empties stack", [] {
    REQUIRE(stack({zeros({0}), zeros({0})}, 1).shape() == Shape{0, 2});
  });

  misuse(t, "split: 3 does not divide 4", [x4] { split(x4, 3); }, {"split", "4", "3"});
  misuse(t, "split: a scalar", [] { split(constant(1.0), 1); }, {"split", "[]", "float64"});
  misuse(t, "split: axis 1 of rank 1", [x4] { split(x4, 2, 1); }, {"split", "axis 1", "[4]"});
  misuse(t, "split: 0 parts", [x4] { split(x4, 0); }, {"split", "0", "[4]"});

  misuse(t, "slice: negative begin", [x4] { slice(x4, {-1}, {1}); }, {"slice", "[-1]", "[4]"});
  misuse(t, "slice: size past the end", [x4] { slice(x4, {2}, {3}); },
         {"slice", "[2]", "[3]", "[4]"});
  misuse(t, "slice: begin + size past INT64_MAX", [x4] { slice(x4, {2}, {kInt64Max}); },
         {"slice", "[9223372036854775807]", "[4]"});
  misuse(t, "slice: size -2", [x4] { slice(x4, {0}, {-2}); }, {"slice", "[-2]", "[4]"});
  misuse(t, "slice: one entry for rank 2", [m] { slice(m, {0}, {1}); }, {"slice", "[2, 3]"});
  misuse(t, "slice: a variable handle", [] { slice(variable_handle(), {0}, {1}); },
         {"slice", "variable handle"});
  defined(t, "slice: an empty window and an empty tensor", [x4] {
    REQUIRE(slice(x4, {4}, {0}).shape() == Shape{0});
    REQUIRE(slice(zeros({0, 3}), {0, 1}, {0, -1}).shape() == Shape{0, 2});
  });

  misuse(t, "gather: index 4 out of range [0, 4)",
         [x4] {
           gather(x4, i32({1, 4}));
         },
         {"gather", "index 4", "[4]", "float64"});
  misuse(t, "gather: negative index", [x4] { gather(x4, i64({-1})); },
         {"gather", "index -1", "[4]"});
  misuse(t, "gather: float indices", [x4] { gather(x4, f64({0})); },
         {"gather", "indices", "float64", "[1]"});
  misuse(t, "gather: scalar params", [] { gather(constant(1.0), i32({0})); },
         {"gather", "[]", "float64"});
  misuse(t, "gather: axis 1 of rank 1", [x4] { gather(x4, i32({0}), 1); },
         {"gather", "axis 1", "[4]"});
  misuse(t, "gather: index out of range along axis 1", [m] { gather(m, i32({3}), 1); },
         {"gather", "index 3", "[2, 3]"});
  misuse(t, "gather: a negative index among rows of 5, checked as it is read",
         [] {
           gather(zeros({2, 5}), i64({1, 0, -2}));
         },
         {"gather", "index -2", "indices[2]", "[2, 5]"});
  misuse(t, "gather: an index out of range where no row is copied",
         [] {
           gather(zeros({0, 3}), i64({0, 3}), 1);
         },
         {"gather", "index 3", "indices[1]", "[0, 3]"});
  misuse(t, "gather: a variable handle", [] { gather(variable_handle(), i32({0})); },
         {"gather", "variable handle"});
  defined(t, "gather: indices read through a reversed view, and int32 indices converted", [x4] {
    const Tensor base = i64({0, 3, 1});
    const Tensor ids = reverse(base, {0});  // [1, 3, 0], a strided view of base
    REQUIRE(shares_storage(ids, base));
    testing::require_close(gather(x4, ids), {3}, {2, 4, 1});
    testing::require_close(gather(x4, i32({2, 2})), {2}, {3, 3});
  });

  misuse(t, "tile: multiples of the wrong length",
         [x4] {
           tile(x4, {2, 2});
         },
         {"tile", "[2, 2]", "[4]"});
  misuse(t, "tile: 2^63 copies", [x4] { tile(x4, {std::size_t{1} << 63}); },
         {"tile", "[9223372036854775808]", "[4]", "2^63"});
  misuse(t, "tile: a product past 2^63 - 1",
         [m] {
           tile(m, {std::size_t{1} << 62, std::size_t{1} << 62});
         },
         {"tile", "[2, 3]", "2^63"});
  misuse(t, "tile: a variable handle", [] { tile(variable_handle(), {2}); },
         {"tile", "variable handle"});
  defined(t, "tile: zero multiples give an empty tensor", [m] {
    REQUIRE(tile(m, {0, 5}).shape() == Shape{0, 15});
  });

  misuse(t, "squeeze: an axis of size 3", [m] { squeeze(m, {1}); },
         {"squeeze", "axis 1", "[2, 3]"});
  misuse(t, "squeeze: axis 5", [m] { squeeze(m, {5}); }, {"squeeze", "axis 5", "[2, 3]"});
  misuse(t, "expand_dims: axis 4 for rank 2", [m] { expand_dims(m, 4); },
         {"expand_dims", "axis 4", "[2, 3]"});
  misuse(t, "expand_dims: axis -4 for rank 2", [m] { expand_dims(m, -4); },
         {"expand_dims", "axis -4", "[2, 3]"});
  misuse(t, "broadcast_to: [2, 3] to [3, 3]",
         [m] {
           broadcast_to(m, {3, 3});
         },
         {"broadcast_to", "[2, 3]", "[3, 3]"});
  misuse(t, "broadcast_to: a shape of 2^80 elements",
         [] {
           broadcast_to(f64({1}), {std::size_t{1} << 40, std::size_t{1} << 40});
         },
         {"broadcast_to", "[1]", "[1099511627776, 1099511627776]"});
  misuse(t, "unbroadcast: [2, 3] to [4]", [m] { unbroadcast(m, {4}); },
         {"unbroadcast", "grad has shape [2, 3] and dtype float64", "[4]"});
  misuse(t, "unbroadcast: [2, 3] to a higher rank",
         [m] {
           unbroadcast(m, {1, 2, 3});
         },
         {"unbroadcast", "[2, 3]", "[1, 2, 3]"});
  misuse(t, "unsorted_segment_sum: id out of range",
         [x4] {
           unsorted_segment_sum(x4, i32({0, 1, 2, 3}), 3);
         },
         {"unsorted_segment_sum", "segment id 3", "[4]"});
  misuse(t, "unsorted_segment_sum: a negative id among rows of 3",
         [] {
           unsorted_segment_sum(zeros({2, 3}), i64({0, -1}), 2);
         },
         {"unsorted_segment_sum", "segment id -1", "segment_ids[1]", "[2, 3]"});
  misuse(t, "unsorted_segment_sum: one id too few",
         [x4] {
           unsorted_segment_sum(x4, i32({0, 1, 2}), 3);
         },
         {"unsorted_segment_sum", "[4]", "[3]"});
  misuse(t, "unsorted_segment_sum: 2^63 segments",
         [] { unsorted_segment_sum(f64({1}), i32({0}), std::size_t{1} << 63); },
         {"unsorted_segment_sum", "[1]", "9223372036854775808"});
  misuse<ResourceExhausted>(t, "tile: 2^60 bytes cannot be allocated",
                            [] { tile(f64({1}), {std::size_t{1} << 57}); },
                            {"tile", "[144115188075855872]", "float64", "out of memory"});
  misuse(t, "reshape: an empty tensor into [0, 2^40, 2^40]",
         [] {
           reshape(zeros({0}), {0, std::int64_t{1} << 40, std::int64_t{1} << 40});
         },
         {"reshape", "[0]", "[0, 1099511627776, 1099511627776]", "2^63"});
  defined(t, "unsorted_segment_sum: int32 overflow wraps", [] {
    const Tensor s = unsorted_segment_sum(i32({kInt32Max, 1}), i32({0, 0}), 1);
    REQUIRE(elements<std::int32_t>(s) == std::vector<std::int32_t>{kInt32Min});
  });
  misuse(t, "identity of a handle", [] { identity(variable_handle()); },
         {"identity", "variable handle"});
  return t;
}

}  // namespace

std::vector<OpSample> array_samples() {
  std::vector<OpSample> s = op_samples();
  attach(s, batch_cases());
  attach_structure_cases(s);
  // squeeze and expand_dims reshape; stack joins reshaped values; unbroadcast undoes a
  // broadcast (a reduction of a gradient to its operand's shape).
  attach_by_function(s, array_misuse(),
                     {{"reshape", "Reshape"},
                      {"identity", "Identity"},
                      {"transpose", "Transpose"},
                      {"concat", "ConcatV2"},
                      {"stack", "ConcatV2"},
                      {"split", "Split"},
                      {"slice", "Slice"},
                      {"gather", "GatherV2"},
                      {"tile", "Tile"},
                      {"squeeze", "Reshape"},
                      {"expand_dims", "Reshape"},
                      {"broadcast_to", "BroadcastTo"},
                      {"unbroadcast", "BroadcastTo"},
                      {"unsorted_segment_sum", "UnsortedSegmentSum"}});
  return s;
}

}  // namespace tapegrad::samples
