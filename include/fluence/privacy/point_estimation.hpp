#pragma once
// Federated point estimation (seed 004 §4): the simplified model in which FeO2's ratio r has a
// closed-form optimum. Client j observes n_s samples x_{j,i} = phi + p_j + v_{j,i}, p_j ~ N(0,
// tau^2), v ~ N(0, beta^2); its estimate is the sample mean (variance sigma_c^2 = tau^2 + beta^2 /
// n_s); a private client adds l_j ~ N(0, N_p gamma^2). The server combines the two group means
//   theta(r) = (N_np theta_np + r N_p theta_p) / (N_np + r N_p),
// whose variance is (docs/math.md §8.1)
//   sigma_s^2(r) = [N_np sigma_c^2 + r^2 N_p (sigma_c^2 + N_p gamma^2)] / (N_np + r N_p)^2,
// minimized at r* = sigma_c^2 / (sigma_c^2 + N_p gamma^2) (Lemma 1).
// It lives in privacy/ (it needs core only): the theory of FeO2's private/opt-out weighting, used
// by `fluence feo2-theory`, not by the federation's training.
#include <cstdint>
#include <vector>

#include "fluence/core/config.hpp"

namespace fluence {

struct PointEstimationConfig {
  // Filled in by from_deck; the defaults are the declared keys' (register_point_estimation_keys).
  int clients{};              // N
  double opt_out_fraction{};  // rho_np
  int samples{};              // n_s
  double tau2{}, beta2{}, gamma2{};
  std::vector<double> ratios;  // r values simulated (r* is added)
  long trials{};
  std::uint64_t seed{};

  static PointEstimationConfig from_deck(const Deck& deck);
  int opt_out_clients() const;
  double client_variance() const { return tau2 + beta2 / samples; }  // sigma_c^2
};

/// Declares the [feo2_theory] keys PointEstimationConfig::from_deck reads: type, default, range and
/// meaning of each (inputs/README.md's tables).
void register_point_estimation_keys(DeckSchema& schema);

/// sigma_s^2(r) of Lemma 1's setting.
double server_variance(const PointEstimationConfig& config, double r);
/// r* = sigma_c^2 / (sigma_c^2 + N_p gamma^2).
double optimal_ratio(const PointEstimationConfig& config);

struct PointEstimationResult {
  std::vector<double> ratios;                // the simulated r (config's, then r*)
  std::vector<double> empirical_variance;    // mean over trials of (theta(r) - phi)^2
  std::vector<double> theoretical_variance;  // sigma_s^2(r)
  double r_star = 0.0;
};

/// Collective: `trials` independent rounds split over the ranks (streams keyed by trial, sums
/// reduced in trial-chunk order: the result does not depend on the rank count).
PointEstimationResult simulate_point_estimation(const PointEstimationConfig& config);

}  // namespace fluence
