// A validator's total eps against a brute force over its randomized responses: every output
// vector of its votes is enumerated, and the largest log-likelihood ratio between the validation
// sets that differ in one row is the exact pure-DP loss. A changed row can flip every vote that
// reads its subset (every vote when the votes are coupled through a shared baseline), so the
// neighbours are all flip patterns of those votes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "fluence/lia/accounting.hpp"

namespace fluence::lia {
namespace {

// The exact eps of `votes` randomized responses, each keeping its bit with probability 1 - p/2
// (seed 002 Eq. 2), where a neighbouring validation set may flip the true bits in `changeable`
// (a mask over the votes): max over outputs o, true bits v and flips f within the mask of
// log P(o | v) / P(o | v xor f). Each vote's factor depends only on whether o_i = v_i, so it
// suffices to enumerate agreements o xor v and flips.
double brute_force_epsilon(int votes, unsigned changeable, double p) {
  const double keep = 1.0 - p / 2.0, flip = p / 2.0;
  double worst = 0.0;
  for (unsigned agree = 0; agree < (1u << votes); ++agree)
    for (unsigned flips = 0; flips < (1u << votes); ++flips) {
      if ((flips & ~changeable) != 0) continue;
      double log_ratio = 0.0;
      for (int i = 0; i < votes; ++i) {
        const bool agrees = (agree >> i) & 1u, flipped = (flips >> i) & 1u;
        const double here = agrees ? keep : flip;
        const double there = (agrees != flipped) ? keep : flip;
        log_ratio += std::log(here / there);
      }
      worst = std::max(worst, log_ratio);
    }
  return worst;
}

// Votes laid out subset after subset: the mask of the votes that read subset g.
unsigned subset_mask(const std::vector<double>& counts, std::size_t g) {
  unsigned mask = 0;
  int first = 0;
  for (std::size_t s = 0; s < g; ++s) first += static_cast<int>(counts[s]);
  for (int i = 0; i < static_cast<int>(counts[g]); ++i) mask |= 1u << (first + i);
  return mask;
}

TEST(LiaAccounting, DisjointSubsetsComposeInParallelAsTheBruteForce) {
  const std::vector<double> counts{3, 4, 1};
  const int votes = 8;
  for (double eps : {0.3, 1.0, 2.0}) {
    const double p = 2.0 / (1.0 + std::exp(eps));  // Eq. 2's p for a vote of exact eps
    // A row lies in one subset: the neighbour flips the votes of that subset only.
    double exact = 0.0;
    for (std::size_t g = 0; g < counts.size(); ++g)
      exact = std::max(exact, brute_force_epsilon(votes, subset_mask(counts, g), p));
    // 1e-12: sums of eight logarithms of O(1) ratios, against the same eps to rounding.
    EXPECT_NEAR(validator_epsilon(counts, false, eps, 0.0), exact, 1e-12) << eps;
    // Coupled votes (one baseline over every difference): any row can flip all eight.
    const double coupled = brute_force_epsilon(votes, (1u << votes) - 1, p);
    EXPECT_NEAR(validator_epsilon(counts, true, eps, 0.0), coupled, 1e-12) << eps;
    EXPECT_GT(coupled, exact + eps);  // the median baseline costs the parallel composition
  }
}

TEST(LiaAccounting, TheRelevanceHistogramAddsItsLaplaceEpsilon) {
  // The Laplace histogram's loss for a row added or removed (one count moves by 1) is
  // max_x |x - 1| / b - |x| / b = 1 / b = eps_h, found here on a grid of x; it reads every row,
  // so it adds to the votes' loss (basic composition).
  const double eps_h = 0.2, b = 1.0 / eps_h;
  double laplace = 0.0;
  for (double x = -20.0; x <= 20.0; x += 0.25)
    laplace = std::max(laplace, (std::abs(x - 1.0) - std::abs(x)) / b);
  const std::vector<double> counts{4, 4};
  const double eps = 1.0, p = 2.0 / (1.0 + std::exp(eps));
  const double votes = brute_force_epsilon(8, subset_mask(counts, 0), p);
  EXPECT_NEAR(validator_epsilon(counts, false, eps, eps_h), votes + laplace, 1e-12);
}

TEST(LiaAccounting, UnboundedVotesAndValidatorsThatCastNone) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isinf(validator_epsilon(std::vector<double>{0, 1}, false, inf, 0.2)));
  // No vote released, only the histogram.
  EXPECT_EQ(validator_epsilon(std::vector<double>{0, 0}, false, inf, 0.2), 0.2);
  EXPECT_EQ(validator_epsilon(std::vector<double>{0, 0}, true, 1.0, 0.0), 0.0);
}

}  // namespace
}  // namespace fluence::lia
