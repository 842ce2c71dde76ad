// The multi-run audit: the Gaussian-fit estimate within 10% of the analytic eps of the Gaussian
// mechanism at eps = 1, 2, 4 (issue 39's bar), the Clopper-Pearson bound recomputed from its
// counts, its soundness over hundreds of seeds, and a planted fault (noise scaled by 1/4) that it
// catches.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../../src/privacy/loss_distribution.hpp"
#include "fluence/audit/ldp_audit.hpp"
#include "fluence/audit/multi_run.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/fl/purposes.hpp"
#include "fluence/privacy/purposes.hpp"

namespace fluence {
namespace {

// The noise z of the sensitivity-1 Gaussian mechanism with eps(delta) = target, from privacy/'s
// exact delta(eps) (Balle & Wang 2018) by nested bisection: independent of audit/.
double noise_for_epsilon(double target, double delta) {
  auto delta_at = [](double z, double eps) {
    return static_cast<double>(
        privacy_loss::hockey_stick(privacy_loss::Direction::remove, 1.0, z, eps));
  };
  double low = 0.05, high = 50.0;
  for (int i = 0; i < 100; ++i) {
    const double z = 0.5 * (low + high);
    // eps(z) > target iff delta(z, target) > delta.
    (delta_at(z, target) > delta ? low : high) = z;
  }
  return high;
}

// N runs of the Gaussian mechanism with (output 1 + z xi) and without (z xi) the target: the
// worst-case one-step canary, each run its own stream of the server's noise purpose.
struct Runs {
  std::vector<double> with_target, without_target;
};
Runs gaussian_runs(std::uint64_t seed, long n, double z) {
  Runs runs;
  for (long i = 0; i < n; ++i) {
    Stream with(seed, purpose::server_noise, 1, static_cast<std::uint64_t>(i));
    Stream without(seed, purpose::server_noise, 0, static_cast<std::uint64_t>(i));
    runs.with_target.push_back(1.0 + z * with.normal());
    runs.without_target.push_back(z * without.normal());
  }
  return runs;
}

// 2 10^5 runs a side: the estimated mu = |m_1 - m_0| / sigma has a standard error of
// sqrt(2 / N) = 0.0032 (in units of mu: 1.4% at eps = 1, where mu = 0.23, less above), and eps(mu)
// changes by at most ~1.3x mu's relative change here, so 10% is more than 5 standard errors; a
// wrong scale (sigma^2 for sigma, a missing pooled factor sqrt 2) fails by far more.
TEST(MultiRun, GaussianFitEstimateWithinTenPercentAtEpsilonOneTwoFour) {
  const double delta = 1e-5;
  for (double eps : {1.0, 2.0, 4.0}) {
    const double z = noise_for_epsilon(eps, delta);
    const Runs runs = gaussian_runs(21, 200'000, z);
    const MultiRunGaussianEstimate estimate =
        multi_run_gaussian_estimate(runs.with_target, runs.without_target, delta);
    EXPECT_NEAR(estimate.epsilon, eps, 0.1 * eps) << "z " << z;
    EXPECT_NEAR(estimate.mu, 1.0 / z, 0.03 / z);
  }
}

// The reported bound is what its counts give at beta/2 per Clopper-Pearson bound, in the direction
// it names; the counts are those of the evaluation half (the second half of each side).
TEST(MultiRun, BoundIsRecomputedFromItsCounts) {
  const double delta = 1e-5, beta = 0.05;
  const Runs runs = gaussian_runs(5, 2000, 0.4);
  const MultiRunBound bound =
      multi_run_epsilon_lower(runs.with_target, runs.without_target, delta, beta);
  long with_above = 0, without_above = 0;
  for (std::size_t i = 1000; i < 2000; ++i) {
    with_above += runs.with_target[i] >= bound.threshold;
    without_above += runs.without_target[i] >= bound.threshold;
  }
  EXPECT_EQ(bound.with_runs, 1000);
  EXPECT_EQ(bound.without_runs, 1000);
  EXPECT_EQ(bound.with_above, with_above);
  EXPECT_EQ(bound.without_above, without_above);
  const double tpr = clopper_pearson_lower(with_above, 1000, beta / 2);
  const double fpr = clopper_pearson_upper(without_above, 1000, beta / 2);
  const double expected = bound.from_negatives ? std::log((1.0 - fpr - delta) / (1.0 - tpr))
                                               : std::log((tpr - delta) / fpr);
  EXPECT_NEAR(bound.epsilon_lower, expected, 1e-12);
  EXPECT_GT(bound.epsilon_lower, 1.0);  // z = 0.4 leaks far more than eps = 1: plenty to see
  EXPECT_EQ(bound.confidence, 1.0 - beta);
}

// Soundness over 300 seeds at 95% confidence, for the Gaussian mechanism (eps = 2 at delta = 1e-5,
// 1000 runs a side) and for eps-randomized response (eps = 1, delta = 0, 2000 runs a side, where
// the threshold test is optimal): at most beta of the seeds may exceed eps, 15 expected at worst;
// the check allows 15 + 3 sd = 26. With the noise scaled by 1/4 (a planted fault), the bound must
// exceed the claimed eps.
TEST(MultiRun, BoundIsSoundOverSeedsAndCatchesTooLittleNoise) {
  const double delta = 1e-5, eps = 2.0, z = noise_for_epsilon(eps, delta);
  int above = 0;
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    const Runs runs = gaussian_runs(seed, 1000, z);
    above +=
        multi_run_epsilon_lower(runs.with_target, runs.without_target, delta, 0.05).epsilon_lower >
        eps;
  }
  EXPECT_LE(above, 26);
  const Runs weak = gaussian_runs(3, 1000, z / 4.0);
  EXPECT_GT(
      multi_run_epsilon_lower(weak.with_target, weak.without_target, delta, 0.05).epsilon_lower,
      eps);

  const double rr_eps = 1.0, keep = 1.0 / (1.0 + std::exp(-rr_eps));
  int rr_above = 0;
  double rr_largest = 0.0;
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    std::vector<double> with_target, without_target;
    for (long i = 0; i < 2000; ++i) {
      Stream with(seed, purpose::randomized_response, 1, static_cast<std::uint64_t>(i));
      Stream without(seed, purpose::randomized_response, 0, static_cast<std::uint64_t>(i));
      with_target.push_back(with.uniform() < keep ? 1.0 : 0.0);
      without_target.push_back(without.uniform() < keep ? 0.0 : 1.0);
    }
    const double bound =
        multi_run_epsilon_lower(with_target, without_target, 0.0, 0.05).epsilon_lower;
    rr_above += bound > rr_eps;
    rr_largest = std::max(rr_largest, bound);
  }
  EXPECT_LE(rr_above, 26);
  EXPECT_GT(rr_largest, 0.7 * rr_eps);  // 1000 evaluation runs a side see most of eps
}

TEST(MultiRun, RefusesBadArguments) {
  const std::vector<double> three = {1.0, 2.0, 3.0}, four = {1.0, 2.0, 3.0, 4.0};
  EXPECT_THROW(multi_run_epsilon_lower(three, four, 0.0, 0.05), InputError);
  EXPECT_THROW(multi_run_epsilon_lower(four, four, 1.0, 0.05), InputError);
  EXPECT_THROW(multi_run_epsilon_lower(four, four, 0.0, 1.0), InputError);
  EXPECT_THROW(multi_run_gaussian_estimate(std::vector<double>{1.0, 1.0},
                                           std::vector<double>{2.0, 2.0}, 1e-5),
               InputError);
}

// multi_run_audit (what `fluence audit --collect` reports) is its three parts on the same runs,
// and a side without spread leaves the estimate NaN instead of refusing the audit.
TEST(MultiRun, AuditCombinesBoundEstimateAndRoc) {
  const Runs runs = gaussian_runs(17, 400, 0.5);
  const MultiRunAudit audit = multi_run_audit(runs.with_target, runs.without_target, 1e-5, 0.05);
  const MultiRunBound bound =
      multi_run_epsilon_lower(runs.with_target, runs.without_target, 1e-5, 0.05);
  EXPECT_EQ(audit.bound.epsilon_lower, bound.epsilon_lower);
  EXPECT_EQ(audit.bound.threshold, bound.threshold);
  EXPECT_EQ(audit.estimate.epsilon,
            multi_run_gaussian_estimate(runs.with_target, runs.without_target, 1e-5).epsilon);
  const RocCurve roc = roc_curve(runs.with_target, runs.without_target);
  EXPECT_EQ(audit.roc.auc, roc_auc(roc));
  EXPECT_EQ(audit.roc.tpr_at_fpr_0_01, tpr_at_fpr(roc, 0.01));
  EXPECT_EQ(audit.roc.tpr_at_fpr_0_001, tpr_at_fpr(roc, 0.001));
  EXPECT_EQ(audit.roc.roc.threshold.size(), roc.threshold.size());
  // mu = 2 here: an AUC of Phi(mu / sqrt 2) = 0.92 within sampling error (0.02 at 400 a side).
  EXPECT_NEAR(audit.roc.auc, 0.5 * std::erfc(-2.0 / 2.0), 0.03);

  const std::vector<double> flat(6, 0.0);
  const MultiRunAudit none = multi_run_audit(flat, flat, 1e-5, 0.05);
  EXPECT_TRUE(std::isnan(none.estimate.epsilon));
  EXPECT_EQ(none.bound.epsilon_lower, 0.0);
  EXPECT_EQ(none.roc.auc, 0.5);
}

}  // namespace
}  // namespace fluence
