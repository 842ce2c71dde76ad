#include "fluence/lia/dp_sgd.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "fluence/model/dense_kernels.hpp"

namespace fluence::lia {

long dp_sgd_steps(std::size_t rows, const DpSgdConfig& config) {
  const long per_epoch = static_cast<long>((rows + config.batch_size - 1) /
                                           static_cast<std::size_t>(config.batch_size));
  return per_epoch * config.epochs;
}

double dp_sgd_rate(std::size_t rows, const DpSgdConfig& config) {
  return std::min(1.0, static_cast<double>(config.batch_size) / static_cast<double>(rows));
}

void dp_sgd(const double* x, const std::int32_t* y, std::size_t rows, int features, int classes,
            const DpSgdConfig& config, Stream& stream, double* theta, DpSgdWorkspace& work,
            DpSgdCanaries* canaries) {
  const int C = classes, D = features;
  const std::size_t p = static_cast<std::size_t>(C) * D;
  const double q = dp_sgd_rate(rows, config);
  const long steps = dp_sgd_steps(rows, config);
  // Normalized by the expected batch size qn (= B), not the drawn one: the drawn size depends on
  // the data's membership and would leak it (Abadi et al.; Opacus' convention).
  const double scale = 1.0 / (q * static_cast<double>(rows));
  work.row_norm.resize(rows);
  for (std::size_t r = 0; r < rows; ++r) work.row_norm[r] = cblas_dnrm2(D, x + r * D, 1);
  work.batch.resize(rows * D);
  work.labels.resize(rows);
  work.logits.resize(rows * C);
  work.gradient.resize(p);
  work.noise.resize(p);
  std::vector<std::size_t> members;
  members.reserve(rows);
  for (long step = 0; step < steps; ++step) {
    members.clear();
    for (std::size_t r = 0; r < rows; ++r)
      if (stream.uniform() < q) members.push_back(r);
    const int m = static_cast<int>(members.size());
    std::fill(work.gradient.begin(), work.gradient.end(), 0.0);
    if (m > 0) {
      for (int i = 0; i < m; ++i) {
        std::copy_n(x + members[i] * D, D, &work.batch[static_cast<std::size_t>(i) * D]);
        work.labels[i] = y[members[i]];
      }
      row_logits(work.batch.data(), m, D, C, theta, work.logits.data());
      for (int i = 0; i < m; ++i) {
        double* a = &work.logits[static_cast<std::size_t>(i) * C];
        double top = a[0];
        for (int c = 1; c < C; ++c) top = std::max(top, a[c]);
        double total = 0.0;
        for (int c = 0; c < C; ++c) total += (a[c] = std::exp(a[c] - top));
        double norm2 = 0.0;
        for (int c = 0; c < C; ++c) {
          a[c] = a[c] / total - (c == work.labels[i] ? 1.0 : 0.0);
          norm2 += a[c] * a[c];
        }
        // ||(p - e_y) x^T||_F = ||p - e_y|| ||x||.
        const double norm = std::sqrt(norm2) * work.row_norm[members[i]];
        if (config.clip > 0.0 && norm > config.clip) {
          const double factor = config.clip / norm;
          for (int c = 0; c < C; ++c) a[c] *= factor;
        }
      }
      // Sum of clipped gradients: A^T X_batch (C x D), onto the zeroed gradient.
      add_outer(work.logits.data(), work.batch.data(), m, D, C, work.gradient.data());
    }
    if (canaries) canaries->add(step, config.clip, q, work.gradient.data());
    if (config.noise_multiplier > 0.0) {
      const double sd = config.noise_multiplier * config.clip;
      stream.fill_normal(work.noise);
      for (std::size_t k = 0; k < p; ++k) work.gradient[k] += sd * work.noise[k];
    }
    if (canaries) canaries->observe(step, work.gradient.data());
    const double shrink = 1.0 - config.learning_rate * config.l2;
    for (std::size_t k = 0; k < p; ++k)
      theta[k] = shrink * theta[k] - config.learning_rate * scale * work.gradient[k];
  }
}

}  // namespace fluence::lia
