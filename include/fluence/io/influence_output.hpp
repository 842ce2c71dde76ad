#pragma once
#include "fluence/influence/client_influence.hpp"
#include "fluence/influence/unlearning.hpp"
#include "fluence/io/results.hpp"

namespace fluence {

/// /hessian/eigenvalue_min, eigenvalue_max, condition_number when the spectrum was computed.
void write_hessian_spectrum(ResultsFile& file, const std::optional<HessianSpectrum>& spectrum);

/// `path` (e.g. /influence/model_gradient_norm): ||grad h|| at the model the scores are computed
/// at, with the attributes `stationary` (1 when within `tolerance`) and `tolerance`.
void write_model_stationarity(ResultsFile& file, const std::string& path,
                              const Stationarity& stationarity);

/// /influence/*, /hessian/*, /ihvp/* of `fluence influence` (docs/outputs.md). Collective: the
/// parameter-change vectors are written by the ranks that own the clients.
void write_influence_output(ResultsFile& file, const FederatedProblem& problem,
                            const InfluenceConfig& config, const ClientInfluence& result);

/// /unlearning/* of `influence.unlearning_clients` (docs/outputs.md).
void write_unlearning_output(ResultsFile& file, const Unlearning& result);

/// /lds/* of `influence.lds_subsets` (docs/outputs.md).
void write_lds_output(ResultsFile& file, const ClientLds& result);

}  // namespace fluence
