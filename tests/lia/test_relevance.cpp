// Relevance-weighted votes (docs/math.md §9) against independent computations: the predicted-class
// histogram against a naive dot-product loop, the Laplace draws against their distribution function
// (DKW bound), and the weights against their formula worked by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "fluence/core/rng.hpp"
#include "fluence/lia/purposes.hpp"
#include "fluence/lia/relevance.hpp"

namespace fluence::lia {
namespace {

TEST(LiaRelevance, HistogramCountsTheFirstMaximalLogitOfEachRow) {
  const int D = 7, C = 5;
  const std::size_t rows = 301;
  Stream stream(11, purpose::lia_relevance);
  std::vector<double> x(rows * D), theta(static_cast<std::size_t>(C) * D);
  for (auto& v : x) v = stream.normal();
  for (auto& v : theta) v = stream.normal();
  // Classes 1 and 3 have identical weights, so every row ties them bitwise: the first maximal
  // logit is class 1's and class 3 is never predicted.
  for (int d = 0; d < D; ++d) theta[3 * D + d] = theta[1 * D + d];
  std::vector<double> naive(C, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    int best = 0;
    double best_logit = -std::numeric_limits<double>::infinity();
    for (int c = 0; c < C; ++c) {
      double logit = 0.0;
      for (int d = 0; d < D; ++d) logit += x[r * D + d] * theta[c * D + d];
      if (logit > best_logit) best_logit = logit, best = c;  // strict: the first maximum wins
    }
    naive[best] += 1.0;
  }
  const auto counts = predicted_class_histogram(x.data(), rows, D, C, theta.data());
  // BLAS and the loop may round the logits differently in the last bits; that decides a row only
  // when its two largest distinct logits are within about 1e-15, which these draws do not have.
  EXPECT_EQ(counts, naive);
  EXPECT_EQ(counts[3], 0.0);
  EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), 0.0), static_cast<double>(rows));
}

TEST(LiaRelevance, LaplaceDrawsFollowTheirDistributionFunction) {
  const double scale = 2.5;
  const long n = 200000;
  Stream stream(5, purpose::lia_relevance, 7);
  std::vector<double> draws(n);
  for (auto& v : draws) v = laplace(scale, stream);
  std::sort(draws.begin(), draws.end());
  // DKW: P(sup |F_n - F| > t) <= 2 exp(-2 n t^2); t = 0.0067 makes that 3e-8.
  double worst = 0.0;
  for (long i = 0; i < n; ++i) {
    const double x = draws[i];
    const double F = x < 0 ? 0.5 * std::exp(x / scale) : 1.0 - 0.5 * std::exp(-x / scale);
    worst = std::max({worst, std::abs(F - static_cast<double>(i) / n),
                      std::abs(F - static_cast<double>(i + 1) / n)});
  }
  EXPECT_LT(worst, 0.0067);
  // Variance 2 scale^2: the sample variance's sd is about sqrt(20/n) of it (kurtosis 6), 1%;
  // 5% is five of those.
  double sum2 = 0.0;
  for (double v : draws) sum2 += v * v;
  EXPECT_NEAR(sum2 / n, 2 * scale * scale, 0.05 * 2 * scale * scale);

  std::vector<double> counts{3.0, 0.0, 5.0};
  add_laplace_noise(counts, std::numeric_limits<double>::infinity(), stream);
  EXPECT_EQ(counts, (std::vector<double>{3.0, 0.0, 5.0}));
}

TEST(LiaRelevance, WeightIsTheOverlapOfTheClippedSharesToThePower) {
  // Five histograms of 4 classes, their shares worked by hand below.
  const std::vector<double> histograms{10, 0,  30, 0,     // a: (1/4, 0, 3/4, 0)
                                       0,  5,  15, 0,     // b: (0, 1/4, 3/4, 0)
                                       10, -3, 30, -1,    // a with noisy negatives: a's shares
                                       -1, -2, 0,  -0.5,  // nothing left: uniform
                                       4,  0,  0,  0};    // one class
  const auto f = relevance_shares(histograms, 4);
  ASSERT_EQ(f.size(), histograms.size());
  EXPECT_EQ(std::vector<double>(f.begin(), f.begin() + 4), (std::vector<double>{0.25, 0, 0.75, 0}));
  EXPECT_EQ(std::vector<double>(f.begin() + 8, f.begin() + 12),
            std::vector<double>(f.begin(), f.begin() + 4));
  EXPECT_EQ(std::vector<double>(f.begin() + 12, f.begin() + 16), std::vector<double>(4, 0.25));
  const double* a = &f[0];
  const double* b = &f[4];
  const double* uniform = &f[12];
  const double* one = &f[16];
  EXPECT_DOUBLE_EQ(relevance_weight(a, b, 4, 1.0), 9.0 / 16);  // 3/4 * 3/4
  EXPECT_DOUBLE_EQ(relevance_weight(a, b, 4, 2.0), 81.0 / 256);
  EXPECT_DOUBLE_EQ(relevance_weight(uniform, b, 4, 1.0), 0.25);  // 1/C with any shares
  EXPECT_EQ(relevance_weight(one, b, 4, 2.0), 0.0);              // disjoint
  EXPECT_EQ(relevance_weight(one, one, 4, 3.0), 1.0);            // identical one-class
  // Power 0 weighs every vote 1: the plain mean of the votes.
  EXPECT_EQ(relevance_weight(one, b, 4, 0.0), 1.0);
}

TEST(LiaRelevance, QuantizedWeightsAreWithinHalfAQuantum) {
  Stream stream(3, purpose::lia_relevance);
  for (int i = 0; i < 1000; ++i) {
    const double w = stream.uniform();
    EXPECT_LE(std::abs(static_cast<double>(quantized_weight(w)) * kWeightQuantum - w),
              0.5 * kWeightQuantum);
  }
  EXPECT_EQ(quantized_weight(1.0), std::int64_t{1} << 40);
  EXPECT_EQ(quantized_weight(0.0), 0);
}

}  // namespace
}  // namespace fluence::lia
