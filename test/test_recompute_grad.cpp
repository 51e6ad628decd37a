// recompute_grad: same values and gradients as the plain function, forward not kept.
#include "support.hpp"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

// A small tanh MLP segment: the kind of block checkpointing is for.
struct Block {
  Tensor w1, w2;
  Tensor operator()(const Tensor& x) const { return tanh(matmul(tanh(matmul(x, w1)), w2)); }
};

}  // namespace

TEST_CASE("TF testFnRecompute: inputs * variable, gradients w.r.t. the input and the variable",
          "[recompute_grad]") {
  Variable test_var(ones({10}, DType::Float32), true, "test_var");
  Tensor test_input = ones({10, 10}, DType::Float32);
  auto test_fn = [&](const Tensor& x) { return x * test_var.value(); };
  auto test_fn_seq = [&](const std::vector<Tensor>& in) {
    Tensor p = in[0] * test_var.value();
    return std::vector<Tensor>{p, p * 2.0};
  };
  auto fn_recompute = recompute_grad(test_fn);
  auto seq_recompute = recompute_grad(test_fn_seq);

  GradientTape tape(/*persistent=*/true);
  tape.watch(test_input);
  Tensor out_re = fn_recompute(test_input);
  Tensor out = test_fn(test_input);
  auto seq_re = seq_recompute({test_input});
  auto seq = test_fn_seq({test_input});
  Tensor seq_re_sum = seq_re[0] + seq_re[1];
  auto stop = tape.stop_recording();

  const std::vector<double> ones_100(100, 1.0), threes_100(100, 3.0);
  require_close(out_re, {10, 10}, values(out));
  require_close(tape.gradient(out_re, test_input), {10, 10}, ones_100);
  require_close(tape.gradient(out, test_input), {10, 10}, ones_100);
  require_close(tape.gradient(out_re, test_var), {10}, std::vector<double>(10, 10.0));
  require_close(tape.gradient(out, test_var), {10}, std::vector<double>(10, 10.0));
  // The sequence-returning function (TF's regression test): both outputs are targets.
  require_close(tape.gradient(seq_re, {test_input})[0], {10, 10}, threes_100);
  require_close(tape.gradient(seq, {test_input})[0], {10, 10}, threes_100);
  auto var_grads = tape.gradient(seq_re_sum, std::vector<Variable>{test_var});
  require_close(var_grads[0], {10}, std::vector<double>(10, 30.0));
}

TEST_CASE("recompute_grad gives the plain block's values and gradients", "[recompute_grad]") {
  Block block{random_tensor({4, 5}, 1), random_tensor({5, 3}, 2)};
  auto checkpointed = recompute_grad([block](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{Block{in[1], in[2]}(in[0])};
  });
  Tensor x = random_tensor({2, 4}, 3);
  std::vector<Tensor> args{x, block.w1, block.w2};

  GradientTape plain_tape;
  plain_tape.watch(args);
  Tensor plain = reduce_sum(block(x) * block(x));
  auto plain_grads = plain_tape.gradient(plain, args);

  GradientTape tape;
  tape.watch(args);
  Tensor y = checkpointed(args)[0];
  Tensor loss = reduce_sum(y * y);
  auto grads = tape.gradient(loss, args);
  require_close(loss, {}, values(plain));
  for (std::size_t i = 0; i < args.size(); ++i) {
    INFO("argument " << i);
    require_close(grads[i], plain_grads[i].shape(), values(plain_grads[i]), 1e-12);
  }
  Fn f = [checkpointed](const std::vector<Tensor>& a) { return checkpointed(a)[0]; };
  for (std::size_t i = 0; i < args.size(); ++i) require_gradient_matches(f, args, i);
}

TEST_CASE("recompute_grad under nested tapes gives the plain second derivatives",
          "[recompute_grad]") {
  Block block{random_tensor({3, 3}, 7), random_tensor({3, 2}, 8)};
  auto checkpointed = recompute_grad(block);
  Fn plain_f = [block](const std::vector<Tensor>& a) { return reduce_sum(block(a[0])); };
  Fn recompute_f = [checkpointed](const std::vector<Tensor>& a) {
    return reduce_sum(checkpointed(a[0]));
  };
  Tensor x = random_tensor({2, 3}, 9);
  auto hessian_row_sum = [&](const Fn& f) {
    GradientTape outer;
    outer.watch(x);
    Tensor g;
    {
      GradientTape inner;
      inner.watch(x);
      g = inner.gradient(f({x}), x);
    }
    return outer.gradient(reduce_sum(g * g), x);
  };
  Tensor expected = hessian_row_sum(plain_f);
  require_close(hessian_row_sum(recompute_f), expected.shape(), values(expected), 1e-12);
  require_second_order_matches(recompute_f, {x});
}

TEST_CASE("recompute_grad with variables read inside, under nested tapes", "[recompute_grad]") {
  Variable w(random_tensor({3, 3}, 21), true, "w");
  auto layer = [&](const Tensor& x) { return tanh(matmul(x, w.value())); };
  auto checkpointed = recompute_grad(layer);
  Tensor x = random_tensor({2, 3}, 22);

  auto second_order = [&](auto&& f) {
    GradientTape outer;
    Tensor g;
    {
      GradientTape inner;
      inner.watch(x);
      g = inner.gradient(reduce_sum(f(x)), w);
    }
    return std::make_pair(g, outer.gradient(reduce_sum(g * g), w));
  };
  auto [g_plain, h_plain] = second_order(layer);
  auto [g_re, h_re] = second_order(checkpointed);
  require_close(g_re, {3, 3}, values(g_plain), 1e-12);
  require_close(h_re, {3, 3}, values(h_plain), 1e-12);

  auto [value, grads] = implicit_value_and_gradients([&] { return reduce_sum(checkpointed(x)); });
  REQUIRE(grads.size() == 1);
  CHECK(grads[0].second == w);
  require_close(grads[0].first, {3, 3}, values(g_plain), 1e-12);
}

TEST_CASE("recompute_grad keeps no forward intermediates, g runs again in the backward",
          "[recompute_grad]") {
  int calls = 0;
  Block block{random_tensor({16, 16}, 31), random_tensor({16, 16}, 32)};
  auto counted = [&](const Tensor& x) {
    ++calls;
    return block(x);
  };
  auto checkpointed = recompute_grad(counted);
  Tensor x = random_tensor({8, 16}, 33);

  GradientTape plain_tape;
  plain_tape.watch(x);
  Tensor plain = block(x);
  // Two matmuls (inputs kept) and two tanh (outputs kept): x, w1, h, tanh(h), w2, y.
  // A tape with one entry that keeps no tensor, for comparison: x alone is 1024 bytes.
  GradientTape one_entry_tape;
  one_entry_tape.watch(x);
  Tensor sum = x + x;
  CHECK(plain_tape.bytes_held() >= one_entry_tape.bytes_held() + 2 * 1024);

  GradientTape tape;
  tape.watch(x);
  Tensor y = checkpointed(x);
  CHECK(calls == 1);
  CHECK(tape.bytes_held() < one_entry_tape.bytes_held() + 1024);
  Tensor g = tape.gradient(y, x);
  CHECK(calls == 2);
  Tensor g_plain = plain_tape.gradient(plain, x);
  require_close(g, {8, 16}, values(g_plain), 1e-12);
}
