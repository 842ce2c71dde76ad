#include "fluence/fl/federation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/quantized_sum.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/core/signals.hpp"
#include "fluence/fl/purposes.hpp"

namespace fluence {

Federation::Federation(FederatedProblem& problem)
    : problem_(problem),
      included_(problem.client_rows.size(), 1),
      objectives_(problem.clients.size()),
      train_rows_(problem.total_train_rows) {}

void Federation::set_local_objective(std::size_t local_client,
                                     std::shared_ptr<LocalObjective> objective) {
  objectives_.at(local_client) = std::move(objective);
}

void Federation::clear_local_objectives() {
  for (auto& objective : objectives_) objective.reset();
}

void Federation::exclude_clients(const std::vector<int>& ids) {
  std::vector<char> included(problem_.client_rows.size(), 1);
  for (int id : ids) included.at(static_cast<std::size_t>(id)) = 0;
  std::int64_t rows = 0;
  for (std::size_t k = 0; k < included.size(); ++k)
    if (included[k]) rows += static_cast<std::int64_t>(problem_.client_rows[k].size());
  if (rows == 0) throw InputError("cannot exclude every client of the federation");
  included_.swap(included);
  train_rows_ = rows;
}

void Federation::sum_over_clients(std::span<double> out,
                                  const std::function<void(std::size_t, double*)>& contribution) {
  const std::size_t width = out.size();
  local_buffer_.resize(problem_.clients.size() * width);
  for (std::size_t k = 0; k < problem_.clients.size(); ++k) {
    double* sum = local_buffer_.data() + k * width;
    if (included(k))
      contribution(k, sum);
    else
      std::fill(sum, sum + width, 0.0);
  }
  ordered_sum(local_buffer_, static_cast<int>(problem_.clients.size()), static_cast<int>(width),
              out);
}

double Federation::objective(const std::vector<double>& theta) {
  const auto& model = *problem_.model;
  double total = 0.0;
  sum_over_clients(std::span<double>(&total, 1), [&](std::size_t k, double* sum) {
    const auto& client = problem_.clients[k];
    if (objectives_[k]) {
      *sum = objectives_[k]->loss_sum(theta.data());
      return;
    }
    *sum =
        model
            .loss_sum(client.features(), client.labels().data(), client.size(), theta.data(), work_)
            .loss_sum;
  });
  return total * inverse_n() + 0.5 * model.l2() * std::pow(norm2(theta), 2);
}

void Federation::gradient(const std::vector<double>& theta, std::vector<double>& out) {
  const auto& model = *problem_.model;
  out.resize(parameters());
  sum_over_clients(out, [&](std::size_t k, double* sum) {
    const auto& client = problem_.clients[k];
    if (objectives_[k]) return objectives_[k]->gradient_sum(theta.data(), sum);
    model.gradient_sum(client.features(), client.labels().data(), client.size(), theta.data(), sum,
                       work_);
  });
  for (std::size_t k = 0; k < out.size(); ++k)
    out[k] = out[k] * inverse_n() + model.l2() * theta[k];
}

void Federation::hessian_vector(const std::vector<double>& theta, const double* v, double* out,
                                HessianCache* cache) {
  const auto& model = *problem_.model;
  const std::size_t p = parameters();
  const bool fill = cache && !cache->filled;
  if (fill) cache->probabilities.resize(problem_.clients.size());
  sum_over_clients(std::span<double>(out, p), [&](std::size_t k, double* sum) {
    const auto& client = problem_.clients[k];
    if (objectives_[k]) return objectives_[k]->hessian_vector_sum(theta.data(), v, sum);
    const SoftmaxRegression* linear = model.linear();
    if (!cache || !linear)
      return model.hessian_vector_sum(client.features(), client.labels().data(), client.size(),
                                      theta.data(), v, sum, work_);
    std::vector<double>& probabilities = cache->probabilities[k];
    if (fill) {
      probabilities.resize(client.size() * model.classes());
      linear->probabilities(client.features(), client.size(), theta.data(), probabilities.data());
    }
    linear->hessian_vector_sum_at(client.features(), client.size(), probabilities.data(), v, sum,
                                  work_);
  });
  if (fill) cache->filled = true;
  for (std::size_t k = 0; k < p; ++k) out[k] = out[k] * inverse_n() + model.l2() * v[k];
}

void Federation::client_hessian_diagonal(std::size_t k, const std::vector<double>& theta,
                                         double* out) {
  const auto& client = problem_.clients[k];
  if (objectives_[k]) return objectives_[k]->hessian_diagonal_sum(theta.data(), out);
  problem_.linear_model("the exact Hessian diagonal (the Jacobi preconditioner)")
      .hessian_diagonal_sum(client.features(), client.size(), theta.data(), out, work_);
}

void Federation::client_hessian(std::size_t k, const std::vector<double>& theta, double* out) {
  const auto& client = problem_.clients[k];
  if (objectives_[k]) return objectives_[k]->hessian_sum(theta.data(), out);
  problem_.linear_model("the explicit Hessian")
      .hessian_sum(client.features(), client.size(), theta.data(), out);
}

void Federation::hessian_diagonal(const std::vector<double>& theta, std::vector<double>& out) {
  out.resize(parameters());
  sum_over_clients(out,
                   [&](std::size_t k, double* sum) { client_hessian_diagonal(k, theta, sum); });
  for (auto& value : out) value = value * inverse_n() + problem_.model->l2();
}

void Federation::explicit_hessian(const std::vector<double>& theta, std::vector<double>& out) {
  const auto& model = *problem_.model;
  const std::size_t p = parameters();
  // Client Hessians are PSD: summed exactly in fixed point, every rank computing its own clients'
  // at once (docs/math.md §8.3).
  psd_matrix_sum(
      static_cast<int>(problem_.clients.size()), p, out,
      [&](int k, double* diagonal) {
        if (included(k)) client_hessian_diagonal(k, theta, diagonal);
        return included(k);
      },
      [&](int k, double* matrix) {
        if (included(k)) client_hessian(k, theta, matrix);
        return included(k);
      });
  for (auto& value : out) value *= inverse_n();
  for (std::size_t j = 0; j < p; ++j) out[j * p + j] += model.l2();
}

NodeWorkQueue& Federation::evaluation_queue() {
  if (!evaluation_queue_) evaluation_queue_ = std::make_unique<NodeWorkQueue>();  // collective
  return *evaluation_queue_;
}

Federation::TestRows Federation::test_chunk_rows(std::size_t chunk) {
  const TestShard& test = problem_.test;
  const std::size_t D = static_cast<std::size_t>(problem_.model->features());
  const std::size_t begin = chunk * test.chunk_rows;
  TestRows rows{test.all_features.data() + begin * D, test.all_labels.data() + begin,
                std::min(test.chunk_rows, test.all_rows - begin)};
  if (!test.all_codes.empty()) {  // decode the chunk's codes
    chunk_features_.resize(rows.count * D);
    test.coding->decode(test.all_codes.data() + begin * D, rows.count, chunk_features_.data());
    rows.x = chunk_features_.data();
  }
  return rows;
}

LossAndAccuracy Federation::test_chunk(std::size_t chunk, const std::vector<double>& theta,
                                       bool fast) {
  const auto& model = *problem_.model;
  const TestRows rows = test_chunk_rows(chunk);
  return fast ? model.fast_loss_sum(rows.x, rows.y, rows.count, theta.data(), work_)
              : model.loss_sum(rows.x, rows.y, rows.count, theta.data(), work_);
}

void Federation::evaluate_taken_chunks(const std::vector<double>& theta, bool fast,
                                       bool abandon_on_stop) {
  std::size_t first = 0, last = 0;
  while (!(abandon_on_stop && stop_signal_received()) && evaluation_queue().next(first, last))
    for (std::size_t k = first; k < last; ++k) {
      const LossAndAccuracy result = test_chunk(k, theta, fast);
      chunk_results_[2 * k] = result.loss_sum;
      chunk_results_[2 * k + 1] = static_cast<double>(result.correct);
    }
}

std::pair<double, double> Federation::reduce_chunk_results() {
  // Each chunk's slots were written by exactly one rank and are 0 elsewhere, so the sum over the
  // ranks is that rank's value exactly; the chunks are then added in chunk order on every rank.
  MPI_Allreduce(MPI_IN_PLACE, chunk_results_.data(), static_cast<int>(chunk_results_.size()),
                MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double loss = 0.0, correct = 0.0;
  for (std::size_t k = 0; 2 * k < chunk_results_.size(); ++k) {
    loss += chunk_results_[2 * k];
    correct += chunk_results_[2 * k + 1];
  }
  const auto n = static_cast<double>(problem_.test.all_rows);
  return {loss / n, correct / n};
}

std::pair<double, double> Federation::evaluate_test(const std::vector<double>& theta, bool fast) {
  const auto& test = problem_.test;
  if (test.chunk_rows > 0) {  // a network: chunks from the node queue
    evaluation_queue().begin(test.chunk_count(), 1);
    chunk_results_.assign(2 * test.chunk_count(), 0.0);
    evaluate_taken_chunks(theta, fast);
    return reduce_chunk_results();
  }
  std::vector<double> chunk_results(static_cast<std::size_t>(test.chunks) * 2);
  const int width = problem_.model->features();
  for (int k = 0; k < test.chunks; ++k) {
    const std::size_t begin = k * TestShard::kTestChunkRows;
    const std::size_t rows = std::min(TestShard::kTestChunkRows, test.rows - begin);
    const auto& model = *problem_.model;
    const SoftmaxRegression* linear = model.linear();
    const double* x = test.features.data() + begin * width;
    const std::int32_t* y = test.labels.data() + begin;
    const auto result =
        linear && test.coding
            ? linear->loss_sum_blocked(test.blocked_codes.data() + begin * width, *test.coding,
                                       rows, y, theta.data(), work_, fast)
        : fast ? model.fast_loss_sum(x, y, rows, theta.data(), work_)
               : model.loss_sum(x, y, rows, theta.data(), work_);
    chunk_results[2 * k] = result.loss_sum;
    chunk_results[2 * k + 1] = static_cast<double>(result.correct);
  }
  double totals[2];
  ordered_sum(chunk_results, test.chunks, 2, std::span<double>(totals, 2));
  const auto n = static_cast<double>(problem_.data.test.rows);
  return {totals[0] / n, totals[1] / n};
}

void Federation::test_gradient(const std::vector<double>& theta, std::vector<double>& out) {
  const auto& test = problem_.test;
  const std::size_t p = parameters();
  if (test.chunk_rows > 0) {
    // A network: rank r takes chunks [n r / R, n (r + 1) / R). Their gradients are p values each,
    // too many to gather, so they are summed in fixed point: a first pass finds the bound every
    // rank agrees on, a second adds the recomputed gradients (exact sums: any rank count).
    const std::size_t chunks = test.chunk_count();
    const auto rank = static_cast<std::size_t>(world_rank()),
               ranks = static_cast<std::size_t>(world_size());
    const std::size_t first = chunks * rank / ranks, last = chunks * (rank + 1) / ranks;
    std::vector<double> gradient(p);
    auto chunk_gradient = [&](std::size_t k) {
      const TestRows rows = test_chunk_rows(k);
      problem_.model->gradient_sum(rows.x, rows.y, rows.count, theta.data(), gradient.data(),
                                   work_);
    };
    double largest = 0.0;
    for (std::size_t k = first; k < last; ++k) {
      chunk_gradient(k);
      for (double g : gradient) largest = std::max(largest, std::abs(g));
      if (std::any_of(gradient.begin(), gradient.end(), [](double g) { return std::isnan(g); }))
        largest = std::numeric_limits<double>::infinity();
    }
    MPI_Allreduce(MPI_IN_PLACE, &largest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    out.assign(p, std::numeric_limits<double>::quiet_NaN());
    if (!std::isfinite(largest)) return;
    QuantizedSum sum;
    sum.reset(p, 0, largest, static_cast<std::int64_t>(chunks), 2);
    for (std::size_t k = first; k < last; ++k) {
      chunk_gradient(k);
      sum.add(0, gradient.data(), 1.0, p);
    }
    sum.allreduce(out);
    const double inverse_m = 1.0 / static_cast<double>(test.all_rows);
    for (auto& value : out) value *= inverse_m;
    return;
  }
  std::vector<double> chunk_gradients(static_cast<std::size_t>(test.chunks) * p);
  const int width = problem_.model->features();
  for (int k = 0; k < test.chunks; ++k) {
    const std::size_t begin = k * TestShard::kTestChunkRows;
    const std::size_t rows = std::min(TestShard::kTestChunkRows, test.rows - begin);
    problem_.model->gradient_sum(test.features.data() + begin * width, test.labels.data() + begin,
                                 rows, theta.data(), chunk_gradients.data() + k * p, work_);
  }
  out.resize(p);
  ordered_sum(chunk_gradients, test.chunks, static_cast<int>(p), out);
  const double inverse_m = 1.0 / static_cast<double>(problem_.data.test.rows);
  for (auto& value : out) value *= inverse_m;
}

namespace {
bool all_finite(const std::vector<double>& values) {
  for (double value : values)
    if (!std::isfinite(value)) return false;
  return true;
}
}  // namespace

void Federation::train_cohort(int round, const std::vector<double>& theta,
                              const LocalTrainingConfig& config, Sampler& sampler,
                              UpdateReduction& reduction) {
  const std::size_t p = parameters();
  chosen_.clear();
  for (std::size_t k = 0; k < problem_.clients.size(); ++k)
    if (included(k) && sampler.in_cohort(round, problem_.clients[k].id())) chosen_.push_back(k);
  if (config.single_precision) theta_single_.assign(theta.begin(), theta.end());
  LocalTrainingConfig local = config;
  local.abandon_on_stop = abandon_on_stop_;
  reduction.begin(round, chosen_.size());
  if (scaffold_) {
    control_buffer_.resize(chosen_.size() * p);
    control_scratch_.resize(p);
  }
  control_bound_ = 0.0;
  diverged_client_ = kNoClient;
  for (std::size_t j = 0; j < chosen_.size(); ++j) {
    // A stop signal gives up the round at the next client (agreed in round()).
    if (stop_requested()) break;
    auto& client = problem_.clients[chosen_[j]];
    if (j + 1 < chosen_.size()) problem_.clients[chosen_[j + 1]].prefetch();
    double* update = reduction.slot(j);
    const double* correction = nullptr;
    if (scaffold_) {
      scaffold_->correction(chosen_[j], control_scratch_.data());
      correction = control_scratch_.data();
    }
    const UpdateSize size = client.train_update(
        *problem_.model, local, problem_.seed, round, update, work_, theta.data(),
        config.single_precision ? theta_single_.data() : nullptr, correction);
    if (scaffold_)
      control_bound_ = std::max(
          control_bound_, scaffold_->next(chosen_[j], update, client.local_steps(local),
                                          local.learning_rate, control_buffer_.data() + j * p));
    if (!std::isfinite(size.max_abs) || !std::isfinite(size.squared_norm))
      diverged_client_ = std::min(diverged_client_, client.id());
    reduction.take(j, client, size);
  }
}

void Federation::round(int round, std::vector<double>& theta, const LocalTrainingConfig& config,
                       Sampler& sampler, UpdateReduction& reduction,
                       const std::function<void()>& before_reduction) {
  train_cohort(round, theta, config, sampler, reduction);
  round_abandoned_ = false;
  if (before_reduction) before_reduction();
  // The reduction's bound (+inf when a client diverged: infinity, not NaN, since MPI_MAX need not
  // carry a NaN through), whether any rank gave the round up for a stop signal, whether any client
  // of the federation trains on a replaced objective, and SCAFFOLD's bound on the control
  // variates' changes, in one reduction.
  // A client whose data term is replaced by a local objective (set_local_objective) has no rows
  // to train on in a round: the ranks agree on that in the same reduction and throw together.
  double replaced = 0.0;
  for (const auto& objective : objectives_) replaced = objective ? 1.0 : replaced;
  double agreed[4] = {diverged_client_ != kNoClient ? std::numeric_limits<double>::infinity()
                                                    : reduction.local_bound(),
                      stop_requested() ? 1.0 : 0.0, replaced, control_bound_};
  MPI_Allreduce(MPI_IN_PLACE, agreed, scaffold_ ? 4 : 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (agreed[2] != 0.0)
    throw RuntimeError(
        "FedAvg cannot train a client whose data term is replaced by a local objective");
  control_bound_ = agreed[3];
  if (agreed[1] != 0.0) {
    // Nothing of the round has been kept (theta and every part's state are as the round found
    // them), so train() writes the previous round's checkpoint.
    round_abandoned_ = true;
    return;
  }
  if (!std::isfinite(agreed[0]) || !std::isfinite(control_bound_)) {
    // Every rank knows; the lowest diverged client id is agreed for train()'s message.
    MPI_Allreduce(MPI_IN_PLACE, &diverged_client_, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    std::fill(theta.begin(), theta.end(), std::numeric_limits<double>::quiet_NaN());
    return;
  }
  reduction.agreed(round, chosen_, theta);
  const std::optional<double> factor = reduction.reduce(round, agreed[0], step_);
  if (scaffold_) advance_controls();
  if (!factor) return;
  const double scale = *factor;
  for (std::size_t k = 0; k < theta.size(); ++k) theta[k] += step_[k] * scale;
}

void Federation::advance_controls() {
  // The sum of the c_i+ - c_i over the cohort, exactly in fixed point as the updates (the same bits
  // for any rank count), with the bound every rank agreed on in round()'s reduction.
  const std::size_t p = parameters();
  control_sum_.reset(p, 0, control_bound_, static_cast<std::int64_t>(problem_.client_rows.size()));
  for (std::size_t j = 0; j < chosen_.size(); ++j) {
    scaffold_->difference(chosen_[j], control_buffer_.data() + j * p, control_scratch_.data());
    control_sum_.add(0, control_scratch_.data(), 1.0, p);
  }
  control_scratch_.resize(p);
  control_sum_.allreduce(control_scratch_);
  scaffold_->advance(control_scratch_.data());
  for (std::size_t j = 0; j < chosen_.size(); ++j)
    scaffold_->commit(chosen_[j], control_buffer_.data() + j * p);
}

std::map<std::string, std::vector<double>> Federation::part_states() const {
  std::map<std::string, std::vector<double>> states;
  if (aggregator_) states["aggregator"] = aggregator_->state();
  if (server_optimizer_) states["server_optimizer"] = server_optimizer_->state();
  if (scaffold_) states["client_update"] = scaffold_->state();
  std::erase_if(states, [](const auto& entry) { return entry.second.empty(); });
  return states;
}

bool Federation::stop_requested() const {
  return abandon_on_stop_ && stop_signal_received();
}

TrainingResult Federation::train(
    const FederationConfig& config, const std::function<void(const RoundMetrics&)>& on_round,
    Privatizer* privatizer,
    const std::function<bool(int, const std::vector<double>&, const std::vector<RoundMetrics>&)>&
        after_round,
    const TrainingResume* resume) {
  TrainingResult result;
  // A caller that checkpoints (after_round) can resume from the previous round, so a stop signal
  // may give up the round in progress rather than wait for its end (docs/operations.md).
  abandon_on_stop_ = static_cast<bool>(after_round);
  struct Reset {
    Federation& federation;
    ~Reset() {
      federation.abandon_on_stop_ = false;
      federation.aggregator_.reset();
      federation.server_optimizer_.reset();
      federation.scaffold_.reset();
    }
  } reset{*this};
  // The round's parts (fl/round.hpp; docs/architecture.md "Extension points"): the sampler and the
  // reduction are the privatizer's in private training; else federation.client_sampling, and the
  // aggregator's (the weighted mean is summed exactly, any other rule gathers the updates). The
  // server's step from each round's aggregate (docs/math.md §8.4) follows every reduction.
  aggregator_ = make_aggregator(config.aggregator);
  const bool gathered = !aggregator_->weighted_mean();
  server_optimizer_ = make_server_optimizer(config.server, parameters());
  const bool optimized = !server_optimizer_->identity();
  const auto clients = static_cast<std::int64_t>(problem_.client_rows.size());
  std::unique_ptr<Sampler> own_sampler;
  std::unique_ptr<UpdateReduction> own_reduction;
  if (!privatizer) {
    own_sampler = make_sampler(config.sampling, problem_.seed, clients);
    if (gathered)
      own_reduction = std::make_unique<GatheredReduction>(parameters(), *aggregator_);
    else
      own_reduction =
          std::make_unique<WeightedMeanReduction>(parameters(), clients, config.uniform_weights);
  }
  Sampler& sampler = privatizer ? privatizer->sampler() : *own_sampler;
  UpdateReduction& reduction = privatizer ? *privatizer : *own_reduction;
  // The client update rule (docs/math.md §8.6): FedProx is in config.local; SCAFFOLD's control
  // variates live here, in the round.
  if (config.client_update.rule == ClientUpdateRule::scaffold) {
    if (privatizer || gathered)
      throw InputError(
          "federation.client_update = \"scaffold\" runs in plain FedAvg's round only (no "
          "privacy, no Ditto, federation.aggregator = \"mean\")");
    std::vector<int> ids;
    for (const Client& client : problem_.clients) ids.push_back(client.id());
    scaffold_ = std::make_unique<ScaffoldControls>(parameters(), std::move(ids), clients);
  }
  result.theta.resize(parameters());
  problem_.model->initialize(problem_.seed, result.theta.data());
  int first_round = 1;
  double elapsed = 0.0;  // wall time of the rounds before a restart
  if (resume) {
    result.theta = resume->theta;
    result.history = resume->history;
    first_round = resume->completed_rounds + 1;
    if (!result.history.empty()) elapsed = result.history.back().wall_time;
    if (const auto found = resume->parts.find("aggregator"); found != resume->parts.end())
      aggregator_->restore(found->second);
    if (const auto found = resume->parts.find("server_optimizer"); found != resume->parts.end())
      server_optimizer_->restore(found->second);
    if (const auto found = resume->parts.find("client_update");
        scaffold_ && found != resume->parts.end())
      scaffold_->restore(found->second);
  }
  Stopwatch clock;
  // The curve of every round is evaluated fast, the final metrics in double.
  auto metrics_at = [&](int round, bool fast) {
    RoundMetrics metrics;
    metrics.round = round;
    metrics.train_loss =
        config.eval_train_loss ? objective(result.theta) : std::numeric_limits<double>::quiet_NaN();
    std::tie(metrics.test_loss, metrics.test_accuracy) = evaluate_test(result.theta, fast);
    metrics.wall_time = elapsed + clock.seconds();
    return metrics;
  };
  // A network's curve: round t's model is evaluated during round t + 1 (overlapped), the last
  // after the loop.
  const bool overlapped = problem_.test.chunk_rows > 0 && config.evaluate_rounds;
  double produced_at = elapsed;  // wall time when the model awaiting evaluation was made
  for (int round = first_round; round <= config.rounds; ++round) {
    const bool pending = overlapped && round >= 2;
    RoundMetrics previous;
    bool evaluated = false;
    std::function<void()> evaluate_previous;
    if (pending) {
      previous.round = round - 1;
      previous.wall_time = produced_at;
      previous.train_loss = config.eval_train_loss ? objective(result.theta)
                                                   : std::numeric_limits<double>::quiet_NaN();
      evaluation_queue().begin(problem_.test.chunk_count(), 1);
      chunk_results_.assign(2 * problem_.test.chunk_count(), 0.0);
      evaluate_previous = [&] {
        evaluate_taken_chunks(result.theta, true, abandon_on_stop_);
        evaluated = true;
      };
    }
    round_abandoned_ = false;
    if (optimized) theta_before_ = result.theta;
    this->round(round, result.theta, config.local, sampler, reduction, evaluate_previous);
    if (round_abandoned_) {
      // A stop signal during the round: the checkpoint of the previous round, as after_round
      // wrote or would have written it (the overlapped evaluation of that round is dropped with
      // this one; the history then ends where after_round(round - 1) saw it end).
      round_abandoned_ = abandon_on_stop_ = false;
      after_round(round - 1, result.theta, result.history);
      result.stopped = true;
      return result;
    }
    if (optimized) server_optimizer_->step(theta_before_, result.theta);
    produced_at = elapsed + clock.seconds();
    // theta is the same on every rank, so every rank stops here together (exit 3), before a
    // checkpoint or results could hold the NaN.
    if (!all_finite(result.theta)) {
      const bool named = diverged_client_ != kNoClient;
      throw DivergenceError(fmt::format(
          "training diverged in round {}: {} (federation.learning_rate = {}, model.l2 = {}; a "
          "smaller learning rate usually helps)",
          round,
          named ? fmt::format("the local update of client {} is not finite", diverged_client_)
                : std::string("the model is not finite"),
          config.local.learning_rate, problem_.model->l2()));
    }
    if (privatizer) privatizer->finish_round(round, result.theta);
    if (pending) {
      if (!evaluated) throw std::logic_error("a round step did not run the overlapped evaluation");
      std::tie(previous.test_loss, previous.test_accuracy) = reduce_chunk_results();
      result.history.push_back(previous);
      if (on_round) on_round(previous);
    } else if (!overlapped && config.evaluate_rounds) {
      result.history.push_back(metrics_at(round, true));
      if (on_round) on_round(result.history.back());
    }
    if (after_round && after_round(round, result.theta, result.history)) {
      result.stopped = true;
      return result;
    }
  }
  if (overlapped && config.rounds >= 1 &&
      (result.history.empty() || result.history.back().round < config.rounds)) {
    RoundMetrics last = metrics_at(config.rounds, true);
    last.wall_time = produced_at;
    result.history.push_back(last);
    if (on_round) on_round(last);
  }
  if (config.newton_polish)
    result.polish_steps = newton_polish(*this, result.theta, config.tolerance,
                                        config.polish_max_steps, config.polish_verbose);
  result.final_metrics = metrics_at(config.rounds, false);
  // The final objective and gradient norm take a pass over every training row: cheap for the
  // linear model, minutes for a CNN (a backward pass over 60,000 images in double). A network
  // computes them only when it evaluates the training loss every round; else they are NaN.
  if (problem_.model->linear() || config.eval_train_loss) {
    std::vector<double> g;
    gradient(result.theta, g);
    result.gradient_norm = norm2(g);
    if (!config.eval_train_loss) result.final_metrics.train_loss = objective(result.theta);
  } else {
    result.gradient_norm = std::numeric_limits<double>::quiet_NaN();
  }
  return result;
}

}  // namespace fluence
