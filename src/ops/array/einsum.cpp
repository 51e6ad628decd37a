// einsum and tensordot, lowered onto recorded ops (transpose, reshape, reduce_sum, multiply,
// squeeze, matmul) so that their gradients, forward rules and higher derivatives are those of
// the ops they are made of. A contraction of two operands is one (batched) matmul: the
// operands are transposed to [batch, free, contracted] and [batch, contracted, free] (or
// passed with matmul's transpose flags when they already are, the other way round).
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include <xtensor/xstorage.hpp>

#include "ops/op_support.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/indexing.hpp"
#include "tapegrad/ops/linalg.hpp"
#include "tapegrad/ops/reduce.hpp"

namespace tapegrad {

namespace {

// A letter is its character code; the i-th dimension of the broadcast "..." is kEllipsis + i.
using Label = int;
constexpr Label kEllipsis = 1000;
// Label lists and permutations stay on the stack up to rank 8: einsum's bookkeeping is a
// few dozen of them per call, and heap allocations were most of its cost on small operands.
using Labels = xt::svector<Label, 8>;

// One operand as the lowering goes: a tensor and the label of each of its dimensions.
struct Term {
  Tensor t;
  Labels labels;
};

bool contains(const Labels& labels, Label l) {
  return std::find(labels.begin(), labels.end(), l) != labels.end();
}

// One side of the equation, split into letters with the position of "..." (-1: none).
struct Spec {
  Labels letters;
  int ellipsis_at = -1;
};

class EinsumParser {
 public:
  EinsumParser(const std::string& equation, const std::vector<Tensor>& operands)
      : equation_(equation), operands_(operands) {}

  [[noreturn]] void fail(const std::string& why) const {
    std::string message = "einsum: equation \"" + equation_ + "\"";
    for (std::size_t i = 0; i < operands_.size(); ++i) {
      message += (i ? ", " : " with ") + std::string("operand ") + std::to_string(i) +
                 " of shape " + detail::ints_to_string(operands_[i].shape());
    }
    throw InvalidArgument(message + ": " + why);
  }

  Spec parse_side(const std::string& text) const {
    Spec spec;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (std::isalpha(static_cast<unsigned char>(c))) {
        spec.letters.push_back(c);
      } else if (text.compare(i, 3, "...") == 0 && spec.ellipsis_at < 0) {
        spec.ellipsis_at = static_cast<int>(spec.letters.size());
        i += 2;
      } else {
        fail(std::string("unexpected '") + c + "' in \"" + text + "\"");
      }
    }
    return spec;
  }

  // The operands as terms (ellipsis expanded, right-aligned to the broadcast "...") and the
  // output's labels.
  std::pair<std::vector<Term>, Labels> parse() const {
    std::string eq;
    for (char c : equation_) {
      if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
    }
    const std::size_t arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    std::vector<Spec> inputs;
    for (std::size_t start = 0;;) {
      const std::size_t comma = lhs.find(',', start);
      inputs.push_back(parse_side(lhs.substr(start, comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (inputs.size() != operands_.size()) {
      fail("names " + std::to_string(inputs.size()) + " operands, " +
           std::to_string(operands_.size()) + " given");
    }
    std::size_t broadcast_rank = 0;
    std::vector<std::size_t> ellipsis_rank(inputs.size(), 0);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::size_t rank = operands_[i].rank();
      const std::size_t letters = inputs[i].letters.size();
      if (rank < letters || (inputs[i].ellipsis_at < 0 && rank != letters)) {
        fail("operand " + std::to_string(i) + " has rank " + std::to_string(rank) + " but " +
             std::to_string(letters) + " labels");
      }
      ellipsis_rank[i] = rank - letters;
      broadcast_rank = std::max(broadcast_rank, ellipsis_rank[i]);
    }
    std::vector<Term> terms;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      Labels labels = inputs[i].letters;
      if (inputs[i].ellipsis_at >= 0) {
        Labels dots;
        for (std::size_t j = 0; j < ellipsis_rank[i]; ++j) {
          dots.push_back(kEllipsis + static_cast<Label>(broadcast_rank - ellipsis_rank[i] + j));
        }
        labels.insert(labels.begin() + inputs[i].ellipsis_at, dots.begin(), dots.end());
      }
      terms.push_back({operands_[i], labels});
    }
    Labels output;
    if (arrow == std::string::npos) {
      // Implicit: the broadcast dimensions, then the letters seen once, alphabetically.
      for (std::size_t j = 0; j < broadcast_rank; ++j)
        output.push_back(kEllipsis + static_cast<Label>(j));
      std::map<Label, int> seen;
      for (const Spec& s : inputs) {
        for (Label l : s.letters) ++seen[l];
      }
      for (const auto& [label, count] : seen) {
        if (count == 1) output.push_back(label);
      }
    } else {
      const Spec out = parse_side(eq.substr(arrow + 2));
      output = out.letters;
      if (out.ellipsis_at >= 0) {
        Labels dots;
        for (std::size_t j = 0; j < broadcast_rank; ++j)
          dots.push_back(kEllipsis + static_cast<Label>(j));
        output.insert(output.begin() + out.ellipsis_at, dots.begin(), dots.end());
      }
      for (std::size_t k = 0; k < output.size(); ++k) {
        const Label l = output[k];
        if (std::count(output.begin(), output.end(), l) > 1) {
          fail(std::string("output label '") + static_cast<char>(l) + "' appears twice");
        }
        const bool found = std::any_of(terms.begin(), terms.end(),
                                       [&](const Term& t) { return contains(t.labels, l); });
        if (!found)
          fail(std::string("output label '") + static_cast<char>(l) + "' is in no operand");
      }
    }
    return {terms, output};
  }

 private:
  const std::string& equation_;
  const std::vector<Tensor>& operands_;
};

Labels positions_of(const Labels& labels, const Labels& order) {
  Labels perm;
  for (Label l : order) {
    perm.push_back(static_cast<int>(std::find(labels.begin(), labels.end(), l) - labels.begin()));
  }
  return perm;
}

// reshape, skipped when the shape is already that (a reshape copies).
Tensor reshaped(const Tensor& t, const std::vector<std::int64_t>& shape) {
  if (t.rank() == shape.size() &&
      std::equal(shape.begin(), shape.end(), t.shape().begin(),
                 [](std::int64_t a, std::size_t b) { return static_cast<std::size_t>(a) == b; })) {
    return t;
  }
  return reshape(t, shape);
}

bool is_identity(const Labels& perm) {
  for (std::size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int>(i)) return false;
  }
  return true;
}

// The term with its dimensions in `order` (a permutation of its labels).
Term transposed(const Term& term, const Labels& order) {
  const Labels perm = positions_of(term.labels, order);
  return {
      is_identity(perm) ? term.t : transpose(term.t, std::vector<int>(perm.begin(), perm.end())),
      order};
}

// Sums the dimensions whose label `keep` rejects.
template <class Keep>
Term sum_unkept(const Term& term, Keep keep) {
  std::vector<int> axes;
  Labels left;
  for (std::size_t d = 0; d < term.labels.size(); ++d) {
    if (keep(term.labels[d])) {
      left.push_back(term.labels[d]);
    } else {
      axes.push_back(static_cast<int>(d));
    }
  }
  if (axes.empty()) return term;
  return {reduce_sum(term.t, axes), left};
}

// The first pair of dimensions (i < j) with one label, or none.
std::optional<std::pair<std::size_t, std::size_t>> repeated_pair(const Labels& labels) {
  for (std::size_t i = 0; i < labels.size(); ++i) {
    for (std::size_t j = i + 1; j < labels.size(); ++j) {
      if (labels[j] == labels[i]) return std::make_pair(i, j);
    }
  }
  return std::nullopt;
}

// A label repeated in one operand: its diagonal, until every label is unique. The two
// dimensions go first and become one of n * n rows, of which a gather takes rows k (n + 1):
// O(n) rows read, and no product with an identity mask (which would turn an inf off the
// diagonal into NaN on it).
Term take_diagonals(Term term) {
  while (const auto pair = repeated_pair(term.labels)) {
    const auto [i, j] = *pair;
    const std::size_t n = term.t.shape()[i];
    Labels labels = {term.labels[i]};
    std::vector<int> perm = {static_cast<int>(i), static_cast<int>(j)};
    std::vector<std::int64_t> shape = {static_cast<std::int64_t>(n)};
    std::int64_t rest = 1;
    for (std::size_t d = 0; d < term.labels.size(); ++d) {
      if (d == i || d == j) continue;
      perm.push_back(static_cast<int>(d));
      labels.push_back(term.labels[d]);
      shape.push_back(static_cast<std::int64_t>(term.t.shape()[d]));
      rest *= shape.back();
    }
    xt::xarray<std::int64_t> rows = xt::xarray<std::int64_t>::from_shape({n});
    for (std::size_t k = 0; k < n; ++k) rows.data()[k] = static_cast<std::int64_t>(k * (n + 1));
    const Tensor moved =
        is_identity(Labels(perm.begin(), perm.end())) ? term.t : transpose(term.t, perm);
    const Tensor diagonal = gather(reshaped(moved, {static_cast<std::int64_t>(n * n), rest}),
                                   Tensor(std::move(rows)), 0);
    term = {reshaped(diagonal, shape), labels};
  }
  return term;
}

std::int64_t size_of(const Term& term, Label l) {
  const auto at = std::find(term.labels.begin(), term.labels.end(), l) - term.labels.begin();
  return static_cast<std::int64_t>(term.t.shape()[static_cast<std::size_t>(at)]);
}

std::int64_t product_of(const Term& term, const Labels& labels) {
  std::int64_t n = 1;
  for (Label l : labels) n *= size_of(term, l);
  return n;
}

// a and b contracted over their shared labels that `keep` rejects; the result's labels are
// batch (shared, kept), a's own, b's own.
template <class Keep>
Term contract(const Term& a_in, const Term& b_in, Keep keep) {
  const Term a = sum_unkept(a_in, [&](Label l) { return keep(l) || contains(b_in.labels, l); });
  const Term b = sum_unkept(b_in, [&](Label l) { return keep(l) || contains(a.labels, l); });
  Labels batch, contracted, free_a, free_b;
  for (Label l : a.labels) {
    if (!contains(b.labels, l)) {
      free_a.push_back(l);
    } else {
      (keep(l) ? batch : contracted).push_back(l);
    }
  }
  for (Label l : b.labels) {
    if (!contains(a.labels, l)) free_b.push_back(l);
  }
  auto join = [](Labels x, const Labels& y, const Labels& z) {
    x.insert(x.end(), y.begin(), y.end());
    x.insert(x.end(), z.begin(), z.end());
    return x;
  };
  // Each operand as [batch?, rows, cols]; a layout already the other way round goes to
  // matmul as a transpose flag instead of a copy.
  const bool ta = !is_identity(positions_of(a.labels, join(batch, free_a, contracted))) &&
                  is_identity(positions_of(a.labels, join(batch, contracted, free_a)));
  const bool tb = !is_identity(positions_of(b.labels, join(batch, contracted, free_b))) &&
                  is_identity(positions_of(b.labels, join(batch, free_b, contracted)));
  const Term at =
      transposed(a, ta ? join(batch, contracted, free_a) : join(batch, free_a, contracted));
  const Term bt =
      transposed(b, tb ? join(batch, free_b, contracted) : join(batch, contracted, free_b));
  const std::int64_t nb = product_of(a, batch), nk = product_of(a, contracted);
  const std::int64_t na = product_of(a, free_a), nf = product_of(b, free_b);
  auto as_matrices = [&](const Tensor& t, std::int64_t rows, std::int64_t cols) {
    return batch.empty() ? reshaped(t, {rows, cols}) : reshaped(t, {nb, rows, cols});
  };
  const Tensor product = matmul(as_matrices(at.t, ta ? nk : na, ta ? na : nk),
                                as_matrices(bt.t, tb ? nf : nk, tb ? nk : nf), ta, tb);
  std::vector<std::int64_t> shape;
  Term result{product, join(batch, free_a, free_b)};
  for (Label l : result.labels) {
    const bool in_a = contains(a.labels, l);
    shape.push_back(size_of(in_a ? a : b, l));
  }
  result.t = reshaped(product, shape);
  return result;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  EinsumParser parser(equation, operands);
  if (operands.empty()) parser.fail("needs at least one operand");
  for (std::size_t i = 0; i < operands.size(); ++i) {
    if (!operands[i].defined()) parser.fail("operand " + std::to_string(i) + " is undefined");
    if (!is_floating(operands[i].dtype()) || operands[i].dtype() != operands[0].dtype()) {
      parser.fail("operands must share one floating dtype; operand " + std::to_string(i) + " is " +
                  dtype_name(operands[i].dtype()));
    }
  }
  // Named, not a structured binding: the lambdas below capture them, which C++17 allows only
  // for variables (clang rejects capturing a binding).
  std::pair<std::vector<Term>, Labels> parsed = parser.parse();
  std::vector<Term>& terms = parsed.first;
  const Labels& output = parsed.second;
  // One size per label; a size-1 dimension against a larger one broadcasts (NumPy), which
  // is the same as the dimension being absent from that operand.
  xt::svector<std::pair<Label, std::size_t>, 16> sizes;
  auto size = [&](Label l) -> std::size_t& {
    for (auto& entry : sizes) {
      if (entry.first == l) return entry.second;
    }
    sizes.push_back({l, 1});  // 1 until seen: it broadcasts against anything
    return sizes.back().second;
  };
  for (const Term& term : terms) {
    for (std::size_t d = 0; d < term.labels.size(); ++d) {
      std::size_t& s = size(term.labels[d]);
      const std::size_t n = term.t.shape()[d];
      if (s != 1 && n != 1 && s != n) {
        const Label l = term.labels[d];
        parser.fail(l >= kEllipsis
                        ? "the \"...\" dimensions do not broadcast"
                        : std::string("label '") + static_cast<char>(l) + "' has sizes " +
                              std::to_string(s) + " and " + std::to_string(n));
      }
      if (s == 1) s = n;
    }
  }
  for (std::size_t k = 0; k < terms.size(); ++k) {
    Term& term = terms[k];
    for (std::size_t i = 0; i < term.labels.size(); ++i) {
      for (std::size_t j = i + 1; j < term.labels.size(); ++j) {
        if (term.labels[i] == term.labels[j] && term.t.shape()[i] != term.t.shape()[j]) {
          parser.fail(std::string("label '") + static_cast<char>(term.labels[i]) +
                      "' repeats in operand " + std::to_string(k) + " with sizes " +
                      std::to_string(term.t.shape()[i]) + " and " +
                      std::to_string(term.t.shape()[j]));
        }
      }
    }
    term = take_diagonals(term);
    std::vector<int> broadcast;
    Labels left;
    for (std::size_t d = 0; d < term.labels.size(); ++d) {
      if (term.t.shape()[d] == 1 && size(term.labels[d]) != 1) {
        broadcast.push_back(static_cast<int>(d));
      } else {
        left.push_back(term.labels[d]);
      }
    }
    if (!broadcast.empty()) term = {squeeze(term.t, broadcast), left};
  }
  // Left to right: after step i, a label survives while the output or a later operand has it.
  Term current = terms[0];
  for (std::size_t i = 0; i < terms.size(); ++i) {
    auto needed = [&](Label l) {
      if (contains(output, l)) return true;
      for (std::size_t j = i + 1; j < terms.size(); ++j) {
        if (contains(terms[j].labels, l)) return true;
      }
      return false;
    };
    current = i == 0 ? sum_unkept(current, needed) : contract(current, terms[i], needed);
  }
  current = sum_unkept(current, [&](Label l) { return contains(output, l); });
  return transposed(current, output).t;
}

Tensor tensordot(const Tensor& a, const Tensor& b, int axes) {
  detail::require_defined("tensordot", a);
  detail::require_defined("tensordot", b);
  auto fail = [&](const std::string& why) {
    throw InvalidArgument(detail::describe("tensordot", {{"a", a}, {"b", b}}) + ", axes " +
                          std::to_string(axes) + ": " + why);
  };
  if (axes < 0 || static_cast<std::size_t>(axes) > std::min(a.rank(), b.rank())) {
    fail("axes must be in [0, min(rank a, rank b)]");
  }
  const auto n = static_cast<std::size_t>(axes);
  const std::size_t lead = a.rank() - n;
  std::int64_t rows = 1, inner = 1, cols = 1;
  std::vector<std::int64_t> shape;
  for (std::size_t d = 0; d < lead; ++d) {
    rows *= static_cast<std::int64_t>(a.shape()[d]);
    shape.push_back(static_cast<std::int64_t>(a.shape()[d]));
  }
  for (std::size_t d = 0; d < n; ++d) {
    if (a.shape()[lead + d] != b.shape()[d]) fail("the contracted dimensions differ");
    inner *= static_cast<std::int64_t>(b.shape()[d]);
  }
  for (std::size_t d = n; d < b.rank(); ++d) {
    cols *= static_cast<std::int64_t>(b.shape()[d]);
    shape.push_back(static_cast<std::int64_t>(b.shape()[d]));
  }
  return reshaped(matmul(reshaped(a, {rows, inner}), reshaped(b, {inner, cols})), shape);
}

}  // namespace tapegrad

TAPEGRAD_OP_SOURCE(einsum)
