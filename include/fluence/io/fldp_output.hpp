#pragma once
#include "fluence/fldp/fldp.hpp"
#include "fluence/io/results.hpp"

namespace fluence {

/// /fldp/* of `fluence fldp` (docs/outputs.md). Every value is replicated; rank 0 writes.
void write_fldp_output(ResultsFile& file, const FederatedProblem& problem,
                       const InfluenceConfig& influence, const FldpConfig& config,
                       const FldpResult& result);

}  // namespace fluence
