// The LDP audit: Clopper-Pearson bounds against binomial tails summed term by term; the measured
// eps of k-ary randomized response within 5% of the configured eps for k = 2..16 and eps =
// 0.5..8, the attribute-inference accuracy within 1 point of the Bayes bound; a sound lower bound
// over 100 seeds; and planted faults (too little randomness) that the lower bound catches.
#include <gtest/gtest.h>

#include <cmath>

#include "fluence/audit/ldp_audit.hpp"
#include "fluence/core/error.hpp"
#include "fluence/privacy/randomized_response.hpp"

namespace fluence {
namespace {

// P(X >= x) and P(X <= x) for X ~ Binomial(n, p), summed from the probability mass function.
double binomial_upper_tail(long x, long n, double p) {
  double sum = 0.0;
  for (long k = x; k <= n; ++k)
    sum += std::exp(std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) +
                    k * std::log(p) + (n - k) * std::log1p(-p));
  return sum;
}

// The bounds are where the tails equal alpha; the bisection stops at 1e-14 in p, so the tails
// agree with alpha to about 1e-12 (their derivative in p is O(n)).
TEST(ClopperPearson, BoundsAreWhereTheBinomialTailsEqualAlpha) {
  const long n = 40;
  for (long x : {1L, 5L, 20L, 39L}) {
    for (double alpha : {0.025, 0.001}) {
      const double low = clopper_pearson_lower(x, n, alpha);
      EXPECT_NEAR(binomial_upper_tail(x, n, low), alpha, 1e-10) << x << " " << alpha;
      const double high = clopper_pearson_upper(x, n, alpha);
      EXPECT_NEAR(1.0 - binomial_upper_tail(x + 1, n, high), alpha, 1e-10) << x << " " << alpha;
      EXPECT_LT(low, static_cast<double>(x) / n);
      EXPECT_GT(high, static_cast<double>(x) / n);
    }
  }
  EXPECT_EQ(clopper_pearson_lower(0, n, 0.05), 0.0);
  EXPECT_EQ(clopper_pearson_upper(n, n, 0.05), 1.0);
}

// The bar: k = 2..16, eps = 0.5..8, the draws ldp_audit_draws asks for (three standard
// errors within 5%), a fixed seed.
TEST(LdpAudit, MeasuredEpsilonWithinFivePercentAndInferenceAtTheBayesBound) {
  for (int k : {2, 3, 8, 16}) {
    for (double eps : {0.5, 1.0, 2.0, 4.0, 8.0}) {
      const LdpAuditResult r = audit_randomized_response(k, eps, ldp_audit_draws(k, eps), 3);
      EXPECT_NEAR(r.epsilon_estimate, eps, 0.05 * eps) << "k " << k << " eps " << eps;
      EXPECT_LE(r.epsilon_lower, eps) << "k " << k << " eps " << eps;
      EXPECT_GT(r.epsilon_lower, 0.8 * eps) << "k " << k << " eps " << eps;
      // The accuracy is a mean of >= 10^4 draws: its standard error is below 0.005.
      EXPECT_NEAR(r.inference_accuracy, r.bayes_accuracy, 0.01) << "k " << k << " eps " << eps;
    }
  }
}

// Soundness: over 100 seeds (small audits, 95% confidence each), the lower bound of the correct
// mechanism stays below the configured eps; a failure rate of 5% would show ~5 (the bound is
// conservative: Bonferroni over outputs and directions).
TEST(LdpAudit, LowerBoundIsSoundOverAHundredSeeds) {
  int above = 0;
  for (std::uint64_t seed = 1; seed <= 100; ++seed)
    above += audit_randomized_response(4, 2.0, 20'000, seed).epsilon_lower > 2.0;
  EXPECT_LE(above, 5);
}

// Planted faults the audit must catch: randomized response run at 1.25 eps while claiming eps,
// and one that keeps the true value outright one time in five (its eps is log 9.99 = 2.30).
TEST(LdpAudit, CatchesAMechanismWeakerThanItsClaim) {
  const int k = 4;
  const double eps = 2.0;
  const LdpAuditResult scaled = audit_randomized_response(
      k, eps, ldp_audit_draws(k, eps), 5, 0.05,
      [&](std::int32_t v, Stream& s) { return randomize_value(v, k, 1.25 * eps, s); });
  EXPECT_GT(scaled.epsilon_lower, eps);
  EXPECT_GT(scaled.inference_accuracy, scaled.bayes_accuracy + 0.02);
  const LdpAuditResult leaky = audit_randomized_response(k, eps, ldp_audit_draws(k, eps), 5, 0.05,
                                                         [&](std::int32_t v, Stream& s) {
                                                           if (s.uniform() < 0.2) return v;
                                                           return randomize_value(v, k, eps, s);
                                                         });
  EXPECT_GT(leaky.epsilon_lower, eps);
}

TEST(LdpAudit, RefusesBadArguments) {
  EXPECT_THROW(audit_randomized_response(1, 1.0, 10, 1), InputError);
  EXPECT_THROW(audit_randomized_response(2, 0.0, 10, 1), InputError);
  EXPECT_THROW(audit_randomized_response(2, INFINITY, 10, 1), InputError);
  EXPECT_THROW(audit_randomized_response(2, 1.0, 0, 1), InputError);
  EXPECT_THROW(audit_randomized_response(2, 1.0, 10, 1, 1.5), InputError);
}

}  // namespace
}  // namespace fluence
