#pragma once
// A HessianOperator over pooled rows, written for the tests without the federation: the IHVP
// solvers and estimators are checked against it and against dense references.
#include <algorithm>
#include <cmath>
#include <vector>

#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/influence/hessian_operator.hpp"
#include "fluence/influence/purposes.hpp"
#include "support/dense_reference.hpp"

namespace fluence::testing {

/// ||x - reference|| / ||reference|| (Euclidean).
inline double relative_error(const std::vector<double>& x, const std::vector<double>& reference) {
  double error = 0.0, size = 0.0;
  for (std::size_t k = 0; k < x.size(); ++k) {
    error += (x[k] - reference[k]) * (x[k] - reference[k]);
    size += reference[k] * reference[k];
  }
  return std::sqrt(error / size);
}

class PooledHessian final : public HessianOperator {
 public:
  PooledHessian(const SoftmaxRegression& model, const std::vector<double>& x, std::size_t rows,
                const std::vector<double>& theta)
      : model_(model), x_(x), rows_(rows), theta_(theta) {}

  std::size_t parameters() const override { return model_.parameters(); }
  bool collective() const override { return false; }

  void apply(const double* v, double* out) override {
    model_.hessian_vector_sum(x_.data(), rows_, theta_.data(), v, out, work_);
    finish(v, out, 1.0 / static_cast<double>(rows_));
  }
  void apply_sampled(const double* v, double* out, int batch, std::uint64_t key0,
                     std::uint64_t key1) override {
    Stream stream(99, purpose::lissa_sample, key0, key1);
    const int D = model_.features();
    batch_.resize(static_cast<std::size_t>(batch) * D);
    for (int b = 0; b < batch; ++b)
      std::copy_n(x_.data() + stream.below(rows_) * D, D, batch_.data() + b * D);
    model_.hessian_vector_sum(batch_.data(), batch, theta_.data(), v, out, work_);
    finish(v, out, 1.0 / batch);
  }
  void diagonal(std::vector<double>& out) override {
    std::vector<double> full;
    dense(full);
    out.resize(parameters());
    for (std::size_t k = 0; k < parameters(); ++k) out[k] = full[k * parameters() + k];
  }
  // Written from the definitions (docs/math.md §3.1), row by row: G = sum_r S_r / sum_r tr S_r,
  // A = (1/n) sum_r tr(S_r) x_r x_r^T with S_r = diag(p_r) - p_r p_r^T.
  KroneckerFactors kronecker_factors() override {
    const int C = model_.classes(), D = model_.features();
    std::vector<double> p(rows_ * C);
    model_.probabilities(x_.data(), rows_, theta_.data(), p.data());
    KroneckerFactors f;
    f.classes = C;
    f.features = D;
    f.class_factor.assign(static_cast<std::size_t>(C) * C, 0.0);
    f.feature_factor.assign(static_cast<std::size_t>(D) * D, 0.0);
    double trace = 0.0;
    for (std::size_t r = 0; r < rows_; ++r) {
      const double* pr = p.data() + r * C;
      const double* xr = x_.data() + r * D;
      double t = 0.0;
      for (int c = 0; c < C; ++c) {
        t += pr[c] * (1.0 - pr[c]);
        for (int e = 0; e < C; ++e)
          f.class_factor[c * C + e] += (c == e ? pr[c] : 0.0) - pr[c] * pr[e];
      }
      trace += t;
      for (int i = 0; i < D; ++i)
        for (int j = 0; j < D; ++j) f.feature_factor[i * D + j] += t * xr[i] * xr[j] / rows_;
    }
    for (auto& g : f.class_factor) g /= trace;
    f.shift = model_.l2() + damping_;
    return f;
  }
  void dense(std::vector<double>& out) override {
    out = dense_objective_hessian(model_, x_.data(), rows_, theta_.data());
    for (std::size_t k = 0; k < parameters(); ++k) out[k * parameters() + k] += damping_;
  }

 private:
  void finish(const double* v, double* out, double scale) const {
    for (std::size_t k = 0; k < parameters(); ++k)
      out[k] = out[k] * scale + (model_.l2() + damping_) * v[k];
  }
  const SoftmaxRegression& model_;
  const std::vector<double>& x_;
  std::size_t rows_;
  const std::vector<double>& theta_;
  std::vector<double> batch_;
  Workspace work_;
};

/// Rows with features ~ N(0, 1) (last column a constant bias) and labels from a planted softmax.
struct PooledData {
  int features, classes;
  std::vector<double> x;
  std::vector<std::int32_t> y;
  std::size_t rows() const { return y.size(); }
};

inline PooledData planted_data(std::size_t rows, int features, int classes, std::uint64_t seed) {
  PooledData data{features, classes, {}, {}};
  Stream stream(seed, purpose::synthetic_rows);
  std::vector<double> planted(static_cast<std::size_t>(classes) * features);
  for (auto& w : planted) w = stream.normal();
  data.x.resize(rows * features);
  std::vector<double> logits(classes);
  for (std::size_t r = 0; r < rows; ++r) {
    double* xr = data.x.data() + r * features;
    for (int j = 0; j + 1 < features; ++j) xr[j] = stream.normal();
    xr[features - 1] = 1.0;
    double total = 0.0;
    for (int c = 0; c < classes; ++c) {
      logits[c] = 0.0;
      for (int j = 0; j < features; ++j) logits[c] += planted[c * features + j] * xr[j];
      total += (logits[c] = std::exp(logits[c]));
    }
    double u = stream.uniform() * total;
    int label = 0;
    while (label + 1 < classes && (u -= logits[label]) > 0.0) ++label;
    data.y.push_back(label);
  }
  return data;
}

}  // namespace fluence::testing
