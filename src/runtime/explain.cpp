// GradientTape::explain: why a gradient is or is not defined, from the tape's records.
//
// It walks the producers backwards from the target, once through every recorded op (the
// "any path" search) and once through the ops a gradient can pass (the "gradient path"
// search: differentiable ops, floating tensors). Comparing the two names what cuts a path.
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/op_registry.hpp"
#include "runtime/tape_stack.hpp"
#include "tapegrad/tape.hpp"

namespace tapegrad {
namespace {

using detail::GradientKind;
using detail::OpEntry;
using detail::TapeImpl;

std::string tensor_text(DType dtype, const Shape& shape) {
  return "shape " + shape_to_string(shape) + ", " + dtype_name(dtype);
}

std::string op_text(const OpEntry& e, std::int64_t index) {
  return "'" + std::string(e.op->name) + "' (op " + std::to_string(index) + ")";
}

// Whether the walk could pass a gradient through this entry.
bool passes_gradient(const OpEntry& e) {
  if (e.custom_backward() != nullptr) return true;
  switch (e.op->kind) {
    case GradientKind::Rule:
    case GradientKind::Identity:
      return true;
    case GradientKind::NotDifferentiable:
      return false;
    case GradientKind::Registered: {
      const detail::UserGradient* g = detail::registered_gradient(*e.op);
      return g != nullptr && !g->not_differentiable;
    }
  }
  return false;
}

// One backward search from `target`: the ops reached, and for each reached op the input that
// led to it (to print one path). With `gradient_only`, only ops that pass a gradient and
// floating tensors are followed.
struct Search {
  std::unordered_map<std::int64_t, std::int64_t>
      next_op_towards_target;                // op -> consumer (-1: target)
  std::unordered_set<std::uint64_t> leaves;  // tensors reached that no recorded op produced
  bool reached_source = false;
  std::int64_t op_using_source = -2;  // the op whose input is the source (-1: target is source)
};

Search search(const TapeImpl& tape, std::uint64_t target, std::uint64_t source,
              bool gradient_only) {
  Search result;
  std::deque<std::pair<std::uint64_t, std::int64_t>> pending{
      {target, -1}};  // (tensor, consumer op)
  std::unordered_set<std::uint64_t> seen{target};
  while (!pending.empty()) {
    const auto [id, consumer] = pending.front();
    pending.pop_front();
    if (id == source) {
      if (!result.reached_source) result.op_using_source = consumer;
      result.reached_source = true;
      continue;
    }
    const std::int32_t* producer = tape.producer(id);
    if (producer == nullptr || *producer == detail::kWatched) {
      result.leaves.insert(id);
      continue;
    }
    const std::int64_t op = *producer;
    if (result.next_op_towards_target.count(op) != 0) continue;
    result.next_op_towards_target.emplace(op, consumer);
    const OpEntry& e = tape.entry(op);
    if (gradient_only && !passes_gradient(e)) continue;
    for (const auto& input : e.inputs()) {
      if (gradient_only && !is_floating(input.dtype())) continue;
      if (seen.insert(input.id).second) pending.emplace_back(input.id, op);
    }
  }
  return result;
}

// "'Sum' (op 4) <- 'Tanh' (op 2) <- 'MatMul' (op 1)": from the op using the source up to the
// target's producer, printed target first.
std::string path_text(const TapeImpl& tape, const Search& s) {
  std::vector<std::string> ops;
  for (std::int64_t op = s.op_using_source; op >= 0;) {
    ops.push_back(op_text(tape.entry(op), op));
    op = s.next_op_towards_target.at(op);
  }
  std::string text;
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) text += (text.empty() ? "" : " <- ") + *it;
  return text;
}

}  // namespace

std::string GradientTape::explain(const Tensor& target, const Tensor& source) const {
  check_thread("explain");
  if (!target.defined() || !source.defined()) {
    throw InvalidArgument(std::string("GradientTape::explain: the ") +
                          (target.defined() ? "source" : "target") + " is undefined");
  }
  if (!state_->impl || state_->consumed) {
    throw TapeError(
        "GradientTape::explain: this non-persistent tape was already used by a "
        "gradient call and its records are gone; explain before gradient(), or use "
        "a persistent tape");
  }
  const TapeImpl& tape = *state_->impl;
  std::string out = "explain: target (" + tensor_text(target.dtype(), target.shape()) +
                    "), source (" + tensor_text(source.dtype(), source.shape()) + ")\n";

  if (!is_floating(source.dtype()) || !is_floating(target.dtype())) {
    const bool source_bad = !is_floating(source.dtype());
    return out + "no gradient: the " + (source_bad ? "source" : "target") + " has dtype " +
           dtype_name(source_bad ? source.dtype() : target.dtype()) +
           "; integer and bool tensors are never differentiated\n";
  }
  if (target.id() == source.id()) return out + "the target is the source: its gradient is ones\n";

  const std::int32_t* source_producer = tape.producer(source.id());
  if (source_producer == nullptr) {
    return out +
           "no gradient: the source is not watched by this tape and no op the tape "
           "recorded produced it; call tape.watch(source) (or read it as a trainable "
           "Variable) before computing the target from it\n";
  }
  if (tape.producer(target.id()) == nullptr) {
    return out +
           "no gradient: the tape never recorded the target; it was computed before the "
           "source was watched, while the tape was not recording (stop_recording, a "
           "custom_gradient forward), or only from tensors this tape does not watch\n";
  }

  const Search any_path = search(tape, target.id(), source.id(), /*gradient_only=*/false);
  const Search gradient_path = search(tape, target.id(), source.id(), /*gradient_only=*/true);
  if (gradient_path.reached_source) {
    return out + "a gradient flows: target <- " + path_text(tape, gradient_path) + " <- source\n";
  }
  if (any_path.reached_source) {
    // Name the ops on the way that stop a gradient, and integer tensors that do.
    std::string cuts;
    for (const auto& [op, consumer] : any_path.next_op_towards_target) {
      (void)consumer;
      const OpEntry& e = tape.entry(op);
      if (passes_gradient(e)) continue;
      const bool unregistered =
          e.op->kind == GradientKind::Registered && detail::registered_gradient(*e.op) == nullptr;
      cuts += "  " + op_text(e, op) +
              (unregistered ? ": no gradient is registered for it (gradient() throws LookupError)"
                            : ": not differentiable") +
              "\n";
    }
    if (cuts.empty())
      cuts = "  an integer or bool tensor between them (its gradient is never computed)\n";
    return out + "no gradient: the target depends on the source only through\n" + cuts +
           "path: target <- " + path_text(tape, any_path) + " <- source\n";
  }
  // Not connected: say what the target does depend on.
  std::size_t unknown = 0;
  std::size_t watched = 0;
  for (std::uint64_t leaf : any_path.leaves) {
    const std::int32_t* p = tape.producer(leaf);
    if (p == nullptr) {
      ++unknown;
    } else {
      ++watched;
    }
  }
  out += "no gradient: the target does not depend on the source on this tape";
  if (watched != 0)
    out += "; it depends on " + std::to_string(watched) + " other watched tensor(s)";
  if (unknown != 0) {
    out += "; its recorded ops read " + std::to_string(unknown) +
           " tensor(s) that no recorded op produced and that are not watched: constants, or "
           "values that left the tape (a Tensor rebuilt from array() cuts the path)";
  }
  return out + "\n";
}

}  // namespace tapegrad
