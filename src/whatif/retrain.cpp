// The what-if ground truth: exact retraining on perturbed records (docs/math.md §6).
#include "fluence/whatif/retrain.hpp"

#include <algorithm>
#include <cmath>

#include "fluence/core/error.hpp"
#include "fluence/core/newton.hpp"
#include "fluence/core/vector_ops.hpp"
#include "fluence/influence/hessian_operator.hpp"
#include "fluence/influence/spectrum.hpp"
#include "fluence/model/dense_kernels.hpp"

namespace fluence {

void PseudoRows::reset(int classes_, int width_) {
  classes = classes_;
  width = width_;
  x.clear();
  weight.clear();
  target.clear();
  flc.clear();
  record_end.clear();
}

void PseudoRows::add(const double* row, double w, const double* t, bool forward_corrected) {
  x.insert(x.end(), row, row + width);
  weight.push_back(w);
  target.insert(target.end(), t, t + classes);
  flc.push_back(forward_corrected ? 1 : 0);
}

namespace {

// Loss of one pseudo-row from its logits z (overwritten with the residual d loss / d z).
double row_loss_residual(double* z, const double* t, bool forward_corrected, const double* P,
                         int C) {
  const double top = *std::max_element(z, z + C);
  double total = 0.0;
  for (int k = 0; k < C; ++k) total += std::exp(z[k] - top);
  const double lse = top + std::log(total);
  double mass = 0.0;
  for (int k = 0; k < C; ++k) mass += t[k];
  double loss = 0.0;
  if (!forward_corrected) {
    // Cross-entropy with a soft target: sum_c t_c (lse - z_c); residual p (sum t) - t.
    for (int k = 0; k < C; ++k) {
      loss += t[k] * (lse - z[k]);
      z[k] = std::exp(z[k] - lse) * mass - t[k];
    }
    return loss;
  }
  // Forward correction: m = P^T p, loss -sum_c t_c log m_c; d/dz_k = p_k (sum t) -
  // p_k sum_c t_c P_kc / m_c (the softmax Jacobian applied to -sum_c t_c P_.c / m_c).
  double p[64], ratio[64];
  if (C > 64) throw RuntimeError("forward loss correction supports at most 64 classes");
  for (int k = 0; k < C; ++k) p[k] = std::exp(z[k] - lse);
  for (int c = 0; c < C; ++c) {
    double m = 0.0;
    for (int u = 0; u < C; ++u) m += P[u * C + c] * p[u];
    loss -= t[c] * std::log(m);
    ratio[c] = t[c] / m;
  }
  for (int k = 0; k < C; ++k) {
    double s = 0.0;
    for (int c = 0; c < C; ++c) s += P[k * C + c] * ratio[c];
    z[k] = p[k] * (mass - s);
  }
  return loss;
}

// The Hessian of one pseudo-row's loss in its logits, C x C (symmetric), at logits z:
//   cross-entropy: T (diag p - p p^T), T = sum t;
//   l_FLC:         H_kj = delta_kj p_k (T - s_k) + p_k p_j (A_kj - T),
//                  s_k = sum_c t_c P_kc / m_c,  A_kj = sum_c t_c P_kc P_jc / m_c^2,
// (differentiating the gradient p_k (T - s_k) once more; P = I gives the cross-entropy).
void row_hessian(const double* z, const double* t, bool forward_corrected, const double* P, int C,
                 double* H) {
  const double top = *std::max_element(z, z + C);
  double p[64], s[64], ratio[64], ratio2[64];
  double total = 0.0, mass = 0.0;
  for (int k = 0; k < C; ++k) total += p[k] = std::exp(z[k] - top);
  for (int k = 0; k < C; ++k) {
    p[k] /= total;
    mass += t[k];
  }
  if (!forward_corrected) {
    for (int k = 0; k < C; ++k)
      for (int j = 0; j < C; ++j) H[k * C + j] = mass * ((k == j ? p[k] : 0.0) - p[k] * p[j]);
    return;
  }
  for (int c = 0; c < C; ++c) {
    double m = 0.0;
    for (int u = 0; u < C; ++u) m += P[u * C + c] * p[u];
    ratio[c] = t[c] / m;
    ratio2[c] = t[c] / (m * m);
  }
  for (int k = 0; k < C; ++k) {
    s[k] = 0.0;
    for (int c = 0; c < C; ++c) s[k] += P[k * C + c] * ratio[c];
  }
  for (int k = 0; k < C; ++k)
    for (int j = 0; j < C; ++j) {
      double a = 0.0;
      for (int c = 0; c < C; ++c) a += P[k * C + c] * P[j * C + c] * ratio2[c];
      H[k * C + j] = (k == j ? p[k] * (mass - s[k]) : 0.0) + p[k] * p[j] * (a - mass);
    }
}

}  // namespace

double PseudoRowLoss::gradient(std::size_t first, std::size_t rows, int classes, const double* z,
                               double* delta, double loss) const {
  const int C = classes;
  double residual[64];
  if (C > 64) throw RuntimeError("forward loss correction supports at most 64 classes");
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t j = first_ + first + r;
    const double w = rows_.weight[j];
    std::copy_n(z + r * C, C, residual);
    loss += w * row_loss_residual(residual, rows_.target.data() + j * C, rows_.flc[j] != 0,
                                  rows_.distortion.data(), C);
    if (delta)
      for (int k = 0; k < C; ++k) delta[r * C + k] = w * residual[k];
  }
  return loss;
}

void PseudoRowLoss::hessian(std::size_t first, std::size_t rows, int classes, const double* z,
                            const double* r_z, double* delta, double* r_delta) const {
  const int C = classes;
  double H[64 * 64];  // no allocation per block of a Hessian product (gradient() checks C <= 64)
  gradient(first, rows, classes, z, delta, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t j = first_ + first + r;
    row_hessian(z + r * C, rows_.target.data() + j * C, rows_.flc[j] != 0, rows_.distortion.data(),
                C, H);
    const double w = rows_.weight[j];
    for (int i = 0; i < C; ++i) {
      double t = 0.0;
      for (int k = 0; k < C; ++k) t += H[i * C + k] * r_z[r * C + k];
      r_delta[r * C + i] = w * t;
    }
  }
}

double pseudo_rows_loss_gradient(const Model& model, const PseudoRows& rows_in, std::size_t first,
                                 std::size_t rows, const double* theta, double* gradient,
                                 std::vector<double>& scratch, Workspace& work) {
  if (rows == 0) return 0.0;
  const int C = rows_in.classes, D = rows_in.width;
  const double* x = rows_in.x.data() + first * D;
  const PseudoRowLoss loss(rows_in, first);
  if (!model.linear()) {
    scratch.resize(model.parameters());
    const double value = model.loss_gradient_sum(x, rows, loss, theta, scratch.data(), work);
    for (std::size_t k = 0; k < scratch.size(); ++k) gradient[k] += scratch[k];
    return value;
  }
  scratch.resize(rows * C);
  double* z = scratch.data();
  row_logits(x, rows, D, C, theta, z);
  const double value = loss.gradient(0, rows, C, z, z, 0.0);  // residuals in place of the logits
  add_outer(z, x, rows, D, C, gradient);                      // gradient += residual^T x
  return value;
}

PerturbedObjective::PerturbedObjective(Federation& federation,
                                       const std::vector<PseudoRows>& pseudo)
    : federation_(federation), pseudo_(pseudo), active_(pseudo.size(), 0) {}

double PerturbedObjective::value_and_gradient(const std::vector<double>& theta,
                                              std::vector<double>& gradient) {
  auto& problem = federation_.problem();
  const Model& model = *problem.model;
  const SoftmaxRegression* linear = model.linear();
  const std::size_t p = federation_.parameters();
  sums_.assign(p + 1, 0.0);
  const int C = model.classes();
  probabilities_.resize(problem.clients.size());
  probabilities_theta_ = theta;
  // One ordered reduction of [gradient sum, loss sum] over clients: rank-count independent.
  federation_.sum_over_clients(sums_, [&](std::size_t k, double* sum) {
    const auto& client = problem.clients[k];
    double loss = 0.0;
    if (linear) {
      // The probabilities at theta are kept: a Newton step from here needs them for its Hessian.
      probabilities_[k].resize(client.size() * C);
      loss = linear->gradient_sum(client.features(), client.labels().data(), client.size(),
                                  theta.data(), sum, work_, probabilities_[k].data());
    } else {
      loss = model.gradient_sum(client.features(), client.labels().data(), client.size(),
                                theta.data(), sum, work_);
    }
    const PseudoRows& rows = pseudo_[k];
    loss += pseudo_rows_loss_gradient(model, rows, 0, rows.rows_of_records(active_[k]),
                                      theta.data(), sum, scratch_, work_);
    sum[p] = loss;
  });
  const double inverse_n = 1.0 / static_cast<double>(federation_.train_rows());
  gradient.resize(p);
  double square = 0.0;
  for (std::size_t j = 0; j < p; ++j) {
    gradient[j] = sums_[j] * inverse_n + model.l2() * theta[j];
    square += theta[j] * theta[j];
  }
  return sums_[p] * inverse_n + 0.5 * model.l2() * square;
}

void PerturbedObjective::prepare_hessian(const std::vector<double>& theta) {
  auto& problem = federation_.problem();
  point_ = theta;
  const SoftmaxRegression* linear = problem.model->linear();
  if (!linear) return;  // a network's products run its R-operator at point_
  const int C = linear->classes();
  const bool cached = theta == probabilities_theta_;  // the last value_and_gradient's theta
  probabilities_.resize(problem.clients.size());
  blocks_.resize(problem.clients.size());
  for (std::size_t k = 0; k < problem.clients.size(); ++k) {
    const auto& client = problem.clients[k];
    if (!cached) {
      probabilities_[k].resize(client.size() * C);
      linear->probabilities(client.features(), client.size(), theta.data(),
                            probabilities_[k].data());
    }
    const PseudoRows& rows = pseudo_[k];
    const std::size_t m = rows.rows_of_records(active_[k]);
    blocks_[k].resize(m * C * C);
    if (m == 0) continue;
    scratch_.resize(m * C);
    row_logits(rows.x.data(), m, rows.width, C, theta.data(), scratch_.data());
    for (std::size_t r = 0; r < m; ++r) {
      double* H = blocks_[k].data() + r * C * C;
      row_hessian(scratch_.data() + r * C, rows.target.data() + r * C, rows.flc[r] != 0,
                  rows.distortion.data(), C, H);
      for (int j = 0; j < C * C; ++j) H[j] *= rows.weight[r];
    }
  }
}

void PerturbedObjective::hessian_vector(const double* v, double* out) {
  auto& problem = federation_.problem();
  const Model& model = *problem.model;
  const SoftmaxRegression* linear = model.linear();
  const int C = model.classes(), D = model.features();
  const std::size_t p = federation_.parameters();
  federation_.sum_over_clients(std::span<double>(out, p), [&](std::size_t k, double* sum) {
    const auto& client = problem.clients[k];
    const PseudoRows& rows = pseudo_[k];
    const std::size_t m = rows.rows_of_records(active_[k]);
    if (!linear) {
      model.hessian_vector_sum(client.features(), client.labels().data(), client.size(),
                               point_.data(), v, sum, work_);
      if (m == 0) return;
      product_.resize(p);
      model.loss_hessian_vector_sum(rows.x.data(), m, PseudoRowLoss(rows), point_.data(), v,
                                    product_.data(), work_);
      for (std::size_t j = 0; j < p; ++j) sum[j] += product_[j];
      return;
    }
    linear->hessian_vector_sum_at(client.features(), client.size(), probabilities_[k].data(), v,
                                  sum, work_);
    if (m == 0) return;
    scratch_.resize(2 * m * C);
    double* a = scratch_.data();  // directional logits V x_r
    double* b = a + m * C;        // H_r a_r
    row_logits(rows.x.data(), m, D, C, v, a);
    for (std::size_t r = 0; r < m; ++r) {
      const double* H = blocks_[k].data() + r * C * C;
      for (int i = 0; i < C; ++i) {
        double t = 0.0;
        for (int j = 0; j < C; ++j) t += H[i * C + j] * a[r * C + j];
        b[r * C + i] = t;
      }
    }
    add_outer(b, rows.x.data(), m, D, C, sum);
  });
  const double inverse_n = 1.0 / static_cast<double>(federation_.train_rows());
  for (std::size_t j = 0; j < p; ++j) out[j] = out[j] * inverse_n + model.l2() * v[j];
}

namespace {

// h_S for the one Newton's method: the Hessian products at the prepared point, CG preconditioned
// with the clean Hessian's solver.
class PerturbedNewton final : public NewtonObjective {
 public:
  PerturbedNewton(PerturbedObjective& objective, std::size_t parameters)
      : objective_(objective), parameters_(parameters) {}
  std::size_t parameters() const override { return parameters_; }
  double value_and_gradient(const std::vector<double>& theta,
                            std::vector<double>& gradient) override {
    return objective_.value_and_gradient(theta, gradient);
  }
  void set_point(const std::vector<double>& theta) override { objective_.prepare_hessian(theta); }
  void hessian_vector(const double* v, double* out) override { objective_.hessian_vector(v, out); }

 private:
  PerturbedObjective& objective_;
  std::size_t parameters_;
};

// h_S's Hessian as SLEPc's operator: products only (the eigensolver needs no diagonal).
class PerturbedHessian final : public HessianOperator {
 public:
  PerturbedHessian(PerturbedObjective& objective, std::size_t parameters)
      : objective_(objective), parameters_(parameters) {}
  std::size_t parameters() const override { return parameters_; }
  bool collective() const override { return true; }
  void apply(const double* v, double* out) override { objective_.hessian_vector(v, out); }
  void apply_sampled(const double*, double*, int, std::uint64_t, std::uint64_t) override {
    throw RuntimeError("whatif: the perturbed Hessian has no sampled products");
  }
  void diagonal(std::vector<double>&) override {
    throw RuntimeError("whatif: the perturbed Hessian has no diagonal");
  }
  void dense(std::vector<double>&) override {
    throw RuntimeError("whatif: the perturbed Hessian is not assembled");
  }

 private:
  PerturbedObjective& objective_;
  std::size_t parameters_;
};

}  // namespace

double perturbed_min_eigenvalue(PerturbedObjective& objective, const std::vector<double>& theta,
                                double tolerance) {
  objective.prepare_hessian(theta);
  PerturbedHessian hessian(objective, theta.size());
  return smallest_eigenvalue(hessian, tolerance);
}

RetrainReport newton_retrain(PerturbedObjective& objective, IhvpSolver& clean_hessian,
                             std::vector<double>& theta, double tolerance, int max_iterations,
                             InterruptibleNewton* stop) {
  PerturbedNewton newton(objective, theta.size());
  NewtonSettings settings;
  settings.tolerance = tolerance;
  settings.max_steps = max_iterations;
  settings.preconditioner = [&](const double* r, double* z) { clean_hessian.apply_inverse(r, z); };
  if (stop) stop->arm(settings, theta);
  const NewtonReport newton_report = minimize_newton(newton, theta, settings);
  RetrainReport report;
  report.interrupted = stop && stop->interrupted(newton_report, theta);
  report.iterations = newton_report.steps;
  report.hessian_products = newton_report.cg_iterations;  // one product per CG iteration
  report.gradient_norm = newton_report.gradient_norm;
  report.converged = newton_report.converged;
  return report;
}

}  // namespace fluence
