#include "fluence/influence/estimators.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "fluence/core/error.hpp"
#include "fluence/core/vector_ops.hpp"

namespace fluence {

RemovalGradient parse_removal_gradient(const std::string& name) {
  if (name == "regularized") return RemovalGradient::regularized;
  if (name == "loss") return RemovalGradient::loss;
  throw InputError("unknown removal gradient '" + name + "' (allowed: regularized, loss)");
}

void group_gradient_sum(const Model& model, const double* x, const std::int32_t* y,
                        std::size_t rows, const double* theta, RemovalGradient kind,
                        std::vector<double>& out, Workspace& work) {
  out.resize(model.parameters());
  model.gradient_sum(x, y, rows, theta, out.data(), work);
  if (kind == RemovalGradient::loss) return;
  const double share = static_cast<double>(rows) * model.l2();
  for (std::size_t k = 0; k < out.size(); ++k) out[k] += share * theta[k];
}

SolveReport removal_parameter_change(IhvpSolver& solver, const std::vector<double>& group_gradient,
                                     std::int64_t n, std::vector<double>& delta) {
  delta.resize(group_gradient.size());
  const SolveReport report = solver.solve(group_gradient.data(), delta.data());
  const double scale = 1.0 / static_cast<double>(n);
  for (auto& value : delta) value *= scale;
  return report;
}

SolveReport perturbation_parameter_change(IhvpSolver& solver,
                                          const std::vector<double>& perturbed_gradient,
                                          const std::vector<double>& original_gradient,
                                          std::int64_t n, std::vector<double>& delta) {
  std::vector<double> difference(perturbed_gradient.size());
  for (std::size_t k = 0; k < difference.size(); ++k)
    difference[k] = perturbed_gradient[k] - original_gradient[k];
  delta.resize(difference.size());
  const SolveReport report = solver.solve(difference.data(), delta.data());
  const double scale = -1.0 / static_cast<double>(n);
  for (auto& value : delta) value *= scale;
  return report;
}

SolveReport solve_s_test(IhvpSolver& solver, const std::vector<double>& test_gradient,
                         std::vector<double>& s_test) {
  s_test.resize(test_gradient.size());
  return solver.solve(test_gradient.data(), s_test.data());
}

double removal_loss_change(const std::vector<double>& s_test,
                           const std::vector<double>& group_gradient, std::int64_t n) {
  return dot(s_test, group_gradient) / static_cast<double>(n);
}

double perturbation_loss_change(const std::vector<double>& s_test,
                                const std::vector<double>& perturbed_gradient,
                                const std::vector<double>& original_gradient, std::int64_t n) {
  return -(dot(s_test, perturbed_gradient) - dot(s_test, original_gradient)) /
         static_cast<double>(n);
}

double loss_change(const std::vector<double>& test_gradient, const std::vector<double>& delta) {
  return dot(test_gradient, delta);
}

namespace {
std::vector<double> mean_ranks(const std::vector<double>& values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double rank = 0.5 * static_cast<double>(i + j);
    for (std::size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
    i = j + 1;
  }
  return ranks;
}
}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2)
    throw RuntimeError("spearman: need two series of equal length >= 2");
  const auto ra = mean_ranks(a), rb = mean_ranks(b);
  const double n = static_cast<double>(a.size());
  const double mean_a = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mean_b = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double covariance = 0.0, var_a = 0.0, var_b = 0.0;
  for (std::size_t k = 0; k < ra.size(); ++k) {
    covariance += (ra[k] - mean_a) * (rb[k] - mean_b);
    var_a += (ra[k] - mean_a) * (ra[k] - mean_a);
    var_b += (rb[k] - mean_b) * (rb[k] - mean_b);
  }
  return covariance / std::sqrt(var_a * var_b);
}

double mean_absolute_error(const std::vector<double>& a, const std::vector<double>& b) {
  double total = 0.0;
  for (std::size_t k = 0; k < a.size(); ++k) total += std::abs(a[k] - b[k]);
  return a.empty() ? 0.0 : total / static_cast<double>(a.size());
}

}  // namespace fluence
