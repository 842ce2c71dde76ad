// Relevance-weighted votes: M0's predicted-class histograms and the weights (docs/math.md §9,
// "Relevance-weighted votes").
#include "fluence/lia/relevance.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace fluence::lia {

std::vector<double> predicted_class_histogram(const double* x, std::size_t rows, int D, int C,
                                              const double* theta) {
  std::vector<double> counts(C, 0.0);
  if (rows == 0) return counts;
  std::vector<double> logits(rows * C);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), C, D, 1.0, x, D,
              theta, D, 0.0, logits.data(), C);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* row = &logits[r * C];
    counts[std::max_element(row, row + C) - row] += 1.0;
  }
  return counts;
}

double laplace(double scale, Stream& stream) {
  // -log1p(-u) is a unit exponential for u uniform on [0, 1), and finite there.
  const double e1 = -std::log1p(-stream.uniform());
  const double e2 = -std::log1p(-stream.uniform());
  return scale * (e1 - e2);
}

void add_laplace_noise(std::span<double> counts, double epsilon, Stream& stream) {
  if (std::isinf(epsilon)) return;
  for (auto& count : counts) count += laplace(1.0 / epsilon, stream);
}

std::vector<double> relevance_shares(std::span<const double> histograms, int C) {
  std::vector<double> shares(histograms.size());
  for (std::size_t h = 0; h < histograms.size(); h += C) {
    double total = 0.0;
    for (int c = 0; c < C; ++c) total += shares[h + c] = std::max(histograms[h + c], 0.0);
    for (int c = 0; c < C; ++c) shares[h + c] = total > 0.0 ? shares[h + c] / total : 1.0 / C;
  }
  return shares;
}

double relevance_weight(const double* validator_shares, const double* contributor_shares, int C,
                        double power) {
  // A plain loop, not a GEMM: C is small, and the same order of additions for every pair keeps the
  // weights independent of how the validators are spread over the ranks.
  double overlap = 0.0;
  for (int c = 0; c < C; ++c) overlap += validator_shares[c] * contributor_shares[c];
  return std::pow(std::min(overlap, 1.0), power);
}

std::int64_t quantized_weight(double weight) {
  return std::llround(weight / kWeightQuantum);
}

}  // namespace fluence::lia
