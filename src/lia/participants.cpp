#include "fluence/lia/participants.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/partition.hpp"
#include "fluence/lia/lia.hpp"
#include "fluence/lia/purposes.hpp"

namespace fluence::lia {

namespace {

using Rows = std::vector<std::int64_t>;

// Moves `count` rows drawn uniformly without replacement from `pool` into `out`. A partial
// Fisher-Yates pass in place: the pool's order changes, which keeps later draws uniform.
void sample_from(Rows& pool, std::int64_t count, Stream& stream, Rows& out) {
  const auto n = static_cast<std::int64_t>(pool.size());
  for (std::int64_t k = 0; k < count && k < n; ++k) {
    const auto j = k + static_cast<std::int64_t>(stream.below(static_cast<std::uint64_t>(n - k)));
    std::swap(pool[k], pool[j]);
    out.push_back(pool[k]);
  }
}

// A participant's label mix: Dirichlet(alpha) over the classes that still have rows (alpha = inf,
// IID: the pools' own proportions).
std::vector<double> label_mix(const std::vector<Rows>& pools, double alpha, Stream& stream) {
  std::vector<double> weights(pools.size(), 0.0);
  std::vector<std::size_t> present;
  for (std::size_t c = 0; c < pools.size(); ++c)
    if (!pools[c].empty()) present.push_back(c);
  if (present.empty()) return weights;
  if (std::isinf(alpha)) {
    for (std::size_t c : present) weights[c] = static_cast<double>(pools[c].size());
  } else {
    const auto mix = stream.dirichlet(alpha, present.size());
    for (std::size_t k = 0; k < present.size(); ++k) weights[present[k]] = mix[k];
  }
  return weights;
}

std::vector<std::int64_t> class_counts(const std::vector<Rows>& pools, double alpha,
                                       std::int64_t total, Stream& stream) {
  const auto weights = label_mix(pools, alpha, stream);
  if (std::all_of(weights.begin(), weights.end(), [](double w) { return w == 0.0; }))
    return std::vector<std::int64_t>(pools.size(), 0);
  return proportional_counts(total, weights);
}

// Takes the wanted rows per class from the pools; a class that runs dry is made up from the
// classes with the most rows left (disjoint: the pools shrink; overlapping: they are only read).
Rows take_rows(std::vector<Rows>& pools, const std::vector<std::int64_t>& wanted, bool disjoint,
               Stream& stream) {
  Rows rows;
  std::int64_t shortfall = 0;
  std::vector<std::int64_t> used(pools.size(), 0);
  for (std::size_t c = 0; c < pools.size(); ++c) {
    const auto take = std::min<std::int64_t>(wanted[c], static_cast<std::int64_t>(pools[c].size()));
    sample_from(pools[c], take, stream, rows);
    used[c] = take;
    shortfall += wanted[c] - take;
  }
  for (; shortfall > 0; --shortfall) {
    std::size_t fullest = 0;
    for (std::size_t c = 1; c < pools.size(); ++c)
      if (static_cast<std::int64_t>(pools[c].size()) - used[c] >
          static_cast<std::int64_t>(pools[fullest].size()) - used[fullest])
        fullest = c;
    if (static_cast<std::int64_t>(pools[fullest].size()) <= used[fullest])
      throw InputError(
          "lia: not enough training rows for one participant's train and validation "
          "sets (lower lia.train_size or lia.validation_size)");
    // The next unused row of that pool (positions below used[] were drawn already).
    auto& pool = pools[fullest];
    const auto k = used[fullest];
    const auto j =
        k + static_cast<std::int64_t>(stream.below(static_cast<std::uint64_t>(pool.size() - k)));
    std::swap(pool[k], pool[j]);
    rows.push_back(pool[k]);
    ++used[fullest];
  }
  if (disjoint)
    for (std::size_t c = 0; c < pools.size(); ++c)
      pools[c].erase(pools[c].begin(), pools[c].begin() + used[c]);
  return rows;
}

std::vector<std::int32_t> label_derangement(int classes, std::uint64_t seed) {
  Stream stream(seed, purpose::lia_corruption, 1);
  std::vector<std::int32_t> map(classes);
  for (;;) {
    for (int c = 0; c < classes; ++c) map[c] = c;
    stream.shuffle(std::span<std::int32_t>(map));
    bool fixed_point = false;
    for (int c = 0; c < classes; ++c) fixed_point = fixed_point || map[c] == c;
    if (!fixed_point) return map;
  }
}

}  // namespace

ParticipantData assign_participants(const Table& train, const LiaConfig& config, std::uint64_t seed,
                                    int excluded_class) {
  ParticipantData data;
  const auto n = static_cast<std::int64_t>(train.rows);
  Stream split(seed, purpose::lia_split);
  const auto order = random_permutation(split, n);
  // The public split comes first in the order, so without one (public_fraction = 0) the warm-up
  // and the participants' rows are those of a deck that predates the key.
  const auto held = std::llround(config.public_fraction * static_cast<double>(n));
  data.public_rows.assign(order.begin(), order.begin() + held);
  std::sort(data.public_rows.begin(), data.public_rows.end());
  const auto warmup =
      std::max<std::int64_t>(1, std::llround(config.warmup_fraction * static_cast<double>(n)));
  if (held + warmup >= n)
    throw InputError("lia: lia.public_fraction + lia.warmup_fraction = " +
                     std::to_string(config.public_fraction + config.warmup_fraction) +
                     " leaves no training rows for the participants: their sum must be below 1");
  data.warmup.assign(order.begin() + held, order.begin() + held + warmup);
  std::sort(data.warmup.begin(), data.warmup.end());
  std::vector<Rows> pools(train.classes());
  std::int64_t available = 0;
  for (auto k = held + warmup; k < n; ++k) {
    const auto row = order[k];
    if (train.label[row] == excluded_class) continue;
    pools[train.label[row]].push_back(row);
    ++available;
  }
  const std::int64_t per_participant = config.train_size + config.validation_size;
  data.overlapping = per_participant * config.participants > available;
  if (per_participant > available)
    throw InputError("lia: one participant needs lia.train_size + lia.validation_size = " +
                     std::to_string(per_participant) + " rows but only " +
                     std::to_string(available) + " training rows remain after the warm-up");
  data.train.resize(config.participants);
  data.validation.resize(config.participants);
  data.train_label.resize(config.participants);
  for (int i = 0; i < config.participants; ++i) {
    Stream stream(seed, purpose::lia_participant_data, static_cast<std::uint64_t>(i));
    if (config.validation_mix == "participant") {
      // Train and validation share the participant's mix: a random split of its rows.
      const auto wanted = class_counts(pools, config.alpha, per_participant, stream);
      Rows rows = take_rows(pools, wanted, !data.overlapping, stream);
      stream.shuffle(std::span<std::int64_t>(rows));
      data.train[i].assign(rows.begin(), rows.begin() + config.train_size);
      data.validation[i].assign(rows.begin() + config.train_size, rows.end());
    } else {
      // The batch has the participant's mix, the validation set the population's.
      data.train[i] = take_rows(pools, class_counts(pools, config.alpha, config.train_size, stream),
                                !data.overlapping, stream);
      data.validation[i] = take_rows(pools,
                                     class_counts(pools, std::numeric_limits<double>::infinity(),
                                                  config.validation_size, stream),
                                     !data.overlapping, stream);
    }
    std::sort(data.train[i].begin(), data.train[i].end());
    std::sort(data.validation[i].begin(), data.validation[i].end());
    for (auto row : data.train[i]) data.train_label[i].push_back(train.label[row]);
  }
  // Corruption (seed §IV "Corruption methods") of the training batches only: validators are
  // honest.
  const auto corrupted = std::llround(config.corrupted_fraction * config.participants);
  Stream choose(seed, purpose::lia_corruption);
  const auto participants = random_permutation(choose, config.participants);
  data.corrupted.assign(participants.begin(), participants.begin() + corrupted);
  std::sort(data.corrupted.begin(), data.corrupted.end());
  data.label_map = label_derangement(train.classes(), seed);
  for (auto i : data.corrupted) {
    Stream stream(seed, purpose::lia_corruption, 2, static_cast<std::uint64_t>(i));
    auto& labels = data.train_label[i];
    const auto size = static_cast<std::int64_t>(labels.size());
    const auto count = std::llround(config.corruption_rate * static_cast<double>(size));
    const auto positions = random_permutation(stream, size);
    for (std::int64_t k = 0; k < count; ++k) {
      auto& label = labels[positions[k]];
      label = config.corruption == "label_shift"
                  ? data.label_map[label]
                  : static_cast<std::int32_t>(stream.below(train.classes()));
    }
  }
  return data;
}

std::vector<std::int64_t> minority_batch(const Table& train, const ParticipantData& data,
                                         const LiaConfig& config, double fraction,
                                         std::uint64_t seed, std::uint64_t run) {
  std::vector<bool> warm(train.rows, false);
  for (auto row : data.warmup) warm[row] = true;
  for (auto row : data.public_rows) warm[row] = true;
  std::vector<Rows> pools(train.classes());
  for (std::size_t r = 0; r < train.rows; ++r)
    if (!warm[r]) pools[train.label[r]].push_back(static_cast<std::int64_t>(r));
  Stream stream(seed, purpose::lia_minority, run,
                static_cast<std::uint64_t>(std::llround(fraction * 1e6)));
  const auto minority = std::llround(fraction * config.train_size);
  Rows rows;
  sample_from(pools[config.minority_class], minority, stream, rows);
  pools[config.minority_class].clear();
  const auto wanted = class_counts(pools, config.alpha, config.train_size - minority, stream);
  Rows rest = take_rows(pools, wanted, false, stream);
  rows.insert(rows.end(), rest.begin(), rest.end());
  std::sort(rows.begin(), rows.end());
  return rows;
}

}  // namespace fluence::lia
