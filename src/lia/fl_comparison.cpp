// fluence lia, FL after filtering (seed 002 Fig. 3): T rounds from M0; every round each included
// participant runs local SGD from theta_t on its batch and the server aggregates the updates with
// FedAvg, KRUM, the trimmed mean or centered clipping.
#include "experiment.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/lia/aggregators.hpp"

namespace fluence::lia {

FlMethodResult run_fl_method(Experiment& e, const std::string& method, const LiaResult& result) {
  const LiaConfig& config = e.config;
  const std::uint64_t seed = e.seed;
  const int P = e.P, D = e.D;
  const std::size_t p = e.p;
  const LocalData& local = e.local;
  const std::vector<double>& theta0 = e.theta0;
  const SoftmaxRegression& model = *e.model;
  const ParticipantData& assignment = e.assignment;
  Workspace& work = e.work;
  std::vector<double> update_local, center(p), aggregate(p);
  std::vector<std::uint8_t> included(P, 1);
  if (method == "oracle")
    for (auto i : assignment.corrupted) included[i] = 0;
  if (method == "lia" || method == "lia_cc")
    for (int a = 0; a < P; ++a) included[a] = static_cast<std::uint8_t>(result.accepted[a]);
  int clients = 0, byzantine = 0, local_clients = 0;
  for (int a = 0; a < P; ++a) {
    clients += included[a];
    byzantine += included[a] && result.corrupted[a];
    local_clients += included[a] && a >= local.first && a < local.last;
  }
  FlMethodResult fl;
  fl.method = method;
  fl.clients = clients;
  std::vector<double> theta(theta0);
  fl.test_accuracy.push_back(result.m0_test_accuracy);
  std::fill(center.begin(), center.end(), 0.0);
  for (int round = 0; round < config.rounds; ++round) {
    if (clients == 0) {
      fl.test_accuracy.push_back(fl.test_accuracy.back());
      continue;
    }
    update_local.assign(static_cast<std::size_t>(local_clients) * p, 0.0);
    int slot = 0;
    for (int a = local.first; a < local.last; ++a) {
      if (!included[a]) continue;
      double* out = &update_local[static_cast<std::size_t>(slot++) * p];
      std::copy(theta.begin(), theta.end(), out);
      const std::size_t offset = static_cast<std::size_t>(a - local.first) * config.train_size;
      for (int epoch = 0; epoch < config.local_epochs; ++epoch) {
        Stream stream(seed, Purpose::lia_fl_shuffle, static_cast<std::uint64_t>(round),
                      static_cast<std::uint64_t>(a), static_cast<std::uint64_t>(epoch));
        const auto order = random_permutation(stream, config.train_size);
        model.sgd_epoch(&local.train_x[offset * D], &local.train_y[offset], order.data(),
                        config.train_size, config.batch_size, config.learning_rate, out, work);
      }
      for (std::size_t k = 0; k < p; ++k) out[k] -= theta[k];
    }
    const auto updates = ordered_allgather(update_local, local_clients, static_cast<int>(p));
    if (method == "krum") {
      krum(updates.data(), clients, p, byzantine, aggregate.data());
    } else if (method == "trimmed_mean") {
      trimmed_mean(updates.data(), clients, p, byzantine, aggregate.data());
    } else if (method == "centered_clipping" || method == "lia_cc") {
      // The previous round's aggregate is the starting center (the momentum of Karimireddy,
      // He & Jaggi's Algorithm 2).
      centered_clipping(updates.data(), clients, p, config.cc_tau, config.cc_iterations,
                        center.data());
      aggregate = center;
    } else {
      mean_update(updates.data(), clients, p, aggregate.data());
    }
    for (std::size_t k = 0; k < p; ++k) theta[k] += aggregate[k];
    fl.test_accuracy.push_back(e.test.accuracy(model, theta, work));
  }
  return fl;
}

}  // namespace fluence::lia
