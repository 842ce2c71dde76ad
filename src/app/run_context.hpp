#pragma once
// The opening and closing of a command's run, done once for every command that writes a results
// file (docs/extending.md "A command"). A command reads as its table of contents, in the phases'
// order (deal.II step-40's run()):
//
//   RunContext run(command_line, {.checkpoints = "fldp"});  // open: stop handlers, the deck
//   const FldpConfig config = ...from_deck(run.deck());     // the command's own settings
//   run.prepare_output();            // the output directory, the checkpoints (--restart)
//   FederatedProblem problem = run.set_up();              // build_problem: PETSc stage Set-up
//   auto trained = run.train_model(federation, training, "cases");  // stage Training
//   ...the command's own work, checkpointed through trained->sweep...
//   return run.finish([&](ResultsFile& file) { ... });    // stage Output: results.h5
//
// The command's own settings are read between opening and prepare_output, so that a deck refused
// there leaves no output directory behind.
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "checkpoints.hpp"
#include "fluence/app/cli.hpp"
#include "fluence/core/config.hpp"
#include "fluence/fl/problem.hpp"
#include "fluence/io/results.hpp"
#include "trained_model.hpp"

namespace fluence::app {

struct RunOptions {
  /// The command's name in its checkpoints (CommandCheckpoints); empty: it takes no checkpoints
  /// and keeps the default stop signals (a signal ends it at once).
  std::string checkpoints;
};

/// The trained model a sweep starts from, and the sweep's checkpoints (each holding the model).
struct TrainedSweep {
  TrainedModel model;
  SweepCheckpoints sweep;
};

class RunContext {
 public:
  /// Opening: the stop handlers (first, for a command with checkpoints: a signal during set-up
  /// stops at the first unit boundary), then the deck (--set and --out applied).
  RunContext(const CommandLine& command_line, RunOptions options = {});

  const CommandLine& command_line() const { return command_line_; }
  const Deck& deck() const { return deck_; }
  const std::string& output_directory() const { return output_directory_; }
  /// Progress lines wanted (no --quiet).
  bool verbose() const { return !command_line_.quiet; }

  /// The output directory made ready (--force), then the command's checkpoints (the --restart
  /// checkpoint read; collective).
  void prepare_output();
  /// After prepare_output, for a command with checkpoints.
  CommandCheckpoints& checkpoints();

  /// Set-up: the federated problem of the deck (data read, clients laid out, model built, memory
  /// checked), in the PETSc stage Set-up, timed for the results' resources.
  FederatedProblem set_up();
  /// The seconds set_up took (NaN before, and for a command that reads no data).
  double setup_seconds() const { return setup_seconds_; }
  /// For a command whose set-up is part of its own work (lia): the seconds it took.
  void record_setup_seconds(double seconds) { setup_seconds_ = seconds; }

  /// Training: the model the sweep starts from (trained, --model, or the checkpoint's;
  /// obtain_trained_model) and the sweep's checkpoints, whose units `unit` names in messages.
  /// nullopt: a stop signal ended training or came before the sweep (checkpoint written; the
  /// command exits kExitStopped).
  std::optional<TrainedSweep> train_model(Federation& federation, const FederationConfig& training,
                                          std::string unit);

  /// Closing, in the PETSc stage Output: results.h5 with the run's attributes (invocation, seed,
  /// resolved deck) and resources, then what `write` adds; committed (renamed into place). Returns
  /// its path.
  std::string write_results(const std::function<void(ResultsFile&)>& write);
  /// write_results, logging "results: PATH"; returns the exit code 0.
  int finish(const std::function<void(ResultsFile&)>& write);

 private:
  const CommandLine& command_line_;
  RunOptions options_;
  Deck deck_;
  std::string output_directory_;
  std::optional<CommandCheckpoints> checkpoints_;
  double setup_seconds_ = std::numeric_limits<double>::quiet_NaN();
};

}  // namespace fluence::app
