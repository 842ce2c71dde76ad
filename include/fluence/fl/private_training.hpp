#pragma once
// Client-level differentially private federated training (seed 004): DP-FedAvg with adaptive
// clipping (§2.1; McMahan et al. 2018, Andrew et al. 2019) and FeO2's opt-out aggregation
// (Algorithm 1), accounted by the accountant `privacy.accountant` (RDP by default; PLD and PRV
// beside it, privacy/accountant.hpp). docs/math.md §7-8.
//
// Per round t: every client is sampled independently with probability q (stream keyed by round and
// client, so a restart or another rank count draws the same clients); a sampled client trains
// locally from theta, clips its update to S and reports b = 1[||update|| <= S]; the server
//   private:  Delta_p = sum_private clip(update) / D_p + N(0, (z_u S / D_p)^2 I),
//   opt-out:  Delta_np = sum_opt_out clip(update) / N_np^t,
//   theta  += Delta_p                                                  (DP-FedAvg)
//   theta  += (N_np^t Delta_np + r D_p Delta_p) / (N_np^t + r D_p)        (FeO2)
// with D_p = q N_p (the expected number of private clients: the fixed denominator of McMahan et
// al., whose sensitivity analysis needs it) or the realized N_p^t (Algorithm 1, `denominator =
// "realized"`). The noise comes from the server's stream (seed, server_noise, round).
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fluence/core/config.hpp"
#include "fluence/core/node_queue.hpp"
#include "fluence/core/quantized_sum.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/fl/federation.hpp"
#include "fluence/privacy/accountant.hpp"
#include "fluence/privacy/adaptive_clip.hpp"
#include "fluence/privacy/client_ledger.hpp"

namespace fluence {

enum class PrivacyMode { none, dp_fedavg, feo2 };

struct PrivacyConfig {
  // Filled in by from_deck; the defaults are the declared keys' (register_private_training_keys).
  PrivacyMode mode{};
  double sampling_rate{};     // q
  double noise_multiplier{};  // z (overall, updates and clipped count together)
  double target_epsilon{};    // > 0: z solved for it over the configured rounds
  double delta{};
  // The accountant whose eps is /privacy/epsilon (and solves z for `target_epsilon`), first, then
  // the further ones whose eps per round is also written (privacy.report_accountants).
  std::vector<std::string> accountants;
  double clip{};  // S (the initial S with adaptive clipping)
  bool adaptive_clip{};
  double target_quantile{};     // kappa
  double clip_learning_rate{};  // eta_b
  double count_noise{};         // z_b; 0 = expected sampled clients / 20 (Andrew et al.)
  double opt_out_fraction{};    // rho_np (FeO2)
  int opt_out_label{};          // >= 0: opt-out clients drawn among holders of this label
  double ratio{};               // FeO2's r
  bool realized_denominator{};

  /// [privacy] keys, checked against the number of clients; z is solved from `epsilon` when given.
  static PrivacyConfig from_deck(const Deck& deck, int clients, int rounds);
  bool enabled() const { return mode != PrivacyMode::none; }
};

/// Ditto personalization (seed 004 §2.2): every client keeps a personal model theta_j and, when
/// sampled, trains f_j(theta_j) + lambda/2 ||theta_j - theta^t||^2 from it (lambda_private or
/// lambda_opt_out by its privacy choice); the personal models persist across rounds.
struct PersonalizationConfig {
  // Filled in by from_deck; the defaults are the declared keys' (register_private_training_keys).
  bool ditto{};
  double lambda_private{}, lambda_opt_out{};
  LocalTrainingConfig local;  // epochs and batch of the federation, personal learning rate
  int metrics_every{};        // evaluate the /feo2 metrics every this many rounds (and the last)
  int rounds{};

  static PersonalizationConfig from_deck(const Deck& deck, const FederationConfig& federation);
};

/// Declares the [privacy] and [personalization] keys PrivacyConfig and PersonalizationConfig read:
/// type, default, range and meaning of each (inputs/README.md's tables).
void register_private_training_keys(DeckSchema& schema);

/// Seed 004 §5.2's metrics per evaluated round (NaN elsewhere): Acc_g on the server's test set;
/// the means over private (p) and opt-out (np) clients of the global (g) and personal (l) models'
/// accuracy on each client's local test data, with their variances across clients.
struct Feo2Metrics {
  std::vector<double> acc_g, acc_g_p, acc_g_np, acc_l_p, acc_l_np;
  std::vector<double> var_g_p, var_g_np, var_l_p, var_l_np;

  /// visit(name, series) for every series, in this order (the output, the checkpoint and the
  /// initialization all go through this one list). Self: Feo2Metrics or const Feo2Metrics.
  template <class Self, class Visit>
  static void for_each(Self& self, Visit&& visit) {
    visit("acc_g", self.acc_g);
    visit("acc_g_p", self.acc_g_p);
    visit("acc_g_np", self.acc_g_np);
    visit("acc_l_p", self.acc_l_p);
    visit("acc_l_np", self.acc_l_np);
    visit("var_g_p", self.var_g_p);
    visit("var_g_np", self.var_g_np);
    visit("var_l_p", self.var_l_p);
    visit("var_l_np", self.var_l_np);
  }
};

/// One accountant's eps after each round (/privacy/accountants/<name>/*), with its bracket.
struct AccountantSeries {
  std::string name;
  std::vector<double> epsilon, lower, upper;
};

/// What a private run reports (/privacy/* in docs/outputs.md).
struct PrivacyHistory {
  double noise_multiplier = 0.0, update_noise_multiplier = 0.0, count_noise = 0.0, delta = 0.0;
  std::vector<int> opt_out_clients;                            // ids, ascending
  std::vector<double> epsilon, best_order, clip_norm;          // per round (S used)
  std::vector<std::int64_t> sampled_private, sampled_opt_out;  // per round
  std::vector<AccountantSeries> accountants;                   // PrivacyConfig::accountants' order
  // Each client's eps after the last round by the ledger (inf for opt-out clients).
  std::vector<double> client_epsilon;
};

/// Extra private clients whose update is fixed: the audit's canaries (audit/canary_clients.hpp).
/// When inserted and sampled (as client first_id() + c by the privatizer's sampler), a canary's
/// update is clipped, summed and noised like every private client's; it is not counted among the
/// sampled clients (the clipping norm's adaptation and a realized denominator see the real clients
/// only).
class CanaryClients {
 public:
  virtual ~CanaryClients() = default;
  /// The canaries inserted into the run that this rank contributes (ascending indices).
  virtual std::span<const long> inserted_here() const = 0;
  /// The sampler id of canary 0 (above every real client's).
  virtual std::int64_t first_id() const = 0;
  /// Canary `canary`'s update before clipping (p values) in a round clipped at `clip`: every
  /// canary's is length(clip) s_c, with its own signs s_c in {-1, 1}^p.
  virtual void update(long canary, double clip, double* out) const = 0;
  virtual double length(double clip) const = 0;
  /// out[i] = sum over `canaries` (hosted here) of s_ci, for i < p: the sum of their clipped
  /// updates is then one pass over the coordinates (each canary's term is +-scale length).
  virtual void sign_sums(std::span<const long> canaries, std::int64_t* out) const = 0;
};

/// Faults planted in the privatizer for the audit's tests, which must catch each (docs/math.md
/// §11.2): the server's noise scaled by 1/4; the updates not clipped; the first round's Poisson
/// cohort trained every round while the accountants compose Poisson sampling. No deck key or
/// option reaches them.
enum class PlantedFault { none, quarter_noise, clipping_skipped, fixed_cohort_as_poisson };

/// The privatizer of the round (fl/round.hpp): Poisson sampling with q, each sampled update
/// clipped to S and summed exactly (private and opt-out sums apart), the server's noise, FeO2's
/// combination, the clipping norm's adaptation, the accountants and the ledger; Ditto's personal
/// steps beside it. Federation::train runs its rounds.
class PrivateTraining final : public Privatizer {
 public:
  /// `aggregation` other than the mean (DP-FedAvg only): the robust rule over the clipped updates,
  /// noised by its sensitivity (Aggregator::sensitivity; refused without one).
  PrivateTraining(Federation& federation, const PrivacyConfig& config,
                  const PersonalizationConfig& personalization = {},
                  const AggregatorConfig& aggregation = {});
  const PrivacyHistory& history() const { return history_; }
  const Feo2Metrics& metrics() const { return metrics_; }
  /// Acc_g of the evaluated rounds, from the federation's own per-round test evaluation (the
  /// server test set is not evaluated twice).
  void take_server_accuracy(const std::vector<RoundMetrics>& history);
  /// Is client `id` sampled in `round`? (The same on every rank.)
  bool sampled(int round, int id) const;
  /// The state a restart needs (clipping norm, accountant, histories, metrics, Ditto's personal
  /// models), as named arrays under "private/", identical on every rank. save_state is collective
  /// (the personal models are gathered in client order).
  void save_state(std::map<std::string, std::vector<double>>& arrays) const;
  void restore_state(const std::map<std::string, std::vector<double>>& arrays);
  /// Inserts canary clients into every later round (null: none); refused without privacy.
  void insert_canaries(const CanaryClients* canaries);
  /// For the audit's tests only: plants `fault` (before the first round).
  void plant_fault_for_testing(PlantedFault fault);

  // The round's parts (Privatizer).
  Sampler& sampler() override { return *sampler_; }
  void begin(int round, std::size_t count) override;
  double* slot(std::size_t j) override;
  void take(std::size_t j, const Client& client, const UpdateSize& size) override;
  double local_bound() const override { return largest_; }
  void agreed(int round, std::span<const std::size_t> chosen,
              const std::vector<double>& theta) override;
  std::optional<double> reduce(int round, double bound, std::vector<double>& step) override;
  void finish_round(int round, const std::vector<double>& theta) override;

 private:
  void personal_step(std::size_t local, int round, const std::vector<double>& received);
  bool evaluated(int round) const;  // the /feo2 metrics are due after this round
  // The round's server normals that this rank takes from the node's queue, as bit patterns at
  // their indices in `out` (the other entries stay zero).
  void draw_server_normals(int round, std::span<std::int64_t> out);
  void evaluate(int round, const std::vector<double>& theta);
  // Adds the round's step to every accountant and the ledger and appends their eps to the
  // history (the ledger's per-client eps after the last round).
  void account_round(int round);
  // The robust rule's reduction (gathered clipped updates, noise by its sensitivity).
  std::optional<double> reduce_robust(int round, std::vector<double>& step);
  // The round's last steps, either reduction: its counts in the history, the clipping norm's
  // adaptation (the count noise from `server`, after the update normals), the accountants.
  void close_round(int round, double n_private, double n_opt_out, double unclipped, Stream& server);

  Federation& federation_;
  PrivacyConfig config_;
  PersonalizationConfig personalization_;
  std::unique_ptr<Sampler> sampler_;    // Poisson with q
  std::unique_ptr<Aggregator> robust_;  // a robust rule over the clipped updates, or null (the sum)
  Feo2Metrics metrics_;
  std::vector<std::vector<double>> personal_;  // per local client; empty until first sampled
  AdaptiveClip clip_;
  std::vector<std::unique_ptr<Accountant>> accountants_;  // PrivacyConfig::accountants' order
  std::unique_ptr<ClientLedger> ledger_;  // every client's own eps, by the first accountant
  std::vector<char> opt_out_;             // per client id
  std::int64_t private_clients_ = 0;
  bool local_tests_ = false;  // some client holds local test rows (else the metrics stay NaN)
  PrivacyHistory history_;
  // The round in progress: the clipping norm S, whether it clips the updates, the
  // width of the sums (private | opt-out), the server normals' slots, and per local update its
  // clipping scale and its sum's offset; the counts: private, opt-out, unclipped, and terms past
  // the bound or non-finite.
  double clip_norm_ = 0.0;
  bool clipped_ = false;     // S finite (mode "none" clips nothing)
  bool summed_now_ = false;  // each update summed as it is trained (its bound S known)
  std::size_t width_ = 0, noise_slots_ = 0;
  std::int64_t counts_[4] = {0, 0, 0, 0};
  double largest_ = 0.0;  // max |term| over this rank's updates (unbounded only)
  std::vector<double> updates_, scales_, sums_, noise_;  // scratch, reused every round
  std::vector<std::size_t> offsets_;
  // The canaries sampled this round on this rank (their updates, unclipped, when the sum waits for
  // the bound), and their clipping scales.
  const CanaryClients* canaries_ = nullptr;
  std::vector<double> canary_updates_, canary_scales_;
  std::vector<long> sampled_canaries_;
  std::vector<std::int64_t> canary_signs_;  // their signs' sums per coordinate
  PlantedFault fault_ = PlantedFault::none;
  QuantizedSum quantized_;
  NodeWorkQueue normal_queue_;  // the server normals, shared out among a node's ranks
  Workspace work_;
};

/// Opt-out client ids (FeO2): round(rho N) clients, uniformly at random, or among the clients
/// holding `label` when label >= 0 (seed 004 §5.1's skewed variant). Every rank gets the same ids.
std::vector<int> choose_opt_out_clients(const FederatedProblem& problem, double fraction,
                                        int label);

}  // namespace fluence
