// fluence lia DECK: parse -> run the LIA experiment (src/lia), checkpointed after the filtering
// stage and after every FL method (docs/operations.md) -> write <out>/results.h5.
#include "fluence/lia/lia.hpp"

#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/data/source.hpp"
#include "fluence/io/lia_output.hpp"
#include "fluence/io/results.hpp"
#include "run_context.hpp"

namespace fluence::app {

int run_lia(const CommandLine& command_line) {
  RunContext run(command_line, {.checkpoints = "lia"});
  run.prepare_output();
  SweepCheckpoints sweep(run.checkpoints(), {}, 0, "stages (filtering, FL methods)");
  Stopwatch clock;
  // The experiment builds its own data and models (its set-up time is result.time_setup).
  const lia::LiaResult result = lia::run_lia(run.deck(), run.verbose(), &sweep);
  if (result.stopped) return kExitStopped;
  // The config again for the writer (cheap; the class count is known from the result's run).
  const lia::LiaConfig config =
      lia::LiaConfig::from_deck(run.deck(), static_cast<int>(result.classes));
  run.record_setup_seconds(result.time_setup);
  const std::string results =
      run.write_results([&](ResultsFile& file) { write_lia_output(file, config, result); });
  log::info("lia: done in {}; results: {}", format_duration(clock.seconds()), results);
  return 0;
}

}  // namespace fluence::app
