#include "fluence/lia/votes.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "fluence/core/lanes.hpp"
#include "fluence/model/dense_kernels.hpp"

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

double vote_quantile(std::vector<double>& values, double q) {
  const auto rank =
      std::min(values.size() - 1, static_cast<std::size_t>(static_cast<double>(values.size()) * q));
  const auto at = values.begin() + static_cast<std::ptrdiff_t>(rank);
  std::nth_element(values.begin(), at, values.end());
  return *at;
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

double mixture_threshold(std::vector<double> values) {
  const double midpoint = kmeans_threshold(values);
  const std::size_t n = values.size();
  if (n < 4) return midpoint;
  // Start: the 2-means split at the midpoint.
  double weight[2] = {0, 0}, mean[2] = {0, 0}, variance[2] = {0, 0};
  for (double v : values) {
    const int k = v >= midpoint ? 1 : 0;
    weight[k] += 1;
    mean[k] += v;
  }
  if (weight[0] == 0 || weight[1] == 0) return midpoint;
  for (int k = 0; k < 2; ++k) mean[k] /= weight[k];
  for (double v : values) {
    const int k = v >= midpoint ? 1 : 0;
    variance[k] += (v - mean[k]) * (v - mean[k]);
  }
  double spread = 0.0;
  for (double v : values)
    spread += (v - 0.5 * (mean[0] + mean[1])) * (v - 0.5 * (mean[0] + mean[1]));
  const double floor = 1e-6 * spread / static_cast<double>(n) + 1e-12;  // no collapse to a point
  for (int k = 0; k < 2; ++k) {
    variance[k] = std::max(variance[k] / weight[k], floor);
    weight[k] /= static_cast<double>(n);
  }
  std::vector<double> responsibility(n);
  double previous = -std::numeric_limits<double>::infinity();
  for (int iteration = 0; iteration < 500; ++iteration) {
    // E step (log-space densities; the 1/sqrt(2 pi) cancels).
    double log_likelihood = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      double log_p[2];
      for (int k = 0; k < 2; ++k)
        log_p[k] = std::log(weight[k]) - 0.5 * std::log(variance[k]) -
                   0.5 * (values[i] - mean[k]) * (values[i] - mean[k]) / variance[k];
      const double top = std::max(log_p[0], log_p[1]);
      const double total = top + std::log(std::exp(log_p[0] - top) + std::exp(log_p[1] - top));
      responsibility[i] = std::exp(log_p[1] - total);
      log_likelihood += total;
    }
    // M step.
    double r1 = 0.0, s1 = 0.0, s0 = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      r1 += responsibility[i];
      s1 += responsibility[i] * values[i];
      s0 += (1 - responsibility[i]) * values[i];
    }
    const double r0 = static_cast<double>(n) - r1;
    if (r0 < 1e-9 || r1 < 1e-9) return midpoint;
    mean[0] = s0 / r0;
    mean[1] = s1 / r1;
    double v0 = 0.0, v1 = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      v0 += (1 - responsibility[i]) * (values[i] - mean[0]) * (values[i] - mean[0]);
      v1 += responsibility[i] * (values[i] - mean[1]) * (values[i] - mean[1]);
    }
    variance[0] = std::max(v0 / r0, floor);
    variance[1] = std::max(v1 / r1, floor);
    weight[0] = r0 / static_cast<double>(n);
    weight[1] = r1 / static_cast<double>(n);
    if (log_likelihood - previous < 1e-10 * std::abs(log_likelihood)) break;
    previous = log_likelihood;
  }
  if (mean[0] > mean[1]) {
    std::swap(mean[0], mean[1]);
    std::swap(variance[0], variance[1]);
    std::swap(weight[0], weight[1]);
  }
  // Equal posteriors: log w0 - log s0 - (x - m0)^2 / (2 v0) = log w1 - log s1 - (x - m1)^2 / (2
  // v1), a quadratic a x^2 + b x + c = 0; the root between the means.
  const double a = 0.5 / variance[1] - 0.5 / variance[0];
  const double b = mean[0] / variance[0] - mean[1] / variance[1];
  const double c = 0.5 * mean[1] * mean[1] / variance[1] - 0.5 * mean[0] * mean[0] / variance[0] +
                   std::log(weight[0]) - 0.5 * std::log(variance[0]) - std::log(weight[1]) +
                   0.5 * std::log(variance[1]);
  auto between = [&](double x) { return x >= mean[0] && x <= mean[1]; };
  if (std::abs(a) < 1e-300) {
    const double x = -c / b;
    return between(x) ? x : midpoint;
  }
  const double discriminant = b * b - 4 * a * c;
  if (discriminant < 0) return midpoint;
  const double root = std::sqrt(discriminant);
  const double x1 = (-b - root) / (2 * a), x2 = (-b + root) / (2 * a);
  if (between(x1)) return x1;
  if (between(x2)) return x2;
  return midpoint;
}

VoteKernel::VoteKernel(int features, int classes, VoteLoss loss)
    : features_(features), classes_(classes), loss_(loss) {}

void exp_nonpositive(const double* x, double* out, std::size_t n) {
  lanes::exp_nonpositive(x, out, n);  // the lane kernel of core/lanes.hpp
}

namespace {

// Cross-entropy of `count` consecutive rows of C logits each: log sum exp - logit[label], the label
// of row a being labels[a * label_stride] (stride 0: one label for all). The max is shifted out per
// row and the exponentials of the whole block come from one vectorized pass; `shifted` is scratch
// of count * C values.
void block_losses(const double* logits, int count, int classes, const std::int32_t* labels,
                  std::size_t label_stride, double* shifted, double* losses) {
  const std::size_t width = static_cast<std::size_t>(count) * classes;
  for (int a = 0; a < count; ++a) {
    const double* l = logits + static_cast<std::size_t>(a) * classes;
    double top = l[0];
    for (int c = 1; c < classes; ++c) top = std::max(top, l[c]);
    double* z = shifted + static_cast<std::size_t>(a) * classes;
    for (int c = 0; c < classes; ++c) z[c] = l[c] - top;
    losses[a] = -z[labels[a * label_stride]];
  }
  exp_nonpositive(shifted, shifted, width);
  for (int a = 0; a < count; ++a) {
    const double* e = shifted + static_cast<std::size_t>(a) * classes;
    double total = 0.0;
    for (int c = 0; c < classes; ++c) total += e[c];
    losses[a] += std::log(total);
  }
}

// The 0-1 loss of `count` consecutive rows of C logits each (1 unless the first maximal logit is
// the label), labels as in block_losses.
void block_errors(const double* logits, int count, int classes, const std::int32_t* labels,
                  std::size_t label_stride, double* errors) {
  for (int a = 0; a < count; ++a) {
    const double* l = logits + static_cast<std::size_t>(a) * classes;
    errors[a] = std::max_element(l, l + classes) - l == labels[a * label_stride] ? 0.0 : 1.0;
  }
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
    row_logits(block_x, rows, D, C, base, base_logits_.data());
    shifted_.resize(std::max(rows, static_cast<std::size_t>(kContributorChunk)) * C);
    row_losses_.resize(kContributorChunk);
    if (loss_ == VoteLoss::zero_one)
      block_errors(base_logits_.data(), static_cast<int>(rows), C, y + row0, 1, base_loss_.data());
    else
      block_losses(base_logits_.data(), static_cast<int>(rows), C, y + row0, 1, shifted_.data(),
                   base_loss_.data());
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
          if (loss_ == VoteLoss::zero_one)
            block_errors(row_logits, chunk, C, &label, 0, row_losses_.data());
          else
            block_losses(row_logits, chunk, C, &label, 0, shifted_.data(), row_losses_.data());
          for (int a = 0; a < chunk; ++a) {
            if (pair_subset != nullptr &&
                row_subset[r] != pair_subset[static_cast<std::size_t>(v) * contributors + a0 + a])
              continue;
            out[a] += base_loss_[local] - row_losses_[a];
          }
        }
      }
    }
  }
}

}  // namespace fluence::lia
