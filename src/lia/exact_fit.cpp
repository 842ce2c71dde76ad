#include "exact_fit.hpp"

#include "fluence/core/error.hpp"
#include "fluence/core/newton.hpp"

namespace fluence::lia {

double regularized_objective(const SoftmaxRegression& model, const double* x, const std::int32_t* y,
                             std::size_t rows, const double* theta, Workspace& work) {
  const double loss = model.loss_sum(x, y, rows, theta, work).loss_sum;
  double norm2 = 0.0;
  for (std::size_t k = 0; k < model.parameters(); ++k) norm2 += theta[k] * theta[k];
  return loss / static_cast<double>(rows) + 0.5 * model.l2() * norm2;
}

namespace {

// (1/n) sum CE + l2/2 ||theta||^2 on one rank's rows for the one Newton's method: Jacobi from the
// exact Hessian diagonal, the probabilities cached at the point.
class RowsObjective final : public NewtonObjective {
 public:
  RowsObjective(const SoftmaxRegression& model, const double* x, const std::int32_t* y,
                std::size_t rows)
      : model_(model),
        x_(x),
        y_(y),
        rows_(rows),
        inverse_n_(1.0 / static_cast<double>(rows)),
        probabilities_(rows * model.classes()) {}
  std::size_t parameters() const override { return model_.parameters(); }
  double value_and_gradient(const std::vector<double>& theta,
                            std::vector<double>& gradient) override {
    gradient.resize(parameters());
    const double loss = model_.gradient_sum(x_, y_, rows_, theta.data(), gradient.data(), work_);
    double square = 0.0;
    for (std::size_t k = 0; k < parameters(); ++k) {
      gradient[k] = gradient[k] * inverse_n_ + model_.l2() * theta[k];
      square += theta[k] * theta[k];
    }
    return loss * inverse_n_ + 0.5 * model_.l2() * square;
  }
  void set_point(const std::vector<double>& theta) override {
    point_ = theta;
    model_.probabilities(x_, rows_, theta.data(), probabilities_.data());
  }
  void hessian_vector(const double* v, double* out) override {
    model_.hessian_vector_sum_at(x_, rows_, probabilities_.data(), v, out, work_);
    for (std::size_t k = 0; k < parameters(); ++k)
      out[k] = out[k] * inverse_n_ + model_.l2() * v[k];
  }
  bool has_hessian_diagonal() const override { return true; }
  bool hessian_diagonal(double* out) override {
    model_.hessian_diagonal_sum(x_, rows_, point_.data(), out, work_);
    for (std::size_t k = 0; k < parameters(); ++k) out[k] = out[k] * inverse_n_ + model_.l2();
    return true;
  }

 private:
  const SoftmaxRegression& model_;
  const double* x_;
  const std::int32_t* y_;
  std::size_t rows_;
  double inverse_n_;
  std::vector<double> probabilities_, point_;
  Workspace work_;
};

}  // namespace

ExactFitReport exact_fit(const SoftmaxRegression& model, const double* x, const std::int32_t* y,
                         std::size_t rows, double tolerance, std::vector<double>& theta) {
  RowsObjective objective(model, x, y, rows);
  NewtonSettings settings;
  settings.tolerance = tolerance;
  settings.max_steps = 100;
  const NewtonReport newton = minimize_newton(objective, theta, settings);
  if (!newton.converged)
    throw RuntimeError("exact fit: Newton did not reach the gradient tolerance in 100 steps");
  ExactFitReport report;
  report.newton_steps = newton.steps;
  report.hessian_products = static_cast<int>(newton.cg_iterations);
  report.gradient_norm = newton.gradient_norm;
  return report;
}

}  // namespace fluence::lia
