#include "train_checkpoint.hpp"

#include <fmt/format.h>

#include <type_traits>
#include <variant>

#include "fluence/core/error.hpp"

namespace fluence::app {

namespace {

const std::vector<double>& array(const CheckpointState& state, const std::string& name) {
  return state_array(state.arrays, name);
}

// The per-round metrics, each stored as the array `history/<name>` with a value per round.
struct HistoryColumn {
  const char* name;
  std::variant<int RoundMetrics::*, double RoundMetrics::*> member;
};
const HistoryColumn kHistoryColumns[] = {{"history/round", &RoundMetrics::round},
                                         {"history/train_loss", &RoundMetrics::train_loss},
                                         {"history/test_loss", &RoundMetrics::test_loss},
                                         {"history/test_accuracy", &RoundMetrics::test_accuracy},
                                         {"history/wall_time", &RoundMetrics::wall_time}};

}  // namespace

CheckpointState training_state(int round, const std::vector<double>& theta,
                               const std::vector<RoundMetrics>& history,
                               const PrivateTraining* private_training,
                               const std::map<std::string, std::vector<double>>& parts) {
  CheckpointState state;
  state.round = round;
  state.arrays["theta"] = theta;
  for (const auto& [part, values] : parts) state.arrays["parts/" + part] = values;
  for (const HistoryColumn& column : kHistoryColumns) {
    auto& values = state.arrays[column.name];
    for (const RoundMetrics& m : history)
      values.push_back(
          std::visit([&](auto member) { return static_cast<double>(m.*member); }, column.member));
  }
  if (private_training) private_training->save_state(state.arrays);
  return state;
}

TrainingResume resume_training(const CheckpointState& state, std::size_t parameters, int rounds,
                               PrivateTraining* private_training) {
  TrainingResume resume;
  resume.completed_rounds = state.round;
  resume.theta = array(state, "theta");
  for (const auto& [name, values] : state.arrays)
    if (name.rfind("parts/", 0) == 0) resume.parts[name.substr(6)] = values;
  if (resume.theta.size() != parameters)
    throw InputError(fmt::format("checkpoint: the model has {} parameters, this run {}",
                                 resume.theta.size(), parameters));
  if (state.round > rounds)
    throw InputError(fmt::format("checkpoint: it is after round {}, but federation.rounds = {}",
                                 state.round, rounds));
  resume.history.resize(array(state, "history/round").size());
  for (const HistoryColumn& column : kHistoryColumns) {
    const auto& values = array(state, column.name);
    for (std::size_t t = 0; t < resume.history.size(); ++t)
      std::visit(
          [&](auto member) {
            using Value = std::remove_reference_t<decltype(resume.history[t].*member)>;
            resume.history[t].*member = static_cast<Value>(values.at(t));
          },
          column.member);
  }
  if (private_training) private_training->restore_state(state.arrays);
  return resume;
}

}  // namespace fluence::app
