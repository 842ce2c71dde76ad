// The tests behind the trust flags of the influence outputs (issue 41): the statistics over the
// trusted retrains against the full ones on the kept subset, the saddle test's threshold, and the
// residual test (CG only; a NaN residual is above any tolerance).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "fluence/influence/estimators.hpp"
#include "fluence/influence/trust.hpp"

namespace fluence {
namespace {

TEST(Trust, StatisticsOverTheKeptEntriesAreThoseOfTheSubset) {
  const std::vector<double> a = {0.3, -1.0, 2.5, 0.7, 9.0, -4.0};
  const std::vector<double> b = {0.1, -0.5, 3.0, 0.2, -7.0, 1.0};
  const std::vector<char> keep = {1, 1, 1, 1, 0, 0};
  const KeptStatistics kept = statistics_over(a, b, keep);
  EXPECT_EQ(kept.count, 4);
  // The first four ranks agree exactly: rho = 1; the MAE by hand: (0.2 + 0.5 + 0.5 + 0.5) / 4.
  EXPECT_DOUBLE_EQ(kept.spearman, 1.0);
  EXPECT_DOUBLE_EQ(kept.mae, 1.7 / 4.0);
  // All kept: bitwise the full statistics.
  const KeptStatistics all = statistics_over(a, b, std::vector<char>(a.size(), 1));
  EXPECT_EQ(all.spearman, spearman(a, b));
  EXPECT_EQ(all.mae, mean_absolute_error(a, b));
  // Too few to rank: NaN, not a number that looks like a result.
  EXPECT_TRUE(std::isnan(statistics_over(a, b, {1, 0, 0, 0, 0, 0}).spearman));
  const KeptStatistics none = statistics_over(a, b, std::vector<char>(a.size(), 0));
  EXPECT_EQ(none.count, 0);
  EXPECT_TRUE(std::isnan(none.mae));
}

TEST(Trust, SaddleIsNegativeCurvatureAboveRounding) {
  EXPECT_TRUE(is_saddle(-1e-3, 2.0));
  EXPECT_FALSE(is_saddle(-1e-13, 2.0));  // within the products' rounding of 0: flat, not a saddle
  EXPECT_FALSE(is_saddle(1e-3, 2.0));
}

TEST(Trust, ResidualAboveTheCgTolerance) {
  IhvpConfig config;
  config.method = IhvpMethod::cg;
  config.rtol = 1e-10;
  EXPECT_FALSE(residual_above_tolerance(config, 1e-10));
  EXPECT_TRUE(residual_above_tolerance(config, 2e-10));
  EXPECT_TRUE(residual_above_tolerance(config, std::numeric_limits<double>::quiet_NaN()));
  config.method = IhvpMethod::lissa;  // no residual target
  EXPECT_FALSE(residual_above_tolerance(config, 0.5));
}

TEST(Trust, IdListShowsTheFirstAndCountsTheRest) {
  EXPECT_EQ(id_list({3, 7, 12}), "3, 7, 12");
  EXPECT_EQ(id_list({1, 2, 3, 4}, 2), "1, 2 and 2 more");
}

}  // namespace
}  // namespace fluence
