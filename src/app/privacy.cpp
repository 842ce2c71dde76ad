// fluence privacy --noise Z | --epsilon E --sampling-rate Q --steps T --delta D [--json]: the RDP
// accountant (docs/math.md §7) from the command line, as tensorflow/privacy's
// compute_dp_sgd_privacy. Rank 0 prints; nothing is written.
#include <cmath>

#include "fluence/app/cli.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/privacy/rdp_accountant.hpp"

namespace fluence::app {

int run_privacy(const CommandLine& command_line) {
  const auto& a = command_line.privacy;
  if (std::isnan(a.noise) == std::isnan(a.epsilon))
    throw InputError(
        "fluence privacy: give either --noise (to get eps) or --epsilon (to get the "
        "noise multiplier)");
  if (!(a.delta > 0.0 && a.delta < 1.0))
    throw InputError(fmt::format("--delta {} is outside (0, 1)", a.delta));
  const bool inverse = !std::isnan(a.epsilon);
  const double noise =
      inverse ? noise_for_epsilon(a.sampling_rate, a.steps, a.epsilon, a.delta) : a.noise;
  if (!(noise > 0.0)) throw InputError(fmt::format("--noise {} must be > 0", noise));
  const PrivacySpent spent = dp_sgd_epsilon(a.sampling_rate, noise, a.steps, a.delta);
  if (a.json) {
    if (inverse)
      log::info(
          "{{\"noise_multiplier\": {}, \"epsilon\": {}, \"delta\": {}, "
          "\"order\": {}}}",
          noise, spent.epsilon, spent.delta, spent.order);
    else
      log::info("{{\"epsilon\": {}, \"delta\": {}, \"order\": {}}}", spent.epsilon, spent.delta,
                spent.order);
  } else {
    if (inverse) log::info("noise multiplier {:.10g} (smallest reaching eps {})", noise, a.epsilon);
    log::info("eps = {:.10g} at delta = {:g} (best RDP order {:g}); q = {:g}, {} steps, noise {:g}",
              spent.epsilon, spent.delta, spent.order, a.sampling_rate, a.steps, noise);
  }
  if (spent.order_at_edge)
    log::warn(
        "the optimal RDP order {:g} is at the edge of the order grid (1.1 .. 1024): eps may "
        "be loose",
        spent.order);
  return 0;
}

}  // namespace fluence::app
