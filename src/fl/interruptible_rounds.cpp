#include "fluence/fl/interruptible_rounds.hpp"

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <map>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/signals.hpp"

namespace fluence {

namespace {

// The parts of Federation::part_states, in the order of the saved unit: its scalars are [the
// finished rounds, each part's size], its state theta followed by each part's values. The order
// is the checkpoint's format (a new part goes at the end).
constexpr std::array<const char*, 3> kParts = {"aggregator", "server_optimizer", "client_update"};

void pack(int round, const std::vector<double>& theta,
          const std::map<std::string, std::vector<double>>& parts, std::vector<double>& scalars,
          std::vector<double>& state) {
  scalars = {static_cast<double>(round)};
  state = theta;
  std::size_t packed = 0;
  for (const char* name : kParts) {
    const auto found = parts.find(name);
    const std::size_t size = found == parts.end() ? 0 : found->second.size();
    scalars.push_back(static_cast<double>(size));
    if (size == 0) continue;
    state.insert(state.end(), found->second.begin(), found->second.end());
    ++packed;
  }
  if (packed != parts.size())
    throw RuntimeError("a federation part's state has no place in a partial retrain");
}

TrainingResume unpack(const std::vector<double>& scalars, const std::vector<double>& state,
                      std::size_t parameters, const std::string& name) {
  const auto misfit = [&] {
    return InputError(fmt::format("checkpoint: the interrupted {} does not fit this run", name));
  };
  if (scalars.size() != 1 + kParts.size() || state.size() < parameters) throw misfit();
  TrainingResume resume;
  resume.completed_rounds = static_cast<int>(scalars[0]);
  resume.theta.assign(state.begin(), state.begin() + static_cast<std::ptrdiff_t>(parameters));
  std::size_t at = parameters;
  for (std::size_t k = 0; k < kParts.size(); ++k) {
    const auto size = static_cast<std::size_t>(scalars[1 + k]);
    if (size > state.size() - at) throw misfit();
    if (size > 0)
      resume.parts[kParts[k]].assign(state.begin() + static_cast<std::ptrdiff_t>(at),
                                     state.begin() + static_cast<std::ptrdiff_t>(at + size));
    at += size;
  }
  if (at != state.size()) throw misfit();
  return resume;
}

}  // namespace

TrainingResult InterruptibleRounds::train(Federation& federation, const FederationConfig& config,
                                          const TrainingResume* start) {
  if (!partial_) return federation.train(config, {}, nullptr, {}, start);
  TrainingResume resumed;
  std::vector<double> scalars;
  if (const std::vector<double>* saved = partial_->resume(key_, &scalars)) {
    resumed = unpack(scalars, *saved, federation.parameters(), name_);
    start = &resumed;
    log::info("resuming {} after {} rounds (from the checkpoint)", name_, resumed.completed_rounds);
  }
  bool saved = false;
  // Every rank polls after every round, in step. A stop signal during a round gives that round
  // up (Federation::train) and lands here for the round before, with the signal seen.
  const auto after_round = [&](int round, const std::vector<double>& theta,
                               const std::vector<RoundMetrics>&) {
    if (!stop_inside_unit_anywhere()) return false;
    std::vector<double> state;
    pack(round, theta, federation.part_states(), scalars, state);
    partial_->interrupted(key_, scalars, std::move(state), name_, fmt::format("{} rounds", round));
    saved = true;
    return true;
  };
  TrainingResult result = federation.train(config, {}, nullptr, after_round, start);
  stopped_ = result.stopped;
  if (stopped_ && !saved) throw RuntimeError(fmt::format("{} stopped unsaved", name_));
  return result;
}

}  // namespace fluence
