#pragma once
// `fluence whatif` (seed 001, docs/math.md §6): a curator holding clean data asks how the test loss
// would change if a fraction k of the records of a group S were randomized with eps-LDP and the
// model retrained, for a whole grid of k and eps. One IHVP s_test = H^{-1} grad L(S_te) is solved;
// every (k, eps) cell is then a sum of per-record scalars s_test^T grad[E l~ - l] over the
// perturbed records (seed 001 Eq. 11-14, 22):
//   d L_te(k, eps) ~= -(1/n) sum_{i in S_k} s_test^T grad_theta [E_eps l~(z_i) - l(z_i)].
// Ground truth: randomize and retrain to the optimum (warm-started), and retrain on the exact
// expected objective.
#include <cstdint>
#include <string>
#include <vector>

#include "fluence/core/config.hpp"
#include "fluence/core/resume.hpp"
#include "fluence/fl/federation.hpp"
#include "fluence/influence/client_influence.hpp"

namespace fluence {

enum class WhatifVariant {
  rr,  // k-RR over `attributes` (features and/or label), the expected-loss form of seed 001 Eq. 13
  rr_l,   // k-RR over the label only (seed 001 Eq. 14, its missing minus sign restored)
  rr_flc  // label k-RR with forward loss correction on the perturbed records (seed 001 Eq. 18, 22)
};
std::string to_string(WhatifVariant variant);
WhatifVariant parse_whatif_variant(const std::string& name);

/// `expected`: the exact E[l~] - l with k-RR probabilities from the original value (what the seed
/// intends); `paper`: seed 001's literal Eq. 13 / Eq. 22 scaling, for comparison (docs/math.md §6).
enum class EstimateForm { expected, paper };

/// An attribute the `rr` variant randomizes: a categorical feature or the label.
struct WhatifAttribute {
  std::string name;
  int column = -1;  // column in Table::categorical; -1 = the label
  int domain = 2;
  int offset = 0;  // first encoded column of the one-hot block (features only)
};

struct WhatifConfig {
  // Filled in by from_deck; the defaults are the declared keys' (register_whatif_keys).
  std::string group_attribute;
  int group_column = -1;                   // categorical column; -1 = the label
  std::vector<std::int32_t> group_values;  // value indices selecting the group
  std::vector<std::string> group_value_names;
  std::vector<double> fractions;  // k: fraction of the group perturbed
  std::vector<double> epsilons;
  std::vector<WhatifAttribute> attributes;  // the rr variant's; rr_l and rr_flc use the label
  double model_tolerance = 0.0;  // federation.tolerance: the trained model's stationarity test
  std::vector<WhatifVariant> variants;
  int repeats{};
  bool retrain{};
  bool expected_retrain{};
  std::int64_t test_sample{};  // 0 = the whole test set
  EstimateForm rr_form{};
  EstimateForm flc_form{};
  bool common_draws{};  // one k-RR draw per (record, attribute, repeat) for every eps
  bool second_order{};  // also the second-order estimate (one IHVP per cell)
  double retrain_tolerance{};
  int retrain_max_iterations{};
  std::uint64_t enumeration_limit{};  // largest product of the rr features' domains

  /// Checks every [whatif] key against the problem's schema (InputError naming the key).
  static WhatifConfig from_deck(const Deck& deck, const FederatedProblem& problem);
  std::size_t cells() const { return fractions.size() * epsilons.size(); }
};

/// Declares the [whatif] keys WhatifConfig::from_deck reads: type, default, range and meaning of
/// each (inputs/README.md's tables).
void register_whatif_keys(DeckSchema& schema);

/// Default grids of seed 001 §V: 30 evenly spaced eps in [0.001, 10] and 10 fractions in [1%, 30%].
std::vector<double> evenly_spaced(double first, double last, int count);

/// How well an estimate tracks the ground truths, per fraction over the eps grid.
struct EstimateMetrics {
  std::vector<double> mae, spearman;  // K, against the mean of the randomized retrains' changes
  std::vector<double> mae_per_draw, spearman_per_draw;  // K, per draw, averaged over the draws
  std::vector<double> mae_expected, spearman_expected;  // K, against expected_retrain
};

struct WhatifVariantResult {
  WhatifVariant variant = WhatifVariant::rr_l;
  std::vector<double> estimated;         // K x E: the seed's first-order estimate
  std::vector<double> second_order;      // K x E: g.dtheta + dtheta^T H_te dtheta / 2, when on
  std::vector<double> actual;            // K x E x R, when retrained
  std::vector<double> expected_retrain;  // K x E, when retrained
  EstimateMetrics first, second;
  // Each retrain's final ||grad h_S|| (as actual and expected_retrain), and the metrics again over
  // the trusted cells only: the (fraction, eps) whose retrains all reached retrain_tolerance.
  std::vector<double> actual_gradient_norm, expected_gradient_norm;
  // With influence.spectrum: the smallest Hessian eigenvalue of h_S at each retrain (NaN: not
  // computed), and whether it is a saddle point (on the trained model's lambda_max scale).
  std::vector<double> actual_min_eigenvalue, expected_min_eigenvalue;
  EstimateMetrics first_trusted, second_trusted;
};

struct WhatifResult {
  bool stopped = false;  // a stop signal ended the sweep after a checkpoint: the rest is partial
  std::int64_t group_size = 0;
  std::vector<std::int64_t> group_rows;  // K: records perturbed at each fraction
  std::int64_t test_rows = 0;
  double base_test_loss = 0.0, base_test_accuracy = 0.0;
  double damping = 0.0;
  SolveReport s_test_report;
  bool s_test_above_tolerance = false;  // its residual above influence.rtol (cg)
  Stationarity stationarity;            // of the trained model the estimates start from
  std::vector<WhatifVariantResult> variants;
  double time_ihvp = 0.0, time_cells = 0.0, time_second_order = 0.0, time_retrain = 0.0;
  long retrain_count = 0;
  long retrain_iterations = 0;        // Newton steps over every retrain
  long retrain_hessian_products = 0;  // products by the perturbed Hessian over every retrain
  double worst_gradient_norm = 0.0;   // largest final ||grad|| of any retrain
  double eigenvalue_max = 0.0;        // of the trained model's Hessian (saddle test scale; 0: none)
};

/// Collective. `theta` is the trained minimizer of the clean objective. With `checkpoint`, the
/// sweep is resumable; its units, in this order: the second-order estimates of one (variant, eps)
/// over every fraction (K solves), then the retrains of one (variant, eps, draw or the
/// expectation) over every fraction (K retrains, each warm-started from the previous fraction's).
/// A restart skips the finished units; s_test and the first-order estimates are recomputed. A stop
/// inside a unit (at a CG iteration of one fraction's solve, or a Newton step of one fraction's
/// retrain) saves it, and a restart continues it from that fraction (docs/operations.md "Stops
/// inside a unit").
WhatifResult run_whatif(Federation& federation, const std::vector<double>& theta,
                        const InfluenceConfig& influence, const WhatifConfig& config, bool progress,
                        SweepCheckpoint* checkpoint = nullptr);

}  // namespace fluence
