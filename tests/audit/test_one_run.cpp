// The one-run audit (Steinke, Nasr & Jagielski 2023): the log-space binomial tail and the p-value
// against term-by-term sums in long double; the bound at the p-value's first crossing of beta
// against a fine scan; exact soundness (the probability that the bound exceeds the true eps,
// summed over every outcome) and Monte Carlo soundness over hundreds of seeds of simulated canary
// games; the guessing rule's ties and the Bonferroni split over the grid.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "fluence/audit/canary_estimate.hpp"
#include "fluence/audit/one_run.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/fl/purposes.hpp"
#include "fluence/privacy/purposes.hpp"

namespace fluence {
namespace {

// The Binomial(n, p) probability masses in long double (range to 1e-4951), from the mode outwards
// by the ratio pmf(j + 1) / pmf(j) = (n - j) p / ((j + 1) (1 - p)): an independent computation
// (no lgamma, no log space).
std::vector<long double> binomial_masses(long n, long double p) {
  std::vector<long double> mass(static_cast<std::size_t>(n) + 1);
  const long mode = static_cast<long>(std::floor((n + 1) * p)) > n
                        ? n
                        : static_cast<long>(std::floor((n + 1) * p));
  // log pmf(mode) once, from exact sums of logs.
  long double log_mode = 0.0L;
  for (long i = 1; i <= n; ++i) log_mode += std::log(static_cast<long double>(i));
  for (long i = 1; i <= mode; ++i) log_mode -= std::log(static_cast<long double>(i));
  for (long i = 1; i <= n - mode; ++i) log_mode -= std::log(static_cast<long double>(i));
  log_mode += mode * std::log(p) + (n - mode) * std::log1p(-p);
  mass[static_cast<std::size_t>(mode)] = std::exp(log_mode);
  for (long j = mode; j < n; ++j)
    mass[static_cast<std::size_t>(j + 1)] =
        mass[static_cast<std::size_t>(j)] * (n - j) * p / ((j + 1) * (1 - p));
  for (long j = mode; j > 0; --j)
    mass[static_cast<std::size_t>(j - 1)] =
        mass[static_cast<std::size_t>(j)] * j * (1 - p) / ((n - j + 1) * p);
  return mass;
}

long double upper_tail(const std::vector<long double>& mass, long from) {
  long double sum = 0.0L;
  for (std::size_t j = static_cast<std::size_t>(std::max(0L, from)); j < mass.size(); ++j)
    sum += mass[j];
  return sum;
}

// The tail agrees with the long-double sum to 1e-10 relative: lgamma's rounding on numbers up to
// ~1e4 costs ~1e-12 in the log, the sum ~n ulps.
TEST(OneRun, LogBinomialTailMatchesTermByTermSums) {
  for (long n : {1L, 10L, 100L, 2000L}) {
    for (double p : {0.1, 0.5, 0.73, 0.99}) {
      const auto mass = binomial_masses(n, p);
      for (long k : {0L, 1L, n / 3, n / 2, (9 * n) / 10, n}) {
        const long double expected = upper_tail(mass, k);
        const double got = log_binomial_upper_tail(k, n, std::log(p), std::log1p(-p));
        EXPECT_NEAR(got, static_cast<double>(std::log(expected)), 1e-10)
            << "n " << n << " p " << p << " k " << k;
      }
    }
  }
  // A tail far below double's range: P[Bin(2000, 1/2) >= 1990] ~ 1e-578.
  const auto mass = binomial_masses(2000, 0.5L);
  const double got = log_binomial_upper_tail(1990, 2000, std::log(0.5), std::log(0.5));
  EXPECT_NEAR(got, static_cast<double>(std::log(upper_tail(mass, 1990))), 1e-9);
  EXPECT_LT(got, -1300.0);
  EXPECT_EQ(log_binomial_upper_tail(11, 10, -1.0, -1.0), -INFINITY);
}

// Steinke et al.'s p-value f(v) + 2 m delta max_i (f(v - i) - f(v)) / i, summed directly.
long double reference_p_value(const OneRunCounts& c, double epsilon, double delta) {
  const long double p = 1.0L / (1.0L + std::exp(-static_cast<long double>(epsilon)));
  const auto mass = binomial_masses(c.guesses, p);
  const long double tail = upper_tail(mass, c.correct);
  long double largest = 0.0L;
  for (long i = 1; i <= c.correct; ++i)
    largest = std::max(largest, (upper_tail(mass, c.correct - i) - tail) / i);
  return tail + 2.0L * c.canaries * delta * largest;
}

TEST(OneRun, PValueMatchesTheTheoremSummedDirectly) {
  const OneRunCounts cases[] = {{1000, 100, 90}, {1000, 1000, 700}, {100, 50, 45}, {50, 10, 10}};
  for (const auto& c : cases) {
    for (double eps : {0.0, 0.5, 2.0, 5.0}) {
      for (double delta : {0.0, 1e-5, 1e-3}) {
        const long double expected = reference_p_value(c, eps, delta);
        EXPECT_NEAR(one_run_log_p_value(c, eps, delta), static_cast<double>(std::log(expected)),
                    1e-9)
            << c.canaries << " " << c.guesses << " " << c.correct << " eps " << eps << " delta "
            << delta;
      }
    }
  }
}

// delta = 0: the bound is the eps where the binomial tail reaches beta; bisection stops at 1e-9
// on the rejected side, so beta lies between the p-values at the bound and 1e-8 above it.
TEST(OneRun, BoundIsWhereTheTailReachesBeta) {
  const OneRunCounts cases[] = {{1000, 100, 90}, {1000, 1000, 700}, {200, 200, 200}, {20, 20, 20}};
  for (const auto& c : cases) {
    for (double beta : {0.05, 1e-3}) {
      const double bound = one_run_epsilon_lower(c, 0.0, beta);
      ASSERT_GT(bound, 0.0);
      EXPECT_LT(one_run_log_p_value(c, bound, 0.0), std::log(beta));
      EXPECT_GE(one_run_log_p_value(c, bound + 1e-8, 0.0), std::log(beta));
    }
  }
  // Half right is no evidence at all.
  EXPECT_EQ(one_run_epsilon_lower({1000, 100, 50}, 0.0, 0.05), 0.0);
  EXPECT_EQ(one_run_epsilon_lower({1000, 0, 0}, 1e-5, 0.05), 0.0);
}

// delta > 0: against the first crossing on a scan of step 1e-4 (the reference's resolution); the
// cases include some where the p-value is not monotone in eps (large 2 m delta).
TEST(OneRun, BoundWithDeltaIsTheFirstCrossing) {
  struct Case {
    OneRunCounts counts;
    double delta;
  };
  const Case cases[] = {{{1000, 100, 90}, 1e-5}, {{1000, 1000, 700}, 1e-5}, {{100, 50, 45}, 1e-3},
                        {{1000, 40, 40}, 1e-4},  {{5000, 200, 180}, 2e-6},  {{1000, 30, 30}, 2e-5}};
  for (const auto& [counts, delta] : cases) {
    const double beta = 0.05;
    double reference = 0.0;
    while (one_run_log_p_value(counts, reference + 1e-4, delta) < std::log(beta)) reference += 1e-4;
    const double bound = one_run_epsilon_lower(counts, delta, beta);
    EXPECT_NEAR(bound, reference, 1.01e-4) << counts.guesses << " " << counts.correct;
    EXPECT_LT(one_run_log_p_value(counts, bound, delta), std::log(beta));
    // delta only weakens the evidence.
    EXPECT_LE(bound, one_run_epsilon_lower(counts, 0.0, beta) + 1e-9);
  }
}

// Exact soundness for the worst case of pure eps-DP: every canary's score is eps-randomized
// response of its inclusion and the auditor guesses all m, so W ~ Binomial(m, e^eps / (1 +
// e^eps)) exactly. P[bound(W) > eps] summed over all outcomes must be at most beta; and the bound
// must not be vacuous (at the expected W it recovers most of eps).
TEST(OneRun, BoundIsSoundExactlyForRandomizedResponse) {
  const long m = 300;
  const double beta = 0.05;
  for (double eps : {0.5, 1.0, 2.0}) {
    const auto mass = binomial_masses(m, 1.0L / (1.0L + std::exp(-static_cast<long double>(eps))));
    long double exceed = 0.0L;
    for (long v = 0; v <= m; ++v)
      if (one_run_epsilon_lower({m, m, v}, 0.0, beta) > eps) exceed += mass[static_cast<size_t>(v)];
    EXPECT_LE(exceed, beta) << eps;
    const long expected_v = std::lround(m / (1.0 + std::exp(-eps)));
    EXPECT_GT(one_run_epsilon_lower({m, m, expected_v}, 0.0, beta), 0.6 * eps) << eps;
  }
}

// Monte Carlo soundness over 400 seeds: m = 500 canaries included by draw_canary_inclusion, each
// scored by eps-randomized response of its inclusion (the mechanism's own stream purpose), guessed
// by the default grid at 95% confidence. At most beta of the seeds may exceed eps; 400 * 0.05 = 20
// expected at worst (the grid's split makes it far fewer), and the check allows 20 + 3 standard
// deviations = 33.
TEST(OneRun, BoundIsSoundOverSeedsForRandomizedResponseCanaries) {
  const long m = 500;
  const double eps = 2.0, keep = 1.0 / (1.0 + std::exp(-eps));
  int above = 0;
  double largest = 0.0;
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    const auto included = draw_canary_inclusion(seed, m);
    std::vector<double> scores(static_cast<std::size_t>(m));
    for (long c = 0; c < m; ++c) {
      Stream stream(seed, purpose::randomized_response, static_cast<std::uint64_t>(c));
      const bool in = included[static_cast<std::size_t>(c)] != 0;
      scores[static_cast<std::size_t>(c)] = (stream.uniform() < keep) == in ? 1.0 : 0.0;
    }
    const OneRunAudit audit = one_run_audit(scores, included, 0.0, 0.05);
    above += audit.epsilon_lower > eps;
    largest = std::max(largest, audit.epsilon_lower);
  }
  EXPECT_LE(above, 33);
  EXPECT_GT(largest, 0.5 * eps);  // the audit sees the leak at all
}

// Gaussian canaries with delta > 0: each canary's score is its inclusion plus N(0, sigma^2), so
// the run is (eps(sigma, delta), delta)-DP in each canary (the Gaussian mechanism of sensitivity
// 1; sigma = 2 is eps ~ 2 at delta = 1e-5); over 200 seeds the bound stays at or below eps but for
// at most 5% + 3 sd (18). With sigma scaled by 1/4 (a planted fault: too little noise) the bound
// exceeds the claimed eps (m = 1000 canaries can show up to about log(m) ~ 5).
TEST(OneRun, BoundIsSoundForGaussianCanariesAndCatchesTooLittleNoise) {
  const long m = 1000;
  const double delta = 1e-5, sigma = 2.0;
  const double eps = gaussian_pair_epsilon(0.0, sigma, 1.0, sigma, delta);
  auto audit = [&](std::uint64_t seed, double noise) {
    const auto included = draw_canary_inclusion(seed, m);
    std::vector<double> scores(static_cast<std::size_t>(m));
    for (long c = 0; c < m; ++c) {
      Stream stream(seed, purpose::server_noise, static_cast<std::uint64_t>(c));
      scores[static_cast<std::size_t>(c)] =
          included[static_cast<std::size_t>(c)] + noise * stream.normal();
    }
    return one_run_audit(scores, included, delta, 0.05).epsilon_lower;
  };
  int above = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) above += audit(seed, sigma) > eps;
  EXPECT_LE(above, 18);
  EXPECT_GT(audit(7, 0.25 * sigma), eps);
}

// Ties are broken by canary index: with all scores equal the top k+ are canaries 0..k+-1 and the
// bottom k- the last ones.
TEST(OneRun, GuessesRankByScoreThenIndex) {
  const std::vector<double> scores = {0.5, 0.5, 0.9, 0.5, 0.1, 0.5};
  const std::vector<std::uint8_t> included = {1, 0, 1, 0, 0, 1};
  // Order: 2 (0.9), then 0, 1, 3, 5 (0.5, by index), then 4 (0.1).
  const OneRunCounts top2 = one_run_counts(scores, included, {2, 0});  // canaries 2, 0: both IN
  EXPECT_EQ(top2.correct, 2);
  const OneRunCounts top3 = one_run_counts(scores, included, {3, 0});  // + canary 1: OUT
  EXPECT_EQ(top3.correct, 2);
  const OneRunCounts bottom2 = one_run_counts(scores, included, {0, 2});  // 4 and 5: OUT, IN
  EXPECT_EQ(bottom2.correct, 1);
  EXPECT_EQ(bottom2.guesses, 2);
  EXPECT_EQ(bottom2.canaries, 6);
  EXPECT_THROW(one_run_counts(scores, included, {4, 3}), InputError);
  EXPECT_THROW(one_run_counts(scores, std::vector<std::uint8_t>(5), {1, 0}), InputError);
}

// The grid's maximum is each rule's bound at beta / G, G the number of rules.
TEST(OneRun, AuditSplitsTheConfidenceOverTheGrid) {
  const long m = 200;
  const auto included = draw_canary_inclusion(11, m);
  std::vector<double> scores(static_cast<std::size_t>(m));
  for (long c = 0; c < m; ++c) {
    Stream stream(11, purpose::server_noise, static_cast<std::uint64_t>(c));
    scores[static_cast<std::size_t>(c)] =
        2.0 * included[static_cast<std::size_t>(c)] + stream.normal();
  }
  const auto grid = one_run_default_guesses(m);
  // k = 1, 2, 5, 10, 20, 50, 100 as (k, 0) and (k, k), and (200, 0).
  EXPECT_EQ(grid.size(), 15u);
  const OneRunAudit audit = one_run_audit(scores, included, 1e-5, 0.05);
  EXPECT_EQ(audit.rules, static_cast<long>(grid.size()));
  double best = 0.0;
  for (const auto& rule : grid)
    best = std::max(best, one_run_epsilon_lower(one_run_counts(scores, included, rule), 1e-5,
                                                0.05 / static_cast<double>(grid.size())));
  EXPECT_EQ(audit.epsilon_lower, best);
  EXPECT_GT(audit.epsilon_lower, 0.0);
  // A single rule fixed in advance keeps all of beta, so its bound is at least the split one's.
  const OneRunGuess fixed[] = {audit.best};
  EXPECT_GE(one_run_audit(scores, included, 1e-5, 0.05, fixed).epsilon_lower, audit.epsilon_lower);
}

// Inclusion is a fair coin per canary, reproducible by key: over 10^5 canaries the fraction is
// within 5 standard errors (5 * 0.5 / sqrt(1e5) = 0.0079) of 1/2.
TEST(OneRun, CanaryInclusionIsAReproducibleFairCoin) {
  const auto a = draw_canary_inclusion(3, 100'000), b = draw_canary_inclusion(3, 100'000);
  EXPECT_EQ(a, b);
  const double fraction = std::accumulate(a.begin(), a.end(), 0.0) / 100'000.0;
  EXPECT_NEAR(fraction, 0.5, 0.0079);
  EXPECT_NE(a, draw_canary_inclusion(4, 100'000));
}

TEST(OneRun, RefusesBadArguments) {
  EXPECT_THROW(one_run_log_p_value({10, 5, 6}, 1.0, 0.0), InputError);
  EXPECT_THROW(one_run_log_p_value({10, 11, 6}, 1.0, 0.0), InputError);
  EXPECT_THROW(one_run_log_p_value({10, 5, 2}, -1.0, 0.0), InputError);
  EXPECT_THROW(one_run_epsilon_lower({10, 5, 2}, 1.5, 0.05), InputError);
  EXPECT_THROW(one_run_epsilon_lower({10, 5, 2}, 0.0, 0.0), InputError);
  EXPECT_THROW(one_run_audit(std::vector<double>{NAN}, std::vector<std::uint8_t>{1}, 0.0, 0.05),
               InputError);
}

}  // namespace
}  // namespace fluence
