// The validators' and the center's side of LIA against independent computations: randomized
// response flip rates (binomial bounds) and its eps formula, the exact 1-D k-means threshold
// against a brute force over every 2-partition, and the GEMM vote kernel against a naive loop over
// contributors and rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/lia/purposes.hpp"
#include "fluence/lia/votes.hpp"

namespace fluence::lia {
namespace {

TEST(LiaVotes, FlipProbabilityMatchesTheEpsilonFormulas) {
  for (double eps : {0.1, 0.5, 1.0, 2.0, 5.0}) {
    const double p = vote_flip_probability(eps, false);
    // A kept vote has probability 1 - p/2, a flipped one p/2: their ratio is e^eps exactly.
    EXPECT_NEAR((1 - p / 2) / (p / 2), std::exp(eps), 1e-12 * std::exp(eps));
    EXPECT_NEAR(vote_epsilon(p, false), eps, 1e-12);
    // The seed's Eq. 3, eps = 2 ln((1 - p/2)/(p/2)).
    const double p_seed = vote_flip_probability(eps, true);
    EXPECT_NEAR(2 * std::log((1 - p_seed / 2) / (p_seed / 2)), eps, 1e-12);
    EXPECT_NEAR(vote_epsilon(p_seed, true), eps, 1e-12);
    EXPECT_GT(p_seed, p);  // the seed's accounting adds more noise for the same stated eps
  }
  EXPECT_EQ(vote_flip_probability(std::numeric_limits<double>::infinity(), false), 0.0);
  EXPECT_TRUE(std::isinf(vote_epsilon(0.0, false)));
}

TEST(LiaVotes, EmpiricalFlipRatesFollowEq2) {
  const long draws = 200000;
  for (double eps : {0.5, 1.0, 3.0}) {
    const double p = vote_flip_probability(eps, false);
    for (int vote : {-1, 1}) {
      long flipped = 0;
      for (long i = 0; i < draws; ++i) {
        Stream stream(3, purpose::lia_vote, static_cast<std::uint64_t>(i),
                      static_cast<std::uint64_t>(vote + 1));
        const int reported = obfuscate_vote(vote, p, stream);
        ASSERT_TRUE(reported == 1 || reported == -1);
        flipped += reported != vote;
      }
      // Binomial(draws, p/2): 5 standard deviations.
      const double q = p / 2;
      EXPECT_NEAR(static_cast<double>(flipped), q * draws, 5 * std::sqrt(draws * q * (1 - q)))
          << "eps " << eps << " vote " << vote;
    }
  }
}

// Brute force: every assignment of the values to two non-empty clusters.
double brute_force_threshold(const std::vector<double>& values) {
  const std::size_t n = values.size();
  double best = std::numeric_limits<double>::infinity(), threshold = 0.0;
  for (unsigned mask = 1; mask + 1 < (1u << n); ++mask) {
    double sum[2] = {0, 0}, count[2] = {0, 0};
    for (std::size_t i = 0; i < n; ++i) {
      sum[(mask >> i) & 1] += values[i];
      count[(mask >> i) & 1] += 1;
    }
    double ss = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const int side = (mask >> i) & 1;
      const double d = values[i] - sum[side] / count[side];
      ss += d * d;
    }
    if (ss < best - 1e-9) {
      best = ss;
      threshold = 0.5 * (sum[0] / count[0] + sum[1] / count[1]);
    }
  }
  return threshold;
}

TEST(LiaVotes, KmeansThresholdIsTheOptimalTwoClusterMidpoint) {
  // Known clusters: the midpoint of their means.
  EXPECT_DOUBLE_EQ(kmeans_threshold({-10, -11, -9, 20, 21, 19}), 5.0);
  // Random sets (continuous values: a unique optimum) against the brute force.
  for (std::uint64_t trial = 0; trial < 40; ++trial) {
    Stream stream(17, purpose::synthetic_rows, trial);
    std::vector<double> values(3 + trial % 10);
    for (auto& v : values) v = stream.normal() * (1 + 5 * stream.uniform());
    EXPECT_NEAR(kmeans_threshold(values), brute_force_threshold(values), 1e-9) << trial;
  }
  EXPECT_EQ(kmeans_threshold({4, 4, 4}), 4.0);
}

// The vote baseline is the element a full sort puts at rank floor(n q) (the last for q = 1), and
// q = 1/2 is the median: rank n/2, as "median" always took.
TEST(LiaVotes, VoteQuantileIsTheSortedElementOfRankFloorNq) {
  for (std::uint64_t trial = 0; trial < 30; ++trial) {
    Stream stream(23, purpose::synthetic_rows, trial);
    std::vector<double> values(1 + trial % 13);
    for (auto& v : values) v = std::floor(4 * stream.normal());  // ties included
    std::vector<double> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    for (double q : {0.1, 0.25, 0.3, 0.5, 0.99, 1.0}) {
      std::vector<double> copy = values;
      const auto rank =
          std::min(values.size() - 1,
                   static_cast<std::size_t>(std::floor(static_cast<double>(values.size()) * q)));
      EXPECT_EQ(vote_quantile(copy, q), sorted[rank]) << trial << " q " << q;
    }
    std::vector<double> copy = values;
    EXPECT_EQ(vote_quantile(copy, 0.5), sorted[values.size() / 2]) << trial;
  }
}

TEST(LiaVotes, MixtureThresholdFindsTheEqualPosteriorPoint) {
  // 7,000 draws from N(0, 2^2) and 3,000 from N(-8, 1): the true equal-posterior point solves
  // log 0.7 - log 2 - x^2/8 = log 0.3 - (x + 8)^2 / 2 between the means. EM's parameter errors
  // are O(1/sqrt(n)), which moves the crossing by a few hundredths; 0.15 leaves room.
  Stream stream(21, purpose::synthetic_rows);
  std::vector<double> values;
  for (int i = 0; i < 7000; ++i) values.push_back(2.0 * stream.normal());
  for (int i = 0; i < 3000; ++i) values.push_back(-8.0 + stream.normal());
  // Bisection on the true posterior difference.
  auto difference = [](double x) {
    return (std::log(0.7) - std::log(2.0) - x * x / 8) - (std::log(0.3) - (x + 8) * (x + 8) / 2);
  };
  double low = -8.0, high = 0.0;
  for (int i = 0; i < 200; ++i) {
    const double middle = 0.5 * (low + high);
    (difference(middle) > 0 ? high : low) = middle;
  }
  EXPECT_NEAR(mixture_threshold(values), 0.5 * (low + high), 0.15);
  // The 2-means midpoint of the same data lies elsewhere (about -3.9): the mixture is not a copy.
  EXPECT_GT(std::abs(kmeans_threshold(values) - 0.5 * (low + high)), 0.5);
}

TEST(LiaVotes, VectorExpMatchesStdExp) {
  // Every argument class the kernel sees: 0, tiny, moderate, ln 2 multiples (range-reduction
  // edges), large negative, and below the -708 clamp.
  std::vector<double> x;
  for (int i = 0; i <= 20000; ++i) x.push_back(-40.0 * i / 20000.0);
  for (int k = 0; k < 1000; ++k) x.push_back(-k * std::log(2.0) * 0.5);
  for (double v : {-1e-300, -1e-17, -699.9, -700.0, -707.9, -708.0}) x.push_back(v);
  std::vector<double> y(x.size());
  exp_nonpositive(x.data(), y.data(), x.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double expected = std::exp(x[i]);
    worst = std::max(worst, std::abs(y[i] - expected) / expected);
  }
  // A degree-13 polynomial on |r| <= ln(2)/2 truncates below 1e-17; Horner adds a few ulp.
  EXPECT_LT(worst, 1e-15);
  // The clamp: below -708 the value is exp(-708) (a positive normal number, never 0, a subnormal
  // or NaN), to the same relative accuracy; one value alone takes the masked partial group.
  double below = -800.0, out = 1.0;
  exp_nonpositive(&below, &out, 1);
  EXPECT_LT(std::abs(out - std::exp(-708.0)) / std::exp(-708.0), 1e-15);
}

double naive_loss(const double* x, std::int32_t y, const double* theta, int C, int D) {
  std::vector<double> logits(C, 0.0);
  for (int c = 0; c < C; ++c)
    for (int d = 0; d < D; ++d) logits[c] += theta[c * D + d] * x[d];
  double total = 0.0;
  for (int c = 0; c < C; ++c) total += std::exp(logits[c]);
  return std::log(total) - logits[y];
}

// The 0-1 loss by the definition: 1 unless the first maximal logit is the label.
double naive_error(const double* x, std::int32_t y, const double* theta, int C, int D) {
  std::vector<double> logits(C, 0.0);
  for (int c = 0; c < C; ++c)
    for (int d = 0; d < D; ++d) logits[c] += theta[c * D + d] * x[d];
  return std::max_element(logits.begin(), logits.end()) - logits.begin() == y ? 0.0 : 1.0;
}

TEST(LiaVotes, KernelEqualsANaiveLoopOverContributors) {
  const int C = 4, D = 7, validators = 37, contributors = 300;  // 3 blocks, 3 chunks
  Stream stream(5, purpose::synthetic_rows);
  std::vector<std::size_t> begin{0};
  for (int v = 0; v < validators; ++v) begin.push_back(begin.back() + 1 + v % 5);
  const std::size_t rows = begin.back();
  std::vector<double> x(rows * D), base(C * D),
      stacked(static_cast<std::size_t>(contributors) * C * D);
  std::vector<std::int32_t> y(rows);
  for (auto& v : x) v = stream.normal();
  for (auto& v : y) v = static_cast<std::int32_t>(stream.below(C));
  for (auto& v : base) v = 0.5 * stream.normal();
  for (auto& v : stacked) v = 0.5 * stream.normal();
  std::vector<std::uint8_t> row_subset(rows),
      pair_subset(static_cast<std::size_t>(validators) * contributors);
  for (auto& s : row_subset) s = static_cast<std::uint8_t>(stream.below(3));
  for (auto& s : pair_subset) s = static_cast<std::uint8_t>(stream.below(3));

  for (const VoteLoss loss : {VoteLoss::cross_entropy, VoteLoss::zero_one}) {
    VoteKernel kernel(D, C, loss);
    const auto naive = loss == VoteLoss::zero_one ? naive_error : naive_loss;
    for (bool subsets : {false, true}) {
      std::vector<double> differences(static_cast<std::size_t>(validators) * contributors);
      kernel.loss_differences(x.data(), y.data(), begin, base.data(), stacked.data(), contributors,
                              differences.data(), subsets ? row_subset.data() : nullptr,
                              subsets ? pair_subset.data() : nullptr);
      long changed = 0;  // pairs whose 0-1 difference is not 0: the check is not vacuous
      for (int v = 0; v < validators; ++v)
        for (int a = 0; a < contributors; ++a) {
          double expected = 0.0;
          for (std::size_t r = begin[v]; r < begin[v + 1]; ++r) {
            if (subsets &&
                row_subset[r] != pair_subset[static_cast<std::size_t>(v) * contributors + a])
              continue;
            expected += naive(&x[r * D], y[r], base.data(), C, D) -
                        naive(&x[r * D], y[r], &stacked[static_cast<std::size_t>(a) * C * D], C, D);
          }
          const double got = differences[static_cast<std::size_t>(v) * contributors + a];
          changed += expected != 0.0;
          // Cross-entropy: sums of a few O(1) terms; only rounding differs (GEMM order,
          // max-shifted log-sum-exp). 0-1 loss: counts, exact, since no two of these random
          // normal logits tie and no GEMM rounding (1e-15) moves an argmax whose gap is larger.
          if (loss == VoteLoss::zero_one)
            EXPECT_EQ(got, expected) << "validator " << v << " contributor " << a;
          else
            EXPECT_NEAR(got, expected, 1e-11) << "validator " << v << " contributor " << a;
        }
      EXPECT_GT(changed, validators * contributors / 4);
    }
    EXPECT_DOUBLE_EQ(kernel.last_gemm_flops(), 2.0 * rows * contributors * C * D);
  }
}

}  // namespace
}  // namespace fluence::lia
