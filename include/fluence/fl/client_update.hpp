#pragma once
// The client update rule, the second part of a federated round (docs/architecture.md "Extension
// points", docs/math.md §8.6): how a sampled client turns the round's model theta_t into its
// update y - theta_t.
//   sgd:      K local SGD steps on F_i (FedAvg; McMahan et al. 2017)
//   fedprox:  every step's gradient gains mu (y - theta_t): SGD on F_i(y) + mu/2 ||y - theta_t||^2
//             (Li et al. 2020, "Federated Optimization in Heterogeneous Networks")
//   scaffold: every step's gradient gains c - c_i, the server's and the client's control variates;
//             afterwards c_i+ = c_i - c + (theta_t - y) / (K eta_l) and the server adds
//             (1/N) sum_S (c_i+ - c_i) to c (Karimireddy et al. 2020, "SCAFFOLD", option II)
// FedProx changes the local training only (LocalTrainingConfig::proximal_mu), so it applies
// wherever clients train; SCAFFOLD's control variates are state that plain FedAvg's round
// (Federation::round) carries, checkpoints and reduces exactly.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fluence/fl/client.hpp"

namespace fluence {

enum class ClientUpdateRule { sgd, fedprox, scaffold };

struct ClientUpdateConfig {
  // Filled in by FederationConfig::from_deck (federation.client_update, federation.proximal_mu).
  ClientUpdateRule rule = ClientUpdateRule::sgd;
  double proximal_mu = 0.0;  // fedprox's mu (copied into LocalTrainingConfig::proximal_mu)
};

/// The rules' names, the deck's choices: sgd, fedprox, scaffold.
std::vector<std::string> client_update_names();
ClientUpdateRule client_update_rule(const std::string& name);

/// SCAFFOLD's control variates: the server's c (p values, the same on every rank) and each hosted
/// client's c_i (zero until the client is first sampled; it never leaves its rank but in
/// checkpoints).
class ScaffoldControls {
 public:
  /// p parameters, the clients this rank hosts (ascending ids), N clients in all.
  ScaffoldControls(std::size_t p, std::vector<int> hosted_ids, std::int64_t clients);

  const std::vector<double>& server() const { return server_; }
  /// out = c - c_k for hosted client k (index into the hosted clients), p values.
  void correction(std::size_t k, double* out) const;
  /// out = c_k+ = c_k - c - update / (steps learning_rate), update = y - theta_t (c_k itself when
  /// the client took no step). Returns max_j |c_k+ - c_k| (+inf when not finite).
  double next(std::size_t k, const double* update, int steps, double learning_rate,
              double* out) const;
  /// out = c_k+ - c_k (p values).
  void difference(std::size_t k, const double* next, double* out) const;
  /// c_k <- c_k+ (the round is kept).
  void commit(std::size_t k, const double* next);
  /// c += sum / N, sum = the round's sum of c_i+ - c_i over the cohort.
  void advance(const double* sum);

  /// Collective: c, then every client's c_i in id order (N x p; zeros for one never sampled), the
  /// same on every rank (a checkpoint's "parts/client_update").
  std::vector<double> state() const;
  /// From state(), on any rank count.
  void restore(const std::vector<double>& state);

 private:
  std::size_t p_;
  std::vector<int> ids_;
  std::int64_t clients_;
  std::vector<double> server_;
  std::vector<std::vector<double>> controls_;  // per hosted client; empty = zero
};

}  // namespace fluence
