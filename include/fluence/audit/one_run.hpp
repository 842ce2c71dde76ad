#pragma once
// The one-run audit of Steinke, Nasr & Jagielski 2023 ("Privacy auditing with one (1) training
// run", docs/math.md §11.2). m canaries are each included independently with probability 1/2; after
// the one run every canary has a score (higher: more likely included). The auditor guesses IN for
// the k+ highest scores, OUT for the k- lowest and abstains on the rest: r = k+ + k- guesses, v of
// them correct. If the run is (eps, delta)-DP in each canary, then for every v
//   P[W >= v] <= f(v) + 2 m delta max_{i = 1..v} (f(v - i) - f(v)) / i,
//   f(v) = P[Binomial(r, e^eps / (1 + e^eps)) >= v]
// (their main theorem; delta = 0 leaves the binomial tail alone). The lower bound at confidence
// 1 - beta is the smallest eps this p-value does not reject: every eps below it is rejected, and a
// run with true eps* has P[bound > eps*] <= P[p-value(eps*) < beta] <= beta.
#include <cstdint>
#include <span>
#include <vector>

namespace fluence {

/// log P[Binomial(trials, p) >= successes] with p given as log p and log(1 - p) (pass both so that
/// neither loses digits near 0 or 1): summed term by term in log space (log-sum-exp), so that tails
/// far below the double range (1e-308) keep their value. 0 (log 1) for successes <= 0, -inf for
/// successes > trials.
double log_binomial_upper_tail(long successes, long trials, double log_p, double log_one_minus_p);

/// What the guessing game produced: m canaries, r guesses (the rest abstained), v correct.
struct OneRunCounts {
  long canaries = 0;  // m
  long guesses = 0;   // r
  long correct = 0;   // v
};

/// log of the p-value of Steinke et al.'s theorem: an upper bound on P[W >= v] for a mechanism that
/// is (eps, delta)-DP in each canary. InputError unless 0 <= v <= r <= m, eps >= 0 and delta in
/// [0, 1].
double one_run_log_p_value(const OneRunCounts& counts, double epsilon, double delta);

/// The eps lower bound at confidence 1 - beta: the smallest eps whose p-value reaches beta (0 when
/// eps = 0 already does), to an absolute tolerance of 1e-9 and on the rejected side (the returned
/// value is rejected, so rounding never makes the bound larger). delta = 0: the p-value is the
/// binomial tail, increasing in eps, and bisection finds its one crossing. delta > 0: the delta
/// term need not increase in eps, so the first crossing is located on a scan of step 1/64 before
/// the bisection (docs/math.md §11.2). Up to 1e4 (the bracket): v = r = m guesses all right at
/// small beta give large bounds, never infinite ones.
double one_run_epsilon_lower(const OneRunCounts& counts, double delta, double beta);

/// One guessing rule: IN for the `positives` highest scores, OUT for the `negatives` lowest.
struct OneRunGuess {
  long positives = 0;  // k+
  long negatives = 0;  // k-
};

/// Plays one guessing rule: canaries ranked by score (ties broken by canary index, which is fixed
/// before inclusion is drawn, so the guesses still depend on the run only through its output).
/// InputError for sizes that differ or k+ + k- > m.
OneRunCounts one_run_counts(std::span<const double> scores, std::span<const std::uint8_t> included,
                            OneRunGuess guess);

/// The default grid of rules for m canaries: k in {1, 2, 5} x 10^j, positive guesses only (k, 0)
/// for k <= m and symmetric (k, k) for 2k <= m. Small on purpose: the confidence is split over it.
std::vector<OneRunGuess> one_run_default_guesses(long canaries);

struct OneRunAudit {
  double epsilon_lower = 0.0;  // the largest bound over the rules (0 if none rejects eps = 0)
  double delta = 0.0;
  double confidence = 0.0;  // 1 - beta, for the maximum over all rules together
  OneRunGuess best;         // the rule that gave epsilon_lower
  OneRunCounts counts;      // its game
  long rules = 0;           // how many rules the confidence was split over
};

/// The audit over a grid of rules chosen before the run (`guesses`, or the default grid when
/// empty): each rule's bound at beta / G for G rules (Bonferroni), the maximum reported, so that
/// P[epsilon_lower > eps*] <= sum over rules <= beta. A single rule fixed in advance keeps all of
/// beta. Rules with k+ + k- > m are dropped before G is counted.
OneRunAudit one_run_audit(std::span<const double> scores, std::span<const std::uint8_t> included,
                          double delta, double beta, std::span<const OneRunGuess> guesses = {});

/// Which of m canaries a run includes: each independently with probability 1/2, canary c from its
/// own stream keyed (seed, canary_inclusion, c), so the draw does not depend on the rank layout.
std::vector<std::uint8_t> draw_canary_inclusion(std::uint64_t seed, long canaries);

}  // namespace fluence
