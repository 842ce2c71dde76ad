// Seed 004 Lemma 1 (federated point estimation) at 1-4 ranks: the simulated server variance
// against sigma_s^2(r), and r* against a grid search and the paper's closed form.
#include <gtest/gtest.h>

#include <cmath>

#include "fluence/privacy/point_estimation.hpp"
#include "support/default_deck.hpp"

namespace fluence {
namespace {

PointEstimationConfig small_config() {
  PointEstimationConfig config = PointEstimationConfig::from_deck(default_deck());
  config.clients = 50;
  config.opt_out_fraction = 0.2;
  config.samples = 5;
  config.tau2 = 0.5;
  config.beta2 = 2.0;
  config.gamma2 = 0.02;
  config.ratios = {0.1, 0.9};
  config.trials = 20000;
  config.seed = 9;
  return config;
}

// A variance estimated from M independent rounds has relative standard error sqrt(2 / M) = 1%
// here; 5% is five standard errors (the bound).
TEST(PointEstimation, SimulatedVarianceMatchesLemma1) {
  const PointEstimationResult result = simulate_point_estimation(small_config());
  ASSERT_EQ(result.ratios.size(), 3u);  // 0.1, 0.9 and r*
  for (std::size_t k = 0; k < 3; ++k)
    EXPECT_NEAR(result.empirical_variance[k] / result.theoretical_variance[k], 1.0, 0.05)
        << "r = " << result.ratios[k];
}

// r* minimizes sigma_s^2 (grid search), and sigma_s^2(r*) is the paper's closed form
// (1/N) sigma_c^2 (sigma_c^2 + N_p gamma^2) / (sigma_c^2 + rho_np N_p gamma^2).
TEST(PointEstimation, OptimalRatioIsLemma1s) {
  const PointEstimationConfig config = small_config();
  const double r_star = optimal_ratio(config);
  const double best = server_variance(config, r_star);
  for (int j = 0; j <= 2000; ++j) EXPECT_GE(server_variance(config, j / 1000.0), best - 1e-15);
  const double sc = config.client_variance(), np = 40.0, rho = 0.2;
  const double closed = sc * (sc + np * config.gamma2) / (sc + rho * np * config.gamma2) / 50.0;
  EXPECT_NEAR(best, closed, 1e-14);
}

}  // namespace
}  // namespace fluence
