#include "trained_model.hpp"

#include <fmt/format.h>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
#include "fluence/io/model_input.hpp"
#include "train_checkpoint.hpp"

namespace fluence::app {

namespace {

// The finished model's scalars, stored as the array `model/final` in this order.
struct FinalNumbers {
  double train_loss = 0.0, test_loss = 0.0, test_accuracy = 0.0;
  int polish_steps = 0;
  double seconds = 0.0;  // TrainedModel::seconds
};
const ScalarFields<FinalNumbers> kFinalNumbers = {{"train_loss", &FinalNumbers::train_loss},
                                                  {"test_loss", &FinalNumbers::test_loss},
                                                  {"test_accuracy", &FinalNumbers::test_accuracy},
                                                  {"polish_steps", &FinalNumbers::polish_steps},
                                                  {"seconds", &FinalNumbers::seconds}};

// The finished model as a sweep checkpoint stores it: what write_training_output needs.
StateArrays model_state(const TrainedModel& model) {
  const TrainingResult& result = model.result;
  StateArrays arrays =
      training_state(static_cast<int>(result.history.size()), result.theta, result.history, nullptr)
          .arrays;
  StateArrays state;
  for (auto& [name, values] : arrays) state["model/" + name] = std::move(values);
  state["model/final"] =
      kFinalNumbers.pack({result.final_metrics.train_loss, result.final_metrics.test_loss,
                          result.final_metrics.test_accuracy, result.polish_steps, model.seconds});
  return state;
}

TrainedModel restore_model(const StateArrays& state, std::size_t parameters) {
  CheckpointState training;
  for (const auto& [name, values] : state)
    if (name.rfind("model/", 0) == 0 && name != "model/final")
      training.arrays[name.substr(6)] = values;
  const auto rounds = training.arrays.find("history/round");
  training.round = rounds == training.arrays.end() ? 0 : static_cast<int>(rounds->second.size());
  TrainedModel model;
  const TrainingResume resume = resume_training(training, parameters, training.round, nullptr);
  model.result.theta = resume.theta;
  model.result.history = resume.history;
  FinalNumbers final;
  kFinalNumbers.read(state, "model/final", final);
  model.result.final_metrics.round = training.round;
  model.result.final_metrics.train_loss = final.train_loss;
  model.result.final_metrics.test_loss = final.test_loss;
  model.result.final_metrics.test_accuracy = final.test_accuracy;
  model.result.polish_steps = final.polish_steps;
  model.seconds = final.seconds;
  return model;
}

// Trains from scratch or from a training-phase checkpoint, checkpointing rounds like train.
TrainingResult train_model(const CommandLine& command_line, Federation& federation,
                           const FederationConfig& config, CommandCheckpoints& checkpoints) {
  std::optional<TrainingResume> resume;
  if (const CheckpointState* restored = checkpoints.restored()) {
    resume = resume_training(*restored, federation.parameters(), config.rounds, nullptr);
    log::info("restart: training continues after round {}", restored->round);
  }
  FederationConfig training = config;
  training.polish_verbose = !command_line.quiet;
  return federation.train(
      training,
      [&](const RoundMetrics& m) {
        if (command_line.quiet) return;
        log::info("round {:>5d}/{}  test loss {:.5f}  test acc {:6.2f}%  elapsed {}  ETA {}",
                  m.round, config.rounds, m.test_loss, 100.0 * m.test_accuracy,
                  format_duration(m.wall_time), format_eta(m.wall_time, m.round, config.rounds));
      },
      {},
      [&](int round, const std::vector<double>& theta, const std::vector<RoundMetrics>& history) {
        return checkpoints.boundary(
            round, checkpoints.due(round - 1, round),
            [&] { return training_state(round, theta, history, nullptr).arrays; },
            fmt::format("round {}", round));
      },
      resume ? &*resume : nullptr);
}

}  // namespace

TrainedModel obtain_trained_model(const CommandLine& command_line, const Deck& deck,
                                  Federation& federation, const FederationConfig& config,
                                  CommandCheckpoints& checkpoints) {
  TrainedModel model;
  const CheckpointState* restored = checkpoints.restored();
  if (restored && restored->arrays.count("model/final")) {
    model = restore_model(restored->arrays, federation.parameters());
    if (!command_line.model.empty())
      log::info("model: from the checkpoint ({} is not read)", command_line.model);
    else
      log::info("model: from the checkpoint");
  } else if (command_line.model.empty() || restored) {
    if (!command_line.model.empty())
      log::warn("--model {} is not read: the checkpoint continues the training it started",
                command_line.model);
    Stopwatch clock;
    model.result = in_stage(Stage::training, [&] {
      return train_model(command_line, federation, config, checkpoints);
    });
    if (model.result.stopped) return model;
    model.seconds = clock.seconds();
  } else {
    Stopwatch clock;
    model.result.theta = read_trained_theta(command_line.model, federation.problem(), deck);
    std::tie(model.result.final_metrics.test_loss, model.result.final_metrics.test_accuracy) =
        federation.evaluate_test(model.result.theta);
    model.result.final_metrics.train_loss = federation.objective(model.result.theta);
    model.seconds = clock.seconds();
    log::info("model: {} (loaded)", command_line.model);
  }
  TrainingResult& result = model.result;
  std::vector<double> gradient;
  federation.gradient(result.theta, gradient);
  result.gradient_norm = norm2(gradient);
  log::info("model: test loss {:.6f}  test accuracy {:.2f}%  |grad h| {:.3e}",
            result.final_metrics.test_loss, 100.0 * result.final_metrics.test_accuracy,
            result.gradient_norm);
  // Whether |grad h| is small enough is the command's to say (model_stationarity: flagged in the
  // results file and warned, against federation.tolerance).
  return model;
}

SweepCheckpoints sweep_checkpoints(CommandCheckpoints& checkpoints, const TrainedModel& model,
                                   std::string unit) {
  return SweepCheckpoints(checkpoints, model_state(model),
                          static_cast<int>(model.result.history.size()) + 1, std::move(unit));
}

}  // namespace fluence::app
