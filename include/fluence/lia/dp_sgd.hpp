#pragma once
// DP-SGD on a softmax last layer (seed 002 §III-B2, after Abadi et al. 2016): Poisson-sampled
// batches with rate q = B/n, each example's gradient clipped to norm Delta, Gaussian noise
// N(0, sigma^2 Delta^2) added to the sum, divided by the expected batch size B. For a linear layer
// the per-example gradient is the outer product (p_i - e_{y_i}) x_i^T, so its norm is
// ||p_i - e_{y_i}|| ||x_i|| and the clipped sum is one GEMM A^T X with A's rows scaled.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fluence/core/rng.hpp"

namespace fluence::lia {

struct DpSgdConfig {
  int epochs = 3;
  int batch_size = 10;
  double learning_rate = 0.1;
  double clip = 1.0;              // 0 = no clipping
  double noise_multiplier = 0.0;  // sigma; 0 = no noise
  double l2 = 0.0;                // weight decay (data-independent, no privacy cost)
};

/// Steps of one run on `rows` examples: epochs * ceil(rows / batch_size).
long dp_sgd_steps(std::size_t rows, const DpSgdConfig& config);
/// The Poisson sampling rate B / rows (at most 1).
double dp_sgd_rate(std::size_t rows, const DpSgdConfig& config);

struct DpSgdWorkspace {
  std::vector<double> batch, logits, gradient, row_norm, noise;
  std::vector<std::int32_t> labels;
};

/// Extra records of a DP-SGD run whose clipped gradients are given: the record-level canaries of an
/// audit (lia/record_canaries.hpp). Each step, after the real records' clipped gradients are
/// summed and before the noise, `add` adds the canaries sampled in that step; after the noise,
/// `observe` sees the step's noisy sum (what the step releases: theta_t is a data-independent
/// function of theta_t-1 and it).
class DpSgdCanaries {
 public:
  virtual ~DpSgdCanaries() = default;
  virtual void add(long step, double clip, double rate, double* gradient) = 0;
  virtual void observe(long step, const double* noisy_gradient) = 0;
};

/// Runs DP-SGD from `theta` (C x D, in/out) on the rows of `x` (rows x D) with labels `y`; every
/// draw (batch membership, noise) comes from `stream`; with `canaries`, their records too.
void dp_sgd(const double* x, const std::int32_t* y, std::size_t rows, int features, int classes,
            const DpSgdConfig& config, Stream& stream, double* theta, DpSgdWorkspace& work,
            DpSgdCanaries* canaries = nullptr);

}  // namespace fluence::lia
