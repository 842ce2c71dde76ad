// fluence whatif DECK [--restart chk.h5|latest]: parse -> build the curator's data (spread over
// clients and ranks) -> train (or --model, or the checkpoint's model) -> s_test once, then every
// (fraction, eps) cell of the what-if grid (seed 001), and with whatif.retrain the randomized and
// expected retrains, checkpointed per unit (docs/operations.md) -> write <out>/results.h5.
#include "fluence/whatif/whatif.hpp"
#include "fluence/app/cli.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/memory.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/influence/memory.hpp"
#include "fluence/io/results.hpp"
#include "fluence/io/training_output.hpp"
#include "fluence/io/whatif_output.hpp"
#include "run_context.hpp"

#include <cmath>

namespace fluence::app {

namespace {

// Mean over the defined (finite) values.
double mean(const std::vector<double>& values) {
  double total = 0.0;
  int count = 0;
  for (double value : values)
    if (std::isfinite(value)) {
      total += value;
      ++count;
    }
  return count > 0 ? total / count : std::nan("");
}

void log_metrics(const std::string& name, const EstimateMetrics& metrics) {
  log::info(
      "whatif {}: mean MAE {:.3g}, rho {:.3f} vs the mean of the randomized retrains (per "
      "draw {:.3f}); MAE {:.3g}, rho {:.3f} vs the expected retrain",
      name, mean(metrics.mae), mean(metrics.spearman), mean(metrics.spearman_per_draw),
      mean(metrics.mae_expected), mean(metrics.spearman_expected));
}

}  // namespace

int run_whatif(const CommandLine& command_line) {
  RunContext run(command_line, {.checkpoints = "whatif"});
  const InfluenceConfig influence = InfluenceConfig::from_deck(run.deck());
  const FederationConfig training = FederationConfig::from_deck(run.deck());
  run.prepare_output();

  FederatedProblem problem = run.set_up();
  const WhatifConfig config = WhatifConfig::from_deck(run.deck(), problem);
  log::info(
      "fluence whatif: {} training rows on {} client(s), {} rank(s), {} parameters; "
      "{} fractions x {} eps x {} variant(s) ({:.2f}s set-up)",
      problem.total_train_rows, problem.client_rows.size(), world_size(),
      problem.model->parameters(), config.fractions.size(), config.epsilons.size(),
      config.variants.size(), run.setup_seconds());
  check_memory(influence_command_memory(problem, influence, training));
  Federation federation(problem);
  std::optional<TrainedSweep> trained =
      run.train_model(federation, training, "units (second-order rows, retrain chains)");
  if (!trained) return kExitStopped;
  const TrainedModel& model = trained->model;

  const WhatifResult result =
      run_whatif(federation, model.result.theta, influence, config, run.verbose(), &trained->sweep);
  if (result.stopped) return kExitStopped;
  log::info("whatif: group {} = {} has {} records; S_te {} rows; IHVP {:.3g} s, {} cells {:.3g} s",
            config.group_attribute, config.group_value_names.front(), result.group_size,
            result.test_rows, result.time_ihvp, config.cells() * config.variants.size(),
            result.time_cells);
  for (const auto& variant : result.variants) {
    if (!config.retrain) continue;
    log_metrics(to_string(variant.variant) + " (first order)", variant.first);
    if (config.second_order)
      log_metrics(to_string(variant.variant) + " (second order)", variant.second);
  }
  if (config.retrain)
    log::info("whatif: {} retrains in {} ({} Newton steps, {} Hessian products)",
              result.retrain_count, format_duration(result.time_retrain), result.retrain_iterations,
              result.retrain_hessian_products);

  return run.finish([&](ResultsFile& file) {
    write_training_output(file, problem, model.result);
    write_whatif_output(file, influence, config, result, model.seconds);
  });
}

}  // namespace fluence::app
