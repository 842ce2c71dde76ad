// fluence lia, the filtering stage (seed 002 Algorithm 1): the contributors' DP-SGD layers, the
// validators' votes (seed 002 Eq. 1-2) from GEMMs over the stacked layers, the center's threshold
// and the filtration metrics (§IV-B), the exact-influence sign check (Fig. 9) and the minority
// experiment (§IV-E).
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "exact_fit.hpp"
#include "experiment.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
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

// What a validator compares each loss difference with. "model": 0, seed 002 Eq. 1 as
// written (vote +1 when A's layer lowers the validation loss below the current model's). "median":
// the validator's median difference over the contributors it evaluates, so its vote says whether A
// helps more than its typical contributor; this removes the shift every noisy layer shares (DP
// noise raises every loss by about tau^2 tr(H)/2) and the shift a non-IID validator sees from every
// foreign batch. "quantile": the q-quantile instead, so a validator votes -1 only on the share q of
// its contributors that help it least. The rationale: a corrupted batch is among the worst for the
// validators holding its classes, an honest non-IID batch rarely is. docs/results/lia.md measures
// that a small q trades recall for precision rather than separating the two groups better.
// With lia.validation_split = "disjoint" the quantile is taken per subset, over the differences
// that read it, so that a vote depends on one subset's rows only (parallel composition).
Baselines vote_baselines(const std::vector<double>& differences,
                         const std::vector<std::uint8_t>& member,
                         const std::vector<std::uint8_t>& pair_subset, int contributors,
                         const LiaConfig& config, int first, int last) {
  Baselines baselines;
  baselines.groups = config.disjoint_split() ? config.validation_subsets : 1;
  baselines.value.assign(static_cast<std::size_t>(last - first) * baselines.groups, 0.0);
  if (config.vote_baseline == "model") return baselines;
  std::vector<double> values;
  for (int b = first; b < last; ++b)
    for (int g = 0; g < baselines.groups; ++g) {
      values.clear();
      for (int k = 0; k < contributors; ++k) {
        const std::size_t at = static_cast<std::size_t>(b - first) * contributors + k;
        if (member[at] && (baselines.groups == 1 || pair_subset[at] == g))
          values.push_back(differences[at]);
      }
      if (!values.empty())
        baselines.value[static_cast<std::size_t>(b - first) * baselines.groups + g] =
            vote_quantile(values, config.vote_quantile);
    }
  return baselines;
}

// The votes of the local validators on `contributors` contributors with ids id0, id0 + 1, ...
// (seed 002 Eq. 1 against the baselines, then seed 002 Eq. 2 from a stream keyed by the pair and
// `round_key`), summed over all validators (exact integer all-reduce). With `weights` (quantized,
// one per validator and contributor as in `member`), each vote counts its weight and the tally
// carries the weights' sums. Every vote cast is counted in `subset_votes` (local validators x
// lia.validation_subsets) under the subset it read (pair_subset; subset 0 when empty), for the
// validators' accounting.
VoteTally tally_votes(const std::vector<double>& differences,
                      const std::vector<std::uint8_t>& member,
                      const std::vector<std::uint8_t>& pair_subset, const Baselines& baselines,
                      int contributors, int id0, std::uint64_t round_key, const LiaConfig& config,
                      int first, int last, std::uint64_t seed,
                      std::vector<std::int64_t>& subset_votes,
                      const std::vector<std::int64_t>& weights = {}) {
  VoteTally tally;
  tally.noisy.assign(contributors, 0);
  tally.truthful.assign(contributors, 0);
  tally.cast.assign(contributors, 0);
  if (!weights.empty()) tally.weight.assign(contributors, 0);
  const double p = config.vote_flip_probability();
  const std::size_t s = static_cast<std::size_t>(config.validation_subsets);
  for (int b = first; b < last; ++b)
    for (int k = 0; k < contributors; ++k) {
      const std::size_t at = static_cast<std::size_t>(b - first) * contributors + k;
      if (!member[at]) continue;
      // +1 when A's layer lowers B's validation loss (by more than the baseline); a tie is -1.
      const int vote = differences[at] > baselines.of(b - first, pair_subset, at) ? 1 : -1;
      Stream stream(seed, purpose::lia_vote, static_cast<std::uint64_t>(b),
                    static_cast<std::uint64_t>(id0 + k), round_key);
      const std::int64_t w = weights.empty() ? 1 : weights[at];
      tally.noisy[k] += w * obfuscate_vote(vote, p, stream);
      tally.truthful[k] += w * vote;
      tally.cast[k] += 1;
      if (!weights.empty()) tally.weight[k] += w;
      subset_votes[static_cast<std::size_t>(b - first) * s +
                   (pair_subset.empty() ? 0 : pair_subset[at])] += 1;
    }
  for (auto* values : {&tally.noisy, &tally.truthful, &tally.cast, &tally.weight})
    if (!values->empty())
      MPI_Allreduce(MPI_IN_PLACE, values->data(), contributors, MPI_INT64_T, MPI_SUM,
                    MPI_COMM_WORLD);
  return tally;
}

// Seed §III-B3: validator b's rows are split into `subsets` disjoint subsets (row j of its set in
// subset j mod s) and its vote on contributor a reads one. "shared": the subset is drawn per pair.
// "disjoint": b deals its votes (members of `member`, in contributor order) to its subsets in
// turn, continuing after the votes it has cast so far (subset_votes), so that every subset serves
// a group of about votes / s votes. One subset: no split, both vectors stay empty.
void validation_subsets(const LiaConfig& config, int first, int last, int contributors, int id0,
                        std::uint64_t seed, const std::vector<std::uint8_t>& member,
                        const std::vector<std::int64_t>& subset_votes,
                        std::vector<std::uint8_t>& row_subset,
                        std::vector<std::uint8_t>& pair_subset) {
  const int s = config.validation_subsets;
  if (s <= 1) return;
  row_subset.resize(static_cast<std::size_t>(last - first) * config.validation_size);
  for (std::size_t r = 0; r < row_subset.size(); ++r)
    row_subset[r] = static_cast<std::uint8_t>((r % config.validation_size) % s);
  pair_subset.assign(static_cast<std::size_t>(last - first) * contributors, 0);
  for (int b = first; b < last; ++b) {
    const auto votes = subset_votes.begin() + static_cast<std::ptrdiff_t>(b - first) * s;
    std::int64_t dealt = std::accumulate(votes, votes + s, std::int64_t{0});
    for (int k = 0; k < contributors; ++k) {
      const std::size_t at = static_cast<std::size_t>(b - first) * contributors + k;
      if (config.disjoint_split()) {
        if (member[at]) pair_subset[at] = static_cast<std::uint8_t>(dealt++ % s);
        continue;
      }
      Stream stream(seed, purpose::lia_validators, 1, static_cast<std::uint64_t>(b),
                    static_cast<std::uint64_t>(id0 + k));
      pair_subset[at] = static_cast<std::uint8_t>(stream.below(s));
    }
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

// Exact influence check (seed 002 Fig. 9 and Eq. 4): retrain M0's objective with each sampled
// contributor's batch added and compare sign(L_B(M0) - L_B(M0 + A)) with the lazy vote
// (seed 002 Eq. 1's sign, before randomized response), per (contributor, validator) pair.
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
void judge_minority_newcomers(Experiment& e, VoteKernel& kernel, const Baselines& baselines,
                              LiaResult& result) {
  const LiaConfig& config = e.config;
  const std::uint64_t seed = e.seed;
  const int P = e.P;
  const std::size_t p = e.p;
  LocalData& local = e.local;
  const int owned = local.last - local.first;
  const Table& train = e.data.train;
  const int rank = world_rank(), ranks = world_size();
  DpSgdWorkspace dp_work;
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
    train_layer(e, e.theta0.data(), x.data(), y.data(), rows.size(), stream,
                &newcomer_local[static_cast<std::size_t>(k - n0) * p], dp_work);
  }
  const auto newcomer_layers =
      ordered_allgather(newcomer_local, static_cast<int>(n1 - n0), static_cast<int>(p));
  // A newcomer is judged against the validators' baselines from the population's contributors.
  const auto newcomer_member =
      membership_matrix(newcomers, P, config, local.first, local.last, seed);
  std::vector<double> minority_differences(static_cast<std::size_t>(owned) * newcomers);
  std::vector<std::uint8_t> row_subset, newcomer_pairs;
  validation_subsets(config, local.first, local.last, newcomers, P, seed, newcomer_member,
                     local.subset_votes, row_subset, newcomer_pairs);
  kernel.loss_differences(local.validation_x.data(), local.validation_y.data(),
                          local.validation_begin, e.theta0.data(), newcomer_layers.data(),
                          newcomers, minority_differences.data(),
                          row_subset.empty() ? nullptr : row_subset.data(),
                          newcomer_pairs.empty() ? nullptr : newcomer_pairs.data());
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
      tally_votes(minority_differences, newcomer_member, newcomer_pairs, baselines, newcomers, P, 0,
                  config, local.first, local.last, seed, local.subset_votes, newcomer_weights);
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

std::vector<double> contributor_layers(Experiment& e, const std::vector<double>& base,
                                       std::uint64_t round_key) {
  const LocalData& local = e.local;
  const int owned = local.last - local.first;
  const std::size_t p = e.p;
  DpSgdWorkspace dp_work;
  std::vector<double> layers_local(static_cast<std::size_t>(owned) * p);
  for (int i = local.first; i < local.last; ++i) {
    Stream stream(e.seed, purpose::lia_dp_sgd, static_cast<std::uint64_t>(i), round_key);
    const Client& participant = e.participant(i);
    train_layer(e, base.data(), participant.features(), participant.labels().data(),
                participant.size(), stream,
                &layers_local[static_cast<std::size_t>(i - local.first) * p], dp_work);
  }
  // Every validator needs every contributor's layer: one all-gather, P x p doubles per rank.
  return ordered_allgather(layers_local, owned, static_cast<int>(p));
}

std::vector<std::int64_t> relevance_vote_weights(const Experiment& e, const LiaResult& result) {
  if (!e.config.relevance_weighted()) return {};
  return vote_weights(e, result.validation_histogram, result.batch_histogram, e.P);
}

VoteRound vote_on_contributors(Experiment& e, VoteKernel& kernel, const std::vector<double>& base,
                               const std::vector<double>& layers, std::uint64_t round_key,
                               const std::vector<std::int64_t>& weights,
                               const std::vector<std::int64_t>& corrupted) {
  const LiaConfig& config = e.config;
  const int P = e.P;
  LocalData& local = e.local;
  const int owned = local.last - local.first;
  VoteRound round;
  round.differences.assign(static_cast<std::size_t>(owned) * P, 0.0);
  const auto member = membership_matrix(P, 0, config, local.first, local.last, e.seed);
  std::vector<std::uint8_t> row_subset, pair_subset;
  validation_subsets(config, local.first, local.last, P, 0, e.seed, member, local.subset_votes,
                     row_subset, pair_subset);
  // Validators (Algorithm 1 lines 8-12): loss differences as GEMMs, then votes.
  kernel.loss_differences(
      local.validation_x.data(), local.validation_y.data(), local.validation_begin, base.data(),
      layers.data(), P, round.differences.data(), row_subset.empty() ? nullptr : row_subset.data(),
      pair_subset.empty() ? nullptr : pair_subset.data());
  round.baselines =
      vote_baselines(round.differences, member, pair_subset, P, config, local.first, local.last);
  const VoteTally tally =
      tally_votes(round.differences, member, pair_subset, round.baselines, P, 0, round_key, config,
                  local.first, local.last, e.seed, local.subset_votes, weights);
  // Center (line 14): the threshold on the vote sums and the filtration metrics (§IV-B).
  round.vote_sum = tally.decided(tally.noisy);
  round.true_vote_sum = tally.decided(tally.truthful);
  round.votes_cast = tally.cast;
  round.threshold = config.threshold == "kmeans"    ? kmeans_threshold(round.vote_sum)
                    : config.threshold == "mixture" ? mixture_threshold(round.vote_sum)
                                                    : 0.0;
  round.accepted.assign(P, 0);
  for (int a = 0; a < P; ++a) round.accepted[a] = round.vote_sum[a] >= round.threshold ? 1 : 0;
  const Filtration metrics = filtration_metrics(round.accepted, corrupted);
  round.recall = metrics.recall;
  round.precision = metrics.precision;
  round.accuracy = metrics.accuracy;
  return round;
}

std::vector<double> gathered_subset_votes(const Experiment& e) {
  const LocalData& local = e.local;
  const std::vector<double> counts(local.subset_votes.begin(), local.subset_votes.end());
  return ordered_allgather(counts, local.last - local.first, e.config.validation_subsets);
}

void filter_contributors(Experiment& e, LiaResult& result) {
  const LiaConfig& config = e.config;
  const int P = e.P, D = e.D;
  // Contributors (Algorithm 1 lines 4-6): k epochs of DP-SGD on the last layer from M0.
  // Each later phase pushes its stage on top of the one before: PETSc charges each its own time.
  LogStage training_stage(Stage::training);
  Stopwatch training_clock;
  const double q = dp_sgd_rate(config.train_size, e.dp);
  const long steps = dp_sgd_steps(config.train_size, e.dp);
  const auto layers = contributor_layers(e, e.theta0, 0);
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
  LogStage votes_stage(Stage::votes);
  Stopwatch vote_clock;
  VoteKernel kernel(D, e.C,
                    config.vote_loss == "zero_one" ? VoteLoss::zero_one : VoteLoss::cross_entropy);
  if (config.relevance_weighted()) relevance_histograms(e, result);
  const auto weights = relevance_vote_weights(e, result);
  const VoteRound round =
      vote_on_contributors(e, kernel, e.theta0, layers, 0, weights, result.corrupted);
  const double gemm_seconds = kernel.last_gemm_seconds();
  result.vote_gflops = gemm_seconds > 0 ? kernel.last_gemm_flops() / gemm_seconds / 1e9 : 0.0;
  result.time_votes = vote_clock.seconds();
  result.vote_sum = round.vote_sum;
  result.true_vote_sum = round.true_vote_sum;
  result.votes_cast = round.votes_cast;
  result.threshold = round.threshold;
  result.accepted = round.accepted;
  result.recall = round.recall;
  result.precision = round.precision;
  result.accuracy = round.accuracy;
  if (e.progress)
    log::info(
        "lia: {} votes in {} (vote GEMMs {:.1f} GFLOP/s per rank); threshold {:.4g}: {} of "
        "{} accepted; recall {:.4f}, precision {:.4f}, accuracy {:.4f}",
        std::accumulate(round.votes_cast.begin(), round.votes_cast.end(), std::int64_t{0}),
        format_duration(result.time_votes), result.vote_gflops, result.threshold,
        std::accumulate(result.accepted.begin(), result.accepted.end(), std::int64_t{0}), P,
        result.recall, result.precision, result.accuracy);

  if (config.sign_check > 0)
    in_stage(Stage::retraining, [&] { check_signs(e, round.differences, kernel, result); });
  if (!config.minority_fractions.empty())
    judge_minority_newcomers(e, kernel, round.baselines, result);
  result.subset_votes = gathered_subset_votes(e);
}

}  // namespace fluence::lia
