// fluence lia, the filtering stage (seed 002 Algorithm 1): the contributors' DP-SGD layers, the
// validators' votes (Eq. 1-2) from GEMMs over the stacked layers, the center's threshold and the
// filtration metrics (§IV-B), the exact-influence sign check (Fig. 9) and the minority experiment
// (§IV-E).
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "exact_fit.hpp"
#include "experiment.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/lia/purposes.hpp"
#include "fluence/lia/relevance.hpp"
#include "fluence/lia/votes.hpp"

namespace fluence::lia {

namespace {

// Which validators vote on contributor `a` (seed §III-B2: all others, or a random subset of m).
// Contributors a >= participants are newcomers (minority experiment): every participant is a
// candidate for them.
std::vector<std::uint8_t> validator_membership(int contributor, int participants, int m, int first,
                                               int last, std::uint64_t seed) {
  std::vector<std::uint8_t> member(last - first, 0);
  if (m == 0) {
    for (int b = first; b < last; ++b) member[b - first] = b != contributor ? 1 : 0;
    return member;
  }
  std::vector<int> candidates;
  candidates.reserve(participants);
  for (int b = 0; b < participants; ++b)
    if (b != contributor) candidates.push_back(b);
  Stream stream(seed, purpose::lia_validators, 0, static_cast<std::uint64_t>(contributor));
  const auto n = candidates.size();
  for (std::size_t k = 0; k < static_cast<std::size_t>(m); ++k) {
    const auto j = k + stream.below(n - k);
    std::swap(candidates[k], candidates[j]);
    const int b = candidates[k];
    if (b >= first && b < last) member[b - first] = 1;
  }
  return member;
}

struct VoteTally {
  std::vector<std::int64_t> noisy, truthful, cast;
  std::vector<std::int64_t> weight;  // relevance: the sum of the quantized weights, else empty

  // What the center decides on: the vote sums, or with relevance weights the weighted means.
  std::vector<double> decided(const std::vector<std::int64_t>& sums) const {
    std::vector<double> out(sums.size());
    for (std::size_t k = 0; k < sums.size(); ++k)
      out[k] = weight.empty()  ? static_cast<double>(sums[k])
               : weight[k] > 0 ? static_cast<double>(sums[k]) / static_cast<double>(weight[k])
                               : 0.0;
    return out;
  }
};

// member[(b - first) * contributors + k] = 1 when validator b votes on contributor id0 + k.
std::vector<std::uint8_t> membership_matrix(int contributors, int id0, const LiaConfig& config,
                                            int first, int last, std::uint64_t seed) {
  std::vector<std::uint8_t> member(static_cast<std::size_t>(last - first) * contributors);
  for (int k = 0; k < contributors; ++k) {
    const auto column = validator_membership(id0 + k, config.participants,
                                             config.validators_per_contributor, first, last, seed);
    for (int b = first; b < last; ++b)
      member[static_cast<std::size_t>(b - first) * contributors + k] = column[b - first];
  }
  return member;
}

// What a validator compares each loss difference with. "model": 0, Eq. 1 as written (vote +1 when
// A's layer lowers the validation loss below the current model's). "median": the validator's
// median difference over the contributors it evaluates, so its vote says whether A helps more than
// its typical contributor; this removes the shift every noisy layer shares (DP noise raises every
// loss by about tau^2 tr(H)/2) and the shift a non-IID validator sees from every foreign batch.
// "quantile": the q-quantile instead, so a validator votes -1 only on the share q of its
// contributors that help it least. The rationale: a corrupted batch is among the worst for the
// validators holding its classes, an honest non-IID batch rarely is. docs/results/lia.md measures
// that a small q trades recall for precision rather than separating the two groups better.
std::vector<double> vote_baselines(const std::vector<double>& differences,
                                   const std::vector<std::uint8_t>& member, int contributors,
                                   const LiaConfig& config, int first, int last) {
  std::vector<double> baseline(last - first, 0.0);
  if (config.vote_baseline == "model") return baseline;
  std::vector<double> values;
  for (int b = first; b < last; ++b) {
    values.clear();
    for (int k = 0; k < contributors; ++k) {
      const std::size_t at = static_cast<std::size_t>(b - first) * contributors + k;
      if (member[at]) values.push_back(differences[at]);
    }
    if (!values.empty()) baseline[b - first] = vote_quantile(values, config.vote_quantile);
  }
  return baseline;
}

// The votes of the local validators on `contributors` contributors with ids id0, id0 + 1, ...
// (Eq. 1 against `baseline`, then Eq. 2), summed over all validators (exact integer all-reduce).
// With `weights` (quantized, one per validator and contributor as in `member`), each vote counts
// its weight and the tally carries the weights' sums.
VoteTally tally_votes(const std::vector<double>& differences,
                      const std::vector<std::uint8_t>& member, const std::vector<double>& baseline,
                      int contributors, int id0, const LiaConfig& config, int first, int last,
                      std::uint64_t seed, const std::vector<std::int64_t>& weights = {}) {
  VoteTally tally;
  tally.noisy.assign(contributors, 0);
  tally.truthful.assign(contributors, 0);
  tally.cast.assign(contributors, 0);
  if (!weights.empty()) tally.weight.assign(contributors, 0);
  const double p = config.vote_flip_probability();
  for (int b = first; b < last; ++b)
    for (int k = 0; k < contributors; ++k) {
      const std::size_t at = static_cast<std::size_t>(b - first) * contributors + k;
      if (!member[at]) continue;
      // +1 when A's layer lowers B's validation loss (by more than the baseline); a tie is -1.
      const int vote = differences[at] > baseline[b - first] ? 1 : -1;
      Stream stream(seed, purpose::lia_vote, static_cast<std::uint64_t>(b),
                    static_cast<std::uint64_t>(id0 + k));
      const std::int64_t w = weights.empty() ? 1 : weights[at];
      tally.noisy[k] += w * obfuscate_vote(vote, p, stream);
      tally.truthful[k] += w * vote;
      tally.cast[k] += 1;
      if (!weights.empty()) tally.weight[k] += w;
    }
  for (auto* values : {&tally.noisy, &tally.truthful, &tally.cast, &tally.weight})
    if (!values->empty())
      MPI_Allreduce(MPI_IN_PLACE, values->data(), contributors, MPI_INT64_T, MPI_SUM,
                    MPI_COMM_WORLD);
  return tally;
}

// Seed §III-B3: validator b's rows are split into `subsets` disjoint subsets (row j of its set in
// subset j mod s) and its vote on contributor a uses one, drawn per pair.
void validation_subsets(const LiaConfig& config, int first, int last, int contributors, int id0,
                        std::uint64_t seed, std::vector<std::uint8_t>& row_subset,
                        std::vector<std::uint8_t>& pair_subset) {
  const int s = config.validation_subsets;
  row_subset.resize(static_cast<std::size_t>(last - first) * config.validation_size);
  for (std::size_t r = 0; r < row_subset.size(); ++r)
    row_subset[r] = static_cast<std::uint8_t>((r % config.validation_size) % s);
  pair_subset.resize(static_cast<std::size_t>(last - first) * contributors);
  for (int b = first; b < last; ++b)
    for (int k = 0; k < contributors; ++k) {
      Stream stream(seed, purpose::lia_validators, 1, static_cast<std::uint64_t>(b),
                    static_cast<std::uint64_t>(id0 + k));
      pair_subset[static_cast<std::size_t>(b - first) * contributors + k] =
          static_cast<std::uint8_t>(stream.below(s));
    }
}

// lia.relevance (docs/math.md §9, "Relevance-weighted votes"): a participant's noisy histogram of
// M0's predicted classes over `rows` rows of x; `role` 0 is a training batch, 1 a validation set.
std::vector<double> noisy_histogram(const Experiment& e, const double* x, std::size_t rows,
                                    std::uint64_t participant, int role) {
  auto counts = predicted_class_histogram(x, rows, e.D, e.C, e.theta0.data());
  Stream stream(e.seed, purpose::lia_relevance, static_cast<std::uint64_t>(role), participant);
  add_laplace_noise(counts, e.config.relevance_epsilon, stream);
  return counts;
}

// The quantized weights of the local validators' votes on `contributors` contributors whose
// histograms are `contributor_histograms` (contributors x C), laid out as membership_matrix.
std::vector<std::int64_t> vote_weights(const Experiment& e,
                                       const std::vector<double>& validation_histograms,
                                       const std::vector<double>& contributor_histograms,
                                       int contributors) {
  const int C = e.C, owned = e.local.last - e.local.first;
  // Shares once per histogram, then one C-long dot product per (validator, contributor) pair.
  const auto validator_shares =
      relevance_shares(std::span<const double>(validation_histograms)
                           .subspan(static_cast<std::size_t>(e.local.first) * C,
                                    static_cast<std::size_t>(owned) * C),
                       C);
  const auto contributor_shares = relevance_shares(contributor_histograms, C);
  std::vector<std::int64_t> weights(static_cast<std::size_t>(owned) * contributors);
  for (int b = 0; b < owned; ++b)
    for (int k = 0; k < contributors; ++k)
      weights[static_cast<std::size_t>(b) * contributors + k] = quantized_weight(relevance_weight(
          &validator_shares[static_cast<std::size_t>(b) * C],
          &contributor_shares[static_cast<std::size_t>(k) * C], C, e.config.relevance_power));
  return weights;
}

// Every participant's two histograms, gathered (P x C each) into the result.
void relevance_histograms(const Experiment& e, LiaResult& result) {
  const LocalData& local = e.local;
  const int owned = local.last - local.first, C = e.C, D = e.D;
  std::vector<double> batch_local, validation_local;
  for (int i = local.first; i < local.last; ++i) {
    const Client& participant = e.participant(i);
    const auto batch = noisy_histogram(e, participant.features(), participant.size(), i, 0);
    const std::size_t v0 = local.validation_begin[i - local.first],
                      v1 = local.validation_begin[i - local.first + 1];
    const auto validation = noisy_histogram(e, &local.validation_x[v0 * D], v1 - v0, i, 1);
    batch_local.insert(batch_local.end(), batch.begin(), batch.end());
    validation_local.insert(validation_local.end(), validation.begin(), validation.end());
  }
  result.batch_histogram = ordered_allgather(batch_local, owned, C);
  result.validation_histogram = ordered_allgather(validation_local, owned, C);
}

struct Filtration {
  double recall, precision, accuracy;
};

Filtration filtration_metrics(const std::vector<std::int64_t>& accepted,
                              const std::vector<std::int64_t>& corrupted_flag) {
  // "Positive" = flagged as corrupted (rejected), as in seed §IV-B.
  long tp = 0, fp = 0, fn = 0, tn = 0;
  for (std::size_t a = 0; a < accepted.size(); ++a) {
    const bool rejected = accepted[a] == 0, bad = corrupted_flag[a] != 0;
    tp += rejected && bad;
    fp += rejected && !bad;
    fn += !rejected && bad;
    tn += !rejected && !bad;
  }
  const double nan = std::nan("");
  return {tp + fn > 0 ? static_cast<double>(tp) / static_cast<double>(tp + fn) : nan,
          tp + fp > 0 ? static_cast<double>(tp) / static_cast<double>(tp + fp) : nan,
          static_cast<double>(tp + tn) / static_cast<double>(accepted.size())};
}

// Exact influence check (seed Fig. 9, Eq. 4): retrain M0's objective with each sampled
// contributor's batch added and compare sign(L_B(M0) - L_B(M0 + A)) with the lazy vote (Eq. 1's
// sign, before randomized response), per (contributor, validator) pair.
void check_signs(Experiment& e, const std::vector<double>& differences, VoteKernel& kernel,
                 LiaResult& result) {
  const LiaConfig& config = e.config;
  const int P = e.P, D = e.D;
  const LocalData& local = e.local;
  const int owned = local.last - local.first;
  const std::vector<double>& theta0 = e.theta0;
  Stream choose(e.seed, purpose::lia_sign_check);
  auto order = random_permutation(choose, P);
  std::vector<std::int64_t> sample(order.begin(), order.begin() + config.sign_check);
  std::sort(sample.begin(), sample.end());
  result.sign_checked = sample;
  std::vector<double> retrained_local;
  int retrained_owned = 0;
  for (auto a : sample) {
    if (a < local.first || a >= local.last) continue;
    const Client& participant = e.participant(static_cast<int>(a));
    std::vector<double> x(e.warmup_x);
    x.insert(x.end(), participant.features(), participant.features() + participant.size() * D);
    std::vector<std::int32_t> y(e.warmup_y);
    y.insert(y.end(), participant.labels().begin(), participant.labels().end());
    std::vector<double> theta(theta0);
    exact_fit(e.model(), x.data(), y.data(), y.size(), config.retrain_tolerance, theta);
    retrained_local.insert(retrained_local.end(), theta.begin(), theta.end());
    ++retrained_owned;
  }
  const auto retrained = ordered_allgather(retrained_local, retrained_owned, static_cast<int>(e.p));
  const int S = config.sign_check;
  std::vector<double> exact(static_cast<std::size_t>(owned) * S);
  kernel.loss_differences(local.validation_x.data(), local.validation_y.data(),
                          local.validation_begin, theta0.data(), retrained.data(), S, exact.data());
  long counts[2] = {0, 0};  // agreeing, compared
  for (int b = local.first; b < local.last; ++b)
    for (int s = 0; s < S; ++s) {
      const auto a = sample[s];
      if (a == b) continue;
      const bool lazy = differences[static_cast<std::size_t>(b - local.first) * P + a] > 0.0;
      const bool truth = exact[static_cast<std::size_t>(b - local.first) * S + s] > 0.0;
      counts[0] += lazy == truth;
      counts[1] += 1;
    }
  MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  result.sign_agreement = static_cast<double>(counts[0]) / static_cast<double>(counts[1]);
  if (e.progress)
    log::info(
        "lia: exact influence of {} contributors by retraining: the lazy vote's sign "
        "agrees in {:.4f} of {} (contributor, validator) pairs",
        S, result.sign_agreement, counts[1]);
}

// Minority experiment (seed §IV-E): newcomers with a share of the class the validators lack, judged
// against the population's threshold and the validators' baselines.
void judge_minority_newcomers(Experiment& e, VoteKernel& kernel,
                              const std::vector<double>& baseline, LiaResult& result) {
  const LiaConfig& config = e.config;
  const std::uint64_t seed = e.seed;
  const int P = e.P;
  const std::size_t p = e.p;
  const LocalData& local = e.local;
  const int owned = local.last - local.first;
  const Table& train = e.data.train;
  const int rank = world_rank(), ranks = world_size();
  DpSgdWorkspace dp_work;
  std::vector<std::uint8_t> row_subset;
  const int F = static_cast<int>(config.minority_fractions.size());
  const int R = config.minority_runs;
  const int newcomers = F * R;
  result.minority.fractions = config.minority_fractions;
  const auto nf = static_cast<std::int64_t>(newcomers);
  const auto n0 = nf * rank / ranks, n1 = nf * (rank + 1) / ranks;
  std::vector<double> newcomer_local(static_cast<std::size_t>(n1 - n0) * p);
  for (auto k = n0; k < n1; ++k) {
    const int f = static_cast<int>(k / R), run = static_cast<int>(k % R);
    const auto rows =
        minority_batch(train, e.assignment, config, config.minority_fractions[f], seed, run);
    const auto x = e.body.features(train, rows);
    const auto y = labels_of(train, rows);
    Stream stream(seed, purpose::lia_dp_sgd, static_cast<std::uint64_t>(P + k));
    train_layer(e, x.data(), y.data(), rows.size(), stream,
                &newcomer_local[static_cast<std::size_t>(k - n0) * p], dp_work);
  }
  const auto newcomer_layers =
      ordered_allgather(newcomer_local, static_cast<int>(n1 - n0), static_cast<int>(p));
  std::vector<double> minority_differences(static_cast<std::size_t>(owned) * newcomers);
  std::vector<std::uint8_t> newcomer_pairs;
  if (config.validation_subsets > 1)
    validation_subsets(config, local.first, local.last, newcomers, P, seed, row_subset,
                       newcomer_pairs);
  kernel.loss_differences(local.validation_x.data(), local.validation_y.data(),
                          local.validation_begin, e.theta0.data(), newcomer_layers.data(),
                          newcomers, minority_differences.data(),
                          row_subset.empty() ? nullptr : row_subset.data(),
                          newcomer_pairs.empty() ? nullptr : newcomer_pairs.data());
  // A newcomer is judged against the validators' baselines from the population's contributors.
  const auto newcomer_member =
      membership_matrix(newcomers, P, config, local.first, local.last, seed);
  std::vector<std::int64_t> newcomer_weights;
  if (config.relevance_weighted()) {
    // Newcomer k's batch histogram; its stream id continues after the P participants.
    std::vector<double> local_histograms;
    for (auto k = n0; k < n1; ++k) {
      const int f = static_cast<int>(k / R), run = static_cast<int>(k % R);
      const auto rows =
          minority_batch(train, e.assignment, config, config.minority_fractions[f], seed, run);
      const auto x = e.body.features(train, rows);
      const auto h =
          noisy_histogram(e, x.data(), rows.size(), static_cast<std::uint64_t>(P + k), 0);
      local_histograms.insert(local_histograms.end(), h.begin(), h.end());
    }
    const auto histograms = ordered_allgather(local_histograms, static_cast<int>(n1 - n0), e.C);
    newcomer_weights = vote_weights(e, result.validation_histogram, histograms, newcomers);
  }
  const VoteTally newcomer_tally =
      tally_votes(minority_differences, newcomer_member, baseline, newcomers, P, config,
                  local.first, local.last, seed, newcomer_weights);
  result.minority.vote_sum = newcomer_tally.decided(newcomer_tally.noisy);
  result.minority.acceptance.assign(F, 0.0);
  for (int k = 0; k < newcomers; ++k)
    if (result.minority.vote_sum[k] >= result.threshold)
      result.minority.acceptance[k / R] += 1.0 / R;
  if (e.progress)
    for (int f = 0; f < F; ++f)
      log::info("lia: minority newcomer with {:.0f}% of class {}: accepted in {:.3f} of {} runs",
                100.0 * config.minority_fractions[f], config.minority_class,
                result.minority.acceptance[f], R);
}

}  // namespace

void filter_contributors(Experiment& e, LiaResult& result) {
  const LiaConfig& config = e.config;
  const std::uint64_t seed = e.seed;
  const int P = e.P, D = e.D;
  const std::size_t p = e.p;
  const LocalData& local = e.local;
  const int owned = local.last - local.first;
  // Contributors (Algorithm 1 lines 4-6): k epochs of DP-SGD on the last layer from M0.
  Stopwatch training_clock;
  const double q = dp_sgd_rate(config.train_size, e.dp);
  const long steps = dp_sgd_steps(config.train_size, e.dp);
  DpSgdWorkspace dp_work;
  auto train_contributor = [&](const double* x, const std::int32_t* y, std::size_t rows,
                               Stream& stream,
                               double* out) { train_layer(e, x, y, rows, stream, out, dp_work); };
  std::vector<double> layers_local(static_cast<std::size_t>(owned) * p);
  for (int i = local.first; i < local.last; ++i) {
    Stream stream(seed, purpose::lia_dp_sgd, static_cast<std::uint64_t>(i));
    const Client& participant = e.participant(i);
    train_contributor(participant.features(), participant.labels().data(), participant.size(),
                      stream, &layers_local[static_cast<std::size_t>(i - local.first) * p]);
  }
  // Every validator needs every contributor's layer: one all-gather, P x p doubles per rank.
  const auto layers = ordered_allgather(layers_local, owned, static_cast<int>(p));
  result.time_training = training_clock.seconds();
  if (e.progress)
    log::info(
        "lia: {} contributors trained (DP-SGD: q = {:.3g}, {} steps, sigma = {:.4g}, "
        "eps = {:.4g} at delta = {:g}{}) in {}",
        P, q, steps, e.dp.noise_multiplier, result.epsilon_train, config.delta,
        config.relevance_weighted()
            ? fmt::format(", of which {:g} for the relevance histogram", config.relevance_epsilon)
            : std::string(),
        format_duration(result.time_training));

  // Validators (lines 8-12): loss differences as GEMMs, then votes.
  Stopwatch vote_clock;
  VoteKernel kernel(D, e.C,
                    config.vote_loss == "zero_one" ? VoteLoss::zero_one : VoteLoss::cross_entropy);
  std::vector<double> differences(static_cast<std::size_t>(owned) * P);
  std::vector<std::uint8_t> row_subset, pair_subset;
  if (config.validation_subsets > 1)
    validation_subsets(config, local.first, local.last, P, 0, seed, row_subset, pair_subset);
  kernel.loss_differences(local.validation_x.data(), local.validation_y.data(),
                          local.validation_begin, e.theta0.data(), layers.data(), P,
                          differences.data(), row_subset.empty() ? nullptr : row_subset.data(),
                          pair_subset.empty() ? nullptr : pair_subset.data());
  const double gemm_seconds = kernel.last_gemm_seconds();
  result.vote_gflops = gemm_seconds > 0 ? kernel.last_gemm_flops() / gemm_seconds / 1e9 : 0.0;
  const auto member = membership_matrix(P, 0, config, local.first, local.last, seed);
  const auto baseline = vote_baselines(differences, member, P, config, local.first, local.last);
  std::vector<std::int64_t> weights;
  if (config.relevance_weighted()) {
    relevance_histograms(e, result);
    weights = vote_weights(e, result.validation_histogram, result.batch_histogram, P);
  }
  const VoteTally tally = tally_votes(differences, member, baseline, P, 0, config, local.first,
                                      local.last, seed, weights);
  result.time_votes = vote_clock.seconds();

  // Center (line 14).
  result.vote_sum = tally.decided(tally.noisy);
  result.true_vote_sum = tally.decided(tally.truthful);
  result.votes_cast = tally.cast;
  result.threshold = config.threshold == "kmeans"    ? kmeans_threshold(result.vote_sum)
                     : config.threshold == "mixture" ? mixture_threshold(result.vote_sum)
                                                     : 0.0;
  result.accepted.assign(P, 0);
  for (int a = 0; a < P; ++a) result.accepted[a] = result.vote_sum[a] >= result.threshold ? 1 : 0;
  const Filtration metrics = filtration_metrics(result.accepted, result.corrupted);
  result.recall = metrics.recall;
  result.precision = metrics.precision;
  result.accuracy = metrics.accuracy;
  if (e.progress)
    log::info(
        "lia: {} votes in {} (vote GEMMs {:.1f} GFLOP/s per rank); threshold {:.4g}: {} of "
        "{} accepted; recall {:.4f}, precision {:.4f}, accuracy {:.4f}",
        std::accumulate(tally.cast.begin(), tally.cast.end(), std::int64_t{0}),
        format_duration(result.time_votes), result.vote_gflops, result.threshold,
        std::accumulate(result.accepted.begin(), result.accepted.end(), std::int64_t{0}), P,
        result.recall, result.precision, result.accuracy);

  if (config.sign_check > 0) check_signs(e, differences, kernel, result);
  if (!config.minority_fractions.empty()) judge_minority_newcomers(e, kernel, baseline, result);
}

}  // namespace fluence::lia
