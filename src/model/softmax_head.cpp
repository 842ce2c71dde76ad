#include "fluence/model/softmax_head.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace fluence {

double softmax_rows(double* logits, std::size_t rows, int classes, const std::int32_t* labels,
                    double loss) {
  for (std::size_t r = 0; r < rows; ++r) {
    double* z = logits + r * classes;
    const double top = *std::max_element(z, z + classes);
    double total = 0.0;
    for (int c = 0; c < classes; ++c) total += std::exp(z[c] - top);
    const double log_total = std::log(total);
    if (labels) loss += top + log_total - z[labels[r]];
    for (int c = 0; c < classes; ++c) z[c] = std::exp(z[c] - top - log_total);
  }
  return loss;
}

double log_loss_rows(const double* logits, std::size_t rows, int classes,
                     const std::int32_t* labels, double loss) {
  for (std::size_t r = 0; r < rows; ++r) {
    const double* z = logits + r * classes;
    const double top = *std::max_element(z, z + classes);
    double total = 0.0;
    for (int c = 0; c < classes; ++c) total += std::exp(z[c] - top);
    loss += top + std::log(total) - z[labels[r]];
  }
  return loss;
}

void softmax_probabilities(double* logits, std::size_t rows, int classes) {
  if (classes == 2) {
    // Two classes: p1 = 1 / (1 + e^(z0 - z1)), one exponential and no logarithm.
    for (std::size_t r = 0; r < rows; ++r) {
      double* z = logits + 2 * r;
      const double p1 = 1.0 / (1.0 + std::exp(z[0] - z[1]));
      z[0] = 1.0 - p1;
      z[1] = p1;
    }
    return;
  }
  for (std::size_t r = 0; r < rows; ++r) {
    double* z = logits + r * classes;
    const double top = *std::max_element(z, z + classes);
    double total = 0.0;
    for (int c = 0; c < classes; ++c) total += (z[c] = std::exp(z[c] - top));
    const double inverse = 1.0 / total;
    for (int c = 0; c < classes; ++c) z[c] *= inverse;
  }
}

template <class T>
long correct_rows(const T* logits, std::size_t rows, int classes, const std::int32_t* labels) {
  long correct = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    const T* z = logits + r * classes;
    if (std::max_element(z, z + classes) - z == labels[r]) ++correct;
  }
  return correct;
}

template <class T>
double cross_entropy_delta(const T* logits, std::size_t rows, int classes,
                           const std::int32_t* labels, double scale, T* delta, double loss) {
  for (std::size_t r = 0; r < rows; ++r) {
    const T* z = logits + r * classes;
    T* d = delta + r * classes;
    const double top = static_cast<double>(*std::max_element(z, z + classes));
    double total = 0.0;
    for (int c = 0; c < classes; ++c) total += std::exp(static_cast<double>(z[c]) - top);
    const double log_total = std::log(total);
    const int label = labels[r];
    loss += top + log_total - static_cast<double>(z[label]);
    for (int c = 0; c < classes; ++c) {
      const double p = std::exp(static_cast<double>(z[c]) - top - log_total);
      d[c] = static_cast<T>(scale * (c == label ? p - 1.0 : p));
    }
  }
  return loss;
}

void softmax_jacobian_rows(const double* p, const double* r, std::size_t rows, int classes,
                           double scale, double* out) {
  for (std::size_t i = 0; i < rows; ++i) {
    const double* pi = p + i * classes;
    const double* ri = r + i * classes;
    double* oi = out + i * classes;
    double mean = 0.0;
    for (int c = 0; c < classes; ++c) mean += pi[c] * ri[c];
    for (int c = 0; c < classes; ++c) oi[c] = scale * (pi[c] * (ri[c] - mean));
  }
}

double TargetCrossEntropy::gradient(std::size_t first, std::size_t rows, int classes,
                                    const double* z, double* delta, double loss) const {
  for (std::size_t r = 0; r < rows; ++r) {
    const double* zr = z + r * classes;
    const double* t = targets_ + (first + r) * classes;
    const double top = *std::max_element(zr, zr + classes);
    double total = 0.0, weight = 0.0, dot = 0.0;
    for (int c = 0; c < classes; ++c) {
      total += std::exp(zr[c] - top);
      weight += t[c];
      dot += t[c] * (zr[c] - top);
    }
    const double log_total = std::log(total);
    // w lse(z) - t.z with the shift by top taken out of both terms (w = sum t).
    loss += weight * log_total - dot;
    if (!delta) continue;
    double* d = delta + r * classes;
    for (int c = 0; c < classes; ++c) d[c] = weight * std::exp(zr[c] - top - log_total) - t[c];
  }
  return loss;
}

void TargetCrossEntropy::hessian(std::size_t first, std::size_t rows, int classes, const double* z,
                                 const double* r_z, double* delta, double* r_delta) const {
  // The label head's softmax and Jacobian, scaled by each row's weight w = sum t.
  std::copy(z, z + rows * classes, delta);
  softmax_rows(delta, rows, classes, nullptr);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* t = targets_ + (first + r) * classes;
    double* d = delta + r * classes;
    const double weight = std::accumulate(t, t + classes, 0.0);
    softmax_jacobian_rows(d, r_z + r * classes, 1, classes, weight, r_delta + r * classes);
    for (int c = 0; c < classes; ++c) d[c] = weight * d[c] - t[c];
  }
}

double LabelCrossEntropy::gradient(std::size_t first, std::size_t rows, int classes,
                                   const double* z, double* delta, double loss) const {
  if (!delta) return log_loss_rows(z, rows, classes, labels_ + first, loss);
  return cross_entropy_delta(z, rows, classes, labels_ + first, 1.0, delta, loss);
}

void LabelCrossEntropy::hessian(std::size_t first, std::size_t rows, int classes, const double* z,
                                const double* r_z, double* delta, double* r_delta) const {
  std::copy(z, z + rows * classes, delta);
  softmax_rows(delta, rows, classes, nullptr);
  softmax_jacobian_rows(delta, r_z, rows, classes, 1.0, r_delta);
  for (std::size_t r = 0; r < rows; ++r) delta[r * classes + labels_[first + r]] -= 1.0;
}

template long correct_rows(const float*, std::size_t, int, const std::int32_t*);
template long correct_rows(const double*, std::size_t, int, const std::int32_t*);
template double cross_entropy_delta(const float*, std::size_t, int, const std::int32_t*, double,
                                    float*, double);
template double cross_entropy_delta(const double*, std::size_t, int, const std::int32_t*, double,
                                    double*, double);

}  // namespace fluence
