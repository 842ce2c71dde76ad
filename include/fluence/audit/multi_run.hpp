#pragma once
// The multi-run audit's statistics (docs/math.md §11.4): N runs with a target (client or record)
// and N without, one score per run from a distinguisher (higher: "with" likelier). If the mechanism
// is (eps, delta)-DP, every test "score >= t" has TPR <= e^eps FPR + delta and, from the other
// neighbour's side, TNR <= e^eps FNR + delta. Two statistics:
//  - a lower bound: exact Clopper-Pearson bounds on TPR and FPR turn either inequality into
//    eps >= log((TPR_lo - delta) / FPR_hi) or log((TNR_lo - delta) / FNR_hi), at confidence
//    1 - beta. Choosing the threshold on the same runs would overstate the confidence, so the runs
//    are split: the first half of each side chooses the threshold and the direction, the second
//    half alone gives the bound;
//  - an estimate: Gaussians fitted to both sides, mu = |m_1 - m_0| / sigma (sigma pooled), and the
//    eps at delta of the Gaussian mechanism with sensitivity / noise = mu (Balle & Wang 2018).
#include <span>

#include "fluence/audit/canary_estimate.hpp"
#include "fluence/audit/membership_inference.hpp"

namespace fluence {

struct MultiRunBound {
  double epsilon_lower = 0.0;  // 0 when no threshold gives a positive bound
  double delta = 0.0;
  double confidence = 0.0;      // 1 - beta
  double threshold = 0.0;       // the test is "score >= threshold" (chosen on the first halves)
  bool from_negatives = false;  // the bound came from TNR <= e^eps FNR + delta
  long with_runs = 0;           // runs with the target in the evaluation half
  long without_runs = 0;        // and without
  long with_above = 0;          // of them, scores >= threshold
  long without_above = 0;
};

/// The Clopper-Pearson lower bound on eps at confidence 1 - beta. Runs must come in the order they
/// were run (or any order fixed before their scores were seen): the first floor(n/2) of each side
/// select, the rest evaluate. Candidate thresholds are the distinct scores of the selection half
/// (at most 512 of them, evenly spaced order statistics, when there are more); the choice maximizes
/// the bound computed on the selection half itself, with Wilson intervals in place of
/// Clopper-Pearson (closed form; the choice only has to ignore the evaluation half). The evaluation
/// bound takes TPR_lo and FPR_hi at beta/2 each: both hold with probability >= 1 - beta, and so do
/// both directions' bounds, since TNR_lo = 1 - FPR_hi and FNR_hi = 1 - TPR_lo. InputError for fewer
/// than 4 runs a side, delta outside [0, 1) or beta outside (0, 1).
MultiRunBound multi_run_epsilon_lower(std::span<const double> with_target,
                                      std::span<const double> without_target, double delta,
                                      double beta);

struct MultiRunGaussianEstimate {
  GaussianFit with_target;
  GaussianFit without_target;
  double mu = 0.0;  // |mean difference| / pooled standard deviation
  double delta = 0.0;
  double epsilon = 0.0;
};

/// The Gaussian-fit estimate (an estimate, with no confidence attached). The pooled standard
/// deviation is sqrt((s_0^2 + s_1^2) / 2), the equal-variance model of the Gaussian mechanism.
MultiRunGaussianEstimate multi_run_gaussian_estimate(std::span<const double> with_target,
                                                     std::span<const double> without_target,
                                                     double delta);

/// Everything a multi-run audit reports of one distinguisher's scores.
struct MultiRunAudit {
  MultiRunBound bound;
  /// NaN epsilon (and mu) when a side has no spread: no Gaussian fits.
  MultiRunGaussianEstimate estimate;
  RocSummary roc;  // "with" runs as members: the ROC of the tests "score >= t"
};

/// multi_run_epsilon_lower, multi_run_gaussian_estimate and summarize_roc of the same runs (in run
/// order), with their InputErrors.
MultiRunAudit multi_run_audit(std::span<const double> with_target,
                              std::span<const double> without_target, double delta, double beta);

}  // namespace fluence
