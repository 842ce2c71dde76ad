#include "fluence/data/partition.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "fluence/core/deck_keys.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"

namespace fluence {

void register_partition_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      section("partition", "how training rows are divided among clients"),
      key("partition.clients", T::integer, "5",
          "number of clients N (natural, column: the data's count unless given)", 1),
      choice("partition.scheme", "\"iid\"",
             {"iid", "dirichlet", "label_shards", "column", "natural"}, "partition scheme"),
      key("partition.alpha", T::real, "0.5", "Dirichlet concentration over labels", 0.0, kInf,
          true),
      key("partition.shards_per_client", T::integer, "2",
          "label_shards: shards per client ([FLDP-FL](../docs/references.md#fldp-fl) §5.1 "
          "/ McMahan et al.)",
          1),
      key("partition.column", T::string, "", "column: the categorical attribute to split on"),
      // Below 1: a client with every row held out has nothing to train on (1 was taken as 0).
      below_maximum(key("partition.local_test_fraction", T::real, "0.0",
                        "fraction of every client's rows held out as its own test data "
                        "([FeO2](../docs/references.md#feo2)'s Acc_g,p, Acc_l,p metrics; a seeded "
                        "shuffle per client); a client keeps at least one training row",
                        0.0, 1.0)),
      key("partition.sizes", T::real_array, "[]",
          "optional size skew: fraction of training rows per client (iid, dirichlet, "
          "label_shards)",
          0.0, kInf, true),
  });
}

PartitionConfig PartitionConfig::from_deck(const Deck& deck) {
  PartitionConfig config;
  config.clients = static_cast<int>(deck.integer("partition.clients"));
  config.clients_given = deck.given("partition.clients");
  config.scheme = deck.string("partition.scheme");
  config.alpha = deck.real("partition.alpha");
  config.shards_per_client = static_cast<int>(deck.integer("partition.shards_per_client"));
  if (deck.has("partition.column")) config.column = deck.string("partition.column");
  config.sizes = deck.reals("partition.sizes");
  if (!config.sizes.empty()) {
    if (is_natural(config))
      throw InputError(
          fmt::format("{}: partition.sizes does not apply to scheme \"{}\" (the "
                      "data's clients fix the client sizes)",
                      deck.where("partition.sizes"), config.scheme));
    if (static_cast<int>(config.sizes.size()) != config.clients)
      throw InputError(
          fmt::format("{}: partition.sizes has {} entries; it needs one per client "
                      "(partition.clients = {})",
                      deck.where("partition.sizes"), config.sizes.size(), config.clients));
    const double total = std::accumulate(config.sizes.begin(), config.sizes.end(), 0.0);
    if (std::abs(total - 1.0) > 1e-6)
      throw InputError(fmt::format("{}: partition.sizes must sum to 1 (they sum to {})",
                                   deck.where("partition.sizes"), total));
  }
  if (config.scheme == "column" && config.column.empty())
    throw InputError(
        fmt::format("{}: partition.column is required when partition.scheme = "
                    "\"column\"",
                    deck.origin()));
  return config;
}

std::vector<std::int64_t> proportional_counts(std::int64_t total,
                                              const std::vector<double>& fractions) {
  const double sum = std::accumulate(fractions.begin(), fractions.end(), 0.0);
  std::vector<std::int64_t> counts(fractions.size());
  double cumulative = 0.0;
  std::int64_t previous = 0;
  for (std::size_t i = 0; i < fractions.size(); ++i) {
    cumulative += fractions[i];
    const std::int64_t boundary = i + 1 == fractions.size()
                                      ? total
                                      : std::llround(cumulative / sum * static_cast<double>(total));
    counts[i] = std::max<std::int64_t>(0, boundary - previous);
    previous = std::max(previous, boundary);
  }
  return counts;
}

namespace {

using Assignment = std::vector<std::vector<std::int64_t>>;

std::vector<double> client_fractions(const PartitionConfig& config) {
  return config.sizes.empty() ? std::vector<double>(config.clients, 1.0) : config.sizes;
}

Assignment partition_iid(std::int64_t rows, const PartitionConfig& config, Stream& stream) {
  const auto order = random_permutation(stream, rows);
  const auto counts = proportional_counts(rows, client_fractions(config));
  Assignment clients(config.clients);
  std::int64_t next = 0;
  for (int i = 0; i < config.clients; ++i)
    for (std::int64_t k = 0; k < counts[i]; ++k) clients[i].push_back(order[next++]);
  return clients;
}

// Rows of each class, each class's rows in a seeded random order.
std::vector<std::vector<std::int64_t>> rows_by_class(const Table& train, Stream& stream) {
  std::vector<std::vector<std::int64_t>> by_class(train.classes());
  for (std::int64_t r : random_permutation(stream, static_cast<std::int64_t>(train.rows)))
    by_class[train.label[r]].push_back(r);
  return by_class;
}

// Each client draws its label mix q_i ~ Dirichlet(alpha) (Hsu et al. 2019; the non-IID set-up of
// seed 002 Fig. 6) and takes its rows class by class from seeded pools. Client sizes are equal (or
// partition.sizes), so no client is empty; when a class pool runs dry the shortfall is taken from
// the classes with the most rows left.
Assignment partition_dirichlet(const Table& train, const PartitionConfig& config, Stream& stream) {
  auto pools = rows_by_class(train, stream);
  const auto sizes =
      proportional_counts(static_cast<std::int64_t>(train.rows), client_fractions(config));
  Assignment clients(config.clients);
  for (int i = 0; i < config.clients; ++i) {
    const auto wanted = proportional_counts(sizes[i], stream.dirichlet(config.alpha, pools.size()));
    std::int64_t shortfall = 0;
    for (std::size_t c = 0; c < pools.size(); ++c) {
      const auto take =
          std::min<std::int64_t>(wanted[c], static_cast<std::int64_t>(pools[c].size()));
      clients[i].insert(clients[i].end(), pools[c].end() - take, pools[c].end());
      pools[c].resize(pools[c].size() - take);
      shortfall += wanted[c] - take;
    }
    for (; shortfall > 0; --shortfall) {
      auto& fullest =
          *std::max_element(pools.begin(), pools.end(),
                            [](const auto& a, const auto& b) { return a.size() < b.size(); });
      clients[i].push_back(fullest.back());
      fullest.pop_back();
    }
  }
  return clients;
}

// Seed 000 §5.1 (after McMahan et al.): rows sorted by label are cut into shards and each client
// takes `shards_per_client` shards at random positions, so clients are saturated by few labels.
Assignment partition_label_shards(const Table& train, const PartitionConfig& config,
                                  Stream& stream) {
  std::vector<std::int64_t> sorted;
  for (const auto& class_rows : rows_by_class(train, stream))
    sorted.insert(sorted.end(), class_rows.begin(), class_rows.end());
  const auto counts =
      proportional_counts(static_cast<std::int64_t>(sorted.size()), client_fractions(config));
  struct Shard {
    int client;
    std::int64_t size;
  };
  std::vector<Shard> shards;
  for (int i = 0; i < config.clients; ++i) {
    const auto sizes =
        proportional_counts(counts[i], std::vector<double>(config.shards_per_client, 1.0));
    for (auto size : sizes) shards.push_back({i, size});
  }
  stream.shuffle(std::span<Shard>(shards));
  Assignment clients(config.clients);
  std::size_t next = 0;
  for (const auto& shard : shards)
    for (std::int64_t k = 0; k < shard.size; ++k) clients[shard.client].push_back(sorted[next++]);
  return clients;
}

// The data's own clients (TFF groups, LEAF users, a client-id array or the partition column),
// those with training rows, in client order.
Assignment partition_natural(const Table& train, const PartitionConfig& config) {
  if (!train.has_clients())
    throw InputError(
        "partition.scheme = \"natural\" needs data that come divided into clients: "
        "data.source = \"tff\" or \"leaf\", or data.arrays.clients (hdf5, npy); for a CSV or "
        "ARFF column use partition.scheme = \"column\"");
  Assignment by_client(train.client_names.size());
  for (std::size_t r = 0; r < train.rows; ++r)
    by_client[static_cast<std::size_t>(train.client[r])].push_back(static_cast<std::int64_t>(r));
  Assignment clients;
  for (auto& rows : by_client)
    if (!rows.empty()) clients.push_back(std::move(rows));
  const std::string what =
      config.scheme == "column"
          ? fmt::format("the values of partition.column = \"{}\"", message_excerpt(config.column))
          : std::string("the data's clients");
  if (config.clients_given && static_cast<std::size_t>(config.clients) != clients.size())
    throw InputError(
        fmt::format("partition.clients = {}, but {} give {} clients with training rows: leave "
                    "partition.clients out or set it to {}",
                    config.clients, what, clients.size(), clients.size()));
  if (clients.size() < by_client.size())
    log::info("# partition: {} of the {} natural clients hold no training rows and take no part",
              by_client.size() - clients.size(), by_client.size());
  return clients;
}

}  // namespace

bool is_natural(const PartitionConfig& config) {
  return config.scheme == "natural" || config.scheme == "column";
}

std::vector<std::vector<std::int64_t>> partition_rows(const Table& train,
                                                      const PartitionConfig& config,
                                                      std::uint64_t seed) {
  if (is_natural(config)) return partition_natural(train, config);
  if (static_cast<std::size_t>(config.clients) > train.rows)
    throw InputError(fmt::format("partition.clients = {} exceeds the {} training rows",
                                 config.clients, train.rows));
  Stream stream(seed, purpose::partition);
  Assignment clients;
  if (config.scheme == "iid") {
    clients = partition_iid(static_cast<std::int64_t>(train.rows), config, stream);
  } else if (config.scheme == "dirichlet") {
    clients = partition_dirichlet(train, config, stream);
  } else {
    clients = partition_label_shards(train, config, stream);
  }
  for (int i = 0; i < config.clients; ++i) {
    if (clients[i].empty())
      throw InputError(
          fmt::format("client {} received no training rows under partition.scheme = \"{}\"{}", i,
                      config.scheme, " (lower partition.clients or adjust partition.sizes)"));
    std::sort(clients[i].begin(), clients[i].end());
  }
  return clients;
}

std::vector<std::int64_t> public_split_rows(const Table& train, double fraction,
                                            std::uint64_t seed) {
  const auto count = std::llround(fraction * static_cast<double>(train.rows));
  if (count <= 0) return {};
  Stream stream(seed, purpose::public_split);
  auto order = random_permutation(stream, static_cast<std::int64_t>(train.rows));
  order.resize(static_cast<std::size_t>(count));
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<std::vector<std::int64_t>> partition_rows_except(
    const Table& train, const std::vector<std::int64_t>& held_out, const PartitionConfig& config,
    std::uint64_t seed) {
  if (held_out.empty()) return partition_rows(train, config, seed);
  // The partition reads only the rows' labels and clients: a table of those for the rest.
  std::vector<std::int64_t> kept;
  Table rest = train.empty_like();
  rest.partial = true;  // no values: the partition never reads them
  for (std::size_t r = 0, next = 0; r < train.rows; ++r) {
    if (next < held_out.size() && held_out[next] == static_cast<std::int64_t>(r)) {
      ++next;
      continue;
    }
    kept.push_back(static_cast<std::int64_t>(r));
    rest.label.push_back(train.label[r]);
    if (!train.client.empty()) rest.client.push_back(train.client[r]);
  }
  rest.rows = kept.size();
  auto clients = partition_rows(rest, config, seed);
  for (auto& rows : clients)
    for (auto& row : rows) row = kept[static_cast<std::size_t>(row)];
  return clients;
}

}  // namespace fluence
