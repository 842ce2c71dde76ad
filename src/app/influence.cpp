// fluence influence DECK [--restart chk.h5|latest]: parse -> build the federation -> train (or
// --model, or the checkpoint's model) -> influence of removing each client (optionally against
// exact retraining), checkpointed per client solve and retrain (docs/operations.md) -> optionally
// verified unlearning and FL-LDS (not checkpointed: redone after a restart) -> write
// <out>/results.h5.
#include "fluence/app/cli.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
#include "fluence/core/memory.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/influence/client_influence.hpp"
#include "fluence/influence/memory.hpp"
#include "fluence/io/influence_output.hpp"
#include "fluence/io/results.hpp"
#include "fluence/io/training_output.hpp"
#include "run_context.hpp"

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
  RunContext run(command_line, {.checkpoints = "influence"});
  const InfluenceConfig config = InfluenceConfig::from_deck(run.deck());
  const FederationConfig training = FederationConfig::from_deck(run.deck());
  run.prepare_output();

  FederatedProblem problem = run.set_up();
  log::info(
      "fluence influence: {} clients on {} rank(s), {} training rows, {} parameters ({:.2f}s "
      "set-up)",
      problem.client_rows.size(), world_size(), problem.total_train_rows,
      problem.model->parameters(), run.setup_seconds());
  check_memory(influence_memory(problem, config, training));
  Federation federation(problem);
  std::optional<TrainedSweep> trained =
      run.train_model(federation, training, "client solves and retrains");
  if (!trained) return kExitStopped;
  const TrainingResult& model = trained->model.result;

  Stopwatch clock;
  const ClientInfluence influence = client_removal_influence(
      federation, model.theta, config, training, run.verbose(), &trained->sweep);
  if (influence.stopped) return kExitStopped;
  double scores_seconds = clock.seconds();
  MPI_Bcast(&scores_seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);  // rank 0's clock, on every rank
  log::info("influence: {} clients scored in {}", influence.estimate.size(),
            format_duration(scores_seconds));
  std::optional<Unlearning> unlearning;
  if (config.unlearning_clients > 0)
    unlearning = in_stage(Stage::retraining, [&] {
      return verify_unlearning(federation, model.theta, config, training, influence.damping,
                               run.verbose());
    });
  std::optional<ClientLds> lds;
  if (config.lds_subsets > 0)
    lds = in_stage(Stage::retraining, [&] {
      return client_lds(federation, model.theta, influence.estimate, config, training,
                        influence.damping, problem.seed, run.verbose());
    });

  return run.finish([&](ResultsFile& file) {
    write_training_output(file, problem, model);
    write_influence_output(file, problem, config, influence);
    file.scalar("/influence/timing/scores", scores_seconds, "s",
                "scoring every client (Hessian, s_test, client gradients), retrains included");
    if (config.scope == HessianScope::federated)
      file.scalar("/influence/timing/s_test", influence.s_test_seconds, "s",
                  "s_test by influence.solver, its set-up included (not the spectrum)");
    if (unlearning) write_unlearning_output(file, *unlearning);
    if (lds) write_lds_output(file, *lds);
  });
}

}  // namespace fluence::app
