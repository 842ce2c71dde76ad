#include "fluence/io/training_output.hpp"

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
  file.dataset(
      "/model/theta", result.theta,
      {static_cast<std::size_t>(model.classes()), static_cast<std::size_t>(model.features())});
  file.attribute("/model/theta", "features", problem.encoding.column_names(problem.data.train));
  file.attribute("/model/theta", "classes", problem.data.train.class_names);
  file.scalar("/model/gradient_norm", result.gradient_norm);
  file.scalar("/model/polish_steps", result.polish_steps);
  file.scalar("/model/train_loss", result.final_metrics.train_loss);
  file.scalar("/model/test_loss", result.final_metrics.test_loss);
  file.scalar("/model/test_accuracy", result.final_metrics.test_accuracy);
  file.scalar("/model/l2", model.l2());
}

void write_clients(ResultsFile& file, const FederatedProblem& problem) {
  const int clients = static_cast<int>(problem.client_rows.size());
  std::vector<std::int64_t> ranks(clients);
  for (int i = 0; i < clients; ++i) ranks[i] = problem.layout->owner(i);
  file.dataset("/clients/size", problem.client_sizes());
  file.dataset("/clients/rank", ranks);
  file.dataset("/clients/epsilon", problem.ldp.epsilon,
               {static_cast<std::size_t>(clients), problem.ldp.attributes.size()});
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
