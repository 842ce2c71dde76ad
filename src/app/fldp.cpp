// fluence fldp DECK [--restart chk.h5|latest]: parse -> build the federation -> train (or --model,
// or the checkpoint's model) -> for each case, the FLDP-FL estimate of the model after clients
// change eps -> eps' or leave (seed 000), against the exact expected retrain and re-randomized
// retrains, checkpointed per case (docs/operations.md) -> write <out>/results.h5.
#include "fluence/fldp/fldp.hpp"
#include "fluence/app/cli.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/memory.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/influence/memory.hpp"
#include "fluence/io/fldp_output.hpp"
#include "fluence/io/results.hpp"
#include "fluence/io/training_output.hpp"
#include "run_context.hpp"

namespace fluence::app {

int run_fldp(const CommandLine& command_line) {
  RunContext run(command_line, {.checkpoints = "fldp"});
  const InfluenceConfig influence = InfluenceConfig::from_deck(run.deck());
  const FederationConfig training = FederationConfig::from_deck(run.deck());
  run.prepare_output();

  FederatedProblem problem = run.set_up();
  const FldpConfig config = FldpConfig::from_deck(run.deck(), problem.ldp);
  log::info(
      "fluence fldp: {} clients on {} rank(s), {} training rows, {} parameters, {} case(s) "
      "({:.2f}s set-up)",
      problem.client_rows.size(), world_size(), problem.total_train_rows,
      problem.model->parameters(), config.cases.size(), run.setup_seconds());
  check_memory(influence_command_memory(problem, influence, training));
  Federation federation(problem);
  std::optional<TrainedSweep> trained = run.train_model(federation, training, "cases");
  if (!trained) return kExitStopped;
  const TrainingResult& model = trained->model.result;

  Stopwatch clock;
  const FldpResult result = run_fldp(federation, model.theta, influence, config, training,
                                     run.verbose(), &trained->sweep);
  if (result.stopped) return kExitStopped;
  log::info("fldp: {} case(s) in {}", result.cases.size(), format_duration(clock.seconds()));

  return run.finish([&](ResultsFile& file) {
    write_training_output(file, problem, model);
    write_fldp_output(file, problem, influence, config, result);
  });
}

}  // namespace fluence::app
