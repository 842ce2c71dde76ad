// fluence privacy --noise Z | --epsilon E --sampling-rate Q --steps T --delta D [--accountant A]
// [--json]: a registered accountant (docs/math.md §7; RDP by default) from the command line, as
// tensorflow/privacy's compute_dp_sgd_privacy. Rank 0 prints; nothing is written.
#include <cmath>

#include "fluence/app/cli.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/privacy/accountant.hpp"

namespace fluence::app {

namespace {

void print_rdp(const EpsilonReport& spent, double noise, bool inverse,
               const CommandLine::Accounting& a) {
  if (a.json) {
    if (inverse)
      log::info("{{\"noise_multiplier\": {}, \"epsilon\": {}, \"delta\": {}, \"order\": {}}}",
                noise, spent.epsilon, spent.delta, spent.rdp_order);
    else
      log::info("{{\"epsilon\": {}, \"delta\": {}, \"order\": {}}}", spent.epsilon, spent.delta,
                spent.rdp_order);
    return;
  }
  log::info("eps = {:.10g} at delta = {:g} (best RDP order {:g}); q = {:g}, {} steps, noise {:g}",
            spent.epsilon, spent.delta, spent.rdp_order, a.sampling_rate, a.steps, noise);
}

// PLD and PRV (and any accountant registered later): eps with its bracket.
void print_bracketed(const EpsilonReport& spent, double noise, bool inverse,
                     const CommandLine::Accounting& a) {
  if (a.json) {
    log::info(
        "{{{}\"epsilon\": {}, \"delta\": {}, \"accountant\": \"{}\", \"epsilon_lower\": {}, "
        "\"epsilon_estimate\": {}, \"epsilon_upper\": {}}}",
        inverse ? fmt::format("\"noise_multiplier\": {}, ", noise) : "", spent.epsilon, spent.delta,
        a.accountant, spent.lower, spent.estimate, spent.upper);
    return;
  }
  // A lower end of 0 means the accountant knows none: only its upper bound is shown then.
  const std::string bracket = spent.lower > 0.0
                                  ? fmt::format("bracket [{:.10g}, {:.10g}], estimate {:.10g}",
                                                spent.lower, spent.upper, spent.estimate)
                                  : std::string("an upper bound");
  log::info("eps = {:.10g} at delta = {:g} ({} accountant, {}); q = {:g}, {} steps, noise {:g}",
            spent.epsilon, spent.delta, a.accountant, bracket, a.sampling_rate, a.steps, noise);
}

}  // namespace

int run_privacy(const CommandLine& command_line) {
  const auto& a = command_line.privacy;
  if (std::isnan(a.noise) == std::isnan(a.epsilon))
    throw InputError(
        "fluence privacy: give either --noise (to get eps) or --epsilon (to get the "
        "noise multiplier)");
  if (!(a.delta > 0.0 && a.delta < 1.0))
    throw InputError(fmt::format("--delta {} is outside (0, 1)", a.delta));
  const bool inverse = !std::isnan(a.epsilon);
  const double noise = inverse ? accountant_noise_for_epsilon(a.accountant, a.sampling_rate,
                                                              a.steps, a.epsilon, a.delta)
                               : a.noise;
  if (!(noise > 0.0)) throw InputError(fmt::format("--noise {} must be > 0", noise));
  const EpsilonReport spent =
      accountant_epsilon(a.accountant, a.sampling_rate, noise, a.steps, a.delta);
  if (inverse && !a.json)
    log::info("noise multiplier {:.10g} (smallest reaching eps {})", noise, a.epsilon);
  if (a.accountant == "rdp")
    print_rdp(spent, noise, inverse, a);
  else
    print_bracketed(spent, noise, inverse, a);
  if (spent.order_at_edge)
    log::warn(
        "the optimal RDP order {:g} is at the edge of the order grid (1.1 .. 1024): eps may "
        "be loose",
        spent.rdp_order);
  return 0;
}

}  // namespace fluence::app
