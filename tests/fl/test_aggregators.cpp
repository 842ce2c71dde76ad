// Robust aggregators against independent brute-force computations: KRUM scores from a naive double
// loop of explicit distances, the trimmed mean from a full sort per coordinate, centered clipping
// from a plain loop of Alg. 2, plus the limiting cases each rule must reduce to.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/fl/aggregators.hpp"
#include "support/scratch_files.hpp"

namespace fluence {
namespace {

std::vector<double> random_updates(int n, std::size_t p, std::uint64_t seed, double scale = 1.0) {
  Stream stream(seed, purpose::synthetic_rows);
  std::vector<double> u(static_cast<std::size_t>(n) * p);
  for (auto& v : u) v = scale * stream.normal();
  return u;
}

double squared_distance(const double* a, const double* b, std::size_t p) {
  double s = 0.0;
  for (std::size_t j = 0; j < p; ++j) s += (a[j] - b[j]) * (a[j] - b[j]);
  return s;
}

// Blanchard et al.'s score written directly: explicit distances, full sort, first n - f - 2.
std::vector<double> naive_krum_scores(const std::vector<double>& u, int n, std::size_t p, int f) {
  std::vector<double> scores(n);
  for (int i = 0; i < n; ++i) {
    std::vector<double> d;
    for (int j = 0; j < n; ++j)
      if (j != i) d.push_back(squared_distance(&u[i * p], &u[j * p], p));
    std::sort(d.begin(), d.end());
    scores[i] = std::accumulate(d.begin(), d.begin() + (n - f - 2), 0.0);
  }
  return scores;
}

// Distances from the Gram expansion lose about eps (||a||^2 + ||b||^2) each; with standard normal
// rows distances and norms are both about p, so 1e-12 relative is ~1000x that error yet far below
// any real difference between scores.
TEST(Aggregators, KrumScoresMatchNaiveDoubleLoop) {
  for (auto [n, p, f] : {std::tuple{7, std::size_t{5}, 2}, std::tuple{12, std::size_t{40}, 3},
                         std::tuple{30, std::size_t{257}, 10}, std::tuple{4, std::size_t{1}, 0}}) {
    const auto u = random_updates(n, p, 100 + n);
    std::vector<double> scores(n);
    krum_scores(u.data(), n, p, f, scores.data());
    const auto want = naive_krum_scores(u, n, p, f);
    int naive_best = 0;
    for (int i = 0; i < n; ++i) {
      EXPECT_NEAR(scores[i], want[i], 1e-12 * want[i]) << "n=" << n << " i=" << i;
      if (want[i] < want[naive_best]) naive_best = i;
    }
    EXPECT_EQ(krum_select(u.data(), n, p, f), naive_best);
  }
}

TEST(Aggregators, KrumSelectsAnHonestRowAmongFarOutliers) {
  const int n = 10, f = 3;
  const std::size_t p = 20;
  // Seven honest rows near (1, ..., 1); three outliers far away in different directions, the
  // last one placed as the first row so that an index bias would show.
  auto u = random_updates(n, p, 7, 0.1);
  for (std::size_t j = 0; j < p; ++j) {
    for (int i = 0; i < n; ++i) u[i * p + j] += 1.0;
    u[0 * p + j] += 50.0;
    u[4 * p + j] -= 80.0 * ((j % 2) ? 1.0 : -1.0);
    u[9 * p + j] += 30.0 * j;
  }
  const int chosen = krum_select(u.data(), n, p, f);
  EXPECT_NE(chosen, 0);
  EXPECT_NE(chosen, 4);
  EXPECT_NE(chosen, 9);
  std::vector<double> out(p);
  krum(u.data(), n, p, f, out.data());
  for (std::size_t j = 0; j < p; ++j) EXPECT_EQ(out[j], u[chosen * p + j]);
}

TEST(Aggregators, KrumTiesGoToTheLowestIndex) {
  const int n = 6;
  const std::size_t p = 3;
  std::vector<double> u(n * p, 0.25);  // all rows equal: every score is 0
  EXPECT_EQ(krum_select(u.data(), n, p, 1), 0);
  // Row 0 far away, rows 1..5 identical (all score 0): the first of the tied rows wins.
  std::vector<double> v(n * p, -0.5);
  v[0] = 10.0;
  EXPECT_EQ(krum_select(v.data(), n, p, 1), 1);
}

TEST(Aggregators, KrumRejectsTooFewClients) {
  const std::vector<double> u(6 * 2, 1.0);
  try {
    krum_select(u.data(), 6, 2, 2);  // n = 6 = 2f + 2
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("n > 2f+2"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(krum_select(u.data(), 6, 2, 1));
  EXPECT_THROW(krum_select(u.data(), 6, 2, -1), InputError);
  EXPECT_THROW(krum_select(u.data(), 0, 2, 0), InputError);
  std::vector<double> bad = u;
  bad[5] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(krum_select(bad.data(), 6, 2, 1), RuntimeError);
}

// Independent reference: sort every coordinate's n values, average the middle n - 2 trim.
std::vector<double> naive_trimmed_mean(const std::vector<double>& u, int n, std::size_t p,
                                       int trim) {
  std::vector<double> out(p);
  for (std::size_t j = 0; j < p; ++j) {
    std::vector<double> column;
    for (int i = 0; i < n; ++i) column.push_back(u[i * p + j]);
    std::sort(column.begin(), column.end());
    double s = 0.0;
    for (int i = trim; i < n - trim; ++i) s += column[i];
    out[j] = s / (n - 2 * trim);
  }
  return out;
}

// Same values summed in a different order: agreement to a few ulps of the largest magnitude
// (|values| <~ 5, n <= 15 terms) is the right test; 1e-13 absolute is ~100x that rounding.
TEST(Aggregators, TrimmedMeanMatchesFullSortPerCoordinate) {
  const std::size_t p = 200;  // crosses the 64-column block boundaries, with a ragged last block
  for (int n : {1, 2, 5, 15})
    for (int trim = 0; 2 * trim < n; ++trim) {
      const auto u = random_updates(n, p, 300 + n);
      std::vector<double> out(p);
      trimmed_mean(u.data(), n, p, trim, out.data());
      const auto want = naive_trimmed_mean(u, n, p, trim);
      for (std::size_t j = 0; j < p; ++j)
        EXPECT_NEAR(out[j], want[j], 1e-13) << "n=" << n << " trim=" << trim << " j=" << j;
    }
}

TEST(Aggregators, TrimmedMeanWithoutTrimmingIsTheMean) {
  const int n = 9;
  const std::size_t p = 131;
  const auto u = random_updates(n, p, 11);
  std::vector<double> trimmed(p), mean(p);
  trimmed_mean(u.data(), n, p, 0, trimmed.data());
  mean_update(u.data(), n, p, mean.data());
  for (std::size_t j = 0; j < p; ++j) EXPECT_EQ(trimmed[j], mean[j]);  // same sums, same order
  for (std::size_t j = 0; j < p; ++j) {
    double s = 0.0;
    for (int i = 0; i < n; ++i) s += u[i * p + j];
    EXPECT_NEAR(mean[j], s / n, 1e-15 * n);
  }
}

TEST(Aggregators, TrimmedMeanIgnoresExtremesAndIsDeterministic) {
  const int n = 8, trim = 2;
  const std::size_t p = 70;
  auto u = random_updates(n, p, 12);
  std::vector<double> before(p), after(p), again(p);
  trimmed_mean(u.data(), n, p, trim, before.data());
  // Pushing the two largest values of every coordinate further out changes nothing.
  for (std::size_t j = 0; j < p; ++j) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return u[a * p + j] < u[b * p + j]; });
    u[order[n - 1] * p + j] = 1e6;
    u[order[n - 2] * p + j] = 1e5;
    u[order[0] * p + j] = -1e7;
  }
  trimmed_mean(u.data(), n, p, trim, after.data());
  trimmed_mean(u.data(), n, p, trim, again.data());
  for (std::size_t j = 0; j < p; ++j) {
    EXPECT_NEAR(after[j], before[j], 1e-13);
    EXPECT_EQ(after[j], again[j]);
  }
}

TEST(Aggregators, TrimmedMeanRejectsTooMuchTrimming) {
  const std::vector<double> u(4 * 3, 1.0);
  std::vector<double> out(3);
  EXPECT_THROW(trimmed_mean(u.data(), 4, 3, 2, out.data()), InputError);  // 2*2 = n
  EXPECT_THROW(trimmed_mean(u.data(), 4, 3, -1, out.data()), InputError);
  EXPECT_NO_THROW(trimmed_mean(u.data(), 4, 3, 1, out.data()));
  EXPECT_THROW(trimmed_mean(u.data(), 4, 0, 1, out.data()), InputError);
}

// Alg. 2 written as plainly as possible, with explicit difference vectors.
std::vector<double> naive_centered_clipping(const std::vector<double>& u, int n, std::size_t p,
                                            double tau, int iterations, std::vector<double> v) {
  for (int l = 0; l < iterations; ++l) {
    std::vector<double> sum(p, 0.0);
    for (int i = 0; i < n; ++i) {
      std::vector<double> d(p);
      for (std::size_t j = 0; j < p; ++j) d[j] = u[i * p + j] - v[j];
      double norm = 0.0;
      for (double x : d) norm += x * x;
      norm = std::sqrt(norm);
      const double c = norm > 0.0 ? std::min(1.0, tau / norm) : 0.0;
      for (std::size_t j = 0; j < p; ++j) sum[j] += c * d[j];
    }
    for (std::size_t j = 0; j < p; ++j) v[j] += sum[j] / n;
  }
  return v;
}

TEST(Aggregators, CenteredClippingMatchesNaiveLoop) {
  const int n = 11;
  const std::size_t p = 33;
  const auto u = random_updates(n, p, 21);
  const auto start = random_updates(1, p, 22, 0.5);
  for (double tau : {0.1, 1.0, 5.0, 100.0})
    for (int iterations : {0, 1, 3}) {
      std::vector<double> center = start;
      centered_clipping(u.data(), n, p, tau, iterations, center.data());
      const auto want = naive_centered_clipping(u, n, p, tau, iterations, start);
      // Same operations up to the order of the norm's sum: rounding-level agreement.
      for (std::size_t j = 0; j < p; ++j) EXPECT_NEAR(center[j], want[j], 1e-13);
    }
}

TEST(Aggregators, CenteredClippingWithHugeRadiusIsTheMean) {
  const int n = 7;
  const std::size_t p = 50;
  const auto u = random_updates(n, p, 23, 3.0);
  std::vector<double> mean(p);
  mean_update(u.data(), n, p, mean.data());
  for (double tau : {1e300, std::numeric_limits<double>::infinity()}) {
    std::vector<double> center(p, 0.0);
    centered_clipping(u.data(), n, p, tau, 1, center.data());
    // From 0 with no clipping the step is (1/n) sum x_i, computed in mean_update's order.
    for (std::size_t j = 0; j < p; ++j) EXPECT_DOUBLE_EQ(center[j], mean[j]);
    // The mean is the fixed point: further iterations stay there up to rounding.
    centered_clipping(u.data(), n, p, tau, 5, center.data());
    for (std::size_t j = 0; j < p; ++j) EXPECT_NEAR(center[j], mean[j], 1e-14);
  }
}

TEST(Aggregators, CenteredClippingStepIsBoundedByTau) {
  const int n = 9;
  const std::size_t p = 25;
  const auto u = random_updates(n, p, 24, 10.0);  // every row ~50 away from 0
  for (double tau : {0.01, 0.5, 2.0})
    for (int iterations : {1, 4}) {
      std::vector<double> center(p, 0.0);
      centered_clipping(u.data(), n, p, tau, iterations, center.data());
      // Each clipped term has norm <= tau, so each iteration moves the center by <= tau.
      const std::vector<double> zero(p, 0.0);
      const double moved = std::sqrt(squared_distance(center.data(), zero.data(), p));
      EXPECT_LE(moved, iterations * tau * (1 + 1e-12));
      EXPECT_GT(moved, 0.0);
    }
}

TEST(Aggregators, CenteredClippingResistsFarOutliersAndHandlesRowsAtTheCenter) {
  const int n = 10;
  const std::size_t p = 4;
  // Eight honest rows around (1, 1, 1, 1), two at 1000: the mean is dragged to ~200, the clipped
  // center stays near the honest mean.
  auto u = random_updates(n, p, 25, 0.05);
  for (int i = 0; i < n; ++i)
    for (std::size_t j = 0; j < p; ++j) u[i * p + j] += i < 8 ? 1.0 : 1000.0;
  std::vector<double> center(p, 1.0);
  centered_clipping(u.data(), n, p, 0.5, 10, center.data());
  for (std::size_t j = 0; j < p; ++j) EXPECT_NEAR(center[j], 1.0, 0.25);

  // Rows exactly at the center: no division by zero, the center does not move.
  const std::vector<double> same(3 * 2, 0.5);
  std::vector<double> c = {0.5, 0.5};
  centered_clipping(same.data(), 3, 2, 1.0, 2, c.data());
  EXPECT_EQ(c[0], 0.5);
  EXPECT_EQ(c[1], 0.5);
}

TEST(Aggregators, CenteredClippingRejectsBadArguments) {
  const std::vector<double> u(3 * 2, 1.0);
  std::vector<double> c(2, 0.0);
  EXPECT_THROW(centered_clipping(u.data(), 3, 2, 0.0, 1, c.data()), InputError);
  EXPECT_THROW(centered_clipping(u.data(), 3, 2, -1.0, 1, c.data()), InputError);
  EXPECT_THROW(centered_clipping(u.data(), 3, 2, std::nan(""), 1, c.data()), InputError);
  EXPECT_THROW(centered_clipping(u.data(), 3, 2, 1.0, -1, c.data()), InputError);
  EXPECT_THROW(centered_clipping(u.data(), 0, 2, 1.0, 1, c.data()), InputError);
  std::vector<double> bad = u;
  bad[0] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(centered_clipping(bad.data(), 3, 2, 1.0, 1, c.data()), RuntimeError);
}

TEST(Aggregators, MeanUpdateRejectsEmptyInput) {
  std::vector<double> out(2);
  EXPECT_THROW(mean_update(out.data(), 0, 2, out.data()), InputError);
}

}  // namespace
}  // namespace fluence

namespace fluence {
namespace {

// docs/extending.md "An aggregator": a new rule is one class and one registration; the built-ins
// come first, and an unknown name lists the registered ones.
class FirstRow final : public Aggregator {
 public:
  std::string_view name() const override { return "first_row_test"; }
  void aggregate(const double* updates, int, std::size_t p, double* step) override {
    std::copy(updates, updates + p, step);
  }
};

TEST(AggregatorRegistry, TakesANewRuleAndNamesTheAllowedOnes) {
  const auto names = aggregator_names();
  ASSERT_GE(names.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 6),
            (std::vector<std::string>{"mean", "median", "trimmed_mean", "krum", "multi_krum",
                                      "centered_clipping"}));
  register_aggregator({"first_row_test", "the first update", [](const AggregatorConfig&) {
                         return std::unique_ptr<Aggregator>(new FirstRow());
                       }});
  AggregatorConfig config;
  config.name = "first_row_test";
  const std::vector<double> updates = {1.0, 2.0, 3.0, 4.0};
  std::vector<double> step(2);
  make_aggregator(config)->aggregate(updates.data(), 2, 2, step.data());
  EXPECT_EQ(step, (std::vector<double>{1.0, 2.0}));
  EXPECT_TRUE(make_aggregator({})->weighted_mean());
  config.name = "bulyan";
  testing::expect_input_error(
      [&] { make_aggregator(config); },
      {"federation.aggregator = \"bulyan\"", "\"krum\"", "\"first_row_test\""});
}

}  // namespace
}  // namespace fluence
