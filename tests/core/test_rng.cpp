// Counter-based streams: reproducible by key, and distributed as claimed. Each distribution test
// uses a fixed seed and a bound (5 standard errors, or a chi-square quantile far in the tail) that
// a correct generator passes and a biased one (off by more than a few percent) fails.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <span>
#include <vector>

#include "fluence/audit/purposes.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/fl/purposes.hpp"
#include "fluence/fldp/purposes.hpp"
#include "fluence/influence/purposes.hpp"
#include "fluence/lia/purposes.hpp"
#include "fluence/model/purposes.hpp"
#include "fluence/privacy/purposes.hpp"
#include "fluence/whatif/purposes.hpp"

namespace fluence {
namespace {

TEST(Stream, SameKeySameSequenceDifferentIdsDiffer) {
  Stream a(42, purpose::partition, 3, 4), b(42, purpose::partition, 3, 4),
      c(42, purpose::partition, 3, 5);
  for (int i = 0; i < 10; ++i) {
    const auto x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    EXPECT_NE(x, c.next_u64());
  }
  Stream d(42, purpose::test_split, 3, 4);
  EXPECT_NE(Stream(42, purpose::partition, 3, 4).next_u64(), d.next_u64());
}

// Pearson chi-square statistic of counts against equal expected frequencies.
double chi_square_uniform(const std::vector<long>& counts, long draws) {
  const double expected = static_cast<double>(draws) / counts.size();
  double statistic = 0.0;
  for (long c : counts) statistic += (c - expected) * (c - expected) / expected;
  return statistic;
}

TEST(Stream, UniformAndBelowAreUniform) {
  Stream stream(1, purpose::synthetic_rows);
  const long draws = 200000;
  std::vector<long> bins(20), small(7);
  double sum = 0.0;
  for (long i = 0; i < draws; ++i) {
    const double u = stream.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    ++bins[static_cast<int>(u * 20)];
    ++small[stream.below(7)];
  }
  EXPECT_NEAR(sum / draws, 0.5, 5 * std::sqrt(1.0 / 12 / draws));
  // chi-square 0.999999 quantiles: 19 df -> 58.9, 6 df -> 37.0.
  EXPECT_LT(chi_square_uniform(bins, draws), 58.9);
  EXPECT_LT(chi_square_uniform(small, draws), 37.0);
}

TEST(Stream, NormalHasUnitMoments) {
  Stream stream(2, purpose::synthetic_rows);
  const long draws = 200000;
  double sum = 0.0, squares = 0.0, fourth = 0.0;
  for (long i = 0; i < draws; ++i) {
    const double z = stream.normal();
    sum += z;
    squares += z * z;
    fourth += z * z * z * z;
  }
  EXPECT_NEAR(sum / draws, 0.0, 5 / std::sqrt(draws));
  EXPECT_NEAR(squares / draws, 1.0, 5 * std::sqrt(2.0 / draws));
  EXPECT_NEAR(fourth / draws, 3.0, 5 * std::sqrt(96.0 / draws));  // Var(z^4) = 105 - 9
}

TEST(Stream, FillNormalHasUnitMomentsAndUncorrelatedPairs) {
  // Both outputs of a Box-Muller pair are used: besides the moments, the two members of a pair must
  // be uncorrelated (their product has mean 0 and variance 1).
  Stream stream(3, purpose::synthetic_rows);
  std::vector<double> z(200001);  // odd: the last value comes from normal()
  stream.fill_normal(z);
  const double n = static_cast<double>(z.size());
  double sum = 0.0, squares = 0.0, fourth = 0.0, cross = 0.0;
  for (double v : z) {
    sum += v;
    squares += v * v;
    fourth += v * v * v * v;
  }
  for (std::size_t i = 0; i + 1 < z.size(); i += 2) cross += z[i] * z[i + 1];
  EXPECT_NEAR(sum / n, 0.0, 5 / std::sqrt(n));
  EXPECT_NEAR(squares / n, 1.0, 5 * std::sqrt(2.0 / n));
  EXPECT_NEAR(fourth / n, 3.0, 5 * std::sqrt(96.0 / n));
  EXPECT_NEAR(cross / (n / 2), 0.0, 5 / std::sqrt(n / 2));
}

TEST(Stream, GammaHasMeanAndVarianceEqualToShape) {
  for (double shape : {0.3, 1.0, 2.5}) {
    Stream stream(3, purpose::partition, static_cast<std::uint64_t>(shape * 10));
    const long draws = 200000;
    double sum = 0.0, squares = 0.0;
    for (long i = 0; i < draws; ++i) {
      const double g = stream.gamma(shape);
      ASSERT_GE(g, 0.0);
      sum += g;
      squares += g * g;
    }
    const double mean = sum / draws, variance = squares / draws - mean * mean;
    EXPECT_NEAR(mean, shape, 5 * std::sqrt(shape / draws)) << shape;
    // Var of the sample variance ~ (mu4 - sigma^4)/n with mu4 = 3k^2 + 6k for Gamma(k).
    EXPECT_NEAR(variance, shape, 5 * std::sqrt((2 * shape * shape + 6 * shape) / draws)) << shape;
  }
}

TEST(Stream, DirichletSumsToOneWithEqualMeans) {
  Stream stream(4, purpose::partition);
  const int k = 5;
  std::vector<double> means(k);
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    const auto d = stream.dirichlet(0.5, k);
    double total = 0.0;
    for (int j = 0; j < k; ++j) {
      total += d[j];
      means[j] += d[j] / draws;
    }
    ASSERT_NEAR(total, 1.0, 1e-12);
  }
  // Var of one coordinate: (1/k)(1 - 1/k)/(k alpha + 1) = 0.16/3.5.
  for (double m : means) EXPECT_NEAR(m, 1.0 / k, 5 * std::sqrt(0.16 / 3.5 / draws));
}

// skip(n) lands where n draws would: from a fresh stream and from one part-way through a block.
TEST(Stream, SkipEqualsDrawing) {
  for (std::uint64_t before : {0, 1, 3, 4, 6}) {
    for (std::uint64_t n : {0, 1, 2, 3, 4, 5, 8, 13, 1000}) {
      Stream drawn(9, purpose::server_noise, 2), skipped(9, purpose::server_noise, 2);
      for (std::uint64_t i = 0; i < before; ++i) {
        drawn.next_u64();
        skipped.next_u64();
      }
      for (std::uint64_t i = 0; i < n; ++i) drawn.next_u64();
      skipped.skip(n);
      for (int i = 0; i < 9; ++i)
        EXPECT_EQ(skipped.next_u64(), drawn.next_u64()) << before << " " << n;
      EXPECT_EQ(skipped.normal(), drawn.normal());
    }
  }
}

// Each module numbers its own streams; two modules sharing a number would draw the same values
// for unrelated things, and a retired number reused would change what old results mean.
TEST(Stream, NoTwoModulesSharePurposeNumbers) {
  const std::span<const Purpose> modules[] = {
      purpose::data_purposes,   purpose::privacy_purposes,   purpose::model_purposes,
      purpose::fl_purposes,     purpose::influence_purposes, purpose::fldp_purposes,
      purpose::whatif_purposes, purpose::lia_purposes,       purpose::audit_purposes};
  std::set<std::uint64_t> seen = {7, 27};  // retired (core/rng.hpp)
  std::size_t count = 0;
  for (const auto& purposes : modules) {
    for (const Purpose& p : purposes) {
      EXPECT_TRUE(seen.insert(p.number).second) << "purpose number " << p.number << " is taken";
      ++count;
    }
  }
  // Every purpose of issue 28's inventory, none lost in the move, issue 26's public_split, the
  // LDP audit's draws, issue 39's canary inclusion, canary directions and LiRA halves, and issue
  // 40's FL-LDS subsets and certified-removal noise, LIA's record canaries and example-level
  // LiRA's halves.
  EXPECT_EQ(count, 40u);
}

}  // namespace
}  // namespace fluence
