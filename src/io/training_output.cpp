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
  file.coordinate("/metrics/round", round, "1", "federated round");
  file.dataset("/metrics/train_loss", train_loss,
               {{"round"}, "nat", "training objective on the clients' randomized data"});
  file.dataset("/metrics/test_loss", test_loss,
               {{"round"}, "nat", "mean cross-entropy on the server's test set"});
  file.dataset("/metrics/test_accuracy", test_accuracy,
               {{"round"}, "1", "fraction of test rows classified correctly"});
  file.dataset("/metrics/wall_time_s", wall_time,
               {{"round"}, "s", "wall time since training started"});
}

void write_model(ResultsFile& file, const FederatedProblem& problem, const TrainingResult& result) {
  const auto& model = *problem.model;
  const auto& classes = problem.data.train.class_names;
  const auto features = problem.encoding.column_names(problem.data.train);
  const std::vector<std::size_t> shape = model.theta_shape();
  // A linear model's parameters form a class x feature table; a network's are one flat vector.
  // Both name their classes and features in datasets, which hold any number of names (the
  // attributes below only up to ResultsFile::kMaxAttributeStrings).
  std::vector<std::string> dimensions{"parameter"};
  file.coordinate("/model/class", classes, "class");
  file.coordinate("/model/feature", features, "encoded feature");
  if (shape.size() == 2) {
    dimensions = {"class", "feature"};
  } else {
    file.dimension("/model/parameter", model.parameters());
  }
  file.dataset("/model/theta", result.theta, {dimensions, "1", "final global model parameters"});
  file.attribute("/model/theta", "features", features);
  file.attribute("/model/theta", "classes", classes);
  file.attribute("/model/theta", "model", model.describe());
  std::vector<std::string> blocks;
  for (const auto& block : model.parameter_blocks()) {
    blocks.push_back(
        fmt::format("{} {} {}", block.name, block.offset, fmt::join(block.shape, "x")));
  }
  file.attribute("/model/theta", "blocks", blocks);
  file.scalar("/model/gradient_norm", result.gradient_norm, "1",
              "norm of the objective's gradient at the final parameters");
  file.scalar("/model/polish_steps", result.polish_steps, "count", "Newton polish steps");
  file.scalar("/model/train_loss", result.final_metrics.train_loss, "nat",
              "training objective at the final parameters");
  file.scalar("/model/test_loss", result.final_metrics.test_loss, "nat",
              "mean cross-entropy on the server's test set at the final parameters");
  file.scalar("/model/test_accuracy", result.final_metrics.test_accuracy, "1",
              "fraction of test rows classified correctly by the final model");
  file.scalar("/model/l2", model.l2(), "1", "L2 coefficient of the objective");
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
  file.dimension("/clients/client", total);
  file.coordinate("/clients/attribute", problem.ldp.attributes, "randomized attribute");
  file.distributed_rows("/clients/size", total, 0, first, local, own_sizes.data(),
                        {{"client"}, "count", "training rows of the client"});
  file.distributed_rows("/clients/rank", total, 0, first, local, own_ranks.data(),
                        {{"client"}, "1", "MPI rank that hosted the client"});
  const std::size_t attributes = problem.ldp.attributes.size();
  const Variable epsilon{{"client", "attribute"},
                         "1",
                         "local differential privacy epsilon of the client's randomized response"};
  if (attributes > 0) {
    file.distributed_rows("/clients/epsilon", total, attributes, first, local,
                          problem.ldp.epsilon.data() + static_cast<std::size_t>(first) * attributes,
                          epsilon);
  } else {
    file.dataset("/clients/epsilon", std::vector<double>{}, epsilon);
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
