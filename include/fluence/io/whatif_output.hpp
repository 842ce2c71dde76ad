#pragma once
#include "fluence/io/results.hpp"
#include "fluence/whatif/whatif.hpp"

namespace fluence {

/// /whatif/* of `fluence whatif` (docs/outputs.md). Every value is replicated; rank 0 writes.
/// `training_seconds` is the time to obtain the trained model (Table IV's first row).
void write_whatif_output(ResultsFile& file, const InfluenceConfig& influence,
                         const WhatifConfig& config, const WhatifResult& result,
                         double training_seconds);

}  // namespace fluence
