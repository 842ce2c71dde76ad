// Adam on a model's mini-batch gradients (model/adam.hpp).
#include "fluence/model/adam.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "fluence/core/error.hpp"

namespace fluence {

namespace {

// Adam's moment decay rates and denominator guard: Kingma & Ba 2015's defaults.
constexpr double kBeta1 = 0.9;
constexpr double kBeta2 = 0.999;
constexpr double kAdamEpsilon = 1e-8;

}  // namespace

void adam_fit(const Model& model, const double* x, const std::int32_t* y, std::size_t rows,
              const AdamSettings& settings, Stream& stream, double* theta, Workspace& work) {
  if (rows == 0) throw InputError("Adam: no training rows");
  if (settings.epochs < 0 || settings.batch_size < 1 || !(settings.learning_rate > 0.0) ||
      !(settings.l2 >= 0.0))
    throw InputError(fmt::format(
        "Adam: epochs {} (>= 0), batch size {} (>= 1), learning rate {} (> 0), l2 {} (>= 0)",
        settings.epochs, settings.batch_size, settings.learning_rate, settings.l2));
  const std::size_t D = static_cast<std::size_t>(model.features()), p = model.parameters();
  const std::size_t batch = std::min(static_cast<std::size_t>(settings.batch_size), rows);
  std::vector<double> gradient(p), first(p, 0.0), second(p, 0.0), xb(batch * D);
  std::vector<std::int32_t> yb(batch);
  std::vector<std::int64_t> order(rows);
  for (std::size_t r = 0; r < rows; ++r) order[r] = static_cast<std::int64_t>(r);
  long step = 0;
  for (int epoch = 0; epoch < settings.epochs; ++epoch) {
    stream.shuffle(std::span<std::int64_t>(order));
    for (std::size_t start = 0; start < rows; start += batch) {
      const std::size_t m = std::min(batch, rows - start);
      for (std::size_t i = 0; i < m; ++i) {
        const std::size_t r = static_cast<std::size_t>(order[start + i]);
        std::copy(x + r * D, x + (r + 1) * D, xb.data() + i * D);
        yb[i] = y[r];
      }
      model.gradient_sum(xb.data(), yb.data(), m, theta, gradient.data(), work);
      ++step;
      // Kingma & Ba's bias-corrected step, the corrections folded into rate and root2.
      const double rate =
          settings.learning_rate / (1.0 - std::pow(kBeta1, static_cast<double>(step)));
      const double root2 = std::sqrt(1.0 - std::pow(kBeta2, static_cast<double>(step)));
      const double inverse_m = 1.0 / static_cast<double>(m);
      for (std::size_t q = 0; q < p; ++q) {
        const double g = gradient[q] * inverse_m + settings.l2 * theta[q];
        first[q] = kBeta1 * first[q] + (1.0 - kBeta1) * g;
        second[q] = kBeta2 * second[q] + (1.0 - kBeta2) * g * g;
        theta[q] -= rate * first[q] / (std::sqrt(second[q]) / root2 + kAdamEpsilon);
      }
    }
  }
}

}  // namespace fluence
