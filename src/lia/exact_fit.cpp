#include "exact_fit.hpp"

#include <cmath>

#include "fluence/core/error.hpp"
#include "fluence/core/vector_ops.hpp"

namespace fluence::lia {

double regularized_objective(const SoftmaxRegression& model, const double* x, const std::int32_t* y,
                             std::size_t rows, const double* theta, Workspace& work) {
  const double loss = model.loss_sum(x, y, rows, theta, work).loss_sum;
  double norm2 = 0.0;
  for (std::size_t k = 0; k < model.parameters(); ++k) norm2 += theta[k] * theta[k];
  return loss / static_cast<double>(rows) + 0.5 * model.l2() * norm2;
}

ExactFitReport exact_fit(const SoftmaxRegression& model, const double* x, const std::int32_t* y,
                         std::size_t rows, double tolerance, std::vector<double>& theta) {
  const std::size_t p = model.parameters();
  const double inv_n = 1.0 / static_cast<double>(rows);
  Workspace work;
  std::vector<double> gradient(p), probabilities(rows * model.classes()), step(p), residual(p),
      direction(p), product(p), trial(p);
  ExactFitReport report;
  auto gradient_at = [&](const std::vector<double>& at) {
    const double loss =
        model.gradient_sum(x, y, rows, at.data(), gradient.data(), work, probabilities.data());
    double norm2 = 0.0;
    for (std::size_t k = 0; k < p; ++k) {
      gradient[k] = gradient[k] * inv_n + model.l2() * at[k];
      norm2 += at[k] * at[k];
    }
    return loss * inv_n + 0.5 * model.l2() * norm2;
  };
  auto hessian = [&](const std::vector<double>& v, std::vector<double>& out) {
    model.hessian_vector_sum_at(x, rows, probabilities.data(), v.data(), out.data(), work);
    for (std::size_t k = 0; k < p; ++k) out[k] = out[k] * inv_n + model.l2() * v[k];
    ++report.hessian_products;
  };
  double objective = gradient_at(theta);
  for (int iteration = 0; iteration < 100; ++iteration) {
    report.gradient_norm = std::sqrt(dot(gradient, gradient));
    if (report.gradient_norm <= tolerance) return report;
    // CG on H s = -g with Eisenstat-Walker forcing min(0.1, sqrt(|g|)).
    const double forcing = std::min(0.1, std::sqrt(report.gradient_norm));
    std::fill(step.begin(), step.end(), 0.0);
    for (std::size_t k = 0; k < p; ++k) residual[k] = direction[k] = -gradient[k];
    double rho = dot(residual, residual);
    for (int cg = 0; cg < 500 && std::sqrt(rho) > forcing * report.gradient_norm; ++cg) {
      hessian(direction, product);
      const double alpha = rho / dot(direction, product);
      for (std::size_t k = 0; k < p; ++k) {
        step[k] += alpha * direction[k];
        residual[k] -= alpha * product[k];
      }
      const double next = dot(residual, residual);
      for (std::size_t k = 0; k < p; ++k) direction[k] = residual[k] + next / rho * direction[k];
      rho = next;
    }
    // Armijo backtracking (the full step is taken near the optimum). Near the optimum the
    // decrease (about |g|^2 / |H|) falls below the objective's rounding, so a step within a few
    // ulps of the current value passes too, as in the other Newton solvers; without it the
    // search would halve the step away and stall just above a tight tolerance.
    const double slope = dot(gradient, step);
    const double rounding = 1e-14 * (1.0 + std::abs(objective));
    double t = 1.0;
    double value = 0.0;
    for (int halving = 0; halving < 40; ++halving, t *= 0.5) {
      for (std::size_t k = 0; k < p; ++k) trial[k] = theta[k] + t * step[k];
      value = regularized_objective(model, x, y, rows, trial.data(), work);
      if (value <= objective + 1e-4 * t * slope + rounding) break;
    }
    theta.swap(trial);
    objective = gradient_at(theta);
    ++report.newton_steps;
  }
  report.gradient_norm = std::sqrt(dot(gradient, gradient));
  if (report.gradient_norm > tolerance)
    throw RuntimeError("exact fit: Newton did not reach the gradient tolerance in 100 steps");
  return report;
}

}  // namespace fluence::lia
