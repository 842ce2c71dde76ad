#pragma once
// The trained model the post-training commands (influence, fldp, whatif) start from: trained here
// (its rounds checkpointed and resumed like `fluence train`'s), read from an earlier run's
// results.h5 (--model) and checked against this deck's problem, or taken from the checkpoint of an
// interrupted sweep.
#include "checkpoints.hpp"
#include "fluence/app/cli.hpp"
#include "fluence/fl/federation.hpp"

namespace fluence::app {

struct TrainedModel {
  TrainingResult result;  // result.stopped: a stop signal ended training (checkpoint written)
  double seconds = 0.0;   // training or loading, as first measured
};

/// Collective. Logs the model's test metrics and warns when |grad h| shows it is not the exact
/// minimizer that influence functions assume; result.gradient_norm is set.
/// A --model file must come from a run of this deck's model (read_trained_theta).
TrainedModel obtain_trained_model(const CommandLine& command_line, const Deck& deck,
                                  Federation& federation, const FederationConfig& config,
                                  CommandCheckpoints& checkpoints);

/// The sweep's checkpoints, each also holding `model`, numbered after its training rounds.
SweepCheckpoints sweep_checkpoints(CommandCheckpoints& checkpoints, const TrainedModel& model,
                                   std::string unit);

}  // namespace fluence::app
