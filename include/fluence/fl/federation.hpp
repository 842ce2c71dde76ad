#pragma once
// Federated training (seed 000 Eq. 1-2) and the federated primitives later commands reuse. Every
// member function is a collective; its result is identical on every rank and does not depend on the
// number of ranks (client and test-chunk contributions are reduced in id order).
#include <functional>
#include <vector>

#include "fluence/fl/problem.hpp"

namespace fluence {

struct RoundMetrics {
  int round = 0;
  double train_loss = 0.0;  // h(theta) on the clients' randomized data (NaN when not evaluated)
  double test_loss = 0.0;
  double test_accuracy = 0.0;
  double wall_time = 0.0;  // seconds since training started
};

struct TrainingResult {
  std::vector<double> theta;
  std::vector<RoundMetrics> history;
  RoundMetrics final_metrics;  // at the returned theta (after any polish)
  double gradient_norm = 0.0;  // ||grad h(theta)||_2 at the returned theta
  int polish_steps = 0;
};

class Federation {
 public:
  explicit Federation(FederatedProblem& problem);

  std::size_t parameters() const { return problem_.model->parameters(); }

  /// h(theta) = sum_i n_i/n L_i(theta) + l2/2 ||theta||^2 (seed 000 Eq. 1 plus L2).
  double objective(const std::vector<double>& theta);
  /// grad h(theta).
  void gradient(const std::vector<double>& theta, std::vector<double>& out);
  /// Hessian of h at theta applied to v.
  void hessian_vector(const std::vector<double>& theta, const double* v, double* out);
  /// Mean loss and accuracy on the server's test set.
  std::pair<double, double> evaluate_test(const std::vector<double>& theta);
  /// One FedAvg round: every client trains locally from theta; theta <- sum_i n_i theta_i / n.
  void fedavg_round(int round, std::vector<double>& theta, const LocalTrainingConfig& config);

  /// Runs the configured rounds (and polish); `on_round` is called on every rank after each round.
  TrainingResult train(const FederationConfig& config,
                       const std::function<void(const RoundMetrics&)>& on_round = {});

  FederatedProblem& problem() { return problem_; }

 private:
  FederatedProblem& problem_;
  Workspace work_;
  std::vector<double> local_buffer_;
};

/// Federated Newton steps with CG (PETSc KSP, options prefix "newton_") on the matrix-free Hessian,
/// with a backtracking line search, until ||grad h|| <= tolerance. Returns the steps taken.
int newton_polish(Federation& federation, std::vector<double>& theta, double tolerance,
                  int max_steps);

double norm2(const std::vector<double>& v);

}  // namespace fluence
