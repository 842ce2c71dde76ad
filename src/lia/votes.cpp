#include "fluence/lia/votes.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace fluence::lia {

double vote_flip_probability(double epsilon, bool seed_accounting) {
  if (std::isinf(epsilon)) return 0.0;
  const double per_symbol = seed_accounting ? epsilon / 2.0 : epsilon;
  return 2.0 / (1.0 + std::exp(per_symbol));
}

double vote_epsilon(double flip_probability, bool seed_accounting) {
  if (flip_probability <= 0.0) return std::numeric_limits<double>::infinity();
  const double half = flip_probability / 2.0;
  const double per_symbol = std::log((1.0 - half) / half);
  return seed_accounting ? 2.0 * per_symbol : per_symbol;
}

int obfuscate_vote(int vote, double flip_probability, Stream& stream) {
  if (flip_probability <= 0.0) return vote;
  // Two draws always, so the stream's use does not depend on the outcome.
  const double coin = stream.uniform();
  const double side = stream.uniform();
  if (coin < flip_probability) return side < 0.5 ? 1 : -1;
  return vote;
}

double kmeans_threshold(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  if (n == 0) return 0.0;
  if (values.front() == values.back()) return values.front();
  // Prefix sums make each split's within-cluster sum of squares O(1):
  // SS = sum x^2 - (sum x)^2 / n on each side.
  std::vector<double> sum(n + 1, 0.0), square(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    sum[i + 1] = sum[i] + values[i];
    square[i + 1] = square[i] + values[i] * values[i];
  }
  double best = std::numeric_limits<double>::infinity();
  std::size_t best_split = 1;
  for (std::size_t k = 1; k < n; ++k) {
    if (values[k] == values[k - 1]) continue;  // equal values stay in one cluster
    const double left = square[k] - sum[k] * sum[k] / static_cast<double>(k);
    const double right_sum = sum[n] - sum[k];
    const double right =
        (square[n] - square[k]) - right_sum * right_sum / static_cast<double>(n - k);
    if (left + right < best) {
      best = left + right;
      best_split = k;
    }
  }
  const double low_mean = sum[best_split] / static_cast<double>(best_split);
  const double high_mean = (sum[n] - sum[best_split]) / static_cast<double>(n - best_split);
  return 0.5 * (low_mean + high_mean);
}

VoteKernel::VoteKernel(int features, int classes) : features_(features), classes_(classes) {}

namespace {

// Cross-entropy of one row of C logits against `label`: log sum exp - logit[label].
inline double row_loss(const double* logits, int classes, std::int32_t label) {
  double top = logits[0];
  for (int c = 1; c < classes; ++c) top = std::max(top, logits[c]);
  double total = 0.0;
  for (int c = 0; c < classes; ++c) total += std::exp(logits[c] - top);
  return std::log(total) + top - logits[label];
}

}  // namespace

void VoteKernel::loss_differences(const double* x, const std::int32_t* y,
                                  const std::vector<std::size_t>& row_begin, const double* base,
                                  const double* stacked, int contributors, double* differences,
                                  const std::uint8_t* row_subset, const std::uint8_t* pair_subset) {
  const int validators = static_cast<int>(row_begin.size()) - 1;
  const int C = classes_, D = features_;
  flops_ = 0.0;
  gemm_seconds_ = 0.0;
  std::fill(differences, differences + static_cast<std::size_t>(validators) * contributors, 0.0);
  for (int first = 0; first < validators; first += kValidatorBlock) {
    const int last = std::min(validators, first + kValidatorBlock);
    const std::size_t row0 = row_begin[first];
    const std::size_t rows = row_begin[last] - row0;
    if (rows == 0) continue;
    const double* block_x = x + row0 * D;
    // L(z, theta_base) once per row.
    base_logits_.resize(rows * C);
    base_loss_.resize(rows);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), C, D, 1.0, block_x,
                D, base, D, 0.0, base_logits_.data(), C);
    for (std::size_t r = 0; r < rows; ++r)
      base_loss_[r] = row_loss(&base_logits_[r * C], C, y[row0 + r]);
    for (int a0 = 0; a0 < contributors; a0 += kContributorChunk) {
      const int chunk = std::min(contributors - a0, kContributorChunk);
      const int width = chunk * C;
      logits_.resize(rows * static_cast<std::size_t>(width));
      const auto start = std::chrono::steady_clock::now();
      // rows x (chunk C) = X (rows x D) * W^T, W the chunk's stacked layers ((chunk C) x D).
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), width, D, 1.0,
                  block_x, D, stacked + static_cast<std::size_t>(a0) * C * D, D, 0.0,
                  logits_.data(), width);
      gemm_seconds_ +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      flops_ += 2.0 * static_cast<double>(rows) * width * D;
      for (int v = first; v < last; ++v) {
        double* out = differences + static_cast<std::size_t>(v) * contributors + a0;
        for (std::size_t r = row_begin[v]; r < row_begin[v + 1]; ++r) {
          const std::size_t local = r - row0;
          const double* row_logits = &logits_[local * width];
          const std::int32_t label = y[r];
          for (int a = 0; a < chunk; ++a) {
            if (pair_subset != nullptr &&
                row_subset[r] != pair_subset[static_cast<std::size_t>(v) * contributors + a0 + a])
              continue;
            out[a] += base_loss_[local] - row_loss(row_logits + a * C, C, label);
          }
        }
      }
    }
  }
}

}  // namespace fluence::lia
