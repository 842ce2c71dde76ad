#include "fluence/privacy/adaptive_clip.hpp"

#include <fmt/format.h>

#include <cmath>

#include "fluence/core/error.hpp"

namespace fluence {

double update_noise_multiplier(double z, double count_noise) {
  if (z == 0.0) return 0.0;
  const double remaining = 1.0 / (z * z) - 1.0 / (4.0 * count_noise * count_noise);
  if (!(remaining > 0.0))
    throw InputError(fmt::format(
        "privacy: the clipped-count noise z_b = {} leaves no budget for the updates at noise "
        "multiplier z = {} (need 2 z_b > z)",
        count_noise, z));
  return 1.0 / std::sqrt(remaining);
}

void AdaptiveClip::update(double unclipped_fraction) {
  clip_ *= std::exp(-learning_rate_ * (unclipped_fraction - target_));
}

}  // namespace fluence
