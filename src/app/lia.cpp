// fluence lia DECK: parse -> run the LIA experiment (src/lia), checkpointed after the filtering
// stage and after every FL method (docs/operations.md) -> write <out>/results.h5.
#include "fluence/lia/lia.hpp"

#include "checkpoints.hpp"
#include "fluence/app/cli.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/data/source.hpp"
#include "fluence/io/lia_output.hpp"
#include "fluence/io/results.hpp"

namespace fluence::app {

int run_lia(const CommandLine& command_line) {
  Deck deck = read_command_deck(command_line);
  const std::string out_dir = deck.string("output.dir");
  prepare_output_directory(out_dir, command_line.force);
  CommandCheckpoints checkpoints(command_line, deck, "lia");
  SweepCheckpoints sweep(checkpoints, {}, 0, "stages (filtering, FL methods)");
  Stopwatch clock;
  const lia::LiaResult result = lia::run_lia(deck, !command_line.quiet, &sweep);
  if (result.stopped) return kExitStopped;
  // The config again for the writer (cheap; the class count is known from the result's run).
  const lia::LiaConfig config = lia::LiaConfig::from_deck(deck, static_cast<int>(result.classes));
  LogStage output(Stage::output);
  ResultsFile file(out_dir);
  write_run_attributes(file, command_line.invocation, deck.integer("seed"), deck.resolved_toml());
  write_run_resources(file, result.time_setup);
  write_lia_output(file, config, result);
  log::info("lia: done in {}; results: {}", format_duration(clock.seconds()), file.commit());
  return 0;
}

}  // namespace fluence::app
