#include "run_context.hpp"

#include <stdexcept>

#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/signals.hpp"

namespace fluence::app {

namespace {
Deck open_deck(const CommandLine& command_line, const RunOptions& options) {
  if (!options.checkpoints.empty()) install_stop_handlers();
  return read_command_deck(command_line);
}
}  // namespace

RunContext::RunContext(const CommandLine& command_line, RunOptions options)
    : command_line_(command_line),
      options_(std::move(options)),
      deck_(open_deck(command_line_, options_)),
      output_directory_(deck_.string("output.dir")) {}

void RunContext::prepare_output() {
  prepare_output_directory(output_directory_, command_line_.force);
  if (!options_.checkpoints.empty())
    checkpoints_.emplace(command_line_, deck_, options_.checkpoints);
}

CommandCheckpoints& RunContext::checkpoints() {
  if (!checkpoints_)
    throw std::logic_error("RunContext: no checkpoints (none asked for, or before prepare_output)");
  return *checkpoints_;
}

FederatedProblem RunContext::set_up() {
  Stopwatch clock;
  FederatedProblem problem = in_stage(Stage::setup, [&] { return build_problem(deck_); });
  setup_seconds_ = clock.seconds();
  return problem;
}

std::optional<TrainedSweep> RunContext::train_model(Federation& federation,
                                                    const FederationConfig& training,
                                                    std::string unit) {
  CommandCheckpoints& command_checkpoints = checkpoints();
  TrainedModel model =
      obtain_trained_model(command_line_, deck_, federation, training, command_checkpoints);
  if (model.result.stopped) return std::nullopt;
  SweepCheckpoints sweep = sweep_checkpoints(command_checkpoints, model, std::move(unit));
  std::optional<TrainedSweep> trained;
  trained.emplace(TrainedSweep{std::move(model), std::move(sweep)});
  if (trained->sweep.model_ready()) return std::nullopt;
  return trained;
}

std::string RunContext::write_results(const std::function<void(ResultsFile&)>& write) {
  LogStage output(Stage::output);
  ResultsFile file(output_directory_);
  write_run_attributes(file, command_line_.invocation, deck_.integer("seed"),
                       deck_.resolved_toml());
  write_run_resources(file, setup_seconds_);
  write(file);
  return file.commit();
}

int RunContext::finish(const std::function<void(ResultsFile&)>& write) {
  log::info("results: {}", write_results(write));
  return 0;
}

}  // namespace fluence::app
