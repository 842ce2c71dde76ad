#include "fluence/model/model.hpp"

namespace fluence {

void Workspace::reserve(std::size_t rows, int classes, int features) {
  const std::size_t need = rows * static_cast<std::size_t>(classes);
  if (logits.size() < need) logits.resize(need);
  if (scratch.size() < need) scratch.resize(need);
  if (batch.size() < rows * static_cast<std::size_t>(features))
    batch.resize(rows * static_cast<std::size_t>(features));
}

void full_batch_step(const double* gradient, double inverse_n, double l2, double learning_rate,
                     const StepTerms& terms, std::size_t p, double* theta) {
  if (terms.empty()) {
    for (std::size_t k = 0; k < p; ++k)
      theta[k] -= learning_rate * (gradient[k] * inverse_n + l2 * theta[k]);
    return;
  }
  for (std::size_t k = 0; k < p; ++k) {
    double g = gradient[k] * inverse_n + l2 * theta[k];
    if (terms.center) g += terms.proximal * (theta[k] - terms.center[k]);
    if (terms.correction) g += terms.correction[k];
    theta[k] -= learning_rate * g;
  }
}

}  // namespace fluence
