#include "fluence/io/training_output.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fluence/core/mpi.hpp"

namespace fluence {

namespace {
void write_metrics(ResultsFile& file, const std::vector<RoundMetrics>& history) {
  std::vector<std::int64_t> round;
  std::vector<double> train_loss, test_loss, test_accuracy, wall_time;
  for (const auto& m : history) {
    round.push_back(m.round);
    train_loss.push_back(m.train_loss);
    test_loss.push_back(m.test_loss);
    test_accuracy.push_back(m.test_accuracy);
    wall_time.push_back(m.wall_time);
  }
  file.dataset("/metrics/round", round);
  file.dataset("/metrics/train_loss", train_loss);
  file.dataset("/metrics/test_loss", test_loss);
  file.dataset("/metrics/test_accuracy", test_accuracy);
  file.dataset("/metrics/wall_time_s", wall_time);
}

void write_model(ResultsFile& file, const FederatedProblem& problem, const TrainingResult& result) {
  const auto& model = *problem.model;
  file.dataset("/model/theta", result.theta, model.theta_shape());
  file.attribute("/model/theta", "features", problem.encoding.column_names(problem.data.train));
  file.attribute("/model/theta", "classes", problem.data.train.class_names);
  file.attribute("/model/theta", "model", model.describe());
  std::vector<std::string> blocks;
  for (const auto& block : model.parameter_blocks()) {
    blocks.push_back(
        fmt::format("{} {} {}", block.name, block.offset, fmt::join(block.shape, "x")));
  }
  file.attribute("/model/theta", "blocks", blocks);
  file.scalar("/model/gradient_norm", result.gradient_norm);
  file.scalar("/model/polish_steps", result.polish_steps);
  file.scalar("/model/train_loss", result.final_metrics.train_loss);
  file.scalar("/model/test_loss", result.final_metrics.test_loss);
  file.scalar("/model/test_accuracy", result.final_metrics.test_accuracy);
  file.scalar("/model/l2", model.l2());
}

// Per-client datasets are written collectively (parallel HDF5): each rank writes the rows of the
// clients it hosts, so nothing per client travels to rank 0.
void write_clients(ResultsFile& file, const FederatedProblem& problem) {
  const int clients = static_cast<int>(problem.client_rows.size());
  const int rank = world_rank();
  const int first = problem.layout->first_client(rank), end = problem.layout->end_client(rank);
  const auto local = static_cast<std::size_t>(end - first);
  const auto total = static_cast<std::size_t>(clients);
  const auto sizes = problem.client_sizes();
  std::vector<std::int64_t> own_sizes(sizes.begin() + first, sizes.begin() + end);
  std::vector<std::int64_t> own_ranks(local, rank);
  file.distributed_rows("/clients/size", total, 0, first, local, own_sizes.data());
  file.distributed_rows("/clients/rank", total, 0, first, local, own_ranks.data());
  const std::size_t attributes = problem.ldp.attributes.size();
  if (attributes > 0) {
    file.distributed_rows(
        "/clients/epsilon", total, attributes, first, local,
        problem.ldp.epsilon.data() + static_cast<std::size_t>(first) * attributes);
  } else {
    file.dataset("/clients/epsilon", std::vector<double>{},
                 {static_cast<std::size_t>(clients), attributes});
  }
  file.attribute("/clients/epsilon", "attributes", problem.ldp.attributes);
}
}  // namespace

void write_training_output(ResultsFile& file, const FederatedProblem& problem,
                           const TrainingResult& result) {
  write_metrics(file, result.history);
  write_model(file, problem, result);
  write_clients(file, problem);
}

}  // namespace fluence
