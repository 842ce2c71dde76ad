#pragma once
// What `fluence train` puts in its checkpoints and takes back on --restart (docs/operations.md):
// the model, the metrics so far and the private-training state, as named arrays.
#include "fluence/fl/federation.hpp"
#include "fluence/fl/private_training.hpp"
#include "fluence/io/checkpoint.hpp"

namespace fluence::app {

CheckpointState training_state(int round, const std::vector<double>& theta,
                               const std::vector<RoundMetrics>& history,
                               const PrivateTraining* private_training,
                               const std::map<std::string, std::vector<double>>& parts = {});

/// The resume point of a checkpoint (restores `private_training` when given). InputError when the
/// checkpoint does not fit this run (model size, rounds).
TrainingResume resume_training(const CheckpointState& state, std::size_t parameters, int rounds,
                               PrivateTraining* private_training);

}  // namespace fluence::app
