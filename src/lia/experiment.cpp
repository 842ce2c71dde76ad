// fluence lia: the set-up shared by every stage (seed 002 §IV "Setup").
#include "experiment.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "exact_fit.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/memory.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/lia/purposes.hpp"
#include "fluence/lia/votes.hpp"
#include "fluence/model/adam.hpp"
#include "fluence/model/build.hpp"
#include "fluence/privacy/rdp_accountant.hpp"

namespace fluence::lia {

std::vector<MemoryTerm> lia_working_memory(const LiaConfig& config, int participants,
                                           std::size_t parameters) {
  const double P = participants, p = static_cast<double>(parameters);
  const double owned = std::ceil(P / world_size());
  const std::string body = config.body == "identity" ? "" : ", the body of lia.body";
  return {
      {8.0 * P * p,
       fmt::format("every contributor's trained layer, held by every rank for its validators: "
                   "lia.participants = {} x {} parameters (classes x features{})",
                   participants, parameters, body)},
      {8.0 * owned * P, fmt::format("a rank's validators' loss differences: {} validators x {} "
                                    "contributors (lia.participants, spread over the ranks)",
                                    owned, participants)},
  };
}

namespace {

// Participants [first, last) of `rank`: whole blocks of kValidatorBlock, blocks split evenly.
std::pair<int, int> owned_range(int participants, int rank, int size) {
  const int block = VoteKernel::kValidatorBlock;
  const int blocks = (participants + block - 1) / block;
  const int first = blocks * rank / size, last = blocks * (rank + 1) / size;
  return {std::min(participants, first * block), std::min(participants, last * block)};
}

}  // namespace

std::vector<double> Body::features(const Table& source,
                                   const std::vector<std::int64_t>& rows) const {
  std::vector<double> encoded(rows.size() * static_cast<std::size_t>(encoding.width()));
  encoding.encode(source, rows, nullptr, encoded.data());
  if (!network) return encoded;
  const std::size_t head = static_cast<std::size_t>(network->head_width()),
                    W = static_cast<std::size_t>(width());
  std::vector<double> inputs(rows.size() * head), out(rows.size() * W, 1.0);
  Workspace work;
  network->head_inputs(encoded.data(), rows.size(), theta.data(), inputs.data(), work);
  for (std::size_t r = 0; r < rows.size(); ++r)
    std::copy_n(inputs.begin() + r * head, head, out.begin() + r * W);  // the bias column stays 1
  if (!center.empty())
    for (std::size_t r = 0; r < rows.size(); ++r)
      for (std::size_t j = 0; j < head; ++j) out[r * W + j] -= center[j];
  return out;
}

void Body::center_on(const Table& source, const std::vector<std::int64_t>& rows) {
  center.clear();
  const auto x = features(source, rows);
  const std::size_t head = static_cast<std::size_t>(network->head_width()),
                    W = static_cast<std::size_t>(width());
  std::vector<double> mean(head, 0.0);
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::size_t j = 0; j < head; ++j) mean[j] += x[r * W + j];
  for (auto& m : mean) m /= static_cast<double>(rows.size());
  center = std::move(mean);
}

namespace {

// The network body on the warm-up rows (every rank computes the same bits): "mlp" is one ReLU
// hidden layer of lia.hidden units, "network" the deck's [model] network; initialized from the
// model's per-layer streams, trained end to end by Adam (lia.body_epochs, lia.body_learning_rate,
// batches of 64, model.l2) on an order from stream (seed, lia_body).
void train_network_body(const Deck& deck, const LiaConfig& config, const Table& train,
                        const std::vector<std::int64_t>& warmup,
                        const std::vector<std::int32_t>& warmup_y, std::uint64_t seed, Body& body) {
  const int D = body.encoding.width(), C = train.classes();
  const bool bias = deck.boolean("model.bias");
  std::unique_ptr<Model> built =
      config.body == "mlp"
          ? std::make_unique<Network>(
                NetworkSpec::mlp(D, {config.hidden}, Activation::relu, C, bias), C, config.l2)
          : build_model(deck, D, train.image_shape, C);
  body.network.reset(static_cast<Network*>(built.release()));
  body.bias_column = bias;
  body.theta.resize(body.network->parameters());
  body.network->initialize(seed, body.theta.data());
  std::vector<double> encoded(warmup.size() * static_cast<std::size_t>(D));
  body.encoding.encode(train, warmup, nullptr, encoded.data());
  AdamSettings adam;
  adam.epochs = config.body_epochs;
  adam.learning_rate = config.body_learning_rate;
  adam.l2 = config.l2;
  Stream stream(seed, purpose::lia_body);
  Workspace work;
  adam_fit(*body.network, encoded.data(), warmup_y.data(), warmup.size(), adam, stream,
           body.theta.data(), work);
}

}  // namespace

namespace {

// data.numeric_scaling = "public": the statistics of rows no participant holds, the public split
// when there is one, else the warm-up (the server's own rows); "standardize" pools every row,
// participants' included, outside any accounting (docs/architecture.md, "Input standardization").
// Every rank holds the whole table.
Encoding lia_encoding(const Table& train, const DataConfig& config,
                      const ParticipantData& assignment, bool bias) {
  if (config.numeric_scaling != "public") return Encoding(train, config.standardize, bias);
  const auto& rows = assignment.public_rows.empty() ? assignment.warmup : assignment.public_rows;
  if (rows.empty())
    throw InputError(fmt::format(
        "data.numeric_scaling = \"public\" takes the numeric statistics from the rows no "
        "participant holds, and lia.public_fraction and lia.warmup_fraction leave none of the {} "
        "training rows: raise either",
        train.rows));
  return Encoding(train, standardizing_scaling(train, rows, rows.size(), RowsHeld::local), bias);
}

}  // namespace

double TestSet::accuracy(const SoftmaxRegression& model, const std::vector<double>& theta,
                         Workspace& work) const {
  long correct =
      y.empty() ? 0 : model.loss_sum(x.data(), y.data(), y.size(), theta.data(), work).correct;
  long sum = 0;
  MPI_Allreduce(&correct, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return static_cast<double>(sum) / static_cast<double>(total);
}

std::vector<std::int32_t> labels_of(const Table& table, const std::vector<std::int64_t>& rows) {
  std::vector<std::int32_t> labels(rows.size());
  for (std::size_t k = 0; k < rows.size(); ++k) labels[k] = table.label[rows[k]];
  return labels;
}

Experiment set_up_experiment(const Deck& deck, bool progress, LiaResult& result) {
  Experiment e;
  e.progress = progress;
  Stopwatch clock;
  const auto seed = e.seed = static_cast<std::uint64_t>(deck.integer("seed"));
  const DataConfig data_config = DataConfig::from_deck(deck);
  e.data = load_data(data_config, seed);
  const TrainTest& data = e.data;
  const Table& train = data.train;
  const int C = train.classes();
  e.config = LiaConfig::from_deck(deck, C);
  const LiaConfig& config = e.config;
  e.C = C;
  result.classes = C;
  const int P = e.P = config.participants;
  const int rank = world_rank(), ranks = world_size();
  const bool minority = !config.minority_fractions.empty();

  e.assignment = assign_participants(train, config, seed, minority ? config.minority_class : -1);
  const ParticipantData& assignment = e.assignment;
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
        "lia: {} participants x {} rows exceed the {} training rows left after the warm-up "
        "(and the public split): each "
        "participant draws its sets independently (disjoint within a participant, overlapping "
        "across participants); the test set stays disjoint",
        P, config.train_size + config.validation_size,
        train.rows - assignment.warmup.size() - assignment.public_rows.size());

  // The body on the public split when there is one (no participant holds it, as the seed's
  // ImageNet pretraining; seed 002 Sec. VIII), else on the warm-up; M0 on the warm-up data. Every
  // rank computes the same bits.
  Body& body = e.body;
  // A network body holds its own biases; the identity body's last layer takes a bias column.
  const bool network_body = config.body != "identity";
  body.encoding =
      lia_encoding(train, data_config, assignment, !network_body && deck.boolean("model.bias"));
  e.warmup_y = labels_of(train, assignment.warmup);
  const auto& warmup_y = e.warmup_y;
  if (network_body) {
    const auto& body_rows =
        assignment.public_rows.empty() ? assignment.warmup : assignment.public_rows;
    train_network_body(deck, config, train, body_rows, labels_of(train, body_rows), seed, body);
    // ReLU outputs share a large positive component, so an update toward one class's features
    // moves every class's logit alike and a vote (seed 002 Eq. 1) hears the batch's labels more
    // than its features; centering on the body rows' mean (no participant's data) removes it.
    if (config.body_center) body.center_on(train, body_rows);
  }
  const int D = e.D = body.width();
  const std::size_t p = e.p = static_cast<std::size_t>(C) * D;
  check_memory(lia_working_memory(config, P, p));
  e.federated.seed = seed;
  e.federated.model = std::make_unique<SoftmaxRegression>(D, C, config.l2);
  const SoftmaxRegression& model = e.model();
  e.warmup_x = body.features(train, assignment.warmup);
  const auto& warmup_x = e.warmup_x;
  e.theta0.assign(p, 0.0);
  std::vector<double>& theta0 = e.theta0;
  const auto fit = exact_fit(model, warmup_x.data(), warmup_y.data(), assignment.warmup.size(),
                             config.retrain_tolerance, theta0);

  TestSet& test = e.test;
  test.total = static_cast<long>(data.test.rows);
  {
    const auto begin = static_cast<std::int64_t>(data.test.rows) * rank / ranks;
    const auto end = static_cast<std::int64_t>(data.test.rows) * (rank + 1) / ranks;
    std::vector<std::int64_t> rows;
    for (auto r = begin; r < end; ++r) rows.push_back(r);
    test.x = body.features(data.test, rows);
    test.y = labels_of(data.test, rows);
  }
  Workspace& work = e.work;
  result.m0_test_accuracy = test.accuracy(model, theta0, work);
  if (progress)
    log::info(
        "lia: M0 on {} warm-up rows ({} body{}, {} parameters): {} Newton steps, test accuracy "
        "{:.4f}",
        assignment.warmup.size(), config.body,
        assignment.public_rows.empty()
            ? std::string()
            : fmt::format(" trained on {} public rows", assignment.public_rows.size()),
        p, fit.newton_steps, result.m0_test_accuracy);

  LocalData& local = e.local;
  std::tie(local.first, local.last) = owned_range(P, rank, ranks);
  {
    FederatedProblem& federated = e.federated;
    federated.client_rows.assign(assignment.train.begin(), assignment.train.end());
    for (const auto& rows : federated.client_rows)
      federated.total_train_rows += static_cast<std::int64_t>(rows.size());
    std::vector<std::int64_t> validation_rows;
    local.validation_begin.push_back(0);
    for (int i = local.first; i < local.last; ++i) {
      const auto& rows = assignment.train[i];
      const auto& labels = assignment.train_label[i];
      federated.clients.emplace_back(i, rows, std::vector<std::int32_t>{}, labels,
                                     std::vector<std::int32_t>{}, labels,
                                     body.features(train, rows));
      validation_rows.insert(validation_rows.end(), assignment.validation[i].begin(),
                             assignment.validation[i].end());
      local.validation_begin.push_back(validation_rows.size());
    }
    local.validation_x = body.features(train, validation_rows);
    local.validation_y = labels_of(train, validation_rows);
    local.subset_votes.assign(
        static_cast<std::size_t>(local.last - local.first) * config.validation_subsets, 0);
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

  DpSgdConfig& dp = e.dp;
  dp.epochs = config.local_epochs;
  dp.batch_size = config.batch_size;
  dp.learning_rate = config.learning_rate;
  dp.clip = config.clip;
  dp.l2 = config.l2;
  const double q = dp_sgd_rate(config.train_size, dp);
  // lia.mode = "per_round": a contributor trains once per round, and lia.epsilon_train is its
  // budget for the whole run (the RDP of every round's steps adds).
  const long steps = dp_sgd_steps(config.train_size, dp) * (config.per_round() ? config.rounds : 1);
  if (std::isfinite(config.epsilon_train)) {
    // With relevance weighting the batch's histogram takes relevance_epsilon of the budget
    // (basic composition of its pure-DP release with DP-SGD's (eps, delta)).
    const double sgd_budget = config.after_relevance(config.epsilon_train);
    dp.noise_multiplier = noise_for_epsilon(q, steps, sgd_budget, config.delta);
    result.epsilon_train = dp_sgd_epsilon(q, dp.noise_multiplier, steps, config.delta).epsilon +
                           (config.epsilon_train - sgd_budget);
  } else {
    result.epsilon_train = std::numeric_limits<double>::infinity();
  }
  result.noise_multiplier = dp.noise_multiplier;
  result.epsilon_vote =
      vote_epsilon(config.vote_flip_probability(), config.vote_accounting == "seed") +
      (config.relevance_weighted() && std::isfinite(config.epsilon_vote) ? config.relevance_epsilon
                                                                         : 0.0);
  return e;
}

void train_layer(Experiment& e, const double* start, const double* x, const std::int32_t* y,
                 std::size_t rows, Stream& stream, double* layer, DpSgdWorkspace& work) {
  std::copy(start, start + e.p, layer);
  dp_sgd(x, y, rows, e.D, e.C, e.dp, stream, layer, work);
}

}  // namespace fluence::lia
