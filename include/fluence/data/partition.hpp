#pragma once
// [partition]: which training rows each client holds. Deterministic in (seed, deck).
#include <cstdint>
#include <string>
#include <vector>

#include "fluence/core/config.hpp"
#include "fluence/data/dataset.hpp"

namespace fluence {

struct PartitionConfig {
  // Filled in by from_deck; the defaults are the declared keys' (register_partition_keys).
  int clients{};
  bool clients_given = true;  // false: a natural partition takes the data's client count
  std::string scheme;
  double alpha{};
  int shards_per_client{};
  std::string column;
  std::vector<double> sizes;  // optional fractions per client

  static PartitionConfig from_deck(const Deck& deck);
};

/// Declares the [partition] keys PartitionConfig::from_deck reads: type, default, range and meaning
/// of each (inputs/README.md's tables).
void register_partition_keys(DeckSchema& schema);

/// Whether the scheme takes its clients from the data (Table::client): "natural" and "column".
bool is_natural(const PartitionConfig& config);

/// Training-row indices (ascending) held by each client. Every client gets at least one row; an
/// InputError says which key to change otherwise. A natural scheme's clients are the data's
/// clients that hold training rows, in client order (those without are left out).
std::vector<std::vector<std::int64_t>> partition_rows(const Table& train,
                                                      const PartitionConfig& config,
                                                      std::uint64_t seed);

/// The training rows held out from every client for data.numeric_scaling = "public"
/// (data.public_fraction): round(fraction * rows) rows chosen by a permutation keyed by (seed,
/// public_split), ascending; empty for fraction 0.
std::vector<std::int64_t> public_split_rows(const Table& train, double fraction,
                                            std::uint64_t seed);

/// partition_rows over the training rows other than `held_out` (ascending): the same partition
/// as partition_rows when `held_out` is empty, else the partition of the remaining rows (their
/// labels and clients), in the ids of `train`.
std::vector<std::vector<std::int64_t>> partition_rows_except(
    const Table& train, const std::vector<std::int64_t>& held_out, const PartitionConfig& config,
    std::uint64_t seed);

/// Splits `total` items into parts proportional to `fractions` by cumulative rounding (the parts
/// sum to `total` exactly).
std::vector<std::int64_t> proportional_counts(std::int64_t total,
                                              const std::vector<double>& fractions);

}  // namespace fluence
