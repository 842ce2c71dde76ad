// The federated objective h as a NewtonObjective (core/newton.hpp): the polish, the retrains of
// influence and FLDP, and FLDP's refinement run the one Newton's method on it. The Hessian
// products are the federation's (collective; the linear model caches its probabilities at the
// point, so every product after the first makes one pass over the data less), Jacobi
// preconditioned from the exact diagonal where the model computes one (the linear model), or by a
// caller's inverse of a nearby Hessian (a clean model's Cholesky factor when the objective changed
// a little: a few iterations instead of hundreds).
#include "fluence/fl/newton.hpp"

#include "fluence/core/log.hpp"

namespace fluence {

FederatedObjective::FederatedObjective(Federation& federation) : federation_(federation) {}

std::size_t FederatedObjective::parameters() const {
  return federation_.parameters();
}

double FederatedObjective::value_and_gradient(const std::vector<double>& theta,
                                              std::vector<double>& gradient) {
  federation_.gradient(theta, gradient);
  return federation_.objective(theta);
}

void FederatedObjective::set_point(const std::vector<double>& theta) {
  point_ = theta;
  cache_.clear();
}

void FederatedObjective::hessian_vector(const double* v, double* out) {
  federation_.hessian_vector(point_, v, out, &cache_);
}

bool FederatedObjective::has_hessian_diagonal() const {
  return federation_.problem().model->linear() != nullptr;
}

bool FederatedObjective::hessian_diagonal(double* out) {
  federation_.hessian_diagonal(point_, diagonal_);
  std::copy(diagonal_.begin(), diagonal_.end(), out);
  return true;
}

int newton_direction(Federation& federation, const std::vector<double>& theta,
                     std::vector<double> gradient, std::vector<double>& direction, double rtol,
                     const NewtonPreconditioner& preconditioner, int max_iterations) {
  FederatedObjective objective(federation);
  NewtonSettings settings;
  settings.preconditioner = preconditioner;
  settings.max_cg_iterations = max_iterations;
  return newton_direction(objective, theta, gradient, direction, rtol, settings);
}

int newton_polish(Federation& federation, std::vector<double>& theta, double tolerance,
                  int max_steps, bool verbose, const NewtonPreconditioner& preconditioner,
                  InterruptibleNewton* stop) {
  FederatedObjective objective(federation);
  NewtonSettings settings;
  settings.tolerance = tolerance;
  settings.max_steps = max_steps;
  settings.verbose = verbose;
  settings.preconditioner = preconditioner;
  if (stop) stop->arm(settings, theta);
  const NewtonReport report = minimize_newton(objective, theta, settings);
  if (stop && stop->interrupted(report, theta)) return report.steps;
  if (!report.converged)
    log::warn("Newton polish stopped after {} steps with |grad h| = {:.3e} > tolerance {:.1e}",
              report.steps, report.gradient_norm, tolerance);
  return report.steps;
}

}  // namespace fluence
