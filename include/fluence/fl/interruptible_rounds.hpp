#pragma once
// A retrain by federation rounds (influence.retrain_mode = "full" or "warm") as a unit a stop may
// interrupt at its round boundaries (docs/operations.md "Stops inside a unit"), as
// InterruptibleNewton (core/newton.hpp) does for a Newton retrain. The state at a boundary is what
// `fluence train` checkpoints after a round (TrainingResume: the round, theta and the parts'
// states, Federation::part_states); the sampler is keyed by the round and keeps none.
#include <string>
#include <utility>
#include <vector>

#include "fluence/core/resume.hpp"
#include "fluence/fl/federation.hpp"

namespace fluence {

class InterruptibleRounds {
 public:
  /// `partial` null: the rounds run to their end (no checkpoints to save a partial unit to).
  InterruptibleRounds(PartialUnit* partial, std::vector<double> key, std::string name)
      : partial_(partial), key_(std::move(key)), name_(std::move(name)) {}
  /// Collective: federation.train(config, ..., start), polled after every round
  /// (stop_inside_unit_anywhere). When `partial` holds this unit, the rounds continue from its
  /// state instead of `start` (logs "resuming NAME after k rounds"). A poll that stops ends the
  /// training there: stopped() is true and `partial` holds the state after that round.
  TrainingResult train(Federation& federation, const FederationConfig& config,
                       const TrainingResume* start = nullptr);
  bool stopped() const { return stopped_; }

 private:
  PartialUnit* partial_;
  std::vector<double> key_;
  std::string name_;
  bool stopped_ = false;
};

}  // namespace fluence
