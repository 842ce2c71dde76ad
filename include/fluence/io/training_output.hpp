#pragma once
#include "fluence/fl/federation.hpp"
#include "fluence/io/results.hpp"

namespace fluence {

/// /metrics/*, /model/*, /clients/* of a training run (docs/outputs.md). Collective.
void write_training_output(ResultsFile& file, const FederatedProblem& problem,
                           const TrainingResult& result);

}  // namespace fluence
