// fluence lia, FL after filtering (seed 002 Fig. 3): T rounds of the shared federation
// (fl/federation.hpp) from M0 on the participants' batches. Every round each included participant
// runs local SGD from theta_t and the server aggregates the updates with FedAvg's mean, KRUM, the
// trimmed mean or centered clipping.
#include <map>

#include "experiment.hpp"
#include "fluence/fl/aggregators.hpp"
#include "fluence/fl/federation.hpp"

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
  // The method's server rule from fl/'s aggregators (the filter methods aggregate what they
  // accept with FedAvg's mean, "lia_cc" with centered clipping); f is the corrupted participants
  // still included, the oracle knowledge seed 002's baselines are given.
  static const std::map<std::string, std::string> rule_of_method = {
      {"krum", "krum"},
      {"trimmed_mean", "trimmed_mean"},
      {"centered_clipping", "centered_clipping"},
      {"lia_cc", "centered_clipping"}};
  AggregatorConfig rule;
  if (const auto found = rule_of_method.find(method); found != rule_of_method.end())
    rule.name = found->second;
  rule.byzantine = byzantine;
  rule.tau = config.cc_tau;
  rule.iterations = config.cc_iterations;
  const std::unique_ptr<Aggregator> aggregator = make_aggregator(rule, "lia.methods");
  GatheredReduction reduction(p, *aggregator);
  const std::unique_ptr<Sampler> everyone = make_sampler({}, e.federated.seed, 0);
  std::vector<double> theta(e.theta0);
  for (int round = 1; round <= config.rounds; ++round) {
    federation.round(round, theta, local, *everyone, reduction);
    fl.test_accuracy.push_back(e.test.accuracy(e.model(), theta, e.work));
  }
  return fl;
}

}  // namespace fluence::lia
