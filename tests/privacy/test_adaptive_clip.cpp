// Adaptive clipping (Andrew et al. 2019) against its deterministic sequence and the noise split.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/privacy/adaptive_clip.hpp"

namespace fluence {
namespace {

// tensorflow/privacy's quantile-adaptive clip test with target 0: update norms 5 and 2.5, S0 = 16,
// eta = ln 2, geometric update, no noise: S halves while both are unclipped, falls by sqrt(2) while
// one is, and stays once both are clipped: 8, 4, 2 sqrt 2, 2, 2 (exact up to rounding).
TEST(AdaptiveClip, DeterministicSequenceOfAndrewEtAl) {
  AdaptiveClip clip(16.0, 0.0, std::log(2.0));
  const std::vector<double> norms = {5.0, 2.5};
  const std::vector<double> expected = {8.0, 4.0, 2.0 * std::sqrt(2.0), 2.0, 2.0};
  for (double want : expected) {
    double unclipped = 0.0;
    for (double norm : norms) unclipped += norm <= clip.clip() ? 1.0 : 0.0;
    clip.update(unclipped / static_cast<double>(norms.size()));
    EXPECT_NEAR(clip.clip(), want, 1e-12 * want);
  }
}

// z^-2 = z_update^-2 + (2 z_b)^-2: with z_b = 10 and z = 1 the updates keep almost all the budget.
TEST(AdaptiveClip, NoiseSplitComposesToTheStatedMultiplier) {
  for (double z : {0.5, 1.0, 1.3})
    for (double zb : {1.0, 5.0, 10.0}) {
      const double zu = update_noise_multiplier(z, zb);
      EXPECT_NEAR(1.0 / (zu * zu) + 1.0 / (4.0 * zb * zb), 1.0 / (z * z), 1e-12 / (z * z));
      EXPECT_GT(zu, z);
    }
  EXPECT_THROW(update_noise_multiplier(2.0, 1.0), InputError);
  EXPECT_EQ(update_noise_multiplier(0.0, 1.0), 0.0);
}

}  // namespace
}  // namespace fluence
