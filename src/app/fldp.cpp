// fluence fldp DECK [--restart chk.h5|latest]: parse -> build the federation -> train (or --model,
// or the checkpoint's model) -> for each case, the FLDP-FL estimate of the model after clients
// change eps -> eps' or leave (seed 000), against the exact expected retrain and re-randomized
// retrains, checkpointed per case (docs/operations.md) -> write <out>/results.h5.
#include "fluence/fldp/fldp.hpp"
#include "fluence/app/cli.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
#include "fluence/core/memory.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/signals.hpp"
#include "fluence/influence/memory.hpp"
#include "fluence/io/fldp_output.hpp"
#include "fluence/io/results.hpp"
#include "fluence/io/training_output.hpp"
#include "trained_model.hpp"

namespace fluence::app {

int run_fldp(const CommandLine& command_line) {
  install_stop_handlers();  // first: a signal during set-up stops at the first unit boundary
  Deck deck = read_command_deck(command_line);
  const std::string out_dir = deck.string("output.dir");
  const InfluenceConfig influence = InfluenceConfig::from_deck(deck);
  const FederationConfig training = FederationConfig::from_deck(deck);
  prepare_output_directory(out_dir, command_line.force);
  CommandCheckpoints checkpoints(command_line, deck, "fldp");

  Stopwatch setup_clock;
  FederatedProblem problem = in_stage(Stage::setup, [&] { return build_problem(deck); });
  const double setup_seconds = setup_clock.seconds();
  const FldpConfig config = FldpConfig::from_deck(deck, problem.ldp);
  log::info(
      "fluence fldp: {} clients on {} rank(s), {} training rows, {} parameters, {} case(s) "
      "({:.2f}s set-up)",
      problem.client_rows.size(), world_size(), problem.total_train_rows,
      problem.model->parameters(), config.cases.size(), setup_seconds);
  check_memory(influence_command_memory(problem, influence, training));
  Federation federation(problem);
  const TrainedModel model =
      obtain_trained_model(command_line, deck, federation, training, checkpoints);
  if (model.result.stopped) return kExitStopped;
  SweepCheckpoints sweep = sweep_checkpoints(checkpoints, model, "cases");
  if (sweep.model_ready()) return kExitStopped;

  Stopwatch clock;
  const FldpResult result = run_fldp(federation, model.result.theta, influence, config, training,
                                     !command_line.quiet, &sweep);
  if (result.stopped) return kExitStopped;
  log::info("fldp: {} case(s) in {}", result.cases.size(), format_duration(clock.seconds()));

  LogStage output(Stage::output);
  ResultsFile file(out_dir);
  write_run_attributes(file, command_line.invocation, deck.integer("seed"), deck.resolved_toml());
  write_run_resources(file, setup_seconds);
  write_training_output(file, problem, model.result);
  write_fldp_output(file, problem, influence, config, result);
  log::info("results: {}", file.commit());
  return 0;
}

}  // namespace fluence::app
