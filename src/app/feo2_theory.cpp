// fluence feo2-theory DECK: simulate seed 004's federated point estimation (§4) and compare the
// server's empirical variance for each ratio r with Lemma 1's sigma_s^2(r) and r*; write
// <out>/results.h5.
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/io/results.hpp"
#include "fluence/privacy/point_estimation.hpp"
#include "run_context.hpp"

namespace fluence::app {

int run_feo2_theory(const CommandLine& command_line) {
  RunContext run(command_line);
  const PointEstimationConfig config = PointEstimationConfig::from_deck(run.deck());
  run.prepare_output();
  Stopwatch clock;
  const PointEstimationResult result = simulate_point_estimation(config);
  log::info(
      "federated point estimation: N = {} ({} opt out), n_s = {}, sigma_c^2 = {:.4g}, "
      "gamma^2 = {:.4g}, {} trials on {} rank(s) in {}",
      config.clients, config.opt_out_clients(), config.samples, config.client_variance(),
      config.gamma2, config.trials, world_size(), format_duration(clock.seconds()));
  log::info("{:>12}  {:>14}  {:>14}  {:>9}", "r", "empirical", "sigma_s^2(r)", "rel. diff");
  for (std::size_t k = 0; k < result.ratios.size(); ++k)
    log::info("{:>12.6g}  {:>14.6g}  {:>14.6g}  {:>8.2f}%{}", result.ratios[k],
              result.empirical_variance[k], result.theoretical_variance[k],
              100.0 * (result.empirical_variance[k] / result.theoretical_variance[k] - 1.0),
              k + 1 == result.ratios.size() ? "  (r*)" : "");
  // No set-up: the resources' set-up time is NaN (it reads no data).
  return run.finish([&](ResultsFile& file) {
    file.coordinate("/feo2_theory/ratio", result.ratios, "1", "ratio r (the last is r*)");
    file.dataset("/feo2_theory/empirical_variance", result.empirical_variance,
                 {{"ratio"}, "1", "mean over trials of the squared error"});
    file.dataset("/feo2_theory/theoretical_variance", result.theoretical_variance,
                 {{"ratio"}, "1", "variance of Lemma 1"});
    file.scalar("/feo2_theory/r_star", result.r_star, "1", "optimal ratio r*");
    file.scalar("/feo2_theory/client_variance", config.client_variance(), "1",
                "client variance sigma_c^2");
  });
}

}  // namespace fluence::app
