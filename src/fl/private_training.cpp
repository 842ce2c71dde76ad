// DP-FedAvg with adaptive clipping and FeO2's opt-out aggregation (seed 004; docs/math.md §8).
#include "fluence/fl/private_training.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "fluence/core/deck_keys.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/fl/purposes.hpp"

namespace fluence {

void register_private_training_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      section("privacy",
              "client-level differential privacy: DP-FedAvg, FeO2 "
              "([FeO2](../docs/references.md#feo2))"),
      choice("privacy.mode", "\"none\"", {"none", "dp-fedavg", "feo2"},
             "none (FedAvg), DP-FedAvg with adaptive clipping (§2.1), or FeO2's opt-out "
             "aggregation (Algorithm 1)"),
      key("privacy.sampling_rate", T::real, "1.0",
          "q: every client is sampled per round with this probability (Poisson, keyed by "
          "round and client)",
          0.0, 1.0, true),
      key("privacy.noise_multiplier", T::real, "1.0",
          "z: the overall noise multiplier (the updates and the clipped count together)", 0.0),
      key("privacy.epsilon", T::real, "",
          "a target eps over `federation.rounds` rounds: z is solved for it (replaces "
          "`noise_multiplier`)",
          0.0, kInf, true),
      key("privacy.delta", T::real, "1e-5", "delta of the (eps, delta) guarantee", 0.0, 1.0, true),
      choice("privacy.accountant", "\"rdp\"", accountant_names(),
             "the accountant of `/privacy/epsilon` and of the noise solved for "
             "`privacy.epsilon`: Rényi DP (an upper bound), privacy-loss distributions (a "
             "tight upper bound) or privacy random variables (an estimate, its bracket's upper "
             "end reported); docs/math.md §7"),
      with_choices(key("privacy.report_accountants", T::string_array, "[]",
                       "further accountants whose eps after every round is written beside "
                       "`privacy.accountant`'s under `/privacy/accountants/<name>/`"),
                   accountant_names()),
      key("privacy.clip", T::real, "1.0",
          "S: the clipping norm of client updates (the initial S with adaptive clipping)", 0.0,
          kInf, true),
      key("privacy.adaptive_clip", T::boolean, "true",
          "adapt S geometrically to the target quantile of update norms ([Andrew et al. "
          "2021](../docs/references.md#andrew-2021))"),
      key("privacy.target_quantile", T::real, "0.5",
          "kappa: the target fraction of unclipped updates", 0.0, 1.0),
      key("privacy.clip_learning_rate", T::real, "0.2", "eta_b: S <- S exp(-eta_b (b_bar - kappa))",
          0.0),
      key("privacy.count_noise", T::real, "0.0",
          "z_b: noise std of the unclipped count (0 = expected sampled clients / 20); "
          "needs 2 z_b > z",
          0.0),
      key("privacy.opt_out_fraction", T::real, "0.0",
          "FeO2: the fraction rho_np of clients that opt out of DP", 0.0, 1.0),
      key("privacy.opt_out_label", T::integer, "-1",
          "FeO2's skewed variant: opt-out clients are drawn among those holding this label "
          "(-1 = any client)",
          -1),
      key("privacy.ratio", T::real, "1.0",
          "FeO2's r: the weight of the private average against the opt-out one", 0.0),
      choice("privacy.denominator", "\"expected\"", {"expected", "realized"},
             "divide the private sum by the expected number of sampled private clients q N_p "
             "(McMahan et al.; the count stays private) or by the realized one "
             "([FeO2](../docs/references.md#feo2) Algorithm 1)"),
      section("personalization", "Ditto personal models ([FeO2](../docs/references.md#feo2) §2.2)"),
      choice("personalization.method", "\"none\"", {"none", "ditto"},
             "none, or Ditto: every client keeps a personal model θ_j and, when sampled, "
             "trains f_j(θ_j) + λ/2 ‖θ_j − θ^t‖² from it; the models persist across rounds"),
      key("personalization.lambda_private", T::real, "0.005",
          "λ_p: the proximal weight of private clients", 0.0),
      key("personalization.lambda_opt_out", T::real, "0.005",
          "λ_np: the proximal weight of opt-out clients", 0.0),
      key("personalization.learning_rate", T::real, "0.0",
          "η_p: the personal SGD step (0 = `federation.learning_rate`); epochs and batch "
          "are the federation's",
          0.0),
      key("personalization.metrics_every", T::integer, "1",
          "evaluate the `/feo2/*` metrics every this many rounds (and after the last)", 1),
  });
}

PrivacyConfig PrivacyConfig::from_deck(const Deck& deck, int clients, int rounds) {
  PrivacyConfig config;
  const std::string mode = deck.string("privacy.mode");
  config.mode = mode == "dp-fedavg" ? PrivacyMode::dp_fedavg
                : mode == "feo2"    ? PrivacyMode::feo2
                                    : PrivacyMode::none;
  config.sampling_rate = deck.real("privacy.sampling_rate");
  config.noise_multiplier = deck.real("privacy.noise_multiplier");
  config.delta = deck.real("privacy.delta");
  config.accountants = {deck.string("privacy.accountant")};
  for (const std::string& name : deck.strings("privacy.report_accountants"))
    if (std::find(config.accountants.begin(), config.accountants.end(), name) ==
        config.accountants.end())
      config.accountants.push_back(name);
  config.clip = deck.real("privacy.clip");
  config.adaptive_clip = deck.boolean("privacy.adaptive_clip");
  config.target_quantile = deck.real("privacy.target_quantile");
  config.clip_learning_rate = deck.real("privacy.clip_learning_rate");
  config.count_noise = deck.real("privacy.count_noise");
  config.opt_out_fraction = deck.real("privacy.opt_out_fraction");
  config.opt_out_label = static_cast<int>(deck.integer("privacy.opt_out_label"));
  config.ratio = deck.real("privacy.ratio");
  config.realized_denominator = deck.string("privacy.denominator") == "realized";
  if (!config.enabled()) return config;
  if (config.mode == PrivacyMode::dp_fedavg && config.opt_out_fraction > 0.0)
    throw InputError(fmt::format(
        "privacy.opt_out_fraction = {} applies to privacy.mode = \"feo2\" (here \"dp-fedavg\")",
        config.opt_out_fraction));
  if (deck.string("federation.polish") == "newton")
    throw InputError(
        "federation.polish = \"newton\" uses every client's exact gradient and would void the "
        "differential privacy of privacy.mode = \"" +
        mode + "\"; set federation.polish = \"none\"");
  if (config.count_noise == 0.0)
    config.count_noise = config.sampling_rate * static_cast<double>(clients) / 20.0;
  if (deck.has("privacy.epsilon")) {
    config.target_epsilon = deck.real("privacy.epsilon");
    config.noise_multiplier =
        accountant_noise_for_epsilon(config.accountants.front(), config.sampling_rate, rounds,
                                     config.target_epsilon, config.delta);
  }
  if (config.adaptive_clip && !(2.0 * config.count_noise > config.noise_multiplier))
    throw InputError(fmt::format(
        "privacy.count_noise: z_b = {:g}{} leaves no budget for the updates at noise multiplier z "
        "= {:g} (adaptive clipping needs 2 z_b > z): raise privacy.count_noise or set "
        "privacy.adaptive_clip = false",
        config.count_noise,
        deck.real("privacy.count_noise") == 0.0 ? " (the default, expected sampled clients / 20)"
                                                : "",
        config.noise_multiplier));
  return config;
}

PersonalizationConfig PersonalizationConfig::from_deck(const Deck& deck,
                                                       const FederationConfig& federation) {
  PersonalizationConfig config;
  config.ditto = deck.string("personalization.method") == "ditto";
  config.lambda_private = deck.real("personalization.lambda_private");
  config.lambda_opt_out = deck.real("personalization.lambda_opt_out");
  config.local = federation.local;
  config.local.full_batch = false;
  const double rate = deck.real("personalization.learning_rate");
  if (rate > 0.0) config.local.learning_rate = rate;
  config.metrics_every = static_cast<int>(deck.integer("personalization.metrics_every"));
  config.rounds = federation.rounds;
  return config;
}

std::vector<int> choose_opt_out_clients(const FederatedProblem& problem, double fraction,
                                        int label) {
  const int clients = static_cast<int>(problem.client_rows.size());
  std::vector<int> candidates;
  for (int id = 0; id < clients; ++id) {
    if (label < 0) {
      candidates.push_back(id);
      continue;
    }
    for (std::int64_t row : problem.client_rows[id])
      if (problem.data.train.label[static_cast<std::size_t>(row)] == label) {
        candidates.push_back(id);
        break;
      }
  }
  const auto wanted = static_cast<std::size_t>(std::llround(fraction * clients));
  if (wanted > candidates.size())
    throw InputError(fmt::format(
        "privacy.opt_out_fraction = {} asks for {} opt-out clients, but only {} clients hold "
        "label {} (privacy.opt_out_label)",
        fraction, wanted, candidates.size(), label));
  Stream stream(problem.seed, purpose::opt_out);
  stream.shuffle(std::span<int>(candidates));
  candidates.resize(wanted);
  std::sort(candidates.begin(), candidates.end());
  return candidates;
}

PrivateTraining::PrivateTraining(Federation& federation, const PrivacyConfig& config,
                                 const PersonalizationConfig& personalization,
                                 const AggregatorConfig& aggregation)
    : federation_(federation),
      config_(config),
      personalization_(personalization),
      sampler_(make_sampler({ClientSampling::Kind::poisson, config.sampling_rate},
                            federation.problem().seed,
                            static_cast<std::int64_t>(federation.problem().client_rows.size()))),
      clip_(config.clip, config.target_quantile, config.clip_learning_rate) {
  const auto& problem = federation.problem();
  const int clients = static_cast<int>(problem.client_rows.size());
  if (aggregation.name != "mean") {
    robust_ = make_aggregator(aggregation, "federation.aggregator");
    if (config.mode != PrivacyMode::dp_fedavg)
      throw InputError(fmt::format(
          "federation.aggregator = \"{}\" in private training needs privacy.mode = "
          "\"dp-fedavg\" (FeO2's opt-out combination and the non-private Ditto baseline are "
          "means)",
          aggregation.name));
    if (!std::isfinite(robust_->sensitivity(1.0)))
      throw InputError(fmt::format(
          "federation.aggregator = \"{}\" has no sensitivity bound to calibrate DP noise to "
          "(its aggregate depends on state carried across rounds): use \"mean\", \"median\", "
          "\"trimmed_mean\", \"krum\" or \"multi_krum\" with privacy",
          aggregation.name));
  }
  opt_out_.assign(clients, 0);
  if (config.mode == PrivacyMode::feo2)
    history_.opt_out_clients =
        choose_opt_out_clients(problem, config.opt_out_fraction, config.opt_out_label);
  if (config.mode == PrivacyMode::none) {
    // The non-private baseline (FedAvg over sampled clients, with Ditto): every client is
    // "opted out", nothing is clipped or noised.
    for (int id = 0; id < clients; ++id) history_.opt_out_clients.push_back(id);
    config_.adaptive_clip = false;
    config_.clip = std::numeric_limits<double>::infinity();
    config_.noise_multiplier = 0.0;
    clip_ = AdaptiveClip(config_.clip, 0.0, 0.0);
  }
  personal_.resize(problem.clients.size());
  const int rounds = std::max(personalization.rounds, 0);
  Feo2Metrics::for_each(metrics_, [&](const char*, std::vector<double>& series) {
    series.assign(static_cast<std::size_t>(rounds), std::numeric_limits<double>::quiet_NaN());
  });
  for (int id : history_.opt_out_clients) opt_out_[id] = 1;
  for (const auto& rows : problem.client_test_rows) local_tests_ |= !rows.empty();
  private_clients_ = clients - static_cast<std::int64_t>(history_.opt_out_clients.size());
  history_.noise_multiplier = config_.noise_multiplier;
  history_.count_noise = config_.adaptive_clip ? config_.count_noise : 0.0;
  history_.update_noise_multiplier =
      config_.adaptive_clip ? update_noise_multiplier(config_.noise_multiplier, config_.count_noise)
                            : config_.noise_multiplier;
  history_.delta = config.delta;
  if (!config_.enabled()) return;
  for (const std::string& name : config_.accountants) {
    accountants_.push_back(make_accountant(name));
    history_.accountants.push_back({name, {}, {}, {}});
  }
  // FeO2's opt-out clients send their clipped updates without noise: no eps bounds them.
  ledger_ = std::make_unique<ClientLedger>(clients, config_.accountants.front());
  const std::vector<std::int64_t> opt_out(history_.opt_out_clients.begin(),
                                          history_.opt_out_clients.end());
  if (!opt_out.empty()) ledger_->unprotect(opt_out);
}

bool PrivateTraining::sampled(int round, int id) const {
  return poisson_sampled(federation_.problem().seed, config_.sampling_rate, round, id);
}

void PrivateTraining::begin(int round, std::size_t count) {
  auto& problem = federation_.problem();
  const std::size_t p = federation_.parameters();
  clip_norm_ = clip_.clip();
  const double S = clip_norm_;
  // The sampled local clients train (in parallel across ranks) and their clipped updates are
  // summed exactly in fixed point (docs/math.md §8.3): the same bits for any rank count, and no
  // rank waits for another's partial sum. With a finite clip norm S, no coordinate of a clipped
  // update exceeds S (|d_i| <= ||d||, up to the rounding of the norm: 2^-40 S of slack is ample),
  // so the bound is known before training and each update is quantized as soon as it is trained,
  // while it is in cache; two limbs keep the rounding far below an ulp of the terms even when S
  // is far above them. Without clipping (mode "none") the updates wait for their exact max over
  // all ranks.
  clipped_ = std::isfinite(S) && fault_ != PlantedFault::clipping_skipped;
  // A robust aggregator needs the clipped updates themselves (gathered in reduce).
  summed_now_ = clipped_ && !robust_;
  const auto max_terms = static_cast<std::int64_t>(problem.client_rows.size());
  // Private and opt-out sums side by side; without opt-out clients (DP-FedAvg) the second is zero
  // and is not reduced.
  width_ = history_.opt_out_clients.empty() ? p : 2 * p;
  // The server's p normals ride in the same reduction (drawn in reduce) when any client is
  // private.
  noise_slots_ = private_clients_ > 0 ? p : 0;
  if (summed_now_) quantized_.reset(width_, 4, S + std::ldexp(S, -40), max_terms, 2, noise_slots_);
  updates_.resize((summed_now_ ? 1 : count) * p);
  scales_.resize(count);
  offsets_.resize(count);
  std::fill(counts_, counts_ + 4, 0);
  largest_ = 0.0;
  // The canaries sampled this round, in canary order: clipped and summed now when the bound is
  // known, else kept (with their max |term| in the agreed bound) until it is.
  canary_updates_.clear();
  canary_scales_.clear();
  if (!canaries_) return;
  if (summed_now_) {
    // Every canary's update is +-L per coordinate (CanaryClients), so all have the same norm and
    // clipping scale, and each coordinate's quantized term is +-Q (Q = the quantization of fl(scale
    // L), rounded to nearest even: symmetric). Their exact sum is then Q times the sum of the
    // sampled canaries' signs: one pass, the same integers as one term per canary.
    sampled_canaries_.clear();
    for (const long c : canaries_->inserted_here())
      if (sampler_->in_cohort(round, static_cast<int>(canaries_->first_id() + c)))
        sampled_canaries_.push_back(c);
    if (sampled_canaries_.empty()) return;
    const double length = canaries_->length(S);
    // The norm as one update's: p equal squares summed in order.
    double squared = 0.0;
    const double square = length * length;
    for (std::size_t i = 0; i < p; ++i) squared += square;
    const double scale = S / std::max(std::sqrt(squared), S);
    canary_signs_.resize(p);
    canaries_->sign_sums(sampled_canaries_, canary_signs_.data());
    counts_[3] += static_cast<std::int64_t>(sampled_canaries_.size()) *
                  static_cast<std::int64_t>(
                      quantized_.add_multiples(0, canary_signs_.data(), length, scale, p));
    return;
  }
  for (const long c : canaries_->inserted_here()) {
    if (!sampler_->in_cohort(round, static_cast<int>(canaries_->first_id() + c))) continue;
    // Every row kept: the sum waits for the bound.
    const std::size_t row = canary_scales_.size();
    canary_updates_.resize(std::max(canary_updates_.size(), (row + 1) * p));
    double* update = canary_updates_.data() + row * p;
    canaries_->update(c, S, update);
    double squared = 0.0, largest = 0.0;
    for (std::size_t i = 0; i < p; ++i) {
      squared += update[i] * update[i];
      largest = std::max(largest, std::abs(update[i]));
    }
    canary_scales_.push_back(clipped_ ? S / std::max(std::sqrt(squared), S) : 1.0);
    largest_ = std::max(largest_, largest);
  }
}

double* PrivateTraining::slot(std::size_t j) {
  return updates_.data() + (summed_now_ ? 0 : j * federation_.parameters());
}

void PrivateTraining::take(std::size_t j, const Client& client, const UpdateSize& size) {
  const std::size_t p = federation_.parameters();
  const double S = clip_norm_;
  const double norm = std::sqrt(size.squared_norm);
  offsets_[j] = opt_out_[client.id()] != 0 ? p : std::size_t{0};
  ++counts_[offsets_[j] != 0 ? 1 : 0];
  if (norm <= S) ++counts_[2];
  scales_[j] = clipped_ ? S / std::max(norm, S) : 1.0;  // Clip(update, S)
  if (!std::isfinite(norm)) {
    ++counts_[3];
    scales_[j] = std::nan("");
  } else if (summed_now_) {
    counts_[3] += static_cast<std::int64_t>(quantized_.add(offsets_[j], slot(j), scales_[j], p));
  } else {
    largest_ = std::max(largest_, size.max_abs);
  }
}

namespace {

// The planted fault's cohort: the first round's Poisson draw, every round.
class FirstRoundCohort final : public Sampler {
 public:
  FirstRoundCohort(std::uint64_t seed, double rate) : seed_(seed), rate_(rate) {}
  bool in_cohort(int, int id) override { return poisson_sampled(seed_, rate_, 1, id); }
  SamplingEvent event() const override {
    return {SamplingEvent::Kind::fixed_size, rate_, 0};  // a fixed cohort (of random size)
  }

 private:
  std::uint64_t seed_;
  double rate_;
};

}  // namespace

void PrivateTraining::insert_canaries(const CanaryClients* canaries) {
  if (canaries && !config_.enabled())
    throw InputError(
        "audit.canaries needs a private run: privacy.mode = \"dp-fedavg\" or \"feo2\"");
  canaries_ = canaries;
}

void PrivateTraining::plant_fault_for_testing(PlantedFault fault) {
  fault_ = fault;
  if (fault == PlantedFault::fixed_cohort_as_poisson)
    sampler_ =
        std::make_unique<FirstRoundCohort>(federation_.problem().seed, config_.sampling_rate);
}

void PrivateTraining::agreed(int round, std::span<const std::size_t> chosen,
                             const std::vector<double>& theta) {
  // Ditto's personal steps start from the round's global model and are independent of the global
  // updates: after the agreement, so that a given-up round changes no personal model. They are not
  // given up themselves (a stop arriving now waits for the round's end).
  if (personalization_.ditto)
    for (const std::size_t k : chosen) personal_step(k, round, theta);
}

std::optional<double> PrivateTraining::reduce(int round, double bound, std::vector<double>& step) {
  auto& problem = federation_.problem();
  const std::size_t p = federation_.parameters();
  const double S = clip_norm_;
  if (robust_) return reduce_robust(round, step);
  if (!summed_now_) {
    quantized_.reset(width_, 4, bound, static_cast<std::int64_t>(problem.client_rows.size()), 1,
                     noise_slots_);
    for (std::size_t j = 0; j < scales_.size(); ++j)
      if (!std::isnan(scales_[j]))
        counts_[3] += static_cast<std::int64_t>(
            quantized_.add(offsets_[j], updates_.data() + j * p, scales_[j], p));
    for (std::size_t k = 0; k < canary_scales_.size(); ++k)
      counts_[3] += static_cast<std::int64_t>(
          quantized_.add(0, canary_updates_.data() + k * p, canary_scales_[k], p));
  }
  std::copy(counts_, counts_ + 4, quantized_.counts().begin());
  if (noise_slots_ > 0) draw_server_normals(round, quantized_.extra());
  // [private sum (p) | opt-out sum (p) | private count | opt-out count | unclipped count]
  sums_.resize(2 * p + 3);
  quantized_.allreduce(std::span<double>(sums_.data(), width_));
  std::fill(sums_.begin() + static_cast<std::ptrdiff_t>(width_), sums_.begin() + 2 * p, 0.0);
  if (quantized_.counts()[3] > 0) std::fill(sums_.begin(), sums_.begin() + 2 * p, std::nan(""));
  for (int k = 0; k < 3; ++k) sums_[2 * p + k] = static_cast<double>(quantized_.counts()[k]);
  const double n_private = sums_[2 * p], n_opt_out = sums_[2 * p + 1];

  // The server's noise: p normals, then the count noise, from one stream keyed by the round. The
  // normals came with the sums (draw_server_normals); every value is the one a single stream
  // gives at its index, whatever the rank count.
  const double expected_private = config_.sampling_rate * static_cast<double>(private_clients_);
  const double d_private = config_.realized_denominator ? n_private : expected_private;
  double sigma = d_private > 0.0 ? history_.update_noise_multiplier * S / d_private : 0.0;
  if (fault_ == PlantedFault::quarter_noise) sigma *= 0.25;
  std::vector<double>& delta_private = noise_;  // the private average, noise included
  delta_private.assign(p, 0.0);
  if (d_private > 0.0) {
    const std::span<const std::int64_t> normals = quantized_.extra();
    for (std::size_t i = 0; i < p; ++i)
      delta_private[i] = sums_[i] / d_private + sigma * std::bit_cast<double>(normals[i]);
  }
  Stream server(problem.seed, purpose::server_noise, static_cast<std::uint64_t>(round));
  server.skip(d_private > 0.0 ? 2 * p : 0);
  std::optional<double> factor;
  if (config_.mode == PrivacyMode::dp_fedavg) {
    step.swap(delta_private);  // noise_ is assigned afresh next round
    factor = 1.0;
  } else {
    const double weight_private = config_.ratio * d_private;
    const double total = n_opt_out + weight_private;
    if (total > 0.0) {
      step.resize(p);
      for (std::size_t i = 0; i < p; ++i)
        step[i] = (sums_[p + i] + weight_private * delta_private[i]) / total;
      factor = 1.0;
    }
  }
  close_round(round, n_private, n_opt_out, sums_[2 * p + 2], server);
  return factor;
}

std::optional<double> PrivateTraining::reduce_robust(int round, std::vector<double>& step) {
  // DP with a robust rule (docs/math.md §8.5): the rule over the clipped updates, then Gaussian
  // noise of standard deviation z_u Delta, Delta the rule's sensitivity at S (its aggregate moves
  // by at most Delta when one client is added or removed). Every rank gathers the same rows: the
  // clients' in id order, then the canaries' in canary order.
  auto& problem = federation_.problem();
  const std::size_t p = federation_.parameters();
  const double S = clip_norm_;
  const std::size_t clients = scales_.size(), canaries = canary_scales_.size();
  for (std::size_t j = 0; j < clients; ++j)
    for (std::size_t i = 0; i < p; ++i) updates_[j * p + i] *= scales_[j];
  for (std::size_t k = 0; k < canaries; ++k)
    for (std::size_t i = 0; i < p; ++i) canary_updates_[k * p + i] *= canary_scales_[k];
  std::vector<double> rows =
      ordered_allgather(std::span<const double>(updates_.data(), clients * p),
                        static_cast<int>(clients), static_cast<int>(p));
  const std::vector<double> canary_rows =
      ordered_allgather(std::span<const double>(canary_updates_.data(), canaries * p),
                        static_cast<int>(canaries), static_cast<int>(p));
  rows.insert(rows.end(), canary_rows.begin(), canary_rows.end());
  std::int64_t counts[4];
  std::copy(counts_, counts_ + 4, counts);
  MPI_Allreduce(MPI_IN_PLACE, counts, 4, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  const int n = static_cast<int>(rows.size() / p);
  step.assign(p, 0.0);
  if (counts[3] > 0) {
    std::fill(step.begin(), step.end(), std::nan(""));
  } else if (n > 0) {
    try {
      robust_->aggregate(rows.data(), n, p, step.data());
    } catch (const InputError& error) {
      // A Poisson cohort too small for the rule (KRUM's n > 2f + 2): no aggregate, the noise
      // alone (every aggregate lies within the sensitivity's ball, the empty one too).
      std::fill(step.begin(), step.end(), 0.0);
      log::warn("round {}: {}: the round's step is the noise alone", round, error.what());
    }
  }
  double sigma = history_.update_noise_multiplier * robust_->sensitivity(S);
  if (fault_ == PlantedFault::quarter_noise) sigma *= 0.25;
  Stream server(problem.seed, purpose::server_noise, static_cast<std::uint64_t>(round));
  for (std::size_t i = 0; i < p; ++i) step[i] += sigma * server.normal();
  close_round(round, static_cast<double>(counts[0]), static_cast<double>(counts[1]),
              static_cast<double>(counts[2]), server);
  return 1.0;
}

void PrivateTraining::close_round(int round, double n_private, double n_opt_out, double unclipped,
                                  Stream& server) {
  auto& problem = federation_.problem();
  history_.sampled_private.push_back(static_cast<std::int64_t>(n_private));
  history_.sampled_opt_out.push_back(static_cast<std::int64_t>(n_opt_out));
  history_.clip_norm.push_back(clip_norm_);
  if (config_.adaptive_clip) {
    // b_bar over all sampled clients, with the count noise z_b (Algorithm 1's last line); the
    // count's normal follows the p update normals in the server's stream.
    const double expected_all =
        config_.sampling_rate * static_cast<double>(problem.client_rows.size());
    const double denominator = config_.realized_denominator ? n_private + n_opt_out : expected_all;
    const double noisy = unclipped + config_.count_noise * server.normal();
    if (denominator > 0.0) clip_.update(noisy / denominator);
  }
  if (config_.enabled()) account_round(round);
}

void PrivateTraining::finish_round(int round, const std::vector<double>& theta) {
  if (evaluated(round)) evaluate(round, theta);
}

void PrivateTraining::account_round(int round) {
  // The accountants compose what the sampler did: its event's q (every client: q = 1). Every
  // client is sampled with the same q: every private client's history is the run's.
  const SamplingEvent event =
      fault_ == PlantedFault::fixed_cohort_as_poisson
          ? SamplingEvent{SamplingEvent::Kind::poisson, config_.sampling_rate, 0}
          : sampler_->event();
  if (event.kind == SamplingEvent::Kind::fixed_size)
    throw std::logic_error("no accountant composes a fixed-size cohort drawn without replacement");
  const double q = event.rate;
  ledger_->add_steps({}, q, config_.noise_multiplier, 1);
  if (round == personalization_.rounds) history_.client_epsilon = ledger_->epsilon(config_.delta);
  for (std::size_t k = 0; k < accountants_.size(); ++k) {
    accountants_[k]->add_steps(q, config_.noise_multiplier, 1);
    const EpsilonReport report = accountants_[k]->epsilon(config_.delta);
    AccountantSeries& series = history_.accountants[k];
    series.epsilon.push_back(report.epsilon);
    series.lower.push_back(report.lower);
    series.upper.push_back(report.upper);
    if (k > 0) continue;
    history_.epsilon.push_back(report.epsilon);
    // The Rényi order attaining eps; no order belongs to the other accountants' eps.
    history_.best_order.push_back(accountants_[k]->name() == "rdp"
                                      ? report.rdp_order
                                      : std::numeric_limits<double>::quiet_NaN());
  }
}

void PrivateTraining::draw_server_normals(int round, std::span<std::int64_t> out) {
  // Drawn before the reduction, by whichever ranks of a node are free first: a rank whose sampled
  // clients trained faster takes more of the normals (Box-Muller's log and cos cost about 45 ns a
  // value) instead of waiting in the reduction for the slower ranks. Blocks of 256 are about 12 us.
  constexpr std::size_t kNormalBlock = 256;
  normal_queue_.begin(out.size(), kNormalBlock);
  std::size_t first = 0, last = 0;
  while (normal_queue_.next(first, last)) {
    Stream server(federation_.problem().seed, purpose::server_noise,
                  static_cast<std::uint64_t>(round));
    server.skip(2 * first);  // normal() takes two outputs
    for (std::size_t i = first; i < last; ++i)
      out[i] = std::bit_cast<std::int64_t>(server.normal());
  }
}

bool PrivateTraining::evaluated(int round) const {
  return round <= personalization_.rounds &&
         (round % personalization_.metrics_every == 0 || round == personalization_.rounds);
}

void PrivateTraining::take_server_accuracy(const std::vector<RoundMetrics>& history) {
  for (const auto& m : history)
    if (evaluated(m.round)) metrics_.acc_g[static_cast<std::size_t>(m.round - 1)] = m.test_accuracy;
}

void PrivateTraining::personal_step(std::size_t local, int round,
                                    const std::vector<double>& received) {
  auto& client = federation_.problem().clients[local];
  auto& personal = personal_[local];
  if (personal.empty()) personal = received;  // theta_j <- theta^0 when not initialized
  const double lambda =
      opt_out_[client.id()] ? personalization_.lambda_opt_out : personalization_.lambda_private;
  client.train_personal(*federation_.problem().model, personalization_.local,
                        federation_.problem().seed, round, personal.data(), received.data(), lambda,
                        work_);
}

// Accuracy means and variances over clients' local test data, reduced in client order.
void PrivateTraining::evaluate(int round, const std::vector<double>& theta) {
  // Without local test rows every mean is 0 / 0: the series keep their NaN, and the ranks skip a
  // collective that would only wait for the slowest of them.
  if (!local_tests_) return;
  auto& problem = federation_.problem();
  const auto& model = *problem.model;
  const std::size_t t = static_cast<std::size_t>(round - 1);
  // [g, g^2, l, l^2, count] for private clients, then the same for opt-out clients.
  std::vector<double> totals(10);
  federation_.sum_over_clients(totals, [&](std::size_t k, double* sum) {
    std::fill(sum, sum + 10, 0.0);
    const auto& client = problem.clients[k];
    const std::size_t m = client.local_test_size();
    if (m == 0) return;
    auto accuracy = [&](const std::vector<double>& parameters) {
      const auto r = model.loss_sum(client.local_test_features(), client.local_test_labels(), m,
                                    parameters.data(), work_);
      return static_cast<double>(r.correct) / static_cast<double>(m);
    };
    const double global = accuracy(theta);
    const double personal = personal_[k].empty() ? global : accuracy(personal_[k]);
    double* group = sum + (opt_out_[client.id()] ? 5 : 0);
    group[0] = global;
    group[1] = global * global;
    group[2] = personal;
    group[3] = personal * personal;
    group[4] = 1.0;
  });
  auto mean = [](double total, double count) {
    return count > 0 ? total / count : std::numeric_limits<double>::quiet_NaN();
  };
  auto variance = [&](double total, double square, double count) {
    return count > 0 ? square / count - mean(total, count) * mean(total, count)
                     : std::numeric_limits<double>::quiet_NaN();
  };
  metrics_.acc_g_p[t] = mean(totals[0], totals[4]);
  metrics_.var_g_p[t] = variance(totals[0], totals[1], totals[4]);
  metrics_.acc_l_p[t] = mean(totals[2], totals[4]);
  metrics_.var_l_p[t] = variance(totals[2], totals[3], totals[4]);
  metrics_.acc_g_np[t] = mean(totals[5], totals[9]);
  metrics_.var_g_np[t] = variance(totals[5], totals[6], totals[9]);
  metrics_.acc_l_np[t] = mean(totals[7], totals[9]);
  metrics_.var_l_np[t] = variance(totals[7], totals[8], totals[9]);
}

namespace {

template <class T>
std::vector<double> as_doubles(const std::vector<T>& values) {
  return std::vector<double>(values.begin(), values.end());
}

const std::vector<double>& required(const std::map<std::string, std::vector<double>>& arrays,
                                    const std::string& name) {
  const auto found = arrays.find(name);
  if (found == arrays.end())
    throw InputError("checkpoint: \"" + name + "\" is missing (a checkpoint of another mode?)");
  return found->second;
}

}  // namespace

void PrivateTraining::save_state(std::map<std::string, std::vector<double>>& arrays) const {
  arrays["private/clip"] = {clip_.clip()};
  if (ledger_) arrays["private/ledger"] = ledger_->state();
  for (std::size_t k = 0; k < accountants_.size(); ++k) {
    const AccountantSeries& series = history_.accountants[k];
    const std::string prefix = "private/accountants/" + series.name + "/";
    arrays[prefix + "state"] = accountants_[k]->state();
    arrays[prefix + "epsilon"] = series.epsilon;
    arrays[prefix + "lower"] = series.lower;
    arrays[prefix + "upper"] = series.upper;
  }
  arrays["private/epsilon"] = history_.epsilon;
  arrays["private/best_order"] = history_.best_order;
  arrays["private/clip_norm"] = history_.clip_norm;
  arrays["private/sampled_private"] = as_doubles(history_.sampled_private);
  arrays["private/sampled_opt_out"] = as_doubles(history_.sampled_opt_out);
  Feo2Metrics::for_each(metrics_, [&](const char* name, const std::vector<double>& series) {
    arrays[std::string("private/metrics/") + name] = series;
  });
  if (!personalization_.ditto) return;
  // Ditto's personal models, one row per client in id order (a flag column first: 0 = not yet
  // initialized). Collective: every rank passes its clients' rows, which are contiguous in id
  // order.
  const std::size_t p = federation_.parameters();
  std::vector<double> local(personal_.size() * (p + 1), 0.0);
  for (std::size_t k = 0; k < personal_.size(); ++k) {
    if (personal_[k].empty()) continue;
    local[k * (p + 1)] = 1.0;
    std::copy(personal_[k].begin(), personal_[k].end(), local.begin() + k * (p + 1) + 1);
  }
  arrays["private/personal"] =
      ordered_allgather(local, static_cast<int>(personal_.size()), static_cast<int>(p + 1));
}

void PrivateTraining::restore_state(const std::map<std::string, std::vector<double>>& arrays) {
  clip_.set_clip(required(arrays, "private/clip").at(0));
  // A checkpoint from before the ledger: every private client's history is the run's rounds.
  if (ledger_ && arrays.contains("private/ledger"))
    ledger_->restore(arrays.at("private/ledger"));
  else if (ledger_)
    ledger_->add_steps({}, config_.sampling_rate, config_.noise_multiplier,
                       static_cast<long>(required(arrays, "private/epsilon").size()));
  for (std::size_t k = 0; k < accountants_.size(); ++k) {
    AccountantSeries& series = history_.accountants[k];
    const std::string prefix = "private/accountants/" + series.name + "/";
    if (series.name == "rdp" && !arrays.contains(prefix + "state") &&
        arrays.contains("private/rdp")) {
      // A checkpoint from before the accountant interface: its RDP vector, its eps history.
      accountants_[k]->restore(arrays.at("private/rdp"));
      series.epsilon = series.upper = required(arrays, "private/epsilon");
      series.lower.assign(series.epsilon.size(), 0.0);
      continue;
    }
    accountants_[k]->restore(required(arrays, prefix + "state"));
    series.epsilon = required(arrays, prefix + "epsilon");
    series.lower = required(arrays, prefix + "lower");
    series.upper = required(arrays, prefix + "upper");
  }
  history_.epsilon = required(arrays, "private/epsilon");
  history_.best_order = required(arrays, "private/best_order");
  history_.clip_norm = required(arrays, "private/clip_norm");
  auto integers = [&](const std::string& name) {
    const auto& values = required(arrays, name);
    return std::vector<std::int64_t>(values.begin(), values.end());
  };
  history_.sampled_private = integers("private/sampled_private");
  history_.sampled_opt_out = integers("private/sampled_opt_out");
  Feo2Metrics::for_each(metrics_, [&](const char* name, std::vector<double>& series) {
    series = required(arrays, std::string("private/metrics/") + name);
  });
  if (!personalization_.ditto) return;
  const auto& all = required(arrays, "private/personal");
  const std::size_t p = federation_.parameters();
  const auto& clients = federation_.problem().clients;
  if (all.size() != federation_.problem().client_rows.size() * (p + 1))
    throw InputError("checkpoint: the personal models do not fit this run's clients and model");
  for (std::size_t k = 0; k < clients.size(); ++k) {
    const double* row = all.data() + static_cast<std::size_t>(clients[k].id()) * (p + 1);
    if (row[0] == 0.0)
      personal_[k].clear();
    else
      personal_[k].assign(row + 1, row + 1 + p);
  }
}

}  // namespace fluence
