#pragma once
// [partition]: which training rows each client holds. Deterministic in (seed, deck).
#include <cstdint>
#include <string>
#include <vector>

#include "fluence/core/config.hpp"
#include "fluence/data/dataset.hpp"

namespace fluence {

struct PartitionConfig {
  int clients = 5;
  std::string scheme = "iid";
  double alpha = 0.5;
  int shards_per_client = 2;
  std::string column;
  std::vector<double> sizes;  // optional fractions per client

  static PartitionConfig from_deck(const Deck& deck);
};

/// Training-row indices (ascending) held by each client. Every client gets at least one row; an
/// InputError says which key to change otherwise.
std::vector<std::vector<std::int64_t>> partition_rows(const Table& train,
                                                      const PartitionConfig& config,
                                                      std::uint64_t seed);

/// Splits `total` items into parts proportional to `fractions` by cumulative rounding (the parts
/// sum to `total` exactly).
std::vector<std::int64_t> proportional_counts(std::int64_t total,
                                              const std::vector<double>& fractions);

}  // namespace fluence
