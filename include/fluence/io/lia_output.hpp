#pragma once
// /lia/... of results.h5 (docs/outputs.md): the filtering outcome, its metrics and privacy levels,
// the sign check, the FL comparison and the minority experiment.
#include "fluence/io/results.hpp"
#include "fluence/lia/lia.hpp"

namespace fluence {

void write_lia_output(ResultsFile& file, const lia::LiaConfig& config,
                      const lia::LiaResult& result);

}  // namespace fluence
