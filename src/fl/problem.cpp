#include "fluence/fl/problem.hpp"

#include <fmt/format.h>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "fluence/core/deck_keys.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/partition.hpp"
#include "fluence/data/source.hpp"
#include "fluence/fl/purposes.hpp"
#include "fluence/model/build.hpp"
#include "fluence/model/network.hpp"
#include "fluence/model/row_kernels.hpp"

namespace fluence {

void register_federation_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      section("federation",
              "federated training (FedAvg; the FLDP-FL paper's Eq. 1-2, "
              "[FLDP-FL](../docs/references.md#fldp-fl))"),
      key("federation.rounds", T::integer, "50", "communication rounds T", 0),
      key("federation.local_epochs", T::integer, "1", "local epochs per round", 1),
      key("federation.batch_size", T::integer, "32", "local mini-batch size (sgd)", 1),
      key("federation.learning_rate", T::real, "0.1", "local step size", 0.0, kInf, true),
      choice("federation.local_precision", "\"double\"", {"double", "single"},
             "arithmetic of the clients' mini-batch SGD (FedAvg and private training): "
             "`\"single\"` computes the logits and the update in float32, as PyTorch does by "
             "default, about twice as fast; the model sent to the client is rounded to float, "
             "and the client returns it plus the float change, taken exactly. Aggregation, "
             "clipping, noise, accounting, Ditto's personal steps and every final evaluation "
             "stay in double (a network's per-round test curve is evaluated in float). The "
             "logistic model needs byte-coded image data for it and refuses it on tabular "
             "sources; networks train in float on any data. Runs stay bitwise identical for "
             "any rank count (docs/performance.md)"),
      choice("federation.client_sampling", "\"all\"", {"all", "poisson", "fixed"},
             "clients in a FedAvg round: every client; each client independently with "
             "probability `sampling_rate` (keyed by round and client, as private training's "
             "sampling); or a cohort of round(`sampling_rate` N) clients (at least 1) drawn "
             "without replacement by a permutation keyed by the round (McMahan et al.'s C). "
             "An empty Poisson cohort leaves the model as it is. Private training and Ditto "
             "sample with `privacy.sampling_rate` and refuse anything but `\"all\"` here"),
      key("federation.sampling_rate", T::real, "0.1",
          "`client_sampling` poisson or fixed: the rate q (ignored with `\"all\"`)", 0.0, 1.0,
          true),
      choice("federation.aggregator", "\"mean\"", aggregator_names(),
             "the server's rule over the cohort's updates (docs/math.md §8.5): FedAvg's mean "
             "weighted by rows (summed exactly, no gathering), or a robust rule over the gathered "
             "unweighted updates: `\"median\"`, `\"trimmed_mean\"`, `\"krum\"`, "
             "`\"multi_krum\"`, `\"centered_clipping\"`. With privacy (DP-FedAvg only) the rule "
             "runs over the clipped updates and the noise is its sensitivity's (centered "
             "clipping has none: refused); FeO2 and the non-private Ditto refuse a rule other "
             "than `\"mean\"`"),
      key("federation.byzantine", T::integer, "0",
          "f: the Byzantine clients KRUM assumes (needs a cohort n > 2f + 2), and the values the "
          "trimmed mean drops at each end (needs n > 2f)",
          0),
      key("federation.krum_selected", T::integer, "1",
          "m: multi-KRUM averages the m updates of lowest score (1 = KRUM's choice)", 1),
      key("federation.cc_tau", T::real, "1.0",
          "τ: centered clipping's radius around the previous round's aggregate", 0.0, kInf, true),
      key("federation.cc_iterations", T::integer, "1", "centered clipping's iterations per round",
          1),
      choice("federation.server_optimizer", "\"sgd\"", server_optimizer_names(),
             "the server's step from each round's aggregate Δ (FedAvg's, DP-FedAvg's, FeO2's): "
             "`\"sgd\"` θ += η Δ (η = 1: the plain round, bit for bit); `\"momentum\"` "
             "(FedAvgM); `\"adagrad\"`, `\"adam\"`, `\"yogi\"` (Reddi et al. 2021, "
             "Algorithm 2); docs/math.md §8.4"),
      key("federation.server_learning_rate", T::real, "1.0", "η: the server's step size", 0.0, kInf,
          true),
      below_maximum(key("federation.server_momentum", T::real, "0.9",
                        "β₁: decay of the server's first moment m (momentum, adagrad, adam, yogi)",
                        0.0, 1.0)),
      below_maximum(key("federation.server_beta2", T::real, "0.99",
                        "β₂: decay of the second moment v (adam, yogi)", 0.0, 1.0)),
      key("federation.server_tau", T::real, "1e-3",
          "τ: adaptivity of adagrad, adam and yogi (v starts at τ², τ is added to √v)", 0.0, kInf,
          true),
      choice("federation.client_update", "\"sgd\"", client_update_names(),
             "the clients' update rule (docs/math.md §8.6): `\"sgd\"` local SGD (FedAvg); "
             "`\"fedprox\"` every local step's gradient gains μ (y − θ_t) (Li et al. 2020; any "
             "model, precision and privacy mode); `\"scaffold\"` every local step's gradient "
             "gains c − c_i, the server's and the client's control variates (Karimireddy et al. "
             "2020, option II; plain FedAvg with `aggregator = \"mean\"` only: refused with "
             "privacy, Ditto and robust aggregators)"),
      key("federation.proximal_mu", T::real, "0.01",
          "μ: FedProx's proximal weight (0 = `\"sgd\"`, bit for bit; Li et al. tune it in "
          "{0.001, 0.01, 0.1, 1})",
          0.0),
      choice("federation.update_weights", "\"rows\"", {"rows", "uniform"},
             "FedAvg's mean of the cohort's updates weighted by the clients' rows, or the plain "
             "mean over the cohort (SCAFFOLD's and FedProx's papers); plain FedAvg with "
             "`aggregator = \"mean\"` only"),
      choice("federation.optimizer", "\"sgd\"", {"sgd", "gd"},
             "local optimizer: mini-batch SGD or full-batch gradient descent"),
      choice("federation.polish", "\"none\"", {"none", "newton"},
             "after the rounds: federated Newton steps (CG on the exact Hessian products, "
             "backtracking line search) to the exact minimizer. For a network a local method: "
             "where CG meets negative curvature the step uses H + μI (μ raised tenfold until "
             "CG passes, lowered tenfold after each full step), and it stops at a stationary "
             "point near the trained model, a local minimum when `fluence influence`'s "
             "spectrum is positive (docs/math.md §10)"),
      key("federation.tolerance", T::real, "1e-10",
          "polish: stop when the gradient norm of the objective is below this", 0.0, kInf, true),
      key("federation.polish_max_steps", T::integer, "50", "polish: most Newton steps", 1),
      key("federation.eval_train_loss", T::boolean, "true",
          "evaluate the training objective at the global model every round (a pass over "
          "every training row: for a network also the condition for the final "
          "`/model/train_loss` and `/model/gradient_norm`, NaN otherwise)"),
  });
}

FederationConfig FederationConfig::from_deck(const Deck& deck) {
  FederationConfig config;
  config.rounds = static_cast<int>(deck.integer("federation.rounds"));
  config.local.epochs = static_cast<int>(deck.integer("federation.local_epochs"));
  config.local.batch_size = static_cast<int>(deck.integer("federation.batch_size"));
  config.local.learning_rate = deck.real("federation.learning_rate");
  config.local.full_batch = deck.string("federation.optimizer") == "gd";
  config.local.single_precision = deck.string("federation.local_precision") == "single";
  config.client_update.rule = client_update_rule(deck.string("federation.client_update"));
  config.client_update.proximal_mu = deck.real("federation.proximal_mu");
  if (config.client_update.rule == ClientUpdateRule::fedprox)
    config.local.proximal_mu = config.client_update.proximal_mu;
  config.uniform_weights = deck.string("federation.update_weights") == "uniform";
  config.newton_polish = deck.string("federation.polish") == "newton";
  config.tolerance = deck.real("federation.tolerance");
  config.polish_max_steps = static_cast<int>(deck.integer("federation.polish_max_steps"));
  config.eval_train_loss = deck.boolean("federation.eval_train_loss");
  config.aggregator.name = deck.string("federation.aggregator");
  config.aggregator.byzantine = static_cast<int>(deck.integer("federation.byzantine"));
  config.aggregator.selected = static_cast<int>(deck.integer("federation.krum_selected"));
  config.aggregator.tau = deck.real("federation.cc_tau");
  config.aggregator.iterations = static_cast<int>(deck.integer("federation.cc_iterations"));
  config.server.name = deck.string("federation.server_optimizer");
  config.server.learning_rate = deck.real("federation.server_learning_rate");
  config.server.beta1 = deck.real("federation.server_momentum");
  config.server.beta2 = deck.real("federation.server_beta2");
  config.server.tau = deck.real("federation.server_tau");
  const std::string sampling = deck.string("federation.client_sampling");
  config.sampling.kind = sampling == "poisson" ? ClientSampling::Kind::poisson
                         : sampling == "fixed" ? ClientSampling::Kind::fixed
                                               : ClientSampling::Kind::all;
  config.sampling.rate = deck.real("federation.sampling_rate");
  if (config.sampling.kind != ClientSampling::Kind::all &&
      (deck.string("privacy.mode") != "none" || deck.string("personalization.method") != "none"))
    throw InputError(fmt::format(
        "federation.client_sampling = \"{}\" samples the clients of plain FedAvg; private "
        "training and Ditto sample them with privacy.sampling_rate (Poisson, as their accounting "
        "assumes): leave federation.client_sampling = \"all\"",
        sampling));
  if (config.aggregator.name != "mean" && deck.string("privacy.mode") != "dp-fedavg" &&
      (deck.string("privacy.mode") != "none" || deck.string("personalization.method") != "none"))
    throw InputError(fmt::format(
        "federation.aggregator = \"{}\" runs in plain FedAvg and in DP-FedAvg (noise calibrated "
        "to the rule's sensitivity); FeO2's opt-out combination (privacy.mode = \"{}\") and the "
        "non-private Ditto baseline (personalization.method = \"{}\") are means: leave "
        "federation.aggregator = \"mean\" there",
        config.aggregator.name, deck.string("privacy.mode"),
        deck.string("personalization.method")));
  const bool private_or_ditto =
      deck.string("privacy.mode") != "none" || deck.string("personalization.method") != "none";
  if (config.uniform_weights && (private_or_ditto || config.aggregator.name != "mean"))
    throw InputError(
        "federation.update_weights = \"uniform\" changes plain FedAvg's mean; private training, "
        "Ditto and the robust aggregators weight the updates their own way: leave "
        "federation.update_weights = \"rows\" there");
  if (config.client_update.rule == ClientUpdateRule::scaffold) {
    if (deck.string("privacy.mode") != "none")
      throw InputError(fmt::format(
          "federation.client_update = \"scaffold\" cannot run with privacy.mode = \"{}\": "
          "SCAFFOLD's control variates c_i carry each client's gradients to the server outside "
          "the clipped and noised update, which DP-FedAvg's and FeO2's analysis does not cover "
          "(use \"fedprox\" or \"sgd\")",
          deck.string("privacy.mode")));
    if (deck.string("personalization.method") != "none")
      throw InputError(
          "federation.client_update = \"scaffold\" runs in plain FedAvg's round; Ditto "
          "(personalization.method) trains its clients in its own round without the control "
          "variates: use \"fedprox\" or \"sgd\"");
    if (config.aggregator.name != "mean")
      throw InputError(fmt::format(
          "federation.client_update = \"scaffold\" with federation.aggregator = \"{}\": "
          "SCAFFOLD's server averages the updates and the control variates alike, and a robust "
          "rule over the updates alone would leave c inconsistent with them; use "
          "federation.aggregator = \"mean\"",
          config.aggregator.name));
  }
  return config;
}

const SoftmaxRegression& FederatedProblem::linear_model(const std::string& what) const {
  if (const SoftmaxRegression* linear = model->linear()) return *linear;
  throw InputError(
      fmt::format("{} needs model.type = \"logistic\" (its one-hot and explicit-Hessian kernels); "
                  "model.type = \"{}\" is not supported there yet",
                  what, model->type()));
}

std::vector<std::int64_t> FederatedProblem::client_sizes() const {
  std::vector<std::int64_t> sizes;
  for (const auto& rows : client_rows) sizes.push_back(static_cast<std::int64_t>(rows.size()));
  return sizes;
}

const Encoding& FederatedProblem::encoding_of(int client) const {
  return client_encodings.empty() ? encoding
                                  : client_encodings.at(static_cast<std::size_t>(client));
}

const std::shared_ptr<const ByteCoding>& FederatedProblem::coding_of(int client) const {
  return client_codings.empty() ? coding : client_codings.at(static_cast<std::size_t>(client));
}

void attach_codes(const FederatedProblem& problem, Client& client) {
  const auto& coding = problem.coding_of(client.id());
  if (!coding) return;
  const Encoding& encoding = problem.encoding_of(client.id());
  std::vector<std::uint8_t> codes(client.size() * encoding.width());
  if (encoding.encode_bytes(problem.data.train, client.rows(), client.categorical().data(), *coding,
                            codes.data()))
    client.set_codes(std::move(codes), coding);
}

namespace {

// `rows` of `table` encoded as doubles (with `want_features`) and, with `coding`, as its 8-bit
// codes where the values allow (`coded`), the arrays grown block by block. A rank's clients' rows
// are some 200 MB of fresh memory: sized up front, the arrays were zeroed in one pass and written
// in a second; grown by blocks that stay in cache, their pages mapped in one call beforehand
// (reserve_populated), they are written once, and each block's table rows are read once for both
// encodings. Every row is encoded alone, so the values are those of
// one Encoding::encode (encode_bytes) over all the rows.
struct EncodedRows {
  std::vector<double> features;
  std::vector<std::uint8_t> codes;
  bool coded = false;
};

EncodedRows encode_rows(const Encoding& encoding, const Table& table,
                        const std::vector<std::int64_t>& rows, const std::int32_t* categorical,
                        const ByteCoding* coding, bool want_features) {
  constexpr std::size_t kBlockRows = 32;  // 200 KB of doubles for a 784-pixel image
  const auto width = static_cast<std::size_t>(encoding.width());
  const auto nc = static_cast<std::size_t>(table.categorical_count());
  EncodedRows out;
  out.coded = coding != nullptr;
  if (want_features) reserve_populated(out.features, rows.size() * width);
  if (out.coded) reserve_populated(out.codes, rows.size() * width);
  std::vector<std::int64_t> block;
  for (std::size_t first = 0; first < rows.size(); first += kBlockRows) {
    const std::size_t count = std::min(kBlockRows, rows.size() - first);
    block.assign(rows.begin() + static_cast<std::ptrdiff_t>(first),
                 rows.begin() + static_cast<std::ptrdiff_t>(first + count));
    const std::int32_t* block_categorical = categorical ? categorical + first * nc : nullptr;
    if (want_features) {
      out.features.resize((first + count) * width);
      encoding.encode(table, block, block_categorical, out.features.data() + first * width);
    }
    if (out.coded) {
      out.codes.resize((first + count) * width);
      out.coded = encoding.encode_bytes(table, block, block_categorical, *coding,
                                        out.codes.data() + first * width);
      if (!out.coded) out.codes = {};
    }
  }
  return out;
}

Client make_client(const FederatedProblem& problem, int id) {
  const auto& rows = problem.client_rows[id];
  const Table& train = problem.data.train;
  std::vector<std::int32_t> categorical, labels;
  randomize_client_rows(problem.ldp, id, train, rows, problem.seed, 0, categorical, labels);
  const int nc = train.categorical_count();
  std::vector<std::int32_t> original_categorical(rows.size() * nc), original_labels(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(train.categorical.data() + train.position(rows[i]) * static_cast<std::size_t>(nc),
                nc, original_categorical.begin() + i * nc);
    original_labels[i] = train.label[rows[i]];
  }
  // The codes as attach_codes makes them, in the same pass as the features.
  const auto& coding = problem.coding_of(id);
  EncodedRows encoded =
      encode_rows(problem.encoding_of(id), train, rows, categorical.data(), coding.get(), true);
  Client client(id, rows, std::move(original_categorical), std::move(original_labels),
                std::move(categorical), std::move(labels), std::move(encoded.features));
  if (encoded.coded) client.set_codes(std::move(encoded.codes), coding);
  return client;
}

// Seed 004 evaluates models on each client's own test data: a fraction of every client's rows,
// drawn by a shuffle keyed by the client (the same on every rank), is held out of its training.
void split_local_test_rows(FederatedProblem& problem, double fraction) {
  problem.client_test_rows.assign(problem.client_rows.size(), {});
  if (fraction <= 0.0) return;
  for (std::size_t id = 0; id < problem.client_rows.size(); ++id) {
    auto& rows = problem.client_rows[id];
    // A client keeps a training row: a fraction that rounds to all of its rows (0.9 of 5) holds
    // out all but one, where it used to hold out none in silence.
    const auto held = std::min(static_cast<std::size_t>(std::llround(fraction * rows.size())),
                               rows.empty() ? std::size_t{0} : rows.size() - 1);
    if (held == 0) continue;
    Stream stream(problem.seed, purpose::local_test_split, id);
    stream.shuffle(std::span<std::int64_t>(rows));
    std::vector<std::int64_t> test(rows.end() - static_cast<std::ptrdiff_t>(held), rows.end());
    rows.resize(rows.size() - held);
    std::sort(rows.begin(), rows.end());
    std::sort(test.begin(), test.end());
    problem.client_test_rows[id] = std::move(test);
  }
}

// Rank `rank`'s chunks of a test set of `rows` rows: first chunk, chunk count, first row, rows.
TestShard shard_extent(std::size_t rows, int rank, int ranks) {
  TestShard shard;
  const auto chunk_rows = TestShard::kTestChunkRows;
  const int total_chunks = static_cast<int>((rows + chunk_rows - 1) / chunk_rows);
  shard.first_chunk = static_cast<int>(static_cast<long>(total_chunks) * rank / ranks);
  const int end_chunk = static_cast<int>(static_cast<long>(total_chunks) * (rank + 1) / ranks);
  shard.chunks = end_chunk - shard.first_chunk;
  shard.first_row = shard.first_chunk * chunk_rows;
  shard.rows = std::min(rows, end_chunk * chunk_rows) - std::min(rows, shard.first_row);
  return shard;
}

TestShard make_test_shard(const Table& test, const Encoding& encoding,
                          const std::shared_ptr<const ByteCoding>& coding) {
  TestShard shard = shard_extent(test.rows, world_rank(), world_size());
  std::vector<std::int64_t> rows(shard.rows);
  for (std::size_t i = 0; i < shard.rows; ++i)
    rows[i] = static_cast<std::int64_t>(shard.first_row + i);
  EncodedRows encoded = encode_rows(encoding, test, rows, nullptr, coding.get(), true);
  shard.features = std::move(encoded.features);
  shard.labels.assign(test.label.begin() + shard.first_row,
                      test.label.begin() + shard.first_row + shard.rows);
  if (encoded.coded) {
    static_assert(TestShard::kTestChunkRows % kCodeBlockRows == 0);
    shard.coding = coding;
    shard.blocked_codes.resize((shard.rows + kCodeBlockRows - 1) / kCodeBlockRows * kCodeBlockRows *
                               encoding.width());
    block_codes(encoded.codes.data(), shard.rows, encoding.width(), shard.blocked_codes.data());
  }
  return shard;
}

TestShard make_network_test_set(const Table& test, const Encoding& encoding,
                                const std::shared_ptr<const ByteCoding>& coding,
                                std::size_t chunk_rows) {
  TestShard shard;
  shard.all_rows = test.rows;
  shard.chunk_rows = chunk_rows;
  std::vector<std::int64_t> rows(test.rows);
  std::iota(rows.begin(), rows.end(), 0);
  shard.all_labels = test.label;
  // The codes alone where the values allow, else the doubles.
  EncodedRows encoded = encode_rows(encoding, test, rows, nullptr, coding.get(), false);
  if (encoded.coded) {
    shard.coding = coding;
    shard.all_codes = std::move(encoded.codes);
    return shard;
  }
  shard.all_features = encode_rows(encoding, test, rows, nullptr, nullptr, true).features;
  return shard;
}

// The training rows rank `rank`'s clients hold (their rows and their local test rows) with the
// public rows every rank reads (data.numeric_scaling = "public"), and the
// test rows it encodes: its chunks of the test set for the logistic model (make_test_shard),
// every test row for a network (make_network_test_set). Ascending.
std::vector<std::int64_t> hosted_train_rows(const FederatedProblem& problem, int rank) {
  std::vector<std::int64_t> rows;
  for (int id = problem.layout->first_client(rank); id < problem.layout->end_client(rank); ++id) {
    rows.insert(rows.end(), problem.client_rows[id].begin(), problem.client_rows[id].end());
    rows.insert(rows.end(), problem.client_test_rows[id].begin(),
                problem.client_test_rows[id].end());
  }
  rows.insert(rows.end(), problem.public_rows.begin(), problem.public_rows.end());
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::vector<std::int64_t> needed_test_rows(std::size_t test_rows, bool network, int rank) {
  const TestShard shard = network ? TestShard{} : shard_extent(test_rows, rank, world_size());
  const std::size_t first = network ? 0 : shard.first_row, count = network ? test_rows : shard.rows;
  std::vector<std::int64_t> rows(count);
  std::iota(rows.begin(), rows.end(), static_cast<std::int64_t>(first));
  return rows;
}

// The most rows any rank holds (the same number on every rank: check_memory's terms must be).
double largest_held_rows(const FederatedProblem& problem, bool network) {
  std::size_t largest = 0;
  for (int rank = 0; rank < world_size(); ++rank) {
    std::size_t rows = problem.public_rows.size() +
                       (network ? problem.data.test.rows
                                : shard_extent(problem.data.test.rows, rank, world_size()).rows);
    for (int id = problem.layout->first_client(rank); id < problem.layout->end_client(rank); ++id)
      rows += problem.client_rows[id].size() + problem.client_test_rows[id].size();
    largest = std::max(largest, rows);
  }
  return static_cast<double>(largest);
}

// The model's parameter-sized vectors every command holds at least: the model, its gradient, a
// client's local copy and the round's sum.
constexpr double kModelVectors = 4.0;

// What the problem surely holds on each rank once the data are read and the model is built
// (core/memory.hpp), each part with the keys that size it: a rank holds its clients' rows and the
// test rows it evaluates (distributed ownership), every rank the labels and client ids.
std::vector<MemoryTerm> problem_memory(const Deck& deck, const FederatedProblem& problem,
                                       bool network) {
  const Table& train = problem.data.train;
  const double all_rows = static_cast<double>(train.rows + problem.data.test.rows);
  const double rows = largest_held_rows(problem, network);
  const double width = problem.encoding.width();
  const double parameters = static_cast<double>(problem.model->parameters());
  const std::string data_keys = deck.string("data.source") == "synthetic"
                                    ? "data.synthetic.rows, .numeric and .categorical"
                                    : "the rows and columns of data.path";
  const std::string type = deck.string("model.type");
  const std::string model_keys = type == "logistic" ? "classes x encoded columns"
                                 : type == "mlp"    ? "model.hidden"
                                                    : "model.conv_filters, model.hidden";
  return {
      {rows * (8.0 * train.numeric_count() + 4.0 * train.categorical_count()),
       fmt::format("the data, each rank its clients' rows and its test rows: at most {} rows of "
                   "{} attributes ({}; partition.clients and the rank count spread them)",
                   rows, train.attributes.size(), data_keys)},
      {all_rows * 8.0,
       fmt::format("the labels and client ids of all {} rows, held by every rank", all_rows)},
      {8.0 * rows * width,
       fmt::format("the encoded rows: at most {} rows x {} encoded columns ({}, categories "
                   "one-hot)",
                   rows, width, data_keys)},
      {8.0 * kModelVectors * parameters,
       fmt::format("{} model parameters ({}) x {} vectors", parameters, model_keys, kModelVectors)},
  };
}

// data.numeric_scaling = "public" takes its statistics from rows no client holds, which
// data.public_fraction holds out; holding rows out for any other scaling would only waste them.
void check_public_rows(const Deck& deck, const DataConfig& config) {
  const bool is_public = config.numeric_scaling == "public";
  if (is_public && !(config.public_fraction > 0.0))
    throw InputError(fmt::format(
        "{}: data.numeric_scaling = \"public\" takes the numeric statistics from training rows "
        "no client holds, and data.public_fraction = {} holds none out: set "
        "data.public_fraction in (0, 1), or use \"per_client\"",
        deck.where("data.numeric_scaling"), config.public_fraction));
  if (!is_public && config.public_fraction > 0.0)
    throw InputError(fmt::format(
        "{}: data.public_fraction = {} holds rows out of every client for data.numeric_scaling "
        "= \"public\" only (here \"{}\"): set data.public_fraction = 0 or use \"public\"",
        deck.where("data.public_fraction"), config.public_fraction, config.numeric_scaling));
}

std::shared_ptr<const ByteCoding> shared_byte_coding(const Encoding& encoding,
                                                     const Table& schema) {
  auto coding = encoding.byte_coding(schema);
  if (!coding) return nullptr;
  return std::make_shared<const ByteCoding>(std::move(coding->with_single()));
}

// data.numeric_scaling decides whose rows give the numeric columns' mean/std (docs/architecture.md,
// "Input standardization"): every training row ("standardize", outside any accounting), none
// ("none"), the public rows every rank holds ("public"), or each hosted client's own rows
// ("per_client": its statistics never leave the client, and a client lives on one rank, so no
// communication either).
void fit_encodings(FederatedProblem& problem, const DataConfig& config, bool bias) {
  const Table& train = problem.data.train;
  const auto& public_rows = problem.public_rows;
  problem.encoding =
      config.numeric_scaling == "public"
          ? Encoding(train,
                     standardizing_scaling(train, public_rows, public_rows.size(), RowsHeld::local),
                     bias)
          : Encoding(train, config.standardize, bias);
  problem.coding = shared_byte_coding(problem.encoding, train);
  if (config.numeric_scaling != "per_client") return;
  problem.client_encodings.resize(problem.client_rows.size());
  problem.client_codings.resize(problem.client_rows.size());
  const int rank = world_rank();
  for (int id = problem.layout->first_client(rank); id < problem.layout->end_client(rank); ++id) {
    const auto& rows = problem.client_rows[id];
    problem.client_encodings[id] = problem.encoding.with_scaling(
        standardizing_scaling(train, rows, rows.size(), RowsHeld::local));
    problem.client_codings[id] = shared_byte_coding(problem.client_encodings[id], train);
  }
}

}  // namespace

FederatedProblem build_problem(const Deck& deck) {
  FederatedProblem problem;
  problem.seed = static_cast<std::uint64_t>(deck.integer("seed"));
  const DataConfig data_config = DataConfig::from_deck(deck);
  check_public_rows(deck, data_config);
  const PartitionConfig partition_config = PartitionConfig::from_deck(deck);
  // First pass, the same on every rank: labels and client ids, the partition and the layout.
  collective_check([&] {
    problem.data =
        load_data_index(data_config, problem.seed,
                        partition_config.scheme == "column" ? partition_config.column : "");
    problem.public_rows =
        public_split_rows(problem.data.train, data_config.public_fraction, problem.seed);
    if (data_config.numeric_scaling == "public" && problem.public_rows.empty())
      throw InputError(
          fmt::format("{}: data.public_fraction = {} of {} training rows holds out no row for "
                      "data.numeric_scaling = \"public\": raise it",
                      deck.where("data.public_fraction"), data_config.public_fraction,
                      problem.data.train.rows));
    problem.client_rows = partition_rows_except(problem.data.train, problem.public_rows,
                                                partition_config, problem.seed);
    problem.ldp =
        LdpPlan::from_deck(deck, problem.data.train, static_cast<int>(problem.client_rows.size()));
  });
  problem.total_train_rows =
      static_cast<std::int64_t>(problem.data.train.rows - problem.public_rows.size());
  split_local_test_rows(problem, deck.real("partition.local_test_fraction"));
  for (const auto& rows : problem.client_test_rows)
    problem.total_train_rows -= static_cast<std::int64_t>(rows.size());
  problem.layout = std::make_unique<ClientLayout>(problem.client_sizes(), world_size());
  // Second pass: each rank reads the values of its clients' rows and of its test rows only.
  const bool network = deck.string("model.type") != "logistic";
  const int rank = world_rank();
  const auto read_start = std::chrono::steady_clock::now();
  collective_check([&] {
    hold_rows(problem.data, data_config, problem.seed, hosted_train_rows(problem, rank),
              needed_test_rows(problem.data.test.rows, network, rank));
  });
  double read_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - read_start).count();
  MPI_Allreduce(MPI_IN_PLACE, &read_seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  log::info(
      "data: each rank holds its clients' rows and its test rows, at most {} of {}; read "
      "in {:.2f} s",
      largest_held_rows(problem, network), problem.data.train.rows + problem.data.test.rows,
      read_seconds);
  fit_encodings(problem, data_config, model_encodes_bias(deck));
  problem.model = build_model(deck, problem.encoding.width(), problem.data.train.image_shape,
                              problem.data.train.classes());
  if (deck.string("federation.local_precision") == "single" && problem.model->linear() &&
      !problem.coding)
    throw InputError(
        "federation.local_precision = \"single\" runs the logistic model's local SGD on 8-bit "
        "codes of the features, which these data do not have (only image data such as "
        "data.source = \"idx\" do); use \"double\" (networks train in float on any data)");
  problem.memory = problem_memory(deck, problem, network);
  check_memory(problem.memory);
  for (int id = problem.layout->first_client(rank); id < problem.layout->end_client(rank); ++id) {
    problem.clients.push_back(make_client(problem, id));
    const auto& test_rows = problem.client_test_rows[id];
    if (test_rows.empty()) continue;
    // Under "per_client" the client's local test rows take its training rows' statistics.
    std::vector<double> features =
        encode_rows(problem.encoding_of(id), problem.data.train, test_rows, nullptr, nullptr, true)
            .features;
    std::vector<std::int32_t> labels;
    for (auto row : test_rows) labels.push_back(problem.data.train.label[row]);
    problem.clients.back().set_local_test(std::move(features), std::move(labels));
  }
  // Under "per_client" the server standardizes its test set with the test set's own statistics
  // (over the ranks' shards for the logistic model, each test row on one rank).
  const Table& test = problem.data.test;
  Encoding test_encoding = problem.encoding;
  auto test_coding = problem.coding;
  if (data_config.numeric_scaling == "per_client") {
    test_encoding = problem.encoding.with_scaling(
        standardizing_scaling(test, needed_test_rows(test.rows, network, rank), test.rows,
                              network ? RowsHeld::local : RowsHeld::across_ranks));
    test_coding = shared_byte_coding(test_encoding, test);
  }
  if (const auto* network_model = problem.model->network())
    problem.test =
        make_network_test_set(test, test_encoding, test_coding, network_model->evaluation_rows());
  else
    problem.test = make_test_shard(test, test_encoding, test_coding);
  return problem;
}

}  // namespace fluence
