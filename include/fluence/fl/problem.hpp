#pragma once
// Everything a federated run is made of, built identically from a deck on every rank: the data,
// its encoding, the partition into clients, each client's randomized data (on the owning rank
// only), the server's test set (split into fixed chunks over the ranks) and the model.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fluence/core/config.hpp"
#include "fluence/core/memory.hpp"
#include "fluence/data/dataset.hpp"
#include "fluence/fl/aggregators.hpp"
#include "fluence/fl/client.hpp"
#include "fluence/fl/client_update.hpp"
#include "fluence/fl/layout.hpp"
#include "fluence/fl/server_optimizer.hpp"
#include "fluence/model/model.hpp"
#include "fluence/model/softmax_regression.hpp"
#include "fluence/privacy/randomized_response.hpp"

namespace fluence {

/// Which clients take part in a FedAvg round (federation.client_sampling): every client, each
/// independently with probability `rate` (Poisson, keyed by round and client as private training's
/// sampling), or a cohort of round(rate N) clients drawn without replacement (McMahan et al.'s
/// C = rate), keyed by the round.
struct ClientSampling {
  enum class Kind { all, poisson, fixed };
  Kind kind = Kind::all;
  double rate = 1.0;
};

struct FederationConfig {
  // Filled in by from_deck; the defaults are the declared keys' (register_federation_keys).
  int rounds{};
  LocalTrainingConfig local;
  ClientSampling sampling;
  bool newton_polish{};
  double tolerance{};
  int polish_max_steps{};
  bool eval_train_loss{};
  bool polish_verbose = true;        // a line per Newton step (retrains inside other commands: off)
  bool evaluate_rounds = true;       // the per-round curve (retrains inside other commands: off)
  ClientUpdateConfig client_update;  // how a sampled client trains (docs/math.md §8.6)
  // FedAvg's mean of the cohort's updates: weighted by rows (false) or plain (SCAFFOLD's and
  // FedProx's papers; federation.update_weights = "uniform").
  bool uniform_weights = false;
  AggregatorConfig aggregator;   // FedAvg's rule over the cohort's updates
  ServerOptimizerConfig server;  // the step taken from each round's aggregate

  static FederationConfig from_deck(const Deck& deck);
};

/// Declares the [federation] keys FederationConfig::from_deck reads: type, default, range and
/// meaning of each (inputs/README.md's tables).
void register_federation_keys(DeckSchema& schema);

/// This rank's share of the test set: chunks [first_chunk, first_chunk + chunks) of kTestChunkRows
/// rows each (the last chunk may be shorter). Chunk results are reduced in chunk order.
struct TestShard {
  static constexpr std::size_t kTestChunkRows = 1024;
  int first_chunk = 0;
  int chunks = 0;
  std::size_t first_row = 0, rows = 0;
  std::vector<double> features;
  std::vector<std::int32_t> labels;
  /// The features as byte codes in the blocked layout of block_codes() (a chunk is whole
  /// blocks), when the data allow: what the evaluation every round reads.
  std::shared_ptr<const ByteCoding> coding;
  std::vector<std::uint8_t> blocked_codes;
  /// A network's evaluation instead (Federation::test_chunk): every rank holds every test row, as
  /// row-major codes of `coding` when the data allow, else as doubles, in chunks of
  /// Network::evaluation_rows() rows that whichever rank is free evaluates.
  std::size_t all_rows = 0, chunk_rows = 0;
  std::vector<std::uint8_t> all_codes;
  std::vector<double> all_features;
  std::vector<std::int32_t> all_labels;
  std::size_t chunk_count() const {
    return chunk_rows ? (all_rows + chunk_rows - 1) / chunk_rows : 0;
  }
};

struct FederatedProblem {
  std::uint64_t seed = 0;
  TrainTest data;
  /// The encoding of every party's rows; under data.numeric_scaling = "per_client" the schema's
  /// columns unscaled, each client's own in client_encodings (encoding_of).
  Encoding encoding;
  std::shared_ptr<const ByteCoding> coding;  // byte codes of the encoding, when the data allow
  /// "per_client": the encoding (its own training rows' mean/std) and byte coding of each client
  /// this rank hosts, by client id (the others' entries unused); empty otherwise.
  std::vector<Encoding> client_encodings;
  std::vector<std::shared_ptr<const ByteCoding>> client_codings;
  /// "public": the training rows no client holds (data.public_fraction), read by every rank and
  /// used only for the encoding's statistics (ascending; empty otherwise).
  std::vector<std::int64_t> public_rows;
  std::vector<std::vector<std::int64_t>> client_rows;       // every client's training rows
  std::vector<std::vector<std::int64_t>> client_test_rows;  // held-out local test rows (or empty)
  LdpPlan ldp;
  std::unique_ptr<ClientLayout> layout;
  std::vector<Client> clients;  // hosted on this rank, ascending id
  TestShard test;
  std::unique_ptr<Model> model;
  std::int64_t total_train_rows = 0;
  /// What the problem surely holds on each rank (core/memory.hpp), checked before the clients'
  /// rows are encoded; a command adds the buffers of its own to check them before it starts.
  std::vector<MemoryTerm> memory;

  std::vector<std::int64_t> client_sizes() const;
  /// The encoding and byte coding of hosted client `client`'s rows.
  const Encoding& encoding_of(int client) const;
  const std::shared_ptr<const ByteCoding>& coding_of(int client) const;
  /// The linear model's fast paths, for `what` (a command or an option) that has no other path
  /// yet: an InputError naming model.type when the model is a network.
  const SoftmaxRegression& linear_model(const std::string& what) const;
};

/// Gives `client` its rows as byte codes of problem.coding_of(client) (from its randomized
/// categorical values) when the data allow; local SGD then reads those.
void attach_codes(const FederatedProblem& problem, Client& client);

/// Collective: every rank calls it with the same deck. Input problems are InputErrors on all ranks,
/// a deck whose data or model would not fit in a rank's memory among them (check_memory).
FederatedProblem build_problem(const Deck& deck);

}  // namespace fluence
