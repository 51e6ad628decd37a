#include "recurrent_program.hpp"

#include <cmath>
#include <optional>
#include <random>
#include <sstream>

namespace tapegrad::fuzz {
namespace {

int draw(std::mt19937_64& rng, int low, int high) {  // uniform in [low, high]
  return std::uniform_int_distribution<int>(low, high)(rng);
}

bool chance(std::mt19937_64& rng, double p) { return std::bernoulli_distribution(p)(rng); }

// Values in about [-scale, scale], different in every element and in every call's scale.
Tensor values_of(const Shape& shape, DType dtype, double scale, double phase) {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = scale * std::sin(0.61 * static_cast<double>(i) + phase) + 0.03;
  return cast(from_values(std::move(v), shape), dtype);
}

constexpr std::int64_t kParameterRows = 8;  // per layer

}  // namespace

RecurrentShape recurrent_shape(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  RecurrentShape shape;
  shape.dtype = chance(rng, 0.3) ? DType::Float32 : DType::Float64;
  shape.layers = draw(rng, 1, 3);
  shape.with_tape = chance(rng, 0.75);
  if (chance(rng, 0.08)) {
    // A large state: a layer's join from about 0.25 MiB to 2 MiB, on both sides of the in-place
    // bound, with few steps.
    shape.rows = draw(rng, 1, 2);
    shape.bits = 1024 * draw(rng, 1, 4);
    shape.steps = draw(rng, 2, 8);
    shape.layers = draw(rng, 1, 2);
  } else {
    static const std::int64_t kBits[] = {1, 2, 3, 5, 7, 8, 13, 33};
    shape.rows = chance(rng, 0.7) ? 1 : draw(rng, 2, 3);
    shape.bits = kBits[draw(rng, 0, 7)];
    shape.steps = draw(rng, 2, 30);
  }
  return shape;
}

// The arguments: the first state [rows, bits], every layer's parameter rows [8·layers, bits],
// a projection [bits, 2] and a square [bits, bits] (a 1x1 stand-in when bits is large).
std::vector<Tensor> recurrent_arguments(std::uint64_t seed, double scale) {
  const RecurrentShape s = recurrent_shape(seed);
  const auto rows = static_cast<std::size_t>(s.rows);
  const auto bits = static_cast<std::size_t>(s.bits);
  const std::size_t square = s.bits <= 64 ? bits : 1;
  return {values_of({rows, bits}, s.dtype, scale, 0.2),
          values_of({static_cast<std::size_t>(kParameterRows * s.layers), bits}, s.dtype,
                    0.8 * scale, 1.1),
          values_of({bits, 2}, s.dtype, 0.5, 2.3),
          values_of({square, square}, s.dtype, 0.3 / static_cast<double>(square), 0.7)};
}

// The program: every decision is drawn from a generator seeded afresh at each call, so the
// trace and the eager call make the same ones. Scalars are tensors of the state's dtype (a
// literal double would promote float32 states).
std::vector<Tensor> run_recurrent_program(std::uint64_t seed, const std::vector<Tensor>& args) {
  const RecurrentShape s = recurrent_shape(seed);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  const Tensor& first_state = args[0];
  const Tensor& parameters = args[1];
  const Tensor& projection = args[2];
  const Tensor& square = args[3];
  const auto scalar = [&](double value) { return cast(constant(value), s.dtype); };
  const bool square_fits = s.bits <= 64;

  std::optional<GradientTape> tape;
  if (s.with_tape) {
    tape.emplace();
    tape->watch({first_state, parameters});
  }

  // Layer 0's input at step t: a loop of the first state.
  std::vector<Tensor> inputs;
  for (int t = 0; t < s.steps; ++t) inputs.push_back(sin(first_state * scalar(0.3 + 0.05 * t)));

  Tensor loss = reduce_sum(first_state * scalar(0.0));
  Tensor readers = loss;  // what ops other than the joins read of the parts
  for (int layer = 0; layer < s.layers; ++layer) {
    std::vector<Tensor> w =
        split(slice(parameters, {kParameterRows * layer, 0}, {kParameterRows, s.bits}), 8, 0);
    const int kind = draw(rng, 0, 3);
    Tensor hidden = slice(first_state * scalar(0.5 + 0.1 * layer), {0, 0}, {s.rows, s.bits});
    Tensor cell = tanh(first_state + w[7]);
    std::vector<Tensor> hiddens;
    for (int t = 0; t < s.steps; ++t) {
      const Tensor& in = inputs[static_cast<std::size_t>(t)];
      if (kind == 0) {
        hidden = tanh(hidden * w[0] + in * w[1] + w[2]);
      } else if (kind == 1) {
        // The gates from one product, split (GradBench's lstm), when a state is one row.
        Tensor gate_in, change;
        if (s.rows == 1) {
          const std::vector<Tensor> gates =
              split(hidden * concat({w[0], w[1]}, 0) + concat({w[2], w[3]}, 0), 2, 0);
          gate_in = gates[0];
          change = gates[1];
        } else {
          gate_in = hidden * w[0] + w[2];
          change = hidden * w[1] + in * w[3];
        }
        cell = cell * sigmoid(in * w[4] + w[5]) + sigmoid(gate_in) * tanh(change);
        hidden = sigmoid(in * w[6]) * tanh(cell);
      } else if (kind == 2) {
        const Tensor mix = sigmoid(hidden * w[0] + in * w[1]);
        const Tensor candidate = tanh(hidden * w[2] + w[3]);
        hidden = mix * hidden + (scalar(1.0) - mix) * candidate;
      } else {
        // An op inside the step: some step outputs are the op's own tensors.
        const Tensor product = square_fits ? matmul(hidden, square) : hidden * square;
        hidden = chance(rng, 0.3) ? product : tanh(product * w[0] + in);
      }
      hiddens.push_back(hidden);
      // A part read by another op before its join, or by a loop that broadcasts it along a
      // new last axis (an expanded read, which needs the part's tensor).
      if (chance(rng, 0.1)) readers = readers + reduce_sum(hidden * scalar(2.0));
      if (chance(rng, 0.1)) {
        const Tensor pair = reshape(cast(constant({0.5, -1.5}), s.dtype), {1, 1, 2});
        readers = readers + reduce_sum(tanh(expand_dims(hidden, 2) * pair));
      }
    }

    const bool along_rows = chance(rng, 0.8);
    const Tensor join = concat(hiddens, along_rows ? 0 : 1);
    loss = loss + reduce_sum(tanh(join * scalar(0.3)));
    if (along_rows) loss = loss + reduce_sum(matmul(join, projection));

    // A join of chosen steps (in any order), an op's output among them sometimes.
    if (chance(rng, 0.5)) {
      std::vector<Tensor> chosen;
      const int count = draw(rng, 1, 4);
      for (int i = 0; i < count; ++i)
        chosen.push_back(hiddens[static_cast<std::size_t>(draw(rng, 0, s.steps - 1))]);
      if (chance(rng, 0.4)) {
        const Tensor& part = hiddens[static_cast<std::size_t>(draw(rng, 0, s.steps - 1))];
        chosen.insert(chosen.begin() + draw(rng, 0, count),
                      square_fits ? matmul(part, square) : part * square);
      }
      const Tensor picked = concat(chosen, 0);
      readers = readers + reduce_sum(exp(picked * scalar(-0.2)));
    }
    // Loops that read the join expanded (a one-element state against a row) or gather its
    // rows: reads that need the join's tensor.
    if (along_rows && chance(rng, 0.3)) {
      const Tensor row = cast(constant({{0.5, -1.0, 1.5}}), s.dtype);  // [1, 3]
      if (s.bits == 1) readers = readers + reduce_sum(tanh(join * row));
      const auto rows = static_cast<double>(s.steps * s.rows);
      const Tensor picked = from_values({rows - 1, 0, std::floor(rows / 2)}, {3}, DType::Int64);
      readers = readers + reduce_sum(gather(join, picked) * scalar(3.0) + scalar(1.0));
    }
    // A part read by another op after its join.
    if (chance(rng, 0.4)) {
      const Tensor& part = hiddens[static_cast<std::size_t>(draw(rng, 0, s.steps - 1))];
      readers = readers + reduce_sum(matmul(part, projection));
    }

    // The layer above reads the join split again, the step outputs themselves, or one
    // product over every step at once (GradBench's lstm), split.
    const int above = draw(rng, 0, 2);
    if (above == 0 && along_rows) {
      inputs = split(join, s.steps, 0);
    } else if (above == 1 && along_rows) {
      inputs = split(sigmoid(join * scalar(0.7) + scalar(0.1)), s.steps, 0);
    } else {
      inputs = hiddens;
    }
  }

  std::vector<Tensor> results{loss, readers};
  if (s.with_tape) {
    const Tensor total = loss + readers;
    // A cell that never reads its parameters leaves them unconnected: zeros, not undefined.
    for (const Tensor& g :
         tape->gradient(total, {first_state, parameters}, UnconnectedGradients::Zero))
      results.push_back(g);
  }
  // A step output handed to the caller sometimes.
  if (chance(rng, 0.3)) results.push_back(inputs.back() * scalar(1.5));
  return results;
}

std::string describe_recurrent_program(std::uint64_t seed) {
  const RecurrentShape s = recurrent_shape(seed);
  std::ostringstream text;
  text << (s.dtype == DType::Float32 ? "float32" : "float64") << ", states [" << s.rows << ", "
       << s.bits << "], " << s.layers << " layers of " << s.steps << " steps, "
       << (s.with_tape ? "with" : "without") << " a tape";
  return text.str();
}

}  // namespace tapegrad::fuzz
