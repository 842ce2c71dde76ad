#pragma once
// The trained model the post-training commands (influence, fldp) start from: trained here, or read
// from an earlier run's results.h5 (--model) and checked against this deck's problem.
#include "fluence/app/cli.hpp"
#include "fluence/fl/federation.hpp"

namespace fluence::app {

/// Collective. Logs the model's test metrics and warns when |grad h| shows it is not the exact
/// minimizer that influence functions assume; result.gradient_norm is set.
TrainingResult obtain_trained_model(const CommandLine& command_line, Federation& federation,
                                    const FederationConfig& config);

}  // namespace fluence::app
