// The multi-run audit's Clopper-Pearson bound and Gaussian-fit estimate (docs/math.md §11.4).
#include "fluence/audit/multi_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "fluence/audit/ldp_audit.hpp"
#include "fluence/core/error.hpp"

namespace fluence {

namespace {

constexpr std::size_t kMaxCandidates = 512;

struct TestBound {
  double epsilon = 0.0;
  bool from_negatives = false;
};

// Both directions' bounds for one test from the bounds on its TPR and FPR: eps >= log((TPR_lo -
// delta) / FPR_hi) and log((TNR_lo - delta) / FNR_hi).
TestBound bound_from_rates(double tpr_low, double fpr_high, double delta) {
  // Clopper-Pearson is symmetric in successes and failures: the TNR's lower bound is 1 - FPR_hi
  // and the FNR's upper bound 1 - TPR_lo, at the same level and on the same events.
  const double tnr_low = 1.0 - fpr_high, fnr_high = 1.0 - tpr_low;
  TestBound bound;
  if (tpr_low > delta) bound.epsilon = std::max(0.0, std::log((tpr_low - delta) / fpr_high));
  if (tnr_low > delta && fnr_high > 0.0) {
    const double other = std::log((tnr_low - delta) / fnr_high);
    if (other > bound.epsilon) bound = {other, true};
  }
  return bound;
}

// Clopper-Pearson at one-sided level alpha: what the reported bound uses.
TestBound exact_bound(long with_above, long with_runs, long without_above, long without_runs,
                      double delta, double alpha) {
  return bound_from_rates(clopper_pearson_lower(with_above, with_runs, alpha),
                          clopper_pearson_upper(without_above, without_runs, alpha), delta);
}

// The Wilson score interval at the normal quantile z: a closed-form stand-in for Clopper-Pearson
// that only chooses the threshold (any rule that looks at the selection half alone keeps the
// evaluation's confidence) and costs no bisection per candidate.
double wilson(long successes, long trials, double z, double sign) {
  const double n = static_cast<double>(trials), p = successes / n, z2 = z * z;
  const double centre = p + z2 / (2.0 * n);
  const double spread = z * std::sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n));
  return std::clamp((centre + sign * spread) / (1.0 + z2 / n), 0.0, 1.0);
}

// The standard normal quantile at 1 - alpha, by bisection on erfc (once per audit).
double normal_upper_quantile(double alpha) {
  double low = 0.0, high = 40.0;
  for (int i = 0; i < 200; ++i) {
    const double middle = 0.5 * (low + high);
    (0.5 * std::erfc(middle / std::sqrt(2.0)) > alpha ? low : high) = middle;
  }
  return high;
}

// How many of `sorted` (ascending) are >= threshold.
long count_at_least(const std::vector<double>& sorted, double threshold) {
  return static_cast<long>(sorted.end() -
                           std::lower_bound(sorted.begin(), sorted.end(), threshold));
}

std::vector<double> sorted_copy(std::span<const double> values) {
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

void check_scores(std::span<const double> scores, const char* side) {
  if (scores.size() < 4)
    throw InputError(fmt::format("multi-run audit: {} runs {} the target (at least 4 needed)",
                                 scores.size(), side));
  for (const double s : scores)
    if (std::isnan(s)) throw InputError(fmt::format("multi-run audit: a score {} is NaN", side));
}

}  // namespace

MultiRunBound multi_run_epsilon_lower(std::span<const double> with_target,
                                      std::span<const double> without_target, double delta,
                                      double beta) {
  check_scores(with_target, "with");
  check_scores(without_target, "without");
  if (!(delta >= 0.0 && delta < 1.0))
    throw InputError(fmt::format("multi-run audit: delta {} outside [0, 1)", delta));
  if (!(beta > 0.0 && beta < 1.0))
    throw InputError(fmt::format("multi-run audit: beta {} outside (0, 1)", beta));
  const double alpha = beta / 2.0;
  const std::size_t with_split = with_target.size() / 2, without_split = without_target.size() / 2;
  const std::vector<double> with_select = sorted_copy(with_target.first(with_split));
  const std::vector<double> without_select = sorted_copy(without_target.first(without_split));
  const std::vector<double> with_eval = sorted_copy(with_target.subspan(with_split));
  const std::vector<double> without_eval = sorted_copy(without_target.subspan(without_split));

  std::vector<double> candidates(with_select);
  candidates.insert(candidates.end(), without_select.begin(), without_select.end());
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  if (candidates.size() > kMaxCandidates) {
    std::vector<double> spaced(kMaxCandidates);
    for (std::size_t i = 0; i < kMaxCandidates; ++i)
      spaced[i] = candidates[i * (candidates.size() - 1) / (kMaxCandidates - 1)];
    candidates = std::move(spaced);
  }

  // The selection: the threshold whose bound, computed on the selection half (Wilson intervals at
  // the same level), is largest.
  const double z = normal_upper_quantile(alpha);
  const long with_n = static_cast<long>(with_select.size());
  const long without_n = static_cast<long>(without_select.size());
  double best_threshold = candidates.front(), best_epsilon = -1.0;
  for (const double t : candidates) {
    const TestBound b =
        bound_from_rates(wilson(count_at_least(with_select, t), with_n, z, -1.0),
                         wilson(count_at_least(without_select, t), without_n, z, 1.0), delta);
    if (b.epsilon > best_epsilon) {
      best_epsilon = b.epsilon;
      best_threshold = t;
    }
  }

  MultiRunBound result;
  result.delta = delta;
  result.confidence = 1.0 - beta;
  result.threshold = best_threshold;
  result.with_runs = static_cast<long>(with_eval.size());
  result.without_runs = static_cast<long>(without_eval.size());
  result.with_above = count_at_least(with_eval, best_threshold);
  result.without_above = count_at_least(without_eval, best_threshold);
  const TestBound evaluated = exact_bound(result.with_above, result.with_runs, result.without_above,
                                          result.without_runs, delta, alpha);
  result.epsilon_lower = evaluated.epsilon;
  result.from_negatives = evaluated.from_negatives;
  return result;
}

MultiRunGaussianEstimate multi_run_gaussian_estimate(std::span<const double> with_target,
                                                     std::span<const double> without_target,
                                                     double delta) {
  MultiRunGaussianEstimate estimate;
  estimate.with_target = fit_gaussian(with_target);
  estimate.without_target = fit_gaussian(without_target);
  estimate.delta = delta;
  const double pooled =
      std::sqrt(0.5 * (estimate.with_target.std * estimate.with_target.std +
                       estimate.without_target.std * estimate.without_target.std));
  if (pooled == 0.0) throw InputError("multi-run audit: the scores have no spread");
  estimate.mu = std::abs(estimate.with_target.mean - estimate.without_target.mean) / pooled;
  estimate.epsilon = gaussian_pair_epsilon(0.0, 1.0, estimate.mu, 1.0, delta);
  return estimate;
}

MultiRunAudit multi_run_audit(std::span<const double> with_target,
                              std::span<const double> without_target, double delta, double beta) {
  MultiRunAudit audit;
  audit.bound = multi_run_epsilon_lower(with_target, without_target, delta, beta);
  audit.roc = summarize_roc(with_target, without_target);
  if (fit_gaussian(with_target).std > 0.0 || fit_gaussian(without_target).std > 0.0) {
    audit.estimate = multi_run_gaussian_estimate(with_target, without_target, delta);
  } else {
    constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    audit.estimate.with_target = fit_gaussian(with_target);
    audit.estimate.without_target = fit_gaussian(without_target);
    audit.estimate.delta = delta;
    audit.estimate.mu = nan;
    audit.estimate.epsilon = nan;
  }
  return audit;
}

}  // namespace fluence
