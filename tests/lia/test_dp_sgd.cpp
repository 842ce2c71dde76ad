// DP-SGD of the contributors (seed 002 §III-B2) against independent computations: without noise
// and with every row in the batch, one step is -lr/B times the sum of explicitly clipped
// per-example gradients (outer products computed naively); on zero features the update is pure
// noise whose spread matches lr sigma Delta / B per step (a chi-square bound).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/lia/dp_sgd.hpp"
#include "fluence/lia/purposes.hpp"

namespace fluence::lia {
namespace {

TEST(LiaDpSgd, OneFullBatchStepIsTheMeanOfClippedGradients) {
  const int C = 3, D = 5, n = 12;
  Stream data(8, purpose::synthetic_rows);
  std::vector<double> x(n * D), theta(C * D);
  std::vector<std::int32_t> y(n);
  for (auto& v : x) v = 2 * data.normal();
  for (auto& v : y) v = static_cast<std::int32_t>(data.below(C));
  for (auto& v : theta) v = 0.3 * data.normal();
  for (double clip : {0.0, 0.5, 3.0}) {
    DpSgdConfig config;
    config.epochs = 1;
    config.batch_size = n;  // q = 1: every row in the one step
    config.learning_rate = 0.7;
    config.clip = clip;
    ASSERT_EQ(dp_sgd_steps(n, config), 1);
    std::vector<double> expected(theta);
    int clipped = 0;
    for (int i = 0; i < n; ++i) {
      std::vector<double> logits(C, 0.0), g(C * D);
      double total = 0.0;
      for (int c = 0; c < C; ++c) {
        for (int d = 0; d < D; ++d) logits[c] += theta[c * D + d] * x[i * D + d];
        total += std::exp(logits[c]);
      }
      double norm2 = 0.0;
      for (int c = 0; c < C; ++c)
        for (int d = 0; d < D; ++d) {
          g[c * D + d] = (std::exp(logits[c]) / total - (c == y[i])) * x[i * D + d];
          norm2 += g[c * D + d] * g[c * D + d];
        }
      const double factor = clip > 0 ? std::min(1.0, clip / std::sqrt(norm2)) : 1.0;
      clipped += factor < 1.0;
      for (int k = 0; k < C * D; ++k) expected[k] -= config.learning_rate / n * factor * g[k];
    }
    if (clip == 0.5) {
      EXPECT_GT(clipped, 0);
    }
    std::vector<double> result(theta);
    DpSgdWorkspace work;
    Stream stream(1, purpose::lia_dp_sgd);
    dp_sgd(x.data(), y.data(), n, D, C, config, stream, result.data(), work);
    for (int k = 0; k < C * D; ++k) EXPECT_NEAR(result[k], expected[k], 1e-13) << clip;
  }
}

TEST(LiaDpSgd, NoiseHasTheCalibratedScale) {
  // Zero features: every gradient vanishes, so theta moves only by the noise,
  // lr / B * N(0, sigma^2 Delta^2) per coordinate and step.
  const int C = 10, D = 50, n = 40;
  std::vector<double> x(n * D, 0.0), theta(C * D, 0.0);
  std::vector<std::int32_t> y(n, 0);
  DpSgdConfig config;
  config.epochs = 2;
  config.batch_size = 8;
  config.learning_rate = 0.5;
  config.clip = 1.5;
  config.noise_multiplier = 2.0;
  const long steps = dp_sgd_steps(n, config);  // 2 * 5
  DpSgdWorkspace work;
  Stream stream(4, purpose::lia_dp_sgd);
  dp_sgd(x.data(), y.data(), n, D, C, config, stream, theta.data(), work);
  double sum2 = 0.0;
  for (double v : theta) sum2 += v * v;
  const double sd = config.learning_rate / config.batch_size * config.noise_multiplier *
                    config.clip * std::sqrt(static_cast<double>(steps));
  const double k = C * D;
  // sum2 / sd^2 ~ chi-square(k): mean k, sd sqrt(2k); 5 standard deviations.
  EXPECT_NEAR(sum2 / (sd * sd), k, 5 * std::sqrt(2 * k));
}

}  // namespace
}  // namespace fluence::lia
