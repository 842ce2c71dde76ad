#pragma once
// `fluence influence`: score every client by the estimated change of the global test loss if it
// were removed (seed 000 Eq. 27 setting; seed 001 Eq. 5 applied to a client's data as the group),
// optionally checked against exact retraining without each client.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "fluence/core/config.hpp"
#include "fluence/core/newton.hpp"
#include "fluence/core/resume.hpp"
#include "fluence/fl/federation.hpp"
#include "fluence/fl/interruptible_rounds.hpp"
#include "fluence/influence/estimators.hpp"
#include "fluence/influence/ihvp.hpp"
#include "fluence/influence/spectrum.hpp"
#include "fluence/influence/trust.hpp"

namespace fluence {

struct InfluenceConfig {
  // Filled in by from_deck; the defaults are the declared keys' (register_influence_keys).
  HessianScope scope{};
  double damping{};
  bool auto_damping{};
  // The smallest eigenvalue the automatic damping leaves: 1e-8 lambda_max ("relative"), or at
  // least influence.damping ("damping": the deck's damping kept above the most negative curvature)
  bool auto_damping_keeps_damping{};
  IhvpConfig ihvp;
  bool spectrum{};
  RemovalGradient removal_gradient{};
  bool vectors{};
  int block_size{};  // clients per block CG solve of the vectors: 1 = one CG each, 0 = all
  bool retrain{};
  enum class Retrain { newton, full, warm } retrain_mode{};
  int unlearning_clients{};  // verified removal of clients 0 .. unlearning_clients - 1
  int lds_subsets{};         // FL-LDS subset federations (0 = none)
  double lds_fraction{};     // the fraction of the clients each leaves out
  // Certified removal (Guo et al. 2020): epsilon (0 = off), delta and the gradient-residual budget
  double certified_epsilon{}, certified_delta{}, certified_budget{};

  static InfluenceConfig from_deck(const Deck& deck);
};

/// Declares the [influence] keys InfluenceConfig::from_deck reads, its solver's
/// (register_ihvp_keys) included: type, default, range and meaning of each (inputs/README.md's
/// tables).
void register_influence_keys(DeckSchema& schema);

struct ClientInfluence {
  bool stopped = false;  // a stop signal ended the sweep after a checkpoint: the rest is partial
  double base_test_loss = 0.0;
  std::vector<double> estimate;               // [clients], every rank
  std::vector<double> actual;                 // [clients] when retrained
  std::vector<double> retrain_gradient_norm;  // [clients] when retrained
  double spearman = 0.0, mae = 0.0;           // when retrained
  // Whether to trust them (issue 41), when retrained. converged: the retrain reached
  // federation.tolerance (always 1 for a schedule without the polish, which has no target);
  // min_eigenvalue: of the Hessian without the client at its retrained model (with
  // influence.spectrum, else NaN), saddle where it is negative. The trusted statistics leave out
  // the unconverged retrains and the saddle points.
  std::vector<char> retrain_converged, retrain_saddle;  // [clients]
  std::vector<double> retrain_min_eigenvalue;           // [clients]
  KeptStatistics trusted;
  Stationarity stationarity;                   // of the model scored
  std::vector<char> residual_above_tolerance;  // per solve, like relative_residual
  std::optional<HessianSpectrum> spectrum;
  double damping = 0.0;  // the damping the solves used (deck value plus any automatic damping)
  std::vector<std::int64_t> iterations;   // per solve: federated = s_test then each client's
  std::vector<double> relative_residual;  // vector; client = each client's vector
  std::vector<double> local_vectors;      // this rank's clients x parameters, client order
  // influence.solver = "ekfac" with the federated Hessian: the estimator's scores against those of
  // the exact s_test by CG (the deck's preconditioner, rtol), and both solves' times.
  struct EstimatorError {
    double seconds = 0.0, exact_seconds = 0.0;  // s_test by the estimator, by CG
    double score_relative_difference = 0.0;     // ||e - e_cg|| / ||e_cg|| over the clients
    double spearman = 0.0;                      // of e and e_cg
    double solution_relative_difference = 0.0;  // ||s - s_cg|| / ||s_cg||
    std::int64_t exact_iterations = 0;
    std::vector<double> exact_estimate;  // [clients]
  };
  std::optional<EstimatorError> estimator_error;
  // Federated scope: seconds of s_test by the deck's solver, its set-up included (EK-FAC's
  // factors, the low-rank eigenpairs, CG's preconditioner; not the spectrum), rank 0's clock.
  double s_test_seconds = 0.0;
  int first_local_client = 0;
  int local_clients = 0;
};

/// Extreme eigenvalues of `hessian` (logged); when it is not safely positive definite, adds the
/// documented damping to `damping` and the operator if config.auto_damping, else warns.
void check_hessian_spectrum(HessianOperator& hessian, const InfluenceConfig& config,
                            std::optional<HessianSpectrum>& spectrum, double& damping);

/// Collective: the model the federation's included clients retrain to from the trained `theta`
/// (influence.retrain_mode). With `stop`, a Newton retrain (retrain_mode = "newton") can be
/// interrupted and continued (stop->stopped(): the returned model is its iterate); with `rounds`,
/// a retrain by federation rounds ("full", "warm") at its round boundaries (rounds->stopped());
/// without them the retrain runs to its end.
std::vector<double> retrained_model(Federation& federation, const std::vector<double>& theta,
                                    const InfluenceConfig& config, const FederationConfig& training,
                                    InterruptibleNewton* stop = nullptr,
                                    InterruptibleRounds* rounds = nullptr);

/// Collective. `theta` should be the trained minimizer; `training` is used for full retraining.
/// With `checkpoint`, the sweep is resumable; its units: each client's solve (its parameter-change
/// vector, or its local solve with the client scope), then each client's leave-one-out retrain. A
/// restart skips the finished units; the spectrum, s_test and the federated estimates are
/// recomputed.
ClientInfluence client_removal_influence(Federation& federation, const std::vector<double>& theta,
                                         const InfluenceConfig& config,
                                         const FederationConfig& training, bool progress,
                                         SweepCheckpoint* checkpoint = nullptr);

}  // namespace fluence
