#include "fluence/influence/memory.hpp"

#include <algorithm>

#include <fmt/core.h>

#include "fluence/core/mpi.hpp"

namespace fluence {

std::vector<MemoryTerm> training_batch_memory(const FederatedProblem& problem,
                                              const LocalTrainingConfig& local) {
  if (local.full_batch || local.batch_size < 1) return {};
  std::size_t largest = 0;
  for (const auto& rows : problem.client_rows) largest = std::max(largest, rows.size());
  // A batch never holds more rows than its client (Model::sgd_epoch sizes its buffers so).
  const std::size_t rows = std::min(static_cast<std::size_t>(local.batch_size), largest);
  const double bytes = problem.model->batch_bytes(rows);
  if (bytes <= 0.0) return {};
  return {{bytes, fmt::format("the training batch buffers: {} rows (federation.batch_size = {}, "
                              "at most the largest client's {} rows) x the model's layer outputs "
                              "and their deltas (model.hidden, model.conv_filters)",
                              rows, local.batch_size, largest)}};
}

std::vector<MemoryTerm> ihvp_memory(const FederatedProblem& problem, const IhvpConfig& config) {
  const double p = static_cast<double>(problem.model->parameters());
  std::vector<MemoryTerm> terms;
  if (config.method == IhvpMethod::explicit_cholesky)
    terms.push_back({16.0 * p * p, fmt::format("influence.solver = \"explicit\": the dense {} x {} "
                                               "Hessian and its Cholesky factor",
                                               p, p)});
  if (config.method == IhvpMethod::lissa && config.lissa.batch > 0) {
    // Every product draws influence.lissa.batch rows over all clients: each rank keeps the
    // positions of those on its clients (batch / ranks on average) and gathers one client's
    // drawn rows at a time (batch / clients on average), 8 bytes a feature and 4 a label.
    const double batch = config.lissa.batch;
    const double clients = std::max<double>(1.0, static_cast<double>(problem.client_rows.size()));
    const double width = problem.model->features();
    terms.push_back(
        {8.0 * batch / world_size() + batch / clients * (8.0 * width + 4.0),
         fmt::format("influence.lissa.batch = {}: the sampled rows' positions ({} per "
                     "rank) and one client's drawn rows ({} rows of {} features)",
                     config.lissa.batch, batch / world_size(), batch / clients, width)});
  }
  return terms;
}

std::vector<MemoryTerm> block_solve_memory(const FederatedProblem& problem,
                                           const InfluenceConfig& influence) {
  if (!influence.vectors || influence.block_size == 1 ||
      influence.scope != HessianScope::federated || influence.ihvp.method != IhvpMethod::cg)
    return {};
  const double p = static_cast<double>(problem.model->parameters());
  const auto clients = static_cast<int>(problem.client_rows.size());
  const int width = influence.block_size > 0 ? std::min(influence.block_size, clients) : clients;
  // block_cg.cpp: the right-hand sides, the solutions and their true residuals, the active
  // columns' iterates and residuals, the new directions and their images, the search block and
  // its image: 9 blocks of p x width; the federated block product's per-client partial products
  // (at most kBlockProductBytes, on the root which gathers them all).
  const double partial = std::min(static_cast<double>(kBlockProductBytes),
                                  8.0 * p * std::max(1, clients) * std::max(1, width));
  return {{72.0 * p * width + partial,
           fmt::format("influence.block_size = {}: the block CG working set, 9 blocks of {} x {} "
                       "and the block product's per-client partial products",
                       influence.block_size, p, width)}};
}

std::vector<MemoryTerm> influence_command_memory(const FederatedProblem& problem,
                                                 const InfluenceConfig& influence,
                                                 const FederationConfig& training) {
  std::vector<MemoryTerm> terms = problem.memory;
  for (auto& term : training_batch_memory(problem, training.local)) terms.push_back(term);
  for (auto& term : ihvp_memory(problem, influence.ihvp)) terms.push_back(term);
  for (auto& term : block_solve_memory(problem, influence)) terms.push_back(term);
  return terms;
}

}  // namespace fluence
