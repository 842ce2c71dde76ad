#pragma once
// `fluence lia`: lazy-influence data filtering (seed 002, Rokvic et al.; seed 003 its workshop
// version). A center trains M0 on warm-up data; each participant, as a contributor, runs k local
// epochs of DP-SGD on the last layer with its training batch and sends the noisy layer; every
// validator votes sign(sum_val L(theta_t) - L(theta_A)) (seed 002 Eq. 1), obfuscated by randomized
// response (seed 002 Eq. 2); the center sums the votes and rejects contributors below a k-means
// threshold. Then T rounds of FL from M0 compare filters and robust aggregators; lia.mode =
// "per_round" adds T rounds that filter every round's contributors (seed 003 Algorithm 1).
// docs/math.md §9.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "fluence/audit/canary_clients.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/resume.hpp"

namespace fluence::lia {

struct LiaConfig {
  // Filled in by from_deck; the defaults are the declared keys' (register_lia_keys).
  int participants{};
  int train_size{};
  int validation_size{};
  std::string validation_mix;  // or "iid": validation sets from the population
  double warmup_fraction{};
  double public_fraction{};  // the body's own split (0: the body trains on the warm-up)
  double alpha{};            // Dirichlet concentration over labels; +inf = IID
  double corrupted_fraction{};
  std::string corruption;  // or "random_label"
  double corruption_rate{};
  int local_epochs{};
  int batch_size{};
  double learning_rate{};
  double fl_learning_rate{};  // the FL comparison's and per-round mode's local step
  double clip{};              // per-example clipping norm Delta (0 = no clipping)
  double epsilon_train{};
  double delta{};
  double epsilon_vote{};
  std::string vote_accounting;  // "exact": eps = ln((1-p/2)/(p/2)); "seed": 2 ln(...)
  std::string vote_baseline;    // or "median" / "quantile" of a validator's differences
  double vote_quantile{};       // the quantile of vote_baseline = "quantile"
  std::string vote_loss;        // or "zero_one": the loss L of seed 002 Eq. 1
  std::string relevance;        // or "predicted_classes": relevance-weighted votes (relevance.hpp)
  double relevance_epsilon{};   // each participant's noisy histogram, taken from its budgets
  double relevance_power{};     // weight = histogram overlap ^ power
  int validators_per_contributor{};  // 0 = all other participants
  int validation_subsets{};
  // "shared": a vote reads one subset drawn per pair (all rows when validation_subsets = 1);
  // "disjoint": a validator deals its votes to its subsets in turn (seed 002 §III-B3's remedy).
  std::string validation_split;
  std::string mode;  // or "per_round": seed 003 Algorithm 1
  std::string body;  // or "mlp", "network"
  int hidden{};
  int body_epochs{};
  double body_learning_rate{};
  bool body_center{};     // subtract the body rows' mean output from every feature
  std::string threshold;  // or "zero"
  int rounds{};
  std::vector<std::string> methods;
  double cc_tau{};
  int cc_iterations{};
  int sign_check{};  // contributors whose exact influence is checked (seed Fig. 9)
  double retrain_tolerance{};
  std::vector<double> minority_fractions;  // seed §IV-E (empty = no minority experiment)
  int minority_class{};
  int minority_runs{};
  double l2{};

  /// Validates the [lia] section against the data's class count (messages name the key).
  static LiaConfig from_deck(const Deck& deck, int classes);

  /// The randomized-response flip probability p of seed 002 Eq. 2 for the vote's budget
  /// (0 for eps = inf).
  double vote_flip_probability() const;
  bool relevance_weighted() const { return relevance != "none"; }
  bool disjoint_split() const { return validation_split == "disjoint"; }
  bool per_round() const { return mode == "per_round"; }
  /// Does each vote read rows of every validation subset? (a median or quantile baseline over all
  /// of a validator's differences, with the shared split: the votes are then one release).
  bool votes_coupled() const { return vote_baseline != "model" && !disjoint_split(); }
  /// What the relevance histogram leaves of a budget: eps - relevance_epsilon when weighted.
  double after_relevance(double epsilon) const;
};

/// Declares the [lia] keys LiaConfig::from_deck reads: type, default, range and meaning of each
/// (inputs/README.md's tables).
void register_lia_keys(DeckSchema& schema);

/// Per-round test accuracy of one FL method after filtering.
struct FlMethodResult {
  std::string method;
  std::vector<double> test_accuracy;  // rounds + 1 values: M0 first
  int clients = 0;                    // participants the method aggregates
};

/// lia.mode = "per_round" (seed 003 Algorithm 1): each round's filtering and the FL round after it.
struct RoundsResult {
  std::vector<double> recall, precision, accuracy, threshold;  // per round
  std::vector<double> test_accuracy;                           // per round, after its aggregation
  std::vector<std::int64_t> accepted;                          // rounds x P
};

struct MinorityResult {
  std::vector<double> fractions;
  std::vector<double> acceptance;  // per fraction: share of the runs accepted
  std::vector<double> vote_sum;    // fractions x runs
};

struct LiaResult {
  int classes = 0;
  bool stopped = false;
  std::vector<double> vote_sum;       // P: sum of the obfuscated votes per contributor
  std::vector<double> true_vote_sum;  // P: the same before randomized response
  std::vector<std::int64_t> accepted, corrupted, votes_cast;
  std::vector<std::int64_t> batch_labels,
      validation_labels;  // P x C label histograms (true labels)
  double threshold = 0.0;
  double recall = 0.0, precision = 0.0, accuracy = 0.0;
  double epsilon_train = 0.0, epsilon_vote = 0.0, noise_multiplier = 0.0;
  // lia.relevance: every participant's noisy predicted-class histograms, P x C each.
  std::vector<double> batch_histogram, validation_histogram;
  double sign_agreement = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::int64_t> sign_checked;  // the contributors checked
  double m0_test_accuracy = 0.0;
  bool overlapping_data = false;
  std::vector<FlMethodResult> fl;
  MinorityResult minority;
  RoundsResult rounds;
  // Votes each validator cast per validation subset over the whole run (P x validation_subsets,
  // exact integers), and each validator's total epsilon from them (docs/math.md §9): pure, and
  // at lia.delta by Renyi DP.
  std::vector<double> subset_votes, epsilon_validator, epsilon_validator_rdp;
  double time_setup = 0.0, time_training = 0.0, time_votes = 0.0, time_fl = 0.0;
  double vote_gflops = 0.0;  // GEMM rate of the vote pass, per rank
  // audit.canaries > 0: the record-canary audit of one contributor's DP-SGD (audit/
  // record_canaries.hpp), and the accountant's eps of that one training.
  std::optional<CanaryAuditResult> audit;
  double audit_epsilon = std::numeric_limits<double>::quiet_NaN();
};

/// Runs the whole experiment (collective). `progress` prints per-stage lines. With `checkpoint`,
/// the filtering stage (unit 1) and every FL method (units 2, 3, ...) are resumable units: a
/// restart skips what its checkpoint holds; on a stop signal the result comes back `stopped`.
LiaResult run_lia(const Deck& deck, bool progress, SweepCheckpoint* checkpoint = nullptr);

}  // namespace fluence::lia
