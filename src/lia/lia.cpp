// fluence lia, the experiment (seed 002 Algorithm 1 with the set-up of §IV): data assignment, the
// frozen body and M0, the contributors' DP-SGD, the validators' votes as GEMMs, the center's
// threshold and filtration metrics, the exact-influence sign check, the FL comparison and the
// minority experiment. Participants live on ranks in contiguous blocks of
// VoteKernel::kValidatorBlock, so every per-participant quantity is computed by one rank from
// keyed streams, and every sum over participants is an exact integer sum or an ordered gather:
// the results are bitwise the same for any rank count.
#include "fluence/lia/lia.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>

#include "exact_fit.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/resume.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/source.hpp"
#include "fluence/lia/aggregators.hpp"
#include "fluence/lia/dp_sgd.hpp"
#include "fluence/lia/mlp_body.hpp"
#include "fluence/lia/participants.hpp"
#include "fluence/lia/votes.hpp"
#include "fluence/model/softmax_regression.hpp"
#include "fluence/privacy/rdp_accountant.hpp"

namespace fluence::lia {

namespace {

// Participants [first, last) of `rank`: whole blocks of kValidatorBlock, blocks split evenly.
std::pair<int, int> owned_range(int participants, int rank, int size) {
  const int block = VoteKernel::kValidatorBlock;
  const int blocks = (participants + block - 1) / block;
  const int first = blocks * rank / size, last = blocks * (rank + 1) / size;
  return {std::min(participants, first * block), std::min(participants, last * block)};
}

// The frozen body (seed §III-B: only the last layer moves): encoded rows, optionally through the
// MLP's hidden layer.
struct Body {
  const Table* table = nullptr;
  Encoding encoding;
  std::optional<MlpBody> mlp;
  int width() const { return mlp ? mlp->output_features() : encoding.width(); }
  std::vector<double> features(const Table& source, const std::vector<std::int64_t>& rows) const {
    std::vector<double> encoded(rows.size() * static_cast<std::size_t>(encoding.width()));
    encoding.encode(source, rows, nullptr, encoded.data());
    if (!mlp) return encoded;
    std::vector<double> out(rows.size() * static_cast<std::size_t>(mlp->output_features()));
    mlp->transform(encoded.data(), rows.size(), out.data());
    return out;
  }
};

std::vector<std::int32_t> labels_of(const Table& table, const std::vector<std::int64_t>& rows) {
  std::vector<std::int32_t> labels(rows.size());
  for (std::size_t k = 0; k < rows.size(); ++k) labels[k] = table.label[rows[k]];
  return labels;
}

// Test accuracy of theta on the test rows, each rank holding a slice; exact integer reduction.
struct TestSet {
  std::vector<double> x;
  std::vector<std::int32_t> y;
  long total = 0;
  double accuracy(const SoftmaxRegression& model, const std::vector<double>& theta,
                  Workspace& work) const {
    long correct =
        y.empty() ? 0 : model.loss_sum(x.data(), y.data(), y.size(), theta.data(), work).correct;
    long sum = 0;
    MPI_Allreduce(&correct, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return static_cast<double>(sum) / static_cast<double>(total);
  }
};

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
  Stream stream(seed, Purpose::lia_validators, 0, static_cast<std::uint64_t>(contributor));
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
std::vector<double> vote_baselines(const std::vector<double>& differences,
                                   const std::vector<std::uint8_t>& member, int contributors,
                                   const LiaConfig& config, int first, int last) {
  std::vector<double> baseline(last - first, 0.0);
  if (config.vote_baseline != "median") return baseline;
  std::vector<double> values;
  for (int b = first; b < last; ++b) {
    values.clear();
    for (int k = 0; k < contributors; ++k) {
      const std::size_t at = static_cast<std::size_t>(b - first) * contributors + k;
      if (member[at]) values.push_back(differences[at]);
    }
    if (values.empty()) continue;
    const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
    std::nth_element(values.begin(), middle, values.end());
    baseline[b - first] = *middle;
  }
  return baseline;
}

// The votes of the local validators on `contributors` contributors with ids id0, id0 + 1, ...
// (Eq. 1 against `baseline`, then Eq. 2), summed over all validators (exact integer all-reduce).
VoteTally tally_votes(const std::vector<double>& differences,
                      const std::vector<std::uint8_t>& member, const std::vector<double>& baseline,
                      int contributors, int id0, const LiaConfig& config, int first, int last,
                      std::uint64_t seed) {
  VoteTally tally;
  tally.noisy.assign(contributors, 0);
  tally.truthful.assign(contributors, 0);
  tally.cast.assign(contributors, 0);
  const double p = config.vote_flip_probability();
  for (int b = first; b < last; ++b)
    for (int k = 0; k < contributors; ++k) {
      const std::size_t at = static_cast<std::size_t>(b - first) * contributors + k;
      if (!member[at]) continue;
      // +1 when A's layer lowers B's validation loss (by more than the baseline); a tie is -1.
      const int vote = differences[at] > baseline[b - first] ? 1 : -1;
      Stream stream(seed, Purpose::lia_vote, static_cast<std::uint64_t>(b),
                    static_cast<std::uint64_t>(id0 + k));
      tally.noisy[k] += obfuscate_vote(vote, p, stream);
      tally.truthful[k] += vote;
      tally.cast[k] += 1;
    }
  for (auto* values : {&tally.noisy, &tally.truthful, &tally.cast})
    MPI_Allreduce(MPI_IN_PLACE, values->data(), contributors, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
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
      Stream stream(seed, Purpose::lia_validators, 1, static_cast<std::uint64_t>(b),
                    static_cast<std::uint64_t>(id0 + k));
      pair_subset[static_cast<std::size_t>(b - first) * contributors + k] =
          static_cast<std::uint8_t>(stream.below(s));
    }
}

// Participants' data on this rank, as features.
struct LocalData {
  int first = 0, last = 0;
  std::vector<double> train_x, validation_x;
  std::vector<std::int32_t> train_y, validation_y;
  std::vector<std::size_t> validation_begin;
};

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

// The resumable state (docs/operations.md): the filtering outcome, then each finished FL method.
void save_lia_state(const LiaResult& r, StateArrays& arrays) {
  auto as_double = [](const std::vector<std::int64_t>& v) {
    return std::vector<double>(v.begin(), v.end());
  };
  arrays["lia/vote_sum"] = r.vote_sum;
  arrays["lia/true_vote_sum"] = r.true_vote_sum;
  arrays["lia/votes_cast"] = as_double(r.votes_cast);
  arrays["lia/accepted"] = as_double(r.accepted);
  arrays["lia/scalars"] = {r.threshold,     r.recall,        r.precision,        r.accuracy,
                           r.epsilon_train, r.epsilon_vote,  r.noise_multiplier, r.sign_agreement,
                           r.vote_gflops,   r.time_training, r.time_votes};
  arrays["lia/sign_checked"] = as_double(r.sign_checked);
  arrays["lia/minority/acceptance"] = r.minority.acceptance;
  arrays["lia/minority/vote_sum"] = r.minority.vote_sum;
  for (const auto& method : r.fl) {
    std::vector<double> stored{static_cast<double>(method.clients)};
    stored.insert(stored.end(), method.test_accuracy.begin(), method.test_accuracy.end());
    arrays["lia/fl/" + method.method] = stored;
  }
}

void restore_filtering(const StateArrays& arrays, int participants, const LiaConfig& config,
                       LiaResult& r) {
  const auto P = static_cast<std::size_t>(participants);
  auto as_int = [](const std::vector<double>& v) {
    return std::vector<std::int64_t>(v.begin(), v.end());
  };
  r.vote_sum = state_array(arrays, "lia/vote_sum", P);
  r.true_vote_sum = state_array(arrays, "lia/true_vote_sum", P);
  r.votes_cast = as_int(state_array(arrays, "lia/votes_cast", P));
  r.accepted = as_int(state_array(arrays, "lia/accepted", P));
  const auto& scalars = state_array(arrays, "lia/scalars", 11);
  r.threshold = scalars[0];
  r.recall = scalars[1];
  r.precision = scalars[2];
  r.accuracy = scalars[3];
  r.epsilon_train = scalars[4];
  r.epsilon_vote = scalars[5];
  r.noise_multiplier = scalars[6];
  r.sign_agreement = scalars[7];
  r.vote_gflops = scalars[8];
  r.time_training = scalars[9];
  r.time_votes = scalars[10];
  r.sign_checked = as_int(state_array(arrays, "lia/sign_checked"));
  r.minority.acceptance = state_array(arrays, "lia/minority/acceptance");
  r.minority.vote_sum = state_array(arrays, "lia/minority/vote_sum");
  if (!config.minority_fractions.empty()) r.minority.fractions = config.minority_fractions;
}

}  // namespace

LiaResult run_lia(const Deck& deck, bool progress, SweepCheckpoint* checkpoint) {
  Stopwatch clock;
  LiaResult result;
  const auto seed = static_cast<std::uint64_t>(deck.integer("seed"));
  const DataConfig data_config = DataConfig::from_deck(deck);
  const TrainTest data = load_data(data_config, seed);
  const Table& train = data.train;
  const int C = train.classes();
  const LiaConfig config = LiaConfig::from_deck(deck, C);
  result.classes = C;
  const int P = config.participants;
  const int rank = world_rank(), ranks = world_size();
  const bool minority = !config.minority_fractions.empty();

  const ParticipantData assignment =
      assign_participants(train, config, seed, minority ? config.minority_class : -1);
  result.overlapping_data = assignment.overlapping;
  // The robust aggregators' conditions, checked before any work (they know f a priori, as the seed
  // notes: KRUM needs n > 2f + 2, the trimmed mean 2f < n).
  const int f = static_cast<int>(assignment.corrupted.size());
  for (const auto& method : config.methods) {
    if (config.rounds > 0 && method == "krum" && P <= 2 * f + 2)
      throw InputError(fmt::format(
          "{}: lia.methods has \"krum\", which needs more than 2f + 2 = {} participants for f = "
          "{} corrupted ones (lia.participants = {}); lower lia.corrupted_fraction or drop krum",
          deck.where("lia.methods"), 2 * f + 2, f, P));
    if (config.rounds > 0 && method == "trimmed_mean" && P <= 2 * f)
      throw InputError(fmt::format(
          "{}: lia.methods has \"trimmed_mean\", which trims f = {} values from each end and "
          "needs more than 2f = {} participants (lia.participants = {})",
          deck.where("lia.methods"), f, 2 * f, P));
  }
  if (assignment.overlapping && progress)
    log::info(
        "lia: {} participants x {} rows exceed the {} training rows left after the warm-up: each "
        "participant draws its sets independently (disjoint within a participant, overlapping "
        "across participants); the test set stays disjoint",
        P, config.train_size + config.validation_size, train.rows - assignment.warmup.size());

  // The body and M0 on the warm-up data (every rank computes the same bits).
  Body body;
  body.encoding = Encoding(train, data_config.standardize, deck.boolean("model.bias"));
  const auto warmup_y = labels_of(train, assignment.warmup);
  if (config.body == "mlp") {
    std::vector<double> encoded(assignment.warmup.size() * body.encoding.width());
    body.encoding.encode(train, assignment.warmup, nullptr, encoded.data());
    MlpTraining options;
    options.epochs = config.body_epochs;
    options.learning_rate = config.body_learning_rate;
    options.l2 = config.l2;
    Stream stream(seed, Purpose::lia_body);
    body.mlp = MlpBody::train(encoded.data(), warmup_y.data(), assignment.warmup.size(),
                              body.encoding.width(), C, config.hidden, options, stream);
  }
  const int D = body.width();
  const std::size_t p = static_cast<std::size_t>(C) * D;
  const SoftmaxRegression model(D, C, config.l2);
  const auto warmup_x = body.features(train, assignment.warmup);
  std::vector<double> theta0(p, 0.0);
  const auto fit = exact_fit(model, warmup_x.data(), warmup_y.data(), assignment.warmup.size(),
                             config.retrain_tolerance, theta0);

  TestSet test;
  test.total = static_cast<long>(data.test.rows);
  {
    const auto begin = static_cast<std::int64_t>(data.test.rows) * rank / ranks;
    const auto end = static_cast<std::int64_t>(data.test.rows) * (rank + 1) / ranks;
    std::vector<std::int64_t> rows;
    for (auto r = begin; r < end; ++r) rows.push_back(r);
    test.x = body.features(data.test, rows);
    test.y = labels_of(data.test, rows);
  }
  Workspace work;
  result.m0_test_accuracy = test.accuracy(model, theta0, work);
  if (progress)
    log::info(
        "lia: M0 on {} warm-up rows ({} body, {} parameters): {} Newton steps, test accuracy "
        "{:.4f}",
        assignment.warmup.size(), config.body, p, fit.newton_steps, result.m0_test_accuracy);

  LocalData local;
  std::tie(local.first, local.last) = owned_range(P, rank, ranks);
  const int owned = local.last - local.first;
  {
    std::vector<std::int64_t> train_rows, validation_rows;
    local.validation_begin.push_back(0);
    for (int i = local.first; i < local.last; ++i) {
      train_rows.insert(train_rows.end(), assignment.train[i].begin(), assignment.train[i].end());
      local.train_y.insert(local.train_y.end(), assignment.train_label[i].begin(),
                           assignment.train_label[i].end());
      validation_rows.insert(validation_rows.end(), assignment.validation[i].begin(),
                             assignment.validation[i].end());
      local.validation_begin.push_back(validation_rows.size());
    }
    local.train_x = body.features(train, train_rows);
    local.validation_x = body.features(train, validation_rows);
    local.validation_y = labels_of(train, validation_rows);
  }
  result.corrupted.assign(P, 0);
  for (auto i : assignment.corrupted) result.corrupted[i] = 1;
  result.batch_labels.assign(static_cast<std::size_t>(P) * C, 0);
  result.validation_labels.assign(static_cast<std::size_t>(P) * C, 0);
  for (int i = 0; i < P; ++i) {
    for (auto row : assignment.train[i])
      ++result.batch_labels[static_cast<std::size_t>(i) * C + train.label[row]];
    for (auto row : assignment.validation[i])
      ++result.validation_labels[static_cast<std::size_t>(i) * C + train.label[row]];
  }
  result.time_setup = clock.seconds();

  // A restart after the filtering stage takes its outcome from the checkpoint (docs/operations.md).
  const StateArrays none;
  const StateArrays& restored = checkpoint ? checkpoint->restored() : none;
  const bool filtered = restored.count("lia/vote_sum") > 0;
  if (filtered) restore_filtering(restored, P, config, result);
  if (!filtered) {
    // Contributors (Algorithm 1 lines 4-6): k epochs of DP-SGD on the last layer from M0.
    Stopwatch training_clock;
    DpSgdConfig dp;
    dp.epochs = config.local_epochs;
    dp.batch_size = config.batch_size;
    dp.learning_rate = config.learning_rate;
    dp.clip = config.clip;
    dp.l2 = config.l2;
    const double q = dp_sgd_rate(config.train_size, dp);
    const long steps = dp_sgd_steps(config.train_size, dp);
    if (std::isfinite(config.epsilon_train)) {
      dp.noise_multiplier = noise_for_epsilon(q, steps, config.epsilon_train, config.delta);
      result.epsilon_train = dp_sgd_epsilon(q, dp.noise_multiplier, steps, config.delta).epsilon;
    } else {
      result.epsilon_train = std::numeric_limits<double>::infinity();
    }
    result.noise_multiplier = dp.noise_multiplier;
    result.epsilon_vote =
        vote_epsilon(config.vote_flip_probability(), config.vote_accounting == "seed");
    DpSgdWorkspace dp_work;
    auto train_contributor = [&](const double* x, const std::int32_t* y, std::size_t rows,
                                 Stream& stream, double* out) {
      std::copy(theta0.begin(), theta0.end(), out);
      dp_sgd(x, y, rows, D, C, dp, stream, out, dp_work);
    };
    std::vector<double> layers_local(static_cast<std::size_t>(owned) * p);
    for (int i = local.first; i < local.last; ++i) {
      Stream stream(seed, Purpose::lia_dp_sgd, static_cast<std::uint64_t>(i));
      const std::size_t offset = static_cast<std::size_t>(i - local.first) * config.train_size;
      train_contributor(&local.train_x[offset * D], &local.train_y[offset], config.train_size,
                        stream, &layers_local[static_cast<std::size_t>(i - local.first) * p]);
    }
    // Every validator needs every contributor's layer: one all-gather, P x p doubles per rank.
    const auto layers = ordered_allgather(layers_local, owned, static_cast<int>(p));
    result.time_training = training_clock.seconds();
    if (progress)
      log::info(
          "lia: {} contributors trained (DP-SGD: q = {:.3g}, {} steps, sigma = {:.4g}, "
          "eps = {:.4g} at delta = {:g}) in {}",
          P, q, steps, dp.noise_multiplier, result.epsilon_train, config.delta,
          format_duration(result.time_training));

    // Validators (lines 8-12): loss differences as GEMMs, then votes.
    Stopwatch vote_clock;
    VoteKernel kernel(D, C);
    std::vector<double> differences(static_cast<std::size_t>(owned) * P);
    std::vector<std::uint8_t> row_subset, pair_subset;
    if (config.validation_subsets > 1)
      validation_subsets(config, local.first, local.last, P, 0, seed, row_subset, pair_subset);
    kernel.loss_differences(local.validation_x.data(), local.validation_y.data(),
                            local.validation_begin, theta0.data(), layers.data(), P,
                            differences.data(), row_subset.empty() ? nullptr : row_subset.data(),
                            pair_subset.empty() ? nullptr : pair_subset.data());
    const double gemm_seconds = kernel.last_gemm_seconds();
    result.vote_gflops = gemm_seconds > 0 ? kernel.last_gemm_flops() / gemm_seconds / 1e9 : 0.0;
    const auto member = membership_matrix(P, 0, config, local.first, local.last, seed);
    const auto baseline = vote_baselines(differences, member, P, config, local.first, local.last);
    const VoteTally tally =
        tally_votes(differences, member, baseline, P, 0, config, local.first, local.last, seed);
    result.time_votes = vote_clock.seconds();

    // Center (line 14).
    result.vote_sum.assign(tally.noisy.begin(), tally.noisy.end());
    result.true_vote_sum.assign(tally.truthful.begin(), tally.truthful.end());
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
    if (progress)
      log::info(
          "lia: {} votes in {} (vote GEMMs {:.1f} GFLOP/s per rank); threshold {:.4g}: {} of "
          "{} accepted; recall {:.4f}, precision {:.4f}, accuracy {:.4f}",
          std::accumulate(tally.cast.begin(), tally.cast.end(), std::int64_t{0}),
          format_duration(result.time_votes), result.vote_gflops, result.threshold,
          std::accumulate(result.accepted.begin(), result.accepted.end(), std::int64_t{0}), P,
          result.recall, result.precision, result.accuracy);

    // Exact influence check (seed Fig. 9, Eq. 4): retrain M0's objective with the contributor's
    // batch added and compare sign(L_B(M0) - L_B(M0 + A)) with the lazy vote, per pair.
    if (config.sign_check > 0) {
      Stream choose(seed, Purpose::lia_sign_check);
      auto order = random_permutation(choose, P);
      std::vector<std::int64_t> sample(order.begin(), order.begin() + config.sign_check);
      std::sort(sample.begin(), sample.end());
      result.sign_checked = sample;
      std::vector<double> retrained_local;
      int retrained_owned = 0;
      for (auto a : sample) {
        if (a < local.first || a >= local.last) continue;
        const std::size_t offset = static_cast<std::size_t>(a - local.first) * config.train_size;
        std::vector<double> x(warmup_x);
        x.insert(x.end(), local.train_x.begin() + offset * D,
                 local.train_x.begin() + (offset + config.train_size) * D);
        std::vector<std::int32_t> y(warmup_y);
        y.insert(y.end(), local.train_y.begin() + offset,
                 local.train_y.begin() + offset + config.train_size);
        std::vector<double> theta(theta0);
        exact_fit(model, x.data(), y.data(), y.size(), config.retrain_tolerance, theta);
        retrained_local.insert(retrained_local.end(), theta.begin(), theta.end());
        ++retrained_owned;
      }
      const auto retrained =
          ordered_allgather(retrained_local, retrained_owned, static_cast<int>(p));
      const int S = config.sign_check;
      std::vector<double> exact(static_cast<std::size_t>(owned) * S);
      kernel.loss_differences(local.validation_x.data(), local.validation_y.data(),
                              local.validation_begin, theta0.data(), retrained.data(), S,
                              exact.data());
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
      if (progress)
        log::info(
            "lia: exact influence of {} contributors by retraining: the lazy vote's sign "
            "agrees in {:.4f} of {} (contributor, validator) pairs",
            S, result.sign_agreement, counts[1]);
    }

    // Minority experiment (seed §IV-E): newcomers with a share of the class the validators lack.
    if (minority) {
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
            minority_batch(train, assignment, config, config.minority_fractions[f], seed, run);
        const auto x = body.features(train, rows);
        const auto y = labels_of(train, rows);
        Stream stream(seed, Purpose::lia_dp_sgd, static_cast<std::uint64_t>(P + k));
        train_contributor(x.data(), y.data(), rows.size(), stream,
                          &newcomer_local[static_cast<std::size_t>(k - n0) * p]);
      }
      const auto newcomer_layers =
          ordered_allgather(newcomer_local, static_cast<int>(n1 - n0), static_cast<int>(p));
      std::vector<double> minority_differences(static_cast<std::size_t>(owned) * newcomers);
      std::vector<std::uint8_t> newcomer_pairs;
      if (config.validation_subsets > 1)
        validation_subsets(config, local.first, local.last, newcomers, P, seed, row_subset,
                           newcomer_pairs);
      kernel.loss_differences(local.validation_x.data(), local.validation_y.data(),
                              local.validation_begin, theta0.data(), newcomer_layers.data(),
                              newcomers, minority_differences.data(),
                              row_subset.empty() ? nullptr : row_subset.data(),
                              newcomer_pairs.empty() ? nullptr : newcomer_pairs.data());
      // A newcomer is judged against the validators' baselines from the population's contributors.
      const auto newcomer_member =
          membership_matrix(newcomers, P, config, local.first, local.last, seed);
      const VoteTally newcomer_tally =
          tally_votes(minority_differences, newcomer_member, baseline, newcomers, P, config,
                      local.first, local.last, seed);
      result.minority.vote_sum.assign(newcomer_tally.noisy.begin(), newcomer_tally.noisy.end());
      result.minority.acceptance.assign(F, 0.0);
      for (int k = 0; k < newcomers; ++k)
        if (result.minority.vote_sum[k] >= result.threshold)
          result.minority.acceptance[k / R] += 1.0 / R;
      if (progress)
        for (int f = 0; f < F; ++f)
          log::info(
              "lia: minority newcomer with {:.0f}% of class {}: accepted in {:.3f} of {} runs",
              100.0 * config.minority_fractions[f], config.minority_class,
              result.minority.acceptance[f], R);
    }
  }
  if (!filtered && checkpoint &&
      checkpoint->units_done(1, [&](StateArrays& arrays) { save_lia_state(result, arrays); })) {
    result.stopped = true;
    return result;
  }

  // FL after filtering (seed Fig. 3): T rounds from M0, every round each included participant
  // runs local SGD from theta_t on its batch and the server aggregates the updates.
  Stopwatch fl_clock;
  std::vector<double> update_local, center(p), aggregate(p);
  for (std::size_t m = 0; m < config.methods.size() && config.rounds > 0; ++m) {
    const std::string& method = config.methods[m];
    if (restored.count("lia/fl/" + method)) {
      FlMethodResult fl;
      fl.method = method;
      const auto& stored =
          state_array(restored, "lia/fl/" + method, static_cast<std::size_t>(config.rounds) + 2);
      fl.clients = static_cast<int>(stored[0]);
      fl.test_accuracy.assign(stored.begin() + 1, stored.end());
      result.fl.push_back(std::move(fl));
      continue;
    }
    std::vector<std::uint8_t> included(P, 1);
    if (method == "oracle")
      for (auto i : assignment.corrupted) included[i] = 0;
    if (method == "lia" || method == "lia_cc")
      for (int a = 0; a < P; ++a) included[a] = static_cast<std::uint8_t>(result.accepted[a]);
    int clients = 0, byzantine = 0, local_clients = 0;
    for (int a = 0; a < P; ++a) {
      clients += included[a];
      byzantine += included[a] && result.corrupted[a];
      local_clients += included[a] && a >= local.first && a < local.last;
    }
    FlMethodResult fl;
    fl.method = method;
    fl.clients = clients;
    std::vector<double> theta(theta0);
    fl.test_accuracy.push_back(result.m0_test_accuracy);
    std::fill(center.begin(), center.end(), 0.0);
    for (int round = 0; round < config.rounds; ++round) {
      if (clients == 0) {
        fl.test_accuracy.push_back(fl.test_accuracy.back());
        continue;
      }
      update_local.assign(static_cast<std::size_t>(local_clients) * p, 0.0);
      int slot = 0;
      for (int a = local.first; a < local.last; ++a) {
        if (!included[a]) continue;
        double* out = &update_local[static_cast<std::size_t>(slot++) * p];
        std::copy(theta.begin(), theta.end(), out);
        const std::size_t offset = static_cast<std::size_t>(a - local.first) * config.train_size;
        for (int epoch = 0; epoch < config.local_epochs; ++epoch) {
          Stream stream(seed, Purpose::lia_fl_shuffle, static_cast<std::uint64_t>(round),
                        static_cast<std::uint64_t>(a), static_cast<std::uint64_t>(epoch));
          const auto order = random_permutation(stream, config.train_size);
          model.sgd_epoch(&local.train_x[offset * D], &local.train_y[offset], order.data(),
                          config.train_size, config.batch_size, config.learning_rate, out, work);
        }
        for (std::size_t k = 0; k < p; ++k) out[k] -= theta[k];
      }
      const auto updates = ordered_allgather(update_local, local_clients, static_cast<int>(p));
      if (method == "krum") {
        krum(updates.data(), clients, p, byzantine, aggregate.data());
      } else if (method == "trimmed_mean") {
        trimmed_mean(updates.data(), clients, p, byzantine, aggregate.data());
      } else if (method == "centered_clipping" || method == "lia_cc") {
        // The previous round's aggregate is the starting center (the momentum of Karimireddy,
        // He & Jaggi's Algorithm 2).
        centered_clipping(updates.data(), clients, p, config.cc_tau, config.cc_iterations,
                          center.data());
        aggregate = center;
      } else {
        mean_update(updates.data(), clients, p, aggregate.data());
      }
      for (std::size_t k = 0; k < p; ++k) theta[k] += aggregate[k];
      fl.test_accuracy.push_back(test.accuracy(model, theta, work));
    }
    if (progress)
      log::info("lia: FL {:<17} ({} clients): test accuracy {:.4f} after {} rounds", method,
                clients, fl.test_accuracy.back(), config.rounds);
    result.fl.push_back(std::move(fl));
    if (checkpoint && checkpoint->units_done(static_cast<long>(m) + 2, [&](StateArrays& arrays) {
          save_lia_state(result, arrays);
        })) {
      result.stopped = true;
      return result;
    }
  }
  result.time_fl = fl_clock.seconds();
  return result;
}

}  // namespace fluence::lia
