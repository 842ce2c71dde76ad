#include "train_checkpoint.hpp"

#include <fmt/format.h>

#include "fluence/core/error.hpp"

namespace fluence::app {

namespace {

const std::vector<double>& array(const CheckpointState& state, const std::string& name) {
  return state_array(state.arrays, name);
}

}  // namespace

CheckpointState training_state(int round, const std::vector<double>& theta,
                               const std::vector<RoundMetrics>& history,
                               const PrivateTraining* private_training) {
  CheckpointState state;
  state.round = round;
  state.arrays["theta"] = theta;
  auto& rounds = state.arrays["history/round"];
  auto& train_loss = state.arrays["history/train_loss"];
  auto& test_loss = state.arrays["history/test_loss"];
  auto& test_accuracy = state.arrays["history/test_accuracy"];
  auto& wall_time = state.arrays["history/wall_time"];
  for (const auto& m : history) {
    rounds.push_back(m.round);
    train_loss.push_back(m.train_loss);
    test_loss.push_back(m.test_loss);
    test_accuracy.push_back(m.test_accuracy);
    wall_time.push_back(m.wall_time);
  }
  if (private_training) private_training->save_state(state.arrays);
  return state;
}

TrainingResume resume_training(const CheckpointState& state, std::size_t parameters, int rounds,
                               PrivateTraining* private_training) {
  TrainingResume resume;
  resume.completed_rounds = state.round;
  resume.theta = array(state, "theta");
  if (resume.theta.size() != parameters)
    throw InputError(fmt::format("checkpoint: the model has {} parameters, this run {}",
                                 resume.theta.size(), parameters));
  if (state.round > rounds)
    throw InputError(fmt::format("checkpoint: it is after round {}, but federation.rounds = {}",
                                 state.round, rounds));
  const auto& round = array(state, "history/round");
  for (std::size_t t = 0; t < round.size(); ++t) {
    RoundMetrics m;
    m.round = static_cast<int>(round[t]);
    m.train_loss = array(state, "history/train_loss").at(t);
    m.test_loss = array(state, "history/test_loss").at(t);
    m.test_accuracy = array(state, "history/test_accuracy").at(t);
    m.wall_time = array(state, "history/wall_time").at(t);
    resume.history.push_back(m);
  }
  if (private_training) private_training->restore_state(state.arrays);
  return resume;
}

}  // namespace fluence::app
