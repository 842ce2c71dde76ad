#pragma once
// Canary clients in a private training run (docs/math.md §11.2-11.3): m extra clients whose
// update is always the same random direction, each inserted into the run with probability 1/2
// (Steinke, Nasr & Jagielski 2023) and, when inserted, sampled, clipped, summed and noised like
// every private client (the privatizer's CanaryClients, fl/private_training.hpp). After each round
// every canary, inserted or held out, is scored by the cosine of its direction with the round's
// model delta; at the end by the cosine with the whole run's delta. From the scores:
//   - the one-run eps lower bound (audit/one_run.hpp) on the all-iterates score (max over rounds:
//     the white-box adversary who sees every round's model) and on the final score (black box);
//   - Andrew et al. 2024's estimate: Gaussians fitted to the inserted and the held-out canaries'
//     scores, and the eps between them at the run's delta (audit/canary_estimate.hpp).
// Each canary lives on one rank (contiguous blocks in canary order), which scores it alone in a
// fixed order, so the scores are the same bits for any rank count.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "fluence/core/config.hpp"
#include "fluence/fl/private_training.hpp"

namespace fluence {

/// [audit] keys read by `fluence train` (declared with the LDP audit's, audit/ldp_audit.hpp).
/// Which canaries a run inserts (audit.canary_inclusion): each with probability 1/2 (the one-run
/// audit), or all or none of them (a multi-run audit's runs with and without its target, with the
/// bit chosen outside the run, e.g. by the SLURM array task).
enum class CanaryInclusion { random, all, none };

struct CanaryAuditConfig {
  long canaries = 0;  // m; 0 = no canaries
  double confidence = 0.95;
  CanaryInclusion inclusion = CanaryInclusion::random;
  static CanaryAuditConfig from_deck(const Deck& deck);
};

/// What the canary audit reports (/audit/* in docs/outputs.md).
struct CanaryAuditResult {
  std::vector<std::uint8_t> inserted;          // per canary
  std::vector<double> score_all_iterates;      // max over rounds of cos(u_c, theta_t - theta_t-1)
  std::vector<double> score_final;             // cos(u_c, theta_T - theta_0)
  double confidence = 0.0, delta = 0.0;        // of the lower bounds; delta of both
  double epsilon_lower_all_iterates = 0.0;     // one-run bound, white box
  double epsilon_lower_final = 0.0;            // one-run bound, black box
  double epsilon_estimate_all_iterates = 0.0;  // Andrew et al., all iterates
  double epsilon_estimate_final = 0.0;         // Andrew et al., final model
  // The white-box likelihood-ratio statistic (CanaryAudit::set_likelihood_model; empty without
  // one): per canary sum over rounds of log(1 - q + q exp(mu zeta_t - mu^2/2)), zeta_t =
  // sqrt(p) cos(u_c, theta_t - theta_t-1), with its one-run bound and its estimate.
  std::vector<double> score_likelihood;
  double epsilon_lower_likelihood = 0.0, epsilon_estimate_likelihood = 0.0;
};

/// Fills the bounds and estimates of `result` from its scores and inclusion: the one-run bounds
/// at `confidence` and Andrew et al.'s estimates (NaN without two canaries and some spread on each
/// side), at `delta`.
void canary_audit_bounds(CanaryAuditResult& result, double delta, double confidence);

class CanaryAudit final : public CanaryClients {
 public:
  /// m canaries over `parameters` coordinates; `clients` the run's real clients (canary c is
  /// client N + c for the sampler). Directions: Rademacher signs / sqrt(p) from the stream (seed,
  /// canary_direction, c); inclusion from (seed, canary_inclusion, c), or forced by `inclusion`.
  CanaryAudit(std::uint64_t seed, long canaries, std::size_t parameters, std::int64_t clients,
              const std::vector<double>& theta_start,
              CanaryInclusion inclusion = CanaryInclusion::random);

  std::span<const long> inserted_here() const override { return inserted_here_; }
  std::int64_t first_id() const override { return clients_; }
  void update(long canary, double clip, double* out) const override;
  double length(double clip) const override;
  void sign_sums(std::span<const long> canaries, std::int64_t* out) const override;

  /// Also scores every canary by the likelihood ratio of the Poisson-subsampled Gaussian mechanism
  /// over the rounds (docs/math.md §11.3c): a round's normalized score zeta = sqrt(p) cos(u_c,
  /// delta_t) is N(0, 1) for a canary not in the round (u_c random, independent of delta_t) and
  /// N(mu, 1) with mu = 1 / z_update for one sampled into it (its clipped update S u_c against
  /// noise z_update S per coordinate), so the Neyman-Pearson statistic of the whole run is
  /// sum_t log(1 - q + q exp(mu zeta_t - mu^2 / 2)). Any fixed statistic keeps the one-run bound
  /// sound; this one sees the ~qT rounds a canary is in instead of the largest of T.
  void set_likelihood_model(double sampling_rate, double update_noise_multiplier);
  /// After round `round` (local, no collective): theta the round's model. A round seen already
  /// (a stop's checkpoint of the previous round) is not scored twice. Rounds are scored kRounds at
  /// a time (the scores are the same bits as one at a time); state() and finish() score the rest.
  void observe(int round, const std::vector<double>& theta);
  /// Collective: the running maxima of every canary in canary order, then (with a likelihood
  /// model) the running likelihood sums, and the last round scored (a checkpoint's
  /// "parts/audit_canaries"); restore takes them back on any rank count, with theta the
  /// checkpoint's model.
  std::vector<double> state();
  void restore(const std::vector<double>& state, const std::vector<double>& theta);
  /// Collective: the scores of every canary and the bounds, with `delta` the run's.
  CanaryAuditResult finish(const std::vector<double>& theta_final, double delta, double confidence);

 private:
  static constexpr std::size_t kRounds = 8;  // rounds scored in one pass over the sign bytes
  // Every hosted canary's direction dotted with each of `vectors` <= kRounds vectors, times
  // sqrt(p): out[k kRounds + r] = sum_i s_ki v[r]_i.
  void signed_sums(const double* const* v, std::size_t vectors, std::vector<double>& out) const;
  // Scores the rounds observed since the last pass, in round order.
  void score_pending();
  std::uint64_t seed_;
  long canaries_, first_ = 0, count_ = 0;  // this rank hosts canaries [first_, first_ + count_)
  std::size_t parameters_;
  std::int64_t clients_;
  // Blocks of 8 coordinates x count_ sign bytes; coordinate 8 b + j is bit 7 - j of its byte (the
  // order in which signed_sums tabulates the 256 sums of a block).
  std::vector<std::uint8_t> sign_bytes_;
  std::vector<std::uint8_t> inserted_;  // every canary's inclusion
  std::vector<long> inserted_here_;
  std::vector<double> best_;  // per hosted canary: max over rounds of its cosine
  // The likelihood statistic (set_likelihood_model): q, mu, and per hosted canary its running sum.
  // Whether it is on is the same on every rank (a rank may host no canary: its sums are empty, and
  // it still takes part in the collectives that gather them).
  bool likelihood_model() const { return likelihood_rate_ > 0.0; }
  double likelihood_rate_ = 0.0, likelihood_shift_ = 0.0;
  std::vector<double> likelihood_;
  std::vector<double> theta_start_, theta_previous_, sums_;
  std::vector<double> pending_deltas_;  // kRounds slots of p: the model changes not yet scored
  int pending_ = 0;
  mutable std::vector<double> tables_;  // signed_sums' tables, kept to spare an allocation a pass
  int last_round_ = 0;
};

}  // namespace fluence
