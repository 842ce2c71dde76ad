#pragma once
// Verified client unlearning and the client-level linear datamodeling score (docs/math.md §1.7,
// §1.8), two checks of `fluence influence`'s client removals against exact retrains:
//   unlearning  each of the first `influence.unlearning_clients` clients removed by the influence
//               step theta^ + (1/n) H^-1 g~_k (§1.2 (R)) and by that step refined with Newton's
//               method on the objective without the client (the machinery of FLDP's refinement,
//               §5.3), each with its distance to the exact retrain and its time against the
//               retrain's;
//   FL-LDS      `influence.lds_subsets` subset federations, each without a random fraction of the
//               clients, retrained exactly; the Spearman correlation over the subsets of the
//               predicted (sum of the left-out clients' estimates) and the actual change of the
//               test loss ([Park et al. 2023](docs/references.md#park-2023)).
#include <cstdint>
#include <optional>
#include <vector>

#include "fluence/fl/federation.hpp"
#include "fluence/influence/client_influence.hpp"

namespace fluence {

struct Unlearning {
  std::vector<std::int64_t> clients;  // [removals] the removed client of each
  // [removals] ||theta - theta_retrain||_2 of each method, and ||theta_retrain - theta^||_2
  std::vector<double> first_order_distance, newton_distance, removal_norm;
  // [removals] |grad h_-k| at the influence step: Guo et al. 2020's gradient residual, which
  // their certified removal masks with noise (docs/math.md §1.7)
  std::vector<double> first_order_gradient_residual;
  // [removals] chord steps theta <- theta - H(theta^)^-1 grad h_-k(theta) after the influence
  // step (explicit solver: the factor's refinement), then Newton steps and their CG iterations
  // (the fallback, and the only refinement without a factor)
  std::vector<std::int64_t> chord_steps;
  std::vector<std::int64_t> newton_steps;
  std::vector<std::int64_t> newton_cg_iterations;
  std::vector<double> newton_gradient_norm;  // [removals] |grad h_-k| at the refined model
  // [removals] |grad h_-k| / l2 at the refined model (convex model): a proven bound on its distance
  // to the minimizer of the l2-strongly convex h_-k (docs/math.md §1.7); +inf without strong
  // convexity
  std::vector<double> newton_distance_bound;
  // [removals] test-loss change of the retrain, and each method's error in it
  std::vector<double> retrain_loss_change, first_order_loss_error, newton_loss_error;
  // [removals] seconds: the influence step (its solve and the client's gradient), the influence
  // step and Newton's refinement together, the exact retrain
  std::vector<double> first_order_seconds, newton_seconds, retrain_seconds;
  // [removals] seconds of the retrain's Newton from theta^ preconditioned by the clean factor
  // instead of Jacobi (explicit solver; NaN otherwise)
  std::vector<double> factored_retrain_seconds;
  // ||theta_control - theta^||_2 of a network (or warm retrain): the retrain's move with every
  // client, taken off the influence step's distance; 0 for a convex model retrained by Newton.
  double control_distance = 0.0;
  double setup_seconds = 0.0;  // the solver's one-time set-up (the explicit Hessian's factor)
  // The last removal's models (for tests): the influence step, the refined one and the retrain.
  std::vector<double> last_first_order, last_newton, last_retrain;

  // Certified removal of Guo et al. 2020 (influence.certified_epsilon > 0; docs/math.md §1.7a):
  // the model trained with the objective perturbed by b^T theta (summed objective), b ~ N(0,
  // sigma^2 I) from the stream (seed, purpose::certified_removal_noise), and each client removed
  // from it by the influence step.
  struct Certified {
    double epsilon = 0.0, delta = 0.0, budget = 0.0;  // (eps, delta) and the residual budget eps'
    double c = 0.0;                                   // sqrt(2 ln(1.5 / delta))
    double sigma = 0.0;                               // c eps' / eps: the noise's scale
    double training_residual = 0.0;  // |grad L_b(theta_b)| of the perturbed model (summed)
    // [removals] the data-dependent bound on |grad L'_b(theta-)| (summed objective, the removed
    // client's data left out), its linear part |grad L'_b(theta_b) + H' Delta| and its Lipschitz
    // part (gamma/2) sum_j |x_j| |P Delta W x_j|^2 (P: centring); the exact residual
    // |grad L'_b(theta-)|
    std::vector<double> residual_bound, linear_residual, lipschitz_bound, residual;
    std::vector<std::int64_t> budget_exceeded;  // [removals] 1: not certified, retrain instead
    std::vector<double> noise;                  // b (for tests)
    std::vector<double> perturbed_model;        // theta_b (for tests)
    std::vector<double> last_removed;           // the last removal's theta- (for tests)
  };
  std::optional<Certified> certified;
};

/// Collective. `theta` the trained minimizer, `damping` the solves' damping (ClientInfluence's).
Unlearning verify_unlearning(Federation& federation, const std::vector<double>& theta,
                             const InfluenceConfig& config, const FederationConfig& training,
                             double damping, bool progress);

struct ClientLds {
  int left_out = 0;                        // clients left out of each subset federation
  std::vector<std::int64_t> left_out_ids;  // [subsets x left_out], ascending within a subset
  std::vector<double> predicted, actual;   // [subsets] test-loss changes
  std::vector<double> retrain_seconds;     // [subsets]
  double score = 0.0;                      // Spearman(predicted, actual)
};

/// The clients left out of subset federation `subset`: `left_out` distinct ids of `clients`,
/// ascending, drawn from the stream (seed, purpose::lds_subset, subset) (the same on every rank).
std::vector<int> lds_subset(std::uint64_t seed, int subset, int clients, int left_out);

/// Collective. `estimate` every client's estimated test-loss change (ClientInfluence::estimate),
/// `damping` the solves' damping. A convex model's retrains (retrain_mode "newton") are
/// preconditioned by the Hessian's Cholesky factor at theta with the explicit solver.
ClientLds client_lds(Federation& federation, const std::vector<double>& theta,
                     const std::vector<double>& estimate, const InfluenceConfig& config,
                     const FederationConfig& training, double damping, std::uint64_t seed,
                     bool progress);

}  // namespace fluence
