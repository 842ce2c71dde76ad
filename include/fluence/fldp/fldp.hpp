#pragma once
// FLDP-FL (seed 000): after training, clients change their privacy level eps -> eps' (or leave),
// and the new global model is estimated from the trained one with influence functions instead of
// retraining:
//   client i: I_i = -H^{-1} grad sum_{z in D_i} [E_{eps'} l(z_eps', theta^) - l(z~, theta^)]
//             (seed 000 Theorem 1, Eq. 14-18; expectation from the ORIGINAL values, ExpectedLoss),
//   removal:  I_i = +H^{-1} sum_{z~ in D_i} grad l~(z~, theta^)   (seed 000 Eq. 27, sign fixed),
//   server:   theta_I = theta^ + (1/n) sum_i I_i                   (seed 000 Eq. 19-20).
// Ground truths: the exact expected objective solved to its optimum (what the estimator targets)
// and retrains on independent re-randomizations; metrics ALD, AAD, ED (seed 000 Eq. 28-30).
// docs/math.md §5 has the derivation and where the seed's code differs.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fluence/core/config.hpp"
#include "fluence/core/resume.hpp"
#include "fluence/fl/federation.hpp"
#include "fluence/fldp/expected_loss.hpp"
#include "fluence/influence/client_influence.hpp"

namespace fluence {

struct FldpChange {
  int client = 0;
  bool remove = false;
  std::vector<double> epsilon;  // per ldp attribute: the new eps' (NaN = unchanged)
};

/// Changes applied together; clients ascending and distinct.
struct FldpCase {
  std::vector<FldpChange> changes;
  std::string description;  // "client 0: cat0 3 -> 1, label 3 -> 1"
  double eps_from = 0.0;    // the changed attributes' common eps before (NaN if they differ)
  double eps_to = 0.0;      // their common eps' (NaN if they differ or on removal)
  bool remove = false;      // some client leaves
};

enum class HessianBlock { full, first };

// Filled in by from_deck; the defaults are the declared keys' (register_fldp_keys).
struct FldpConfig {
  std::vector<FldpCase> cases;
  bool retrain{};
  int retrain_seeds{};
  bool retrain_full{};
  int newton_steps{};
  HessianBlock hessian_block{};
  ExpectationConfig expectation;

  /// The cases of [[fldp.change]] (one case) and [fldp.sweep]; InputError when there is none or a
  /// change names an unknown client or attribute.
  static FldpConfig from_deck(const Deck& deck, const LdpPlan& plan);
};

/// Declares the [fldp] keys FldpConfig::from_deck reads: type, default, range and meaning of each
/// (inputs/README.md's tables).
void register_fldp_keys(DeckSchema& schema);

struct FldpCaseResult {
  std::vector<double> theta_estimate, theta_expected, theta_newton;
  double test_loss_estimate = 0.0, test_accuracy_estimate = 0.0;
  double test_loss_expected = 0.0, test_accuracy_expected = 0.0;
  double ald_expected = 0.0, aad_expected = 0.0, ed_expected = 0.0;
  std::vector<double> newton_ed_expected;  // per refinement step
  std::vector<double> newton_time;  // per step: seconds of the estimate refined up to that step
  std::vector<double> test_loss_retrain, test_accuracy_retrain;  // per re-randomized retrain
  std::vector<double> ald, aad, ed;                              // per re-randomized retrain
  double time_estimate = 0.0, time_retrain = 0.0;                // seconds (retrain: mean per draw)
  double mc_standard_error = 0.0;  // ||standard error of theta_I|| (0 when exact)
  std::int64_t ihvp_iterations = 0;
  double ihvp_residual = 0.0;             // largest relative residual of the case's solves
  bool residual_above_tolerance = false;  // ihvp_residual above influence.rtol (cg)
  // Whether each retrain can be trusted (docs/outputs.md): ||grad h'|| where it stopped and, with
  // influence.spectrum, the smallest Hessian eigenvalue of h' there (NaN: not computed), for the
  // expected retrain and each re-randomized one; the flags follow from them at the sweep's end.
  double expected_gradient_norm = std::numeric_limits<double>::quiet_NaN();
  double expected_min_eigenvalue = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> retrain_gradient_norm, retrain_min_eigenvalue;  // per re-randomized retrain
  bool expected_converged = true, expected_saddle = false;
  std::vector<char> retrain_converged, retrain_saddle;  // per re-randomized retrain
};

struct FldpResult {
  bool stopped = false;  // a stop signal ended the sweep after a checkpoint: `cases` is partial
  double base_test_loss = 0.0, base_test_accuracy = 0.0;
  double damping = 0.0;
  std::optional<HessianSpectrum> spectrum;
  double time_setup = 0.0;    // Hessian operator, spectrum and solver set-up shared by the cases
  Stationarity stationarity;  // of the trained model the estimates start from
  std::vector<FldpCaseResult> cases;
};

/// Collective. `theta` is the trained model; `training` drives full retrains. With `checkpoint`,
/// the sweep is resumable, one case a unit: a restart skips the finished cases, and a stop inside
/// a case (its estimate's CG solves, its Newton retrains and refinement) saves the case so far and
/// the interrupted solve's or Newton run's state, which a restart continues (docs/operations.md
/// "Stops inside a unit").
FldpResult run_fldp(Federation& federation, const std::vector<double>& theta,
                    const InfluenceConfig& influence, const FldpConfig& config,
                    const FederationConfig& training, bool progress,
                    SweepCheckpoint* checkpoint = nullptr);

/// The changed attributes of a change, for ExpectedLoss (attributes whose eps' is given and
/// differs from the plan's eps).
std::vector<ChangedAttribute> changed_attributes(const FederatedProblem& problem,
                                                 const FldpChange& change);

/// The client with its changed attributes re-randomized from the original values under eps'
/// (draw `draw`: stream (seed, fldp_rerandomization, global row, column + 1, draw)); the other
/// attributes keep their randomized values z~.
Client rerandomized_client(const FederatedProblem& problem, const Client& client,
                           const std::vector<ChangedAttribute>& changed, std::uint64_t draw);

}  // namespace fluence
