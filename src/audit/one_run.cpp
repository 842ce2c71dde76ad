// The one-run audit of Steinke, Nasr & Jagielski 2023 (docs/math.md §11.2).
#include "fluence/audit/one_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "fluence/audit/purposes.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"

namespace fluence {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// log(e^a + e^b) without overflow; -inf is the identity.
double log_add(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == kNegInf) return a;
  return a + std::log1p(std::exp(b - a));
}

// log p and log(1 - p) of randomized response's accuracy p = e^eps / (1 + e^eps) = 1 / (1 +
// e^-eps), both without cancellation or overflow for any eps >= 0.
struct LogAccuracy {
  double log_p, log_one_minus_p;
  explicit LogAccuracy(double epsilon)
      : log_p(-std::log1p(std::exp(-epsilon))), log_one_minus_p(-epsilon + log_p) {}
};

// log sum_{j = first..last} e^{term(j)} in two passes (largest term first), so every term is
// exponentiated relative to the largest: no underflow of the sum while any term is representable.
template <class Term>
double log_sum_range(long first, long last, Term&& term) {
  if (first > last) return kNegInf;
  double largest = kNegInf;
  for (long j = first; j <= last; ++j) largest = std::max(largest, term(j));
  if (largest == kNegInf) return kNegInf;
  double sum = 0.0;
  for (long j = first; j <= last; ++j) sum += std::exp(term(j) - largest);
  return largest + std::log(sum);
}

void check_counts(const OneRunCounts& c) {
  if (!(0 <= c.correct && c.correct <= c.guesses && c.guesses <= c.canaries))
    throw InputError(
        fmt::format("one-run audit: need 0 <= correct ({}) <= guesses ({}) <= canaries ({})",
                    c.correct, c.guesses, c.canaries));
}

// The p-value of one game as a function of eps, with log C(r, j) tabulated once: the bound's
// search evaluates it a few hundred times, each O(r) exponentials and no allocation.
class OneRunPValue {
 public:
  explicit OneRunPValue(const OneRunCounts& counts)
      : counts_(counts), log_choose_(static_cast<std::size_t>(counts.guesses) + 1) {
    const double r = static_cast<double>(counts.guesses);
    for (long j = 0; j <= counts.guesses; ++j)
      log_choose_[static_cast<std::size_t>(j)] =
          std::lgamma(r + 1.0) - std::lgamma(j + 1.0) - std::lgamma(r - j + 1.0);
  }

  double log_value(double epsilon, double delta) const {
    const long r = counts_.guesses, v = counts_.correct;
    if (v <= 0) return 0.0;  // P[W >= 0] = 1
    const LogAccuracy accuracy(epsilon);
    auto log_pmf = [&](long j) {
      return log_choose_[static_cast<std::size_t>(j)] + j * accuracy.log_p +
             (r - j) * accuracy.log_one_minus_p;
    };
    const double log_tail = log_sum_range(v, r, log_pmf);  // log f(v)
    if (delta == 0.0) return log_tail;
    // log max_i (f(v - i) - f(v)) / i, f(v - i) - f(v) = P[v - i <= B <= v - 1] accumulated from
    // j = v - 1 downwards in log space (the masses can be far below the double range).
    double window = kNegInf, largest = kNegInf;
    for (long i = 1; i <= v; ++i) {
      window = log_add(window, log_pmf(v - i));
      largest = std::max(largest, window - std::log(static_cast<double>(i)));
    }
    return log_add(log_tail, std::log(2.0 * counts_.canaries * delta) + largest);
  }

 private:
  OneRunCounts counts_;
  std::vector<double> log_choose_;
};

constexpr double kEpsilonTolerance = 1e-9;
constexpr double kEpsilonBracket = 1e4;
constexpr double kScanStep = 1.0 / 64.0;

}  // namespace

double log_binomial_upper_tail(long successes, long trials, double log_p, double log_one_minus_p) {
  if (trials < 0) throw InputError(fmt::format("binomial tail: {} trials", trials));
  if (successes <= 0) return 0.0;
  if (successes > trials) return kNegInf;
  const double n = static_cast<double>(trials);
  return log_sum_range(successes, trials, [&](long j) {
    return std::lgamma(n + 1.0) - std::lgamma(j + 1.0) - std::lgamma(n - j + 1.0) + j * log_p +
           (trials - j) * log_one_minus_p;
  });
}

double one_run_log_p_value(const OneRunCounts& counts, double epsilon, double delta) {
  check_counts(counts);
  if (!(epsilon >= 0.0)) throw InputError(fmt::format("one-run audit: eps {} < 0", epsilon));
  if (!(delta >= 0.0 && delta <= 1.0))
    throw InputError(fmt::format("one-run audit: delta {} outside [0, 1]", delta));
  return OneRunPValue(counts).log_value(epsilon, delta);
}

double one_run_epsilon_lower(const OneRunCounts& counts, double delta, double beta) {
  check_counts(counts);
  if (!(delta >= 0.0 && delta <= 1.0))
    throw InputError(fmt::format("one-run audit: delta {} outside [0, 1]", delta));
  if (!(beta > 0.0 && beta < 1.0))
    throw InputError(fmt::format("one-run audit: beta {} outside (0, 1)", beta));
  const OneRunPValue p_value(counts);
  const double log_beta = std::log(beta);
  auto rejected = [&](double epsilon) { return p_value.log_value(epsilon, delta) < log_beta; };
  if (!rejected(0.0)) return 0.0;
  // [low, high]: low rejected, high not, with no crossing below low that the search has seen.
  double low = 0.0, high;
  if (delta == 0.0) {
    // The binomial tail increases with p, and p with eps: one crossing, bracketed by doubling.
    high = 1.0;
    while (rejected(high) && high < kEpsilonBracket) {
      low = high;
      high *= 2.0;
    }
  } else {
    // The delta term P[v - i <= B < v] / i can fall as eps grows, so the p-value can cross beta,
    // fall back and cross again; the bound is the first crossing, found cell by cell.
    high = kScanStep;
    while (rejected(high) && high < kEpsilonBracket) {
      low = high;
      high += kScanStep;
    }
  }
  if (rejected(high)) return high;  // still rejected at the bracket's end
  while (high - low > kEpsilonTolerance) {
    const double middle = 0.5 * (low + high);
    (rejected(middle) ? low : high) = middle;
  }
  return low;
}

namespace {

// Canary indices by descending score, ties by ascending index (stable), after checking the inputs.
std::vector<long> score_order(std::span<const double> scores,
                              std::span<const std::uint8_t> included) {
  if (scores.size() != included.size())
    throw InputError(
        fmt::format("one-run audit: {} scores for {} canaries", scores.size(), included.size()));
  for (const double s : scores)
    if (std::isnan(s)) throw InputError("one-run audit: a canary score is NaN");
  std::vector<long> order(scores.size());
  std::iota(order.begin(), order.end(), 0L);
  std::stable_sort(order.begin(), order.end(), [&](long a, long b) {
    return scores[static_cast<std::size_t>(a)] > scores[static_cast<std::size_t>(b)];
  });
  return order;
}

bool valid_rule(const OneRunGuess& g, long canaries) {
  return g.positives >= 0 && g.negatives >= 0 && g.positives + g.negatives <= canaries;
}

OneRunCounts play(const std::vector<long>& order, std::span<const std::uint8_t> included,
                  OneRunGuess guess) {
  const long m = static_cast<long>(order.size());
  OneRunCounts counts;
  counts.canaries = m;
  counts.guesses = guess.positives + guess.negatives;
  auto in = [&](long rank) {
    return included[static_cast<std::size_t>(order[static_cast<std::size_t>(rank)])] != 0;
  };
  for (long rank = 0; rank < guess.positives; ++rank) counts.correct += in(rank);
  for (long rank = m - guess.negatives; rank < m; ++rank) counts.correct += !in(rank);
  return counts;
}

}  // namespace

OneRunCounts one_run_counts(std::span<const double> scores, std::span<const std::uint8_t> included,
                            OneRunGuess guess) {
  const std::vector<long> order = score_order(scores, included);
  if (!valid_rule(guess, static_cast<long>(scores.size())))
    throw InputError(fmt::format("one-run audit: {} IN and {} OUT guesses for {} canaries",
                                 guess.positives, guess.negatives, scores.size()));
  return play(order, included, guess);
}

std::vector<OneRunGuess> one_run_default_guesses(long canaries) {
  std::vector<OneRunGuess> grid;
  for (long decade = 1; decade <= canaries; decade *= 10) {
    for (long factor : {1L, 2L, 5L}) {
      const long k = factor * decade;
      if (k <= canaries) grid.push_back({k, 0});
      if (2 * k <= canaries) grid.push_back({k, k});
    }
  }
  return grid;
}

OneRunAudit one_run_audit(std::span<const double> scores, std::span<const std::uint8_t> included,
                          double delta, double beta, std::span<const OneRunGuess> guesses) {
  if (!(beta > 0.0 && beta < 1.0))
    throw InputError(fmt::format("one-run audit: beta {} outside (0, 1)", beta));
  const std::vector<long> order = score_order(scores, included);
  const long m = static_cast<long>(scores.size());
  std::vector<OneRunGuess> rules;
  if (guesses.empty()) {
    rules = one_run_default_guesses(m);
  } else {
    for (const OneRunGuess& g : guesses)
      if (valid_rule(g, m) && g.positives + g.negatives > 0) rules.push_back(g);
  }
  OneRunAudit audit;
  audit.delta = delta;
  audit.confidence = 1.0 - beta;
  audit.rules = static_cast<long>(rules.size());
  audit.counts.canaries = m;
  if (rules.empty()) return audit;
  const double beta_per_rule = beta / static_cast<double>(rules.size());  // Bonferroni
  bool first = true;
  for (const OneRunGuess& rule : rules) {
    const OneRunCounts counts = play(order, included, rule);
    const double bound = one_run_epsilon_lower(counts, delta, beta_per_rule);
    if (first || bound > audit.epsilon_lower) {
      audit.epsilon_lower = bound;
      audit.best = rule;
      audit.counts = counts;
      first = false;
    }
  }
  return audit;
}

std::vector<std::uint8_t> draw_canary_inclusion(std::uint64_t seed, long canaries) {
  if (canaries < 0) throw InputError(fmt::format("canary inclusion: {} canaries", canaries));
  std::vector<std::uint8_t> included(static_cast<std::size_t>(canaries));
  for (long c = 0; c < canaries; ++c) {
    Stream stream(seed, purpose::canary_inclusion, static_cast<std::uint64_t>(c));
    included[static_cast<std::size_t>(c)] = stream.uniform() < 0.5;
  }
  return included;
}

}  // namespace fluence
