// The RDP accountant against published reference values (tensorflow/privacy's
// compute_dp_sgd_privacy tests and dp_accounting's RDP tests) and against closed forms.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/privacy/rdp_accountant.hpp"

namespace fluence {
namespace {

// dp_accounting rdp_privacy_accountant_test (sigma 2.5, q 0.01, 50 steps); the reference values
// are given to 9 digits, rtol 1e-4 as in the issue (fractional orders use a truncated series).
TEST(RdpAccountant, MatchesDpAccountingReferenceValues) {
  const double q = 0.01, sigma = 2.5;
  EXPECT_NEAR(50 * sampled_gaussian_rdp(q, sigma, 2.5), 1.08548710e-3, 1e-4 * 1.08548710e-3);
  EXPECT_NEAR(50 * sampled_gaussian_rdp(q, sigma, 5.0), 2.18075656e-3, 1e-4 * 2.18075656e-3);
  EXPECT_NEAR(50 * sampled_gaussian_rdp(q, sigma, 50.0), 2.38460375e-2, 1e-4 * 2.38460375e-2);
}

// tensorflow/privacy compute_dp_sgd_privacy_test: eps after ceil(epochs N / batch) steps at
// q = batch / N, with the improved conversion; the optimum is at an integer order, where the RDP
// is an exact finite sum, so the 10 printed digits must agree (rtol 1e-9).
TEST(RdpAccountant, MatchesTensorflowPrivacyDpSgdValues) {
  const PrivacySpent mnist = dp_sgd_epsilon(150.0 / 60000.0, 1.3, 6000, 1e-5);
  EXPECT_NEAR(mnist.epsilon, 0.7242234026, 1e-9 * 0.7242234026);
  EXPECT_EQ(mnist.order, 19.0);
  EXPECT_FALSE(mnist.order_at_edge);
  const PrivacySpent large = dp_sgd_epsilon(100.0 / 1e5, 1.0, 30000, 1e-7);
  EXPECT_NEAR(large.epsilon, 1.4154988495, 1e-9 * 1.4154988495);
  EXPECT_EQ(large.order, 13.0);
}

// Without subsampling the mechanism is the Gaussian mechanism, RDP alpha / (2 sigma^2) exactly.
TEST(RdpAccountant, FullBatchIsTheGaussianMechanism) {
  for (double alpha : {1.5, 2.0, 7.25, 64.0})
    EXPECT_DOUBLE_EQ(sampled_gaussian_rdp(1.0, 1.7, alpha), alpha / (2 * 1.7 * 1.7));
  EXPECT_EQ(sampled_gaussian_rdp(0.0, 1.0, 3.0), 0.0);
}

// The fractional series and the integer binomial sum are two formulas for one function of alpha:
// they must join continuously at integer orders (the gap from alpha = 5 to 5 + 1e-7 is the
// derivative times 1e-7, below 1e-9 relative here).
TEST(RdpAccountant, FractionalSeriesJoinsIntegerSum) {
  for (double q : {0.001, 0.01, 0.2})
    for (double sigma : {0.7, 1.0, 3.0})
      for (double alpha : {2.0, 5.0, 32.0}) {
        const double exact = sampled_gaussian_rdp(q, sigma, alpha);
        const double nearby = sampled_gaussian_rdp(q, sigma, alpha + 1e-7);
        EXPECT_NEAR(nearby, exact, 1e-6 * exact + 1e-15) << q << " " << sigma << " " << alpha;
      }
}

// The conversion is monotone: more noise, smaller eps; more steps, larger eps.
TEST(RdpAccountant, EpsilonIsMonotone) {
  double previous = INFINITY;
  for (double sigma : {0.6, 0.8, 1.0, 1.5, 3.0}) {
    const double eps = dp_sgd_epsilon(0.01, sigma, 1000, 1e-5).epsilon;
    EXPECT_LT(eps, previous);
    previous = eps;
  }
  EXPECT_LT(dp_sgd_epsilon(0.01, 1.0, 100, 1e-5).epsilon,
            dp_sgd_epsilon(0.01, 1.0, 200, 1e-5).epsilon);
}

// The inverse recovers the noise multiplier of the reference case, to the bisection tolerance
// (eps is smooth in sigma, so 1e-10 relative in sigma gives ~1e-9 in eps).
TEST(RdpAccountant, NoiseForEpsilonInvertsTheReference) {
  const double sigma = noise_for_epsilon(150.0 / 60000.0, 6000, 0.7242234026, 1e-5);
  EXPECT_NEAR(sigma, 1.3, 1e-7);
  EXPECT_LE(dp_sgd_epsilon(150.0 / 60000.0, sigma, 6000, 1e-5).epsilon, 0.7242234026 + 1e-12);
  EXPECT_THROW(noise_for_epsilon(1.0, 1000000, 1e-6, 1e-5), InputError);
}

TEST(RdpAccountant, AccountantComposesSteps) {
  RdpAccountant accountant;
  accountant.add_steps(0.01, 1.1, 300);
  accountant.add_steps(0.01, 1.1, 700);
  const PrivacySpent split = accountant.spent(1e-5);
  const PrivacySpent whole = dp_sgd_epsilon(0.01, 1.1, 1000, 1e-5);
  EXPECT_NEAR(split.epsilon, whole.epsilon, 1e-12 * whole.epsilon);
  EXPECT_EQ(split.order, whole.order);
}

// The accountant keeps one step's RDP for the last (q, sigma): steps at changing rates and noise
// compose exactly as with each step's RDP computed afresh.
TEST(RdpAccountant, RepeatedAndChangingStepsMatchFreshSums) {
  RdpAccountant accountant;
  const double steps[][2] = {{0.05, 1.0}, {0.05, 1.0}, {0.02, 1.0}, {0.02, 1.3}, {0.05, 1.0}};
  std::vector<double> expected(accountant.orders().size(), 0.0);
  for (auto [q, sigma] : steps) {
    accountant.add_steps(q, sigma, 3);
    for (std::size_t k = 0; k < expected.size(); ++k)
      expected[k] += 3.0 * sampled_gaussian_rdp(q, sigma, accountant.orders()[k]);
  }
  for (std::size_t k = 0; k < expected.size(); ++k) EXPECT_EQ(accountant.rdp()[k], expected[k]);
}

}  // namespace
}  // namespace fluence
