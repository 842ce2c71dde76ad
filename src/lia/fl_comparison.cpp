// fluence lia, FL after filtering (seed 002 Fig. 3): T rounds of the shared federation
// (fl/federation.hpp) from M0 on the participants' batches. Every round each included participant
// runs local SGD from theta_t and the server aggregates the updates with FedAvg's mean, KRUM, the
// trimmed mean or centered clipping.
#include "experiment.hpp"
#include "fluence/fl/federation.hpp"
#include "fluence/lia/aggregators.hpp"

namespace fluence::lia {

FlMethodResult run_fl_method(Experiment& e, const std::string& method, const LiaResult& result) {
  const LiaConfig& config = e.config;
  const int P = e.P;
  const std::size_t p = e.p;
  std::vector<std::uint8_t> included(P, 1);
  if (method == "oracle")
    for (auto i : e.assignment.corrupted) included[i] = 0;
  if (method == "lia" || method == "lia_cc")
    for (int a = 0; a < P; ++a) included[a] = static_cast<std::uint8_t>(result.accepted[a]);
  int clients = 0, byzantine = 0;
  std::vector<int> excluded;
  for (int a = 0; a < P; ++a) {
    clients += included[a];
    byzantine += included[a] && result.corrupted[a];
    if (!included[a]) excluded.push_back(a);
  }
  FlMethodResult fl;
  fl.method = method;
  fl.clients = clients;
  fl.test_accuracy.push_back(result.m0_test_accuracy);
  if (clients == 0) {  // a filter that rejects everyone leaves M0 in place
    fl.test_accuracy.resize(static_cast<std::size_t>(config.rounds) + 1, result.m0_test_accuracy);
    return fl;
  }
  Federation federation(e.federated);
  federation.exclude_clients(excluded);
  LocalTrainingConfig local;
  local.epochs = config.local_epochs;
  local.batch_size = config.batch_size;
  local.learning_rate = config.fl_learning_rate;
  // The previous round's aggregate is centered clipping's starting center (the momentum of
  // Karimireddy, He & Jaggi's Algorithm 2).
  std::vector<double> center(p, 0.0);
  const Federation::UpdateAggregator aggregate = [&](const double* updates, int n, double* step) {
    if (method == "krum") {
      krum(updates, n, p, byzantine, step);
    } else if (method == "trimmed_mean") {
      trimmed_mean(updates, n, p, byzantine, step);
    } else if (method == "centered_clipping" || method == "lia_cc") {
      centered_clipping(updates, n, p, config.cc_tau, config.cc_iterations, center.data());
      std::copy(center.begin(), center.end(), step);
    } else {
      mean_update(updates, n, p, step);
    }
  };
  std::vector<double> theta(e.theta0);
  for (int round = 1; round <= config.rounds; ++round) {
    federation.aggregated_round(round, theta, local, aggregate);
    fl.test_accuracy.push_back(e.test.accuracy(e.model(), theta, e.work));
  }
  return fl;
}

}  // namespace fluence::lia
