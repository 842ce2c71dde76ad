#include "selection.hpp"

#include <algorithm>
#include <cmath>

#include "fluence/core/error.hpp"
#include "fluence/core/krylov.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/quantized_sum.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/whatif/purposes.hpp"

namespace fluence::whatif_detail {

namespace {

bool in_group(const FederatedProblem& problem, const WhatifConfig& config, const Client& client,
              std::size_t i) {
  const std::int32_t value =
      config.group_column < 0
          ? client.original_labels()[i]
          : client.original_categorical()[i * problem.data.train.categorical_count() +
                                          config.group_column];
  return std::find(config.group_values.begin(), config.group_values.end(), value) !=
         config.group_values.end();
}

double group_key(std::uint64_t seed, std::int64_t row) {
  return Stream(seed, purpose::whatif_group_sample, static_cast<std::uint64_t>(row)).uniform();
}

}  // namespace

GroupSelection select_group(const FederatedProblem& problem, const WhatifConfig& config) {
  // (key, global row) of every local group record; rows are exact in a double (< 2^53).
  std::vector<double> local;
  for (const auto& client : problem.clients)
    for (std::size_t i = 0; i < client.size(); ++i)
      if (in_group(problem, config, client, i)) {
        local.push_back(group_key(problem.seed, client.rows()[i]));
        local.push_back(static_cast<double>(client.rows()[i]));
      }
  const std::vector<double> all = ordered_allgather(local, static_cast<int>(local.size() / 2), 2);
  std::vector<std::pair<double, double>> order;
  for (std::size_t j = 0; j < all.size(); j += 2) order.emplace_back(all[j], all[j + 1]);
  std::sort(order.begin(), order.end());

  GroupSelection selection;
  selection.group_size = static_cast<std::int64_t>(order.size());
  if (selection.group_size == 0)
    throw InputError("whatif.group: no training record has " + config.group_attribute + " = " +
                     config.group_value_names.front());
  std::int64_t largest = 0;
  for (double fraction : config.fractions) {
    const auto count = static_cast<std::int64_t>(
        std::llround(fraction * static_cast<double>(selection.group_size)));
    selection.selected.push_back(std::max<std::int64_t>(count, 1));
    largest = std::max(largest, selection.selected.back());
  }
  // A local record's position in the selection order, if it is among the first `largest`.
  const std::size_t K = config.fractions.size();
  selection.rows.resize(problem.clients.size());
  selection.prefix.resize(problem.clients.size(), std::vector<std::size_t>(K, 0));
  for (std::size_t c = 0; c < problem.clients.size(); ++c) {
    const auto& client = problem.clients[c];
    std::vector<std::pair<std::int64_t, std::size_t>> mine;  // (position, local row)
    for (std::size_t i = 0; i < client.size(); ++i) {
      if (!in_group(problem, config, client, i)) continue;
      const std::pair<double, double> key(group_key(problem.seed, client.rows()[i]),
                                          static_cast<double>(client.rows()[i]));
      const auto position = std::lower_bound(order.begin(), order.end(), key) - order.begin();
      if (position < largest) mine.emplace_back(position, i);
    }
    std::sort(mine.begin(), mine.end());
    for (const auto& [position, row] : mine) {
      selection.rows[c].push_back(row);
      for (std::size_t k = 0; k < K; ++k)
        if (position < selection.selected[k]) ++selection.prefix[c][k];
    }
  }
  return selection;
}

TestSelection::TestSelection(Federation& federation, std::int64_t sample)
    : federation_(federation) {
  const auto& problem = federation.problem();
  const auto& test = problem.test;
  const auto total = static_cast<std::int64_t>(problem.data.test.rows);
  const std::size_t width = static_cast<std::size_t>(problem.model->features());
  const bool whole = sample <= 0 || sample >= total;
  rows_ = whole ? total : sample;
  const bool network = test.chunk_rows > 0;  // every rank holds every test row (problem.hpp)
  if (whole && !network) {
    for (int k = 0; k < test.chunks; ++k) {
      const std::size_t begin = k * TestShard::kTestChunkRows;
      chunks_.push_back({test.features.data() + begin * width, test.labels.data() + begin,
                         std::min(TestShard::kTestChunkRows, test.rows - begin)});
    }
    return;
  }
  std::vector<char> chosen(static_cast<std::size_t>(total), 1);
  if (!whole) {
    std::vector<std::pair<double, std::int64_t>> keys;
    for (std::int64_t r = 0; r < total; ++r)
      keys.emplace_back(
          Stream(problem.seed, purpose::whatif_test_sample, static_cast<std::uint64_t>(r))
              .uniform(),
          r);
    std::nth_element(keys.begin(), keys.begin() + sample, keys.end());
    std::fill(chosen.begin(), chosen.end(), 0);
    for (std::int64_t j = 0; j < sample; ++j) chosen[keys[j].second] = 1;
  }
  // This rank's chunks of kTestChunkRows test rows: the linear model's shard, or for a network the
  // same split of the chunks over the ranks (rows decoded from its byte codes when coded).
  std::size_t first_chunk = static_cast<std::size_t>(test.first_chunk), chunks = test.chunks;
  if (network) {
    const std::size_t count = (test.all_rows + TestShard::kTestChunkRows - 1) /
                              TestShard::kTestChunkRows,
                      rank = static_cast<std::size_t>(world_rank()),
                      ranks = static_cast<std::size_t>(world_size());
    first_chunk = count * rank / ranks;
    chunks = count * (rank + 1) / ranks - first_chunk;
  }
  sample_x_.resize(chunks);
  sample_y_.resize(chunks);
  const std::size_t first_row = first_chunk * TestShard::kTestChunkRows;
  const std::size_t end_row =
      std::min(static_cast<std::size_t>(total), first_row + chunks * TestShard::kTestChunkRows);
  for (std::size_t r = first_row; r < end_row; ++r) {
    if (!chosen[r]) continue;
    auto& x = sample_x_[(r - first_row) / TestShard::kTestChunkRows];
    const std::size_t at = x.size();
    x.resize(at + width);
    if (!network) {
      std::copy_n(test.features.begin() + (r - test.first_row) * width, width, x.begin() + at);
    } else if (!test.all_codes.empty()) {
      test.coding->decode(test.all_codes.data() + r * width, 1, x.data() + at);
    } else {
      std::copy_n(test.all_features.begin() + r * width, width, x.begin() + at);
    }
    sample_y_[(r - first_row) / TestShard::kTestChunkRows].push_back(
        network ? test.all_labels[r] : test.labels[r - test.first_row]);
  }
  for (std::size_t k = 0; k < chunks; ++k)
    chunks_.push_back({sample_x_[k].data(), sample_y_[k].data(), sample_y_[k].size()});
}

std::pair<double, double> TestSelection::evaluate(const std::vector<double>& theta) {
  std::vector<double> results(chunks_.size() * 2);
  for (std::size_t k = 0; k < chunks_.size(); ++k) {
    const auto r =
        model().loss_sum(chunks_[k].x, chunks_[k].y, chunks_[k].rows, theta.data(), work_);
    results[2 * k] = r.loss_sum;
    results[2 * k + 1] = static_cast<double>(r.correct);
  }
  double totals[2];
  ordered_sum(results, static_cast<int>(chunks_.size()), 2, std::span<double>(totals, 2));
  return {totals[0] / static_cast<double>(rows_), totals[1] / static_cast<double>(rows_)};
}

void TestSelection::gradient(const std::vector<double>& theta, std::vector<double>& out) {
  const std::size_t p = model().parameters();
  std::vector<double> gradients(chunks_.size() * p);
  for (std::size_t k = 0; k < chunks_.size(); ++k)
    model().gradient_sum(chunks_[k].x, chunks_[k].y, chunks_[k].rows, theta.data(),
                         gradients.data() + k * p, work_);
  out.resize(p);
  ordered_sum(gradients, static_cast<int>(chunks_.size()), static_cast<int>(p), out);
  for (auto& value : out) value /= static_cast<double>(rows_);
}

void TestSelection::hessian(const std::vector<double>& theta, std::vector<double>& out) {
  const std::size_t p = model().parameters();
  if (const SoftmaxRegression* linear = model().linear()) {
    // Each chunk's Hessian is PSD: summed exactly in fixed point, all ranks at once
    // (docs/math.md §8.3).
    psd_matrix_sum(
        static_cast<int>(chunks_.size()), p, out,
        [&](int k, double* diagonal) {
          linear->hessian_diagonal_sum(chunks_[k].x, chunks_[k].rows, theta.data(), diagonal,
                                       work_);
          return true;
        },
        [&](int k, double* matrix) {
          linear->hessian_sum(chunks_[k].x, chunks_[k].rows, theta.data(), matrix);
          return true;
        });
    for (auto& value : out) value /= static_cast<double>(rows_);
    return;
  }
  // A network's (indefinite) Hessian from p exact products (small p only; collective).
  out.assign(p * p, 0.0);
  dense_from_products({p, [&](const double* v, double* w) { hessian_vector(theta, v, w); }, {}},
                      out.data());
}

void TestSelection::hessian_vector(const std::vector<double>& theta, const double* v, double* out) {
  const std::size_t p = model().parameters();
  const int C = model().classes();
  const SoftmaxRegression* linear = model().linear();
  if (linear && probabilities_.empty())
    for (const auto& chunk : chunks_) {
      probabilities_.emplace_back(chunk.rows * C);
      linear->probabilities(chunk.x, chunk.rows, theta.data(), probabilities_.back().data());
    }
  std::vector<double> products(chunks_.size() * p);
  for (std::size_t k = 0; k < chunks_.size(); ++k)
    if (linear)
      linear->hessian_vector_sum_at(chunks_[k].x, chunks_[k].rows, probabilities_[k].data(), v,
                                    products.data() + k * p, work_);
    else
      model().hessian_vector_sum(chunks_[k].x, chunks_[k].y, chunks_[k].rows, theta.data(), v,
                                 products.data() + k * p, work_);
  ordered_sum(products, static_cast<int>(chunks_.size()), static_cast<int>(p),
              std::span<double>(out, p));
  for (std::size_t j = 0; j < p; ++j) out[j] /= static_cast<double>(rows_);
}

}  // namespace fluence::whatif_detail
