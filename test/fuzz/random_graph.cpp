#include "random_graph.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>
#include <sstream>
#include <utility>

namespace tapegrad::fuzz {

namespace {

using Transform = std::function<Tensor(const Tensor&)>;
using Apply = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Generated values stay within this bound and tensors within this size: enough for every op
// family, small enough that central differences over every element stay cheap and exact.
constexpr double kValueBound = 100.0;
constexpr std::size_t kMaxElements = 48;

std::vector<double> values_of(const Tensor& t) {
  // Named: array() refers into the tensor, which must outlive the copy below.
  const Tensor as_double = t.dtype() == DType::Float64 ? t : cast(t, DType::Float64);
  const auto& a = as_double.array<double>();
  return std::vector<double>(a.begin(), a.end());
}

std::string shape_text(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

template <class T>
std::string list_text(const std::vector<T>& v) {
  std::ostringstream os;
  os << '{';
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << '}';
  return os.str();
}

bool broadcastable(const Shape& a, const Shape& b) {
  for (std::size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
    const std::size_t x = a[a.size() - i], y = b[b.size() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

// For each element of `shape` (row-major), the index of its group when `axes` are reduced.
std::vector<std::size_t> reduction_groups(const Shape& shape, const std::vector<bool>& reduced) {
  std::vector<std::size_t> groups(num_elements(shape));
  std::vector<std::size_t> index(shape.size(), 0);
  for (std::size_t flat = 0; flat < groups.size(); ++flat) {
    std::size_t g = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (!reduced[d]) g = g * shape[d] + index[d];
    }
    groups[flat] = g;
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return groups;
}

// Smallest gap between the largest (sign=+1) or smallest (sign=-1) element of each group and
// the next one: 0 means a tie at the extremum, where max/min has no derivative.
double extremum_gap(const std::vector<double>& v, const std::vector<std::size_t>& groups,
                    double sign) {
  std::vector<std::pair<double, double>> best;  // per group: first, second
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (groups[i] >= best.size()) best.resize(groups[i] + 1, {-INFINITY, -INFINITY});
    auto& b = best[groups[i]];
    const double x = sign * v[i];
    if (x > b.first) {
      b.second = b.first;
      b.first = x;
    } else if (x > b.second) {
      b.second = x;
    }
  }
  double gap = INFINITY;
  for (const auto& b : best) gap = std::min(gap, b.first - b.second);
  return gap;
}

Tensor identity_matrix(std::size_t n) {
  std::vector<double> v(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i) v[i * n + i] = 1.0;
  return from_values(v, {n, n});
}

}  // namespace

// Builds one graph: draws ops, runs each at the base point, keeps those whose values stay
// finite and bounded.
class GraphBuilder {
 public:
  GraphBuilder(std::uint64_t seed, DType dtype) : rng_(seed), dtype_(dtype) { graph_.seed_ = seed; }

  RandomGraph build(int min_ops = 3, int max_ops = 12) {
    make_inputs();
    const int target_ops = uniform_int(min_ops, max_ops);
    // 400 attempts for the short graphs (their seeds keep their graphs), 40 per op for long.
    const int max_attempts = max_ops <= 12 ? 400 : 40 * target_ops;
    int attempts = 0;
    while (static_cast<int>(graph_.steps_.size()) < target_ops && attempts++ < max_attempts)
      try_one_op();
    std::vector<bool> used(nodes_.size(), false);
    for (const auto& step : graph_.steps_)
      for (std::size_t a : step.args) used[a] = true;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (!used[i]) graph_.sinks_.push_back(i);
    for (const auto& n : nodes_) graph_.node_shapes_.push_back(n.shape());
    return std::move(graph_);
  }

 private:
  // ---- random draws
  int uniform_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng_);
  }
  bool coin(double p = 0.5) { return std::bernoulli_distribution(p)(rng_); }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(uniform_int(0, static_cast<int>(v.size()) - 1))];
  }
  // An axis in [0, rank), written negative half of the time.
  int axis_for(std::size_t rank, int a) { return coin() ? a - static_cast<int>(rank) : a; }

  Tensor random_values(const Shape& shape, double lo, double hi) {
    std::vector<double> v(num_elements(shape));
    for (auto& x : v) x = uniform(lo, hi);
    return constant_of(v, shape);
  }
  // A constant of the graph's dtype.
  Tensor constant_of(const std::vector<double>& values, const Shape& shape) const {
    return from_values(values, shape, dtype_);
  }

  // ---- inputs: suffixes of one base shape with some dimensions set to 1, so they broadcast
  void make_inputs() {
    const int rank = coin(0.1) ? 0 : uniform_int(1, 3);
    Shape base;
    // At most 32 elements per input: central differences cost two evaluations per element.
    do {
      base.clear();
      for (int i = 0; i < rank; ++i) base.push_back(static_cast<std::size_t>(uniform_int(1, 4)));
    } while (num_elements(base) > 32);
    if (rank > 0 && coin(0.08)) base[static_cast<std::size_t>(uniform_int(0, rank - 1))] = 0;
    const int count = uniform_int(1, 3);
    for (int i = 0; i < count; ++i) {
      // The first input has the base shape; the others drop leading dimensions or set some
      // to 1, so that every pair broadcasts.
      Shape s(base.begin() + (i == 0 ? 0 : uniform_int(0, rank)), base.end());
      if (i > 0)
        for (auto& d : s)
          if (coin(0.3)) d = 1;
      Tensor x = random_values(s, -2.0, 2.0);
      graph_.inputs_.push_back(x);
      nodes_.push_back(x);
    }
  }

  // A node index, the most recent qualifying one half of the time (deep graphs), else any.
  template <class Pred>
  bool pick_node(Pred pred, std::size_t& out) {
    std::vector<std::size_t> c;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (pred(nodes_[i])) c.push_back(i);
    if (c.empty()) return false;
    out = coin() ? c.back() : pick(c);
    return true;
  }
  bool pick_any(std::size_t& out) {
    return pick_node([](const Tensor&) { return true; }, out);
  }

  // Runs the step at the base point; keeps it if every output is finite, bounded and small.
  bool commit(std::string description, std::vector<std::size_t> args, Apply apply) {
    std::vector<Tensor> in;
    for (std::size_t a : args) in.push_back(nodes_[a]);
    const std::vector<Tensor> out = apply(in);
    for (const Tensor& t : out) {
      if (t.dtype() != dtype_ || t.size() > kMaxElements) return false;
      for (double v : values_of(t))
        if (!std::isfinite(v) || std::abs(v) > kValueBound) return false;
    }
    for (const Tensor& t : out) {
      nodes_.push_back(t);
    }
    graph_.steps_.push_back(
        {std::move(description), std::move(args), std::move(apply), out.size()});
    return true;
  }

  // ---- conditioning: differentiable transforms, fixed from base-point values, that keep an
  // op's argument inside its smooth domain. `text` wraps the argument's description.
  struct Conditioned {
    Transform f;
    std::string text;  // with "x" for the argument
  };
  static Conditioned as_is() {
    return {[](const Tensor& x) { return x; }, "x"};
  }
  // |result| >= margin elementwise: x + c, with c = +-margin where |x| < margin.
  Conditioned away_from_zero(const Tensor& x, double margin) {
    std::vector<double> v = values_of(x), c(v.size(), 0.0);
    bool any = false;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (std::abs(v[i]) < margin) {
        c[i] = v[i] >= 0 ? margin : -margin;
        any = true;
      }
    }
    if (!any) return as_is();
    Tensor shift = constant_of(c, x.shape());
    return {[shift](const Tensor& t) { return add(t, shift); },
            "(x + shift away from 0 by " + std::to_string(margin) + ")"};
  }
  // result >= floor + margin: x itself when it already is, else softplus(x) + floor + margin
  // or exp(tanh(x)) + floor + margin.
  Conditioned above(const Tensor& x, double floor, double margin) {
    const auto v = values_of(x);
    if (std::all_of(v.begin(), v.end(), [&](double e) { return e >= floor + margin; }))
      return as_is();
    const double lo = floor + margin;
    if (coin())
      return {[lo](const Tensor& t) { return add(softplus(t), scalar(lo, t.dtype())); },
              "(softplus(x) + " + std::to_string(lo) + ")"};
    return {[lo](const Tensor& t) { return add(exp(tanh(t)), scalar(lo, t.dtype())); },
            "(exp(tanh(x)) + " + std::to_string(lo) + ")"};
  }
  // |result| <= bound: x itself when it already is, else bound * tanh(x / bound).
  Conditioned bounded(const Tensor& x, double bound) {
    const auto v = values_of(x);
    if (std::all_of(v.begin(), v.end(), [&](double e) { return std::abs(e) <= bound; }))
      return as_is();
    return {
        [bound](const Tensor& t) { return multiply(tanh(t / bound), scalar(bound, t.dtype())); },
        std::to_string(bound) + "*tanh(x/" + std::to_string(bound) + ")"};
  }
  // `text` with its argument "x" (a lone x, not the x of "exp") renamed to `arg`.
  static std::string wrap(const std::string& text, const std::string& arg) {
    std::string out;
    for (std::size_t k = 0; k < text.size(); ++k) {
      const bool letter_before = k > 0 && std::isalpha(static_cast<unsigned char>(text[k - 1]));
      const bool letter_after =
          k + 1 < text.size() && std::isalpha(static_cast<unsigned char>(text[k + 1]));
      out += text[k] == 'x' && !letter_before && !letter_after ? arg : std::string(1, text[k]);
    }
    return out;
  }

  // ---- op families
  bool unary() {
    std::size_t i;
    if (!pick_any(i)) return false;
    const Tensor& x = nodes_[i];
    using UnaryOp = Tensor (*)(const Tensor&);
    struct Plain {
      const char* name;
      UnaryOp op;
    };
    static const std::vector<Plain> plain = {
        {"sin", tapegrad::sin},           {"cos", tapegrad::cos},
        {"tanh", tapegrad::tanh},         {"sigmoid", tapegrad::sigmoid},
        {"softplus", tapegrad::softplus}, {"square", tapegrad::square},
        {"negative", tapegrad::negative}, {"identity", tapegrad::identity}};
    const int kind = uniform_int(0, 10);
    std::string name;
    UnaryOp op = nullptr;
    Conditioned cond = as_is();
    switch (kind) {
      case 0:
      case 1:
      case 2: {
        const Plain& p = pick(plain);
        name = p.name;
        op = p.op;
        break;
      }
      case 3:
        name = "exp";
        op = tapegrad::exp;
        cond = bounded(x, 3.0);
        break;
      case 4:
        name = "log";
        op = tapegrad::log;
        cond = above(x, 0.0, 0.2);
        break;
      case 5:
        name = "log1p";
        op = tapegrad::log1p;
        cond = above(x, -1.0, 0.2);
        break;
      case 6:
        name = "sqrt";
        op = tapegrad::sqrt;
        cond = above(x, 0.0, 0.2);
        break;
      case 7: {
        static const std::vector<std::pair<const char*, UnaryOp>> kinks = {
            {"abs", tapegrad::abs}, {"relu", tapegrad::relu}, {"sign", tapegrad::sign}};
        const auto& k = pick(kinks);
        name = k.first;
        op = k.second;
        cond = away_from_zero(x, 0.1);
        break;
      }
      case 8:
        name = "reciprocal";
        op = tapegrad::reciprocal;
        cond = away_from_zero(x, 0.3);
        break;
      case 9: {  // pow with a scalar exponent
        static const std::vector<double> powers = {2.0, 3.0, 0.5, -1.0, 1.5, -0.5};
        const double p = pick(powers);
        Conditioned c = (p == 2.0 || p == 3.0) ? as_is() : above(x, 0.0, 0.2);
        auto f = c.f;
        return commit("pow(" + c.text + ", " + std::to_string(p) + ")", {i},
                      [f, p](const std::vector<Tensor>& a) {
                        return std::vector<Tensor>{tapegrad::pow(f(a[0]), p)};
                      });
      }
      default: {  // Tensor (op) double, double (op) Tensor
        const double c = uniform(-2.0, 2.0);
        const int which = uniform_int(0, 4);
        static const char* texts[] = {"x + c", "c - x", "x * c", "x / c", "c / x"};
        Conditioned den = which == 4 ? away_from_zero(x, 0.3) : as_is();
        const double cc = which == 3 ? (c >= 0 ? c + 0.5 : c - 0.5) : c;
        auto f = den.f;
        return commit((which == 4 ? "c / " + den.text : std::string(texts[which])) +
                          " with c=" + std::to_string(cc),
                      {i}, [f, which, cc](const std::vector<Tensor>& a) {
                        const Tensor& t = a[0];
                        switch (which) {
                          case 0:
                            return std::vector<Tensor>{t + cc};
                          case 1:
                            return std::vector<Tensor>{cc - t};
                          case 2:
                            return std::vector<Tensor>{t * cc};
                          case 3:
                            return std::vector<Tensor>{t / cc};
                          default:
                            return std::vector<Tensor>{cc / f(t)};
                        }
                      });
      }
    }
    auto f = cond.f;
    return commit(name + "(" + cond.text + ")", {i}, [f, op](const std::vector<Tensor>& a) {
      return std::vector<Tensor>{op(f(a[0]))};
    });
  }

  bool binary() {
    std::size_t i, j;
    if (!pick_any(i)) return false;
    const Shape sa = nodes_[i].shape();
    if (!pick_node([&](const Tensor& t) { return broadcastable(sa, t.shape()); }, j)) return false;
    const Tensor &a = nodes_[i], &b = nodes_[j];
    const int kind = uniform_int(0, 7);
    using BinaryOp = Tensor (*)(const Tensor&, const Tensor&);
    switch (kind) {
      case 0:
      case 1:
      case 2: {
        static const std::vector<std::pair<const char*, BinaryOp>> plain = {
            {"add", tapegrad::add},
            {"subtract", tapegrad::subtract},
            {"multiply", tapegrad::multiply}};
        const auto& p = pick(plain);
        BinaryOp op = p.second;
        return commit(std::string(p.first) + "(a, b)", {i, j}, [op](const std::vector<Tensor>& x) {
          return std::vector<Tensor>{op(x[0], x[1])};
        });
      }
      case 3: {
        Conditioned den = away_from_zero(b, 0.3);
        auto f = den.f;
        return commit("divide(a, " + wrap(den.text, "b") + ")", {i, j},
                      [f](const std::vector<Tensor>& x) {
                        return std::vector<Tensor>{divide(x[0], f(x[1]))};
                      });
      }
      case 4: {
        Conditioned base = above(a, 0.0, 0.2), expo = bounded(b, 2.0);
        auto fb = base.f, fe = expo.f;
        return commit("pow(" + wrap(base.text, "a") + ", " + wrap(expo.text, "b") + ")", {i, j},
                      [fb, fe](const std::vector<Tensor>& x) {
                        return std::vector<Tensor>{tapegrad::pow(fb(x[0]), fe(x[1]))};
                      });
      }
      case 5:
      case 6: {  // maximum / minimum, b shifted by a scalar so no pair ties
        const std::vector<double> d = values_of(subtract(a, b));
        double s = 0.0;
        auto separated = [&](double shift) {
          return std::all_of(d.begin(), d.end(),
                             [&](double e) { return std::abs(e - shift) >= 0.05; });
        };
        int tries = 0;
        while (!separated(s) && tries++ < 30) s = uniform(-2.0, 2.0);
        if (!separated(s)) return false;
        const bool is_max = kind == 5;
        return commit(
            std::string(is_max ? "maximum" : "minimum") + "(a, b + " + std::to_string(s) + ")",
            {i, j}, [is_max, s](const std::vector<Tensor>& x) {
              const Tensor shifted = add(x[1], scalar(s, x[1].dtype()));
              return std::vector<Tensor>{is_max ? maximum(x[0], shifted) : minimum(x[0], shifted)};
            });
      }
      default: {  // where with a fixed random condition of the broadcast shape
        const Shape out = add(a, b).shape();
        std::vector<double> c(num_elements(out));
        for (auto& e : c) e = coin() ? 1.0 : 0.0;
        const Shape cond_shape =
            coin() ? out : Shape(out.begin() + (out.empty() ? 0 : 1), out.end());
        c.resize(num_elements(cond_shape));
        Tensor cond = cast(from_values(c, cond_shape), DType::Bool);
        return commit("where(cond " + shape_text(cond_shape) + ", a, b)", {i, j},
                      [cond](const std::vector<Tensor>& x) {
                        return std::vector<Tensor>{where(cond, x[0], x[1])};
                      });
      }
    }
  }

  bool reduction() {
    std::size_t i;
    if (!pick_any(i)) return false;
    const Tensor& x = nodes_[i];
    const Shape& s = x.shape();
    const std::size_t r = s.size();
    std::vector<int> axes;
    std::vector<bool> reduced(r, false);
    if (r > 0 && coin(0.75)) {
      for (std::size_t d = 0; d < r; ++d) {
        if (coin()) {
          axes.push_back(axis_for(r, static_cast<int>(d)));
          reduced[d] = true;
        }
      }
    }
    if (axes.empty()) std::fill(reduced.begin(), reduced.end(), true);  // {} = every axis
    const bool keepdims = coin();
    bool reduces_empty = false;  // a reduced group with no element
    for (std::size_t d = 0; d < r; ++d)
      if (reduced[d] && s[d] == 0) reduces_empty = true;
    const int kind = uniform_int(0, 5);
    static const char* names[] = {"reduce_sum",       "reduce_mean", "reduce_prod",
                                  "reduce_logsumexp", "reduce_max",  "reduce_min"};
    if (kind != 0 && kind != 2 && reduces_empty) return false;
    const std::string text = std::string(names[kind]) + "(x" + (kind >= 4 ? " + ramp" : "") +
                             ", axes=" + list_text(axes) +
                             ", keepdims=" + (keepdims ? "true" : "false") + ")";
    Tensor ramp = zeros(s, dtype_);
    if (kind >= 4) {  // a fixed ramp over each group's elements separates its extremum
      const auto groups = reduction_groups(s, reduced);
      const auto v = values_of(x);
      const double sign = kind == 4 ? 1.0 : -1.0;
      std::vector<double> rank_in_group(v.size());
      std::vector<std::size_t> order(v.size());
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng_);
      std::vector<double> seen;
      for (std::size_t k : order) {
        if (groups[k] >= seen.size()) seen.resize(groups[k] + 1, 0.0);
        rank_in_group[k] = seen[groups[k]]++;
      }
      bool ok = false;
      for (double scale : {0.0, 0.05, 0.3, 1.0, 3.0}) {
        std::vector<double> shifted(v.size()), r_values(v.size());
        for (std::size_t k = 0; k < v.size(); ++k) {
          r_values[k] = scale * rank_in_group[k];
          shifted[k] = v[k] + r_values[k];
        }
        if (extremum_gap(shifted, groups, sign) >= 0.05) {
          ramp = constant_of(r_values, s);
          ok = true;
          break;
        }
      }
      if (!ok) return false;
    }
    return commit(text, {i}, [kind, axes, keepdims, ramp](const std::vector<Tensor>& a) {
      const Tensor& t = a[0];
      switch (kind) {
        case 0:
          return std::vector<Tensor>{reduce_sum(t, axes, keepdims)};
        case 1:
          return std::vector<Tensor>{reduce_mean(t, axes, keepdims)};
        case 2:
          return std::vector<Tensor>{reduce_prod(t, axes, keepdims)};
        case 3:
          return std::vector<Tensor>{reduce_logsumexp(t, axes, keepdims)};
        case 4:
          return std::vector<Tensor>{reduce_max(add(t, ramp), axes, keepdims)};
        default:
          return std::vector<Tensor>{reduce_min(add(t, ramp), axes, keepdims)};
      }
    });
  }

  // A shape of `size` elements and a random rank (0..4).
  std::vector<std::int64_t> random_factorisation(std::size_t size) {
    const int rank = size == 1 ? uniform_int(0, 3) : uniform_int(1, 4);
    std::vector<std::int64_t> dims;
    std::size_t rest = size;
    for (int d = 0; d + 1 < rank; ++d) {
      std::vector<std::size_t> divisors;
      if (rest == 0) {
        divisors = {0, 1, 2, 3};
      } else {
        for (std::size_t k = 1; k <= rest; ++k)
          if (rest % k == 0) divisors.push_back(k);
      }
      const std::size_t k = pick(divisors);
      dims.push_back(static_cast<std::int64_t>(k));
      if (k != 0) rest /= k;
    }
    if (rank > 0) dims.push_back(static_cast<std::int64_t>(rest));
    if (size == 0 && std::none_of(dims.begin(), dims.end(), [](std::int64_t d) { return d == 0; }))
      dims.back() = 0;
    std::shuffle(dims.begin(), dims.end(), rng_);
    if (size > 0 && rank > 0 && coin(0.3))
      dims[static_cast<std::size_t>(uniform_int(0, rank - 1))] = -1;
    return dims;
  }

  bool array_op() {
    std::size_t i;
    if (!pick_any(i)) return false;
    const Tensor& x = nodes_[i];
    const Shape s = x.shape();
    const std::size_t r = s.size();
    const int ri = static_cast<int>(r);
    switch (uniform_int(0, 12)) {
      case 12: {  // unbroadcast: sums x down to a shape it broadcasts from
        Shape target(s.begin() + uniform_int(0, ri), s.end());
        for (auto& d : target)
          if (coin(0.4)) d = 1;
        return commit("unbroadcast(x, " + shape_text(target) + ")", {i},
                      [target](const std::vector<Tensor>& a) {
                        return std::vector<Tensor>{unbroadcast(a[0], target)};
                      });
      }
      case 0: {
        const auto dims = random_factorisation(x.size());
        return commit("reshape(x, " + list_text(dims) + ")", {i},
                      [dims](const std::vector<Tensor>& a) {
                        return std::vector<Tensor>{reshape(a[0], dims)};
                      });
      }
      case 1: {
        std::vector<int> perm(r);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng_);
        if (coin(0.2)) perm.clear();  // reverses the axes
        return commit("transpose(x, " + list_text(perm) + ")", {i},
                      [perm](const std::vector<Tensor>& a) {
                        return std::vector<Tensor>{transpose(a[0], perm)};
                      });
      }
      case 2: {
        const int axis = uniform_int(-ri - 1, ri);
        return commit("expand_dims(x, " + std::to_string(axis) + ")", {i},
                      [axis](const std::vector<Tensor>& a) {
                        return std::vector<Tensor>{expand_dims(a[0], axis)};
                      });
      }
      case 3: {
        std::vector<int> axes;
        for (std::size_t d = 0; d < r; ++d)
          if (s[d] == 1 && coin()) axes.push_back(axis_for(r, static_cast<int>(d)));
        if (axes.empty() && std::none_of(s.begin(), s.end(), [](std::size_t d) { return d == 1; }))
          return false;
        return commit("squeeze(x, " + list_text(axes) + ")", {i},
                      [axes](const std::vector<Tensor>& a) {
                        return std::vector<Tensor>{squeeze(a[0], axes)};
                      });
      }
      case 4: {  // broadcast_to: new leading dimensions, size-1 dimensions stretched
        Shape target;
        if (coin(0.4)) target.push_back(static_cast<std::size_t>(uniform_int(1, 3)));
        for (std::size_t d : s)
          target.push_back(d == 1 && coin() ? static_cast<std::size_t>(uniform_int(1, 3)) : d);
        return commit("broadcast_to(x, " + shape_text(target) + ")", {i},
                      [target](const std::vector<Tensor>& a) {
                        return std::vector<Tensor>{broadcast_to(a[0], target)};
                      });
      }
      case 5: {
        std::vector<std::size_t> m;
        for (std::size_t d = 0; d < r; ++d)
          m.push_back(static_cast<std::size_t>(uniform_int(1, 2)));
        return commit("tile(x, " + list_text(m) + ")", {i}, [m](const std::vector<Tensor>& a) {
          return std::vector<Tensor>{tile(a[0], m)};
        });
      }
      case 6: {  // concat with nodes equal in every dimension but the axis
        if (r == 0) return false;
        const int axis = uniform_int(0, ri - 1);
        std::vector<std::size_t> args = {i};
        const int parts = uniform_int(2, 3);
        for (int p = 1; p < parts; ++p) {
          std::size_t j;
          if (!pick_node(
                  [&](const Tensor& t) {
                    if (t.rank() != r) return false;
                    for (std::size_t d = 0; d < r; ++d)
                      if (static_cast<int>(d) != axis && t.shape()[d] != s[d]) return false;
                    return true;
                  },
                  j))
            return false;
          args.push_back(j);
        }
        const int written = axis_for(r, axis);
        return commit(
            "concat(" + std::to_string(parts) + " parts, axis=" + std::to_string(written) + ")",
            args, [written](const std::vector<Tensor>& a) {
              return std::vector<Tensor>{concat(a, written)};
            });
      }
      case 7: {  // stack with nodes of the same shape
        std::vector<std::size_t> args = {i};
        const int parts = uniform_int(1, 3);
        for (int p = 1; p < parts; ++p) {
          std::size_t j;
          if (!pick_node([&](const Tensor& t) { return t.shape() == s; }, j)) return false;
          args.push_back(j);
        }
        const int axis = uniform_int(-ri - 1, ri);
        return commit(
            "stack(" + std::to_string(parts) + " parts, axis=" + std::to_string(axis) + ")", args,
            [axis](const std::vector<Tensor>& a) { return std::vector<Tensor>{stack(a, axis)}; });
      }
      case 8: {  // split: every piece becomes a node
        if (r == 0) return false;
        const int axis = uniform_int(0, ri - 1);
        std::vector<int> nums;
        for (int n = 1; n <= 4; ++n)
          if (s[static_cast<std::size_t>(axis)] % static_cast<std::size_t>(n) == 0)
            nums.push_back(n);
        const int num = pick(nums);
        const int written = axis_for(r, axis);
        return commit(
            "split(x, num=" + std::to_string(num) + ", axis=" + std::to_string(written) + ")", {i},
            [num, written](const std::vector<Tensor>& a) { return split(a[0], num, written); });
      }
      case 9: {
        std::vector<std::int64_t> begin, size;
        for (std::size_t d : s) {
          const int b = uniform_int(0, static_cast<int>(d));
          begin.push_back(b);
          size.push_back(coin(0.25) ? -1 : uniform_int(0, static_cast<int>(d) - b));
        }
        return commit("slice(x, begin=" + list_text(begin) + ", size=" + list_text(size) + ")", {i},
                      [begin, size](const std::vector<Tensor>& a) {
                        return std::vector<Tensor>{slice(a[0], begin, size)};
                      });
      }
      case 10: {  // gather with fixed (possibly repeated) indices
        if (r == 0) return false;
        const int axis = uniform_int(0, ri - 1);
        const std::size_t dim = s[static_cast<std::size_t>(axis)];
        Shape ishape;
        const int irank = uniform_int(0, 2);
        for (int k = 0; k < irank; ++k)
          ishape.push_back(static_cast<std::size_t>(uniform_int(0, 3)));
        if (dim == 0 && num_elements(ishape) > 0) ishape = {0};
        std::vector<double> idx(num_elements(ishape));
        for (auto& e : idx) e = uniform_int(0, static_cast<int>(dim) - 1);
        const Tensor indices = from_values(idx, ishape, coin() ? DType::Int64 : DType::Int32);
        const int written = axis_for(r, axis);
        return commit("gather(x, indices " + shape_text(ishape) + " " + list_text(idx) +
                          ", axis=" + std::to_string(written) + ")",
                      {i}, [indices, written](const std::vector<Tensor>& a) {
                        return std::vector<Tensor>{gather(a[0], indices, written)};
                      });
      }
      default: {  // unsorted_segment_sum over the leading axis
        if (r == 0) return false;
        const std::size_t segments = static_cast<std::size_t>(uniform_int(1, 4));
        std::vector<double> ids(s[0]);
        for (auto& e : ids) e = uniform_int(0, static_cast<int>(segments) - 1);
        const Tensor seg = from_values(ids, {s[0]}, DType::Int64);
        return commit(
            "unsorted_segment_sum(x, ids " + list_text(ids) + ", " + std::to_string(segments) + ")",
            {i}, [seg, segments](const std::vector<Tensor>& a) {
              return std::vector<Tensor>{unsorted_segment_sum(a[0], seg, segments)};
            });
      }
    }
  }

  bool nn_op() {
    std::size_t i;
    if (!pick_node([](const Tensor& t) { return t.rank() > 0; }, i)) return false;
    const Shape s = nodes_[i].shape();
    const int ri = static_cast<int>(s.size());
    switch (uniform_int(0, 3)) {
      case 0:
      case 1: {
        const bool log_form = coin();
        const int axis = uniform_int(-ri, ri - 1);
        return commit(
            std::string(log_form ? "log_softmax" : "softmax") + "(x, axis=" + std::to_string(axis) +
                ")",
            {i}, [log_form, axis](const std::vector<Tensor>& a) {
              return std::vector<Tensor>{log_form ? log_softmax(a[0], axis) : softmax(a[0], axis)};
            });
      }
      default: {  // cross-entropies: labels from a node of the same shape
        std::size_t j;
        if (!pick_node([&](const Tensor& t) { return t.shape() == s; }, j)) return false;
        // Labels are softmax(b) (rows summing to 1, the usual use) or b itself (any rows: the
        // logits gradient is softmax * sum(labels) - labels, exact for both).
        if (coin()) {
          const bool normalised = coin();
          return commit(std::string("softmax_cross_entropy_with_logits(labels=") +
                            (normalised ? "softmax(b)" : "b") + ", logits=a)",
                        {i, j}, [normalised](const std::vector<Tensor>& a) {
                          return std::vector<Tensor>{softmax_cross_entropy_with_logits(
                              normalised ? softmax(a[1]) : a[1], a[0])};
                        });
        }
        const bool squash = coin();
        return commit(std::string("sigmoid_cross_entropy_with_logits(labels=") +
                          (squash ? "sigmoid(b)" : "b") + ", logits=a)",
                      {i, j}, [squash](const std::vector<Tensor>& a) {
                        return std::vector<Tensor>{
                            sigmoid_cross_entropy_with_logits(squash ? sigmoid(a[1]) : a[1], a[0])};
                      });
      }
    }
  }

  bool linalg_op() {
    std::size_t i;
    if (!pick_node([](const Tensor& t) { return t.rank() >= 2; }, i)) return false;
    const Shape s = nodes_[i].shape();
    const std::size_t r = s.size();
    const int kind = uniform_int(0, 5);
    if (kind <= 1) {  // matmul with a partner whose inner dimension matches
      const bool ta = coin();
      const std::size_t inner = ta ? s[r - 2] : s[r - 1];
      const Shape batch(s.begin(), s.end() - 2);
      std::vector<std::pair<std::size_t, bool>> partners;
      for (std::size_t j = 0; j < nodes_.size(); ++j) {
        const Shape& t = nodes_[j].shape();
        if (t.size() < 2 || !broadcastable(batch, Shape(t.begin(), t.end() - 2))) continue;
        if (t[t.size() - 2] == inner) partners.push_back({j, false});
        if (t[t.size() - 1] == inner) partners.push_back({j, true});
      }
      const auto [j, tb] = pick(partners);  // never empty: i itself, one way or the other
      return commit("matmul(a, b, transpose_a=" + std::string(ta ? "true" : "false") +
                        ", transpose_b=" + (tb ? "true" : "false") + ")",
                    {i, j}, [ta, tb = tb](const std::vector<Tensor>& a) {
                      return std::vector<Tensor>{matmul(a[0], a[1], ta, tb)};
                    });
    }
    // Square ops: the leading n x n block of x's matrices, made well-conditioned.
    const std::size_t n = std::min(s[r - 2], s[r - 1]);
    if (n == 0 || n > 4) return false;
    std::vector<std::int64_t> begin(r, 0), size(r, -1);
    size[r - 2] = size[r - 1] = static_cast<std::int64_t>(n);
    const Tensor eye = cast(identity_matrix(n), dtype_);
    const double scale = 0.4 / static_cast<double>(n);
    // I + (0.4/n) tanh(X): every eigenvalue within 0.4 of 1.
    auto near_identity = [begin, size, eye, scale](const Tensor& x) {
      return add(eye, multiply(tanh(slice(x, begin, size)), scalar(scale, x.dtype())));
    };
    const std::string a_text = "(I + " + std::to_string(scale) +
                               "*tanh(x[..., :" + std::to_string(n) + ", :" + std::to_string(n) +
                               "]))";
    switch (kind) {
      case 2:
        return commit("matrix_inverse" + a_text, {i},
                      [near_identity](const std::vector<Tensor>& a) {
                        return std::vector<Tensor>{matrix_inverse(near_identity(a[0]))};
                      });
      case 3:
        return commit("matrix_determinant" + a_text, {i},
                      [near_identity](const std::vector<Tensor>& a) {
                        return std::vector<Tensor>{matrix_determinant(near_identity(a[0]))};
                      });
      case 4: {  // solve with a right-hand side of the same batch shape and n rows
        const Shape batch(s.begin(), s.end() - 2);
        std::size_t j;
        const bool found = pick_node(
            [&](const Tensor& t) {
              const Shape& ts = t.shape();
              return ts.size() == r && Shape(ts.begin(), ts.end() - 2) == batch && ts[r - 2] == n;
            },
            j);
        if (!found) return false;
        return commit("solve" + a_text + ", b)", {i, j},
                      [near_identity](const std::vector<Tensor>& a) {
                        return std::vector<Tensor>{solve(near_identity(a[0]), a[1])};
                      });
      }
      default: {  // cholesky of B B^T + I
        const double c = 0.5 / static_cast<double>(n);
        return commit("cholesky(B B^T + I), B = " + std::to_string(c) + "*tanh(x[..., :n, :n])",
                      {i}, [begin, size, eye, c](const std::vector<Tensor>& a) {
                        const Tensor b =
                            multiply(tanh(slice(a[0], begin, size)), scalar(c, a[0].dtype()));
                        return std::vector<Tensor>{cholesky(add(matmul(b, b, false, true), eye))};
                      });
      }
    }
  }

  void try_one_op() {
    switch (uniform_int(0, 9)) {
      case 0:
      case 1:
        unary();
        break;
      case 2:
      case 3:
        binary();
        break;
      case 4:
      case 5:
        reduction();
        break;
      case 6:
      case 7:
        array_op();
        break;
      case 8:
        nn_op();
        break;
      default:
        linalg_op();
        break;
    }
  }

  std::mt19937_64 rng_;
  DType dtype_;
  RandomGraph graph_;
  std::vector<Tensor> nodes_;
};

RandomGraph RandomGraph::generate(std::uint64_t seed, DType dtype) {
  return generate(seed, dtype, 3, 12);
}

RandomGraph RandomGraph::generate(std::uint64_t seed, DType dtype, int min_ops, int max_ops) {
  // TAPEGRAD_FUZZ_OPS=<min>-<max> sets every test's range (long graphs for a search).
  if (const char* range = std::getenv("TAPEGRAD_FUZZ_OPS"); range != nullptr && *range != '\0') {
    char* end = nullptr;
    min_ops = static_cast<int>(std::strtol(range, &end, 10));
    max_ops = *end == '-' ? static_cast<int>(std::strtol(end + 1, nullptr, 10)) : min_ops;
  }
  return GraphBuilder(seed, dtype).build(min_ops, max_ops);
}

std::vector<Tensor> RandomGraph::evaluate_nodes(const std::vector<Tensor>& inputs) const {
  std::vector<Tensor> nodes = inputs;
  for (const auto& step : steps_) {
    std::vector<Tensor> in;
    for (std::size_t a : step.args) in.push_back(nodes[a]);
    for (Tensor& t : step.apply(in)) nodes.push_back(std::move(t));
  }
  return nodes;
}

std::vector<std::string> RandomGraph::op_descriptions() const {
  std::vector<std::string> out;
  for (const auto& step : steps_) out.push_back(step.description);
  return out;
}

std::vector<Tensor> RandomGraph::evaluate_sinks(const std::vector<Tensor>& inputs) const {
  const std::vector<Tensor> nodes = evaluate_nodes(inputs);
  std::vector<Tensor> sinks;
  for (std::size_t k : sinks_) sinks.push_back(nodes[k]);
  return sinks;
}

Tensor RandomGraph::evaluate(const std::vector<Tensor>& inputs) const {
  std::vector<Tensor> flat;
  for (const Tensor& t : evaluate_sinks(inputs))
    flat.push_back(reshape(t, {static_cast<std::int64_t>(t.size())}));
  return flat.size() == 1 ? flat[0] : concat(flat, 0);
}

RandomGraph RandomGraph::isolate(std::size_t index) const {
  const std::vector<Tensor> nodes = evaluate_nodes(inputs_);
  const GraphStep& step = steps_.at(index);
  RandomGraph g;
  g.seed_ = seed_;
  GraphStep alone = step;
  alone.args.clear();
  for (std::size_t k = 0; k < step.args.size(); ++k) {
    // A fresh tensor per argument: a repeated argument becomes two independent inputs.
    const Tensor& v = nodes[step.args[k]];
    g.inputs_.push_back(from_values(values_of(v), v.shape(), v.dtype()));
    g.node_shapes_.push_back(nodes[step.args[k]].shape());
    alone.args.push_back(k);
  }
  for (const Tensor& t : step.apply(g.inputs_)) {
    g.sinks_.push_back(g.node_shapes_.size());
    g.node_shapes_.push_back(t.shape());
  }
  g.steps_.push_back(std::move(alone));
  return g;
}

std::string RandomGraph::describe() const {
  std::ostringstream os;
  std::size_t node = 0;
  for (; node < inputs_.size(); ++node)
    os << "  node " << node << " = input " << shape_text(node_shapes_[node]) << "\n";
  for (const auto& step : steps_) {
    os << "  node";
    for (std::size_t k = 0; k < step.output_count; ++k) os << ' ' << node + k;
    os << " = " << step.description << " of nodes " << list_text(step.args) << " ->";
    for (std::size_t k = 0; k < step.output_count; ++k)
      os << ' ' << shape_text(node_shapes_[node + k]);
    os << "\n";
    node += step.output_count;
  }
  os << "  output = concat of the flattened sinks " << list_text(sinks_) << "\n";
  return os.str();
}

}  // namespace tapegrad::fuzz
