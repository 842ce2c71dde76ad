// fluence influence DECK [--restart chk.h5|latest]: parse -> build the federation -> train (or
// --model, or the checkpoint's model) -> influence of removing each client (optionally against
// exact retraining), checkpointed per client solve and retrain (docs/operations.md) -> write
// <out>/results.h5.
#include "fluence/app/cli.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
#include "fluence/core/memory.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/signals.hpp"
#include "fluence/influence/client_influence.hpp"
#include "fluence/influence/memory.hpp"
#include "fluence/io/influence_output.hpp"
#include "fluence/io/results.hpp"
#include "fluence/io/training_output.hpp"
#include "trained_model.hpp"

namespace fluence::app {

namespace {
// The problem's memory and the parameter-change vectors of a rank's share of the clients
// (influence.vectors), checked before training rather than found missing after it. The share is
// the average, the same on every rank, so that every rank decides alike.
std::vector<MemoryTerm> influence_memory(const FederatedProblem& problem,
                                         const InfluenceConfig& config,
                                         const FederationConfig& training) {
  std::vector<MemoryTerm> memory = influence_command_memory(problem, config, training);
  const double clients = static_cast<double>(problem.client_rows.size()) / world_size();
  const double parameters = static_cast<double>(problem.model->parameters());
  if (config.vectors)
    memory.push_back({8.0 * clients * parameters,
                      fmt::format("influence.vectors: {} clients per rank x {} parameters", clients,
                                  parameters)});
  return memory;
}
}  // namespace

int run_influence(const CommandLine& command_line) {
  install_stop_handlers();  // first: a signal during set-up stops at the first unit boundary
  Deck deck = read_command_deck(command_line);
  const std::string out_dir = deck.string("output.dir");
  const InfluenceConfig config = InfluenceConfig::from_deck(deck);
  const FederationConfig training = FederationConfig::from_deck(deck);
  prepare_output_directory(out_dir, command_line.force);
  CommandCheckpoints checkpoints(command_line, deck, "influence");

  Stopwatch setup_clock;
  FederatedProblem problem = in_stage(Stage::setup, [&] { return build_problem(deck); });
  const double setup_seconds = setup_clock.seconds();
  log::info(
      "fluence influence: {} clients on {} rank(s), {} training rows, {} parameters ({:.2f}s "
      "set-up)",
      problem.client_rows.size(), world_size(), problem.total_train_rows,
      problem.model->parameters(), setup_seconds);
  check_memory(influence_memory(problem, config, training));
  Federation federation(problem);
  const TrainedModel model =
      obtain_trained_model(command_line, deck, federation, training, checkpoints);
  if (model.result.stopped) return kExitStopped;
  SweepCheckpoints sweep = sweep_checkpoints(checkpoints, model, "client solves and retrains");
  if (sweep.model_ready()) return kExitStopped;

  Stopwatch clock;
  const ClientInfluence influence = client_removal_influence(federation, model.result.theta, config,
                                                             training, !command_line.quiet, &sweep);
  if (influence.stopped) return kExitStopped;
  log::info("influence: {} clients scored in {}", influence.estimate.size(),
            format_duration(clock.seconds()));

  LogStage output(Stage::output);
  ResultsFile file(out_dir);
  write_run_attributes(file, command_line.invocation, deck.integer("seed"), deck.resolved_toml());
  write_run_resources(file, setup_seconds);
  write_training_output(file, problem, model.result);
  write_influence_output(file, problem, config, influence);
  log::info("results: {}", file.commit());
  return 0;
}

}  // namespace fluence::app
