#pragma once
// Up-front memory estimates of the influence commands (`influence`, `fldp`, `whatif`; issue 41):
// besides the problem's data and model (FederatedProblem::memory), the training's batch buffers
// (a network's layer outputs for a batch of federation.batch_size rows) and the IHVP solver's
// working set (LiSSA's sampled rows, the explicit solver's dense Hessian), each naming the keys
// that size it. Like every estimate of core/memory.hpp they count only what is surely allocated.
#include <vector>

#include "fluence/core/memory.hpp"
#include "fluence/fl/problem.hpp"
#include "fluence/influence/client_influence.hpp"

namespace fluence {

/// The SGD batch buffers of local training: min(batch_size, the largest client's rows) rows of
/// Model::batch_bytes (none for full-batch steps).
std::vector<MemoryTerm> training_batch_memory(const FederatedProblem& problem,
                                              const LocalTrainingConfig& local);

/// The IHVP solver's working set on each rank: LiSSA's sampled rows (influence.lissa.batch), the
/// explicit solver's dense Hessian and its factor.
std::vector<MemoryTerm> ihvp_memory(const FederatedProblem& problem, const IhvpConfig& config);

/// The block CG of the parameter-change vectors (influence.vectors with influence.block_size != 1,
/// federated Hessian): its blocks of p x block_size and the block product's partial products.
std::vector<MemoryTerm> block_solve_memory(const FederatedProblem& problem,
                                           const InfluenceConfig& influence);

/// problem.memory and the above, for check_memory.
std::vector<MemoryTerm> influence_command_memory(const FederatedProblem& problem,
                                                 const InfluenceConfig& influence,
                                                 const FederationConfig& training);

}  // namespace fluence
