#include "fluence/fl/federation.hpp"

#include <cmath>
#include <limits>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/quantized_sum.hpp"

namespace fluence {

double norm2(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

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
    if (!cache)
      return model.hessian_vector_sum(client.features(), client.size(), theta.data(), v, sum,
                                      work_);
    std::vector<double>& probabilities = cache->probabilities[k];
    if (fill) {
      probabilities.resize(client.size() * model.classes());
      model.probabilities(client.features(), client.size(), theta.data(), probabilities.data());
    }
    model.hessian_vector_sum_at(client.features(), client.size(), probabilities.data(), v, sum,
                                work_);
  });
  if (fill) cache->filled = true;
  for (std::size_t k = 0; k < p; ++k) out[k] = out[k] * inverse_n() + model.l2() * v[k];
}

void Federation::client_hessian_diagonal(std::size_t k, const std::vector<double>& theta,
                                         double* out) {
  const auto& client = problem_.clients[k];
  if (objectives_[k]) return objectives_[k]->hessian_diagonal_sum(theta.data(), out);
  problem_.model->hessian_diagonal_sum(client.features(), client.size(), theta.data(), out, work_);
}

void Federation::client_hessian(std::size_t k, const std::vector<double>& theta, double* out) {
  const auto& client = problem_.clients[k];
  if (objectives_[k]) return objectives_[k]->hessian_sum(theta.data(), out);
  problem_.model->hessian_sum(client.features(), client.size(), theta.data(), out);
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

std::pair<double, double> Federation::evaluate_test(const std::vector<double>& theta, bool fast) {
  const auto& test = problem_.test;
  std::vector<double> chunk_results(static_cast<std::size_t>(test.chunks) * 2);
  const int width = problem_.model->features();
  for (int k = 0; k < test.chunks; ++k) {
    const std::size_t begin = k * TestShard::kTestChunkRows;
    const std::size_t rows = std::min(TestShard::kTestChunkRows, test.rows - begin);
    const auto result =
        test.coding
            ? problem_.model->loss_sum_blocked(test.blocked_codes.data() + begin * width,
                                               *test.coding, rows, test.labels.data() + begin,
                                               theta.data(), work_, fast)
            : problem_.model->loss_sum(test.features.data() + begin * width,
                                       test.labels.data() + begin, rows, theta.data(), work_);
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

void Federation::fedavg_round(int round, std::vector<double>& theta,
                              const LocalTrainingConfig& config) {
  const std::size_t p = parameters();
  int replaced = 0;
  for (const auto& objective : objectives_) replaced |= objective != nullptr;
  // Collective, so that every rank throws together rather than some waiting in the reduction.
  MPI_Allreduce(MPI_IN_PLACE, &replaced, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  if (replaced)
    throw RuntimeError(
        "FedAvg cannot train a client whose data term is replaced by a local objective");
  local_buffer_.resize(problem_.clients.size() * p);
  for (std::size_t k = 0; k < problem_.clients.size(); ++k) {
    auto& client = problem_.clients[k];
    double* local = local_buffer_.data() + k * p;
    if (!included(k)) {
      std::fill(local, local + p, 0.0);
      continue;
    }
    client.train_round(*problem_.model, config, problem_.seed, round, local, work_, theta.data());
    // The message the server receives: n_i theta_i (seed 000 Eq. 2 numerator).
    const auto weight = static_cast<double>(client.size());
    for (std::size_t j = 0; j < p; ++j) local[j] *= weight;
  }
  ordered_sum(local_buffer_, static_cast<int>(problem_.clients.size()), static_cast<int>(p), theta);
  for (auto& value : theta) value *= inverse_n();
}

TrainingResult Federation::train(
    const FederationConfig& config, const std::function<void(const RoundMetrics&)>& on_round,
    const std::function<void(int, std::vector<double>&)>& round_step,
    const std::function<bool(int, const std::vector<double>&, const std::vector<RoundMetrics>&)>&
        after_round,
    const TrainingResume* resume) {
  TrainingResult result;
  result.theta.assign(parameters(), 0.0);
  int first_round = 1;
  double elapsed = 0.0;  // wall time of the rounds before a restart
  if (resume) {
    result.theta = resume->theta;
    result.history = resume->history;
    first_round = resume->completed_rounds + 1;
    if (!result.history.empty()) elapsed = result.history.back().wall_time;
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
  for (int round = first_round; round <= config.rounds; ++round) {
    if (round_step)
      round_step(round, result.theta);
    else
      fedavg_round(round, result.theta, config.local);
    result.history.push_back(metrics_at(round, true));
    if (on_round) on_round(result.history.back());
    if (after_round && after_round(round, result.theta, result.history)) {
      result.stopped = true;
      return result;
    }
  }
  if (config.newton_polish)
    result.polish_steps = newton_polish(*this, result.theta, config.tolerance,
                                        config.polish_max_steps, config.polish_verbose);
  std::vector<double> g;
  gradient(result.theta, g);
  result.gradient_norm = norm2(g);
  result.final_metrics = metrics_at(config.rounds, false);
  if (!config.eval_train_loss) result.final_metrics.train_loss = objective(result.theta);
  return result;
}

}  // namespace fluence
