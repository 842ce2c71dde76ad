#pragma once
#include "fluence/fl/private_training.hpp"
#include "fluence/io/results.hpp"

namespace fluence {

/// /privacy/* of a private `fluence train` (docs/outputs.md). Rank 0 writes.
void write_privacy_output(ResultsFile& file, const PrivacyConfig& config,
                          const PrivacyHistory& history);

/// /feo2/* (seed 004 §5.2 metrics per round; NaN where not evaluated).
void write_feo2_output(ResultsFile& file, const Feo2Metrics& metrics);

}  // namespace fluence
