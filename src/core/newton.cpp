#include "fluence/core/newton.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "fluence/core/error.hpp"
#include "fluence/core/krylov.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/signals.hpp"
#include "fluence/core/vector_ops.hpp"

namespace fluence {

namespace {

// The CG of a Newton run on (H + damping I), its damping changeable between solves.
class DampedSystem {
 public:
  DampedSystem(NewtonObjective& objective, const NewtonSettings& settings)
      : objective_(objective), damping_(settings.damping), solver_(make_operator(), [&] {
          CgSettings cg;
          cg.prefix = settings.prefix;
          cg.rtol = 1e-12;
          cg.max_iterations = settings.max_cg_iterations;
          cg.apply_preconditioner = settings.preconditioner;
          cg.preconditioner = settings.preconditioner            ? CgPreconditioner::custom
                              : objective.has_hessian_diagonal() ? CgPreconditioner::jacobi
                                                                 : CgPreconditioner::none;
          return cg;
        }()) {}

  double damping() const { return damping_; }
  void set_damping(double damping) {
    damping_ = damping;
    solver_.operator_changed();
  }
  /// direction = (H + damping I)^-1 gradient at the objective's current point.
  CgOutcome solve(const std::vector<double>& gradient, std::vector<double>& direction,
                  double rtol) {
    solver_.operator_changed();
    solver_.set_rtol(rtol);
    return solver_.solve(gradient.data(), direction.data());
  }

 private:
  LinearOperator make_operator() {
    LinearOperator op;
    op.size = objective_.parameters();
    op.apply = [this](const double* v, double* out) {
      objective_.hessian_vector(v, out);
      if (damping_ > 0.0)
        for (std::size_t k = 0; k < objective_.parameters(); ++k) out[k] += damping_ * v[k];
    };
    if (objective_.has_hessian_diagonal())
      op.diagonal = [this](double* out) {
        objective_.hessian_diagonal(out);
        for (std::size_t k = 0; k < objective_.parameters(); ++k) out[k] += damping_;
      };
    return op;
  }

  NewtonObjective& objective_;
  double damping_;
  ConjugateGradient solver_;
};

}  // namespace

NewtonReport minimize_newton(NewtonObjective& objective, std::vector<double>& theta,
                             const NewtonSettings& settings) {
  const std::size_t p = objective.parameters();
  std::vector<double> gradient(p), direction(p), trial(p), trial_gradient(p);
  NewtonReport report;
  report.value = objective.value_and_gradient(theta, gradient);
  report.gradient_norm = norm2(gradient);
  DampedSystem system(objective, settings);
  if (settings.resume) {
    report.steps = settings.resume->steps;
    report.cg_iterations = settings.resume->cg_iterations;
    if (settings.resume->damping != system.damping()) system.set_damping(settings.resume->damping);
  }
  for (; report.steps < settings.max_steps && report.gradient_norm > settings.tolerance;) {
    if (settings.stop_poll && settings.stop_poll()) {
      report.interrupted = true;
      break;
    }
    objective.set_point(theta);
    const double forcing =
        std::max(settings.forcing_floor,
                 std::min(0.1, std::pow(report.gradient_norm, settings.forcing_power)));
    CgOutcome outcome = system.solve(gradient, direction, forcing);
    int iterations = outcome.iterations;
    while (outcome.indefinite) {  // negative curvature: Levenberg-Marquardt damping
      const double raised = std::max(1e-4, 10.0 * system.damping());
      if (raised > 1e12)
        throw RuntimeError("Newton: no damping makes the Hessian positive definite");
      system.set_damping(raised);
      outcome = system.solve(gradient, direction, forcing);
      iterations += outcome.iterations;
    }
    report.cg_iterations += iterations;
    const double slope = -dot(gradient, direction);  // the derivative along -direction
    double t = 1.0;
    for (int halvings = 0;; ++halvings) {
      for (std::size_t k = 0; k < p; ++k) trial[k] = theta[k] - t * direction[k];
      const double trial_value = objective.value_and_gradient(trial, trial_gradient);
      const bool sufficient = trial_value <= report.value + 1e-4 * t * slope;
      const bool rounding_level =
          std::abs(trial_value - report.value) <= 1e-13 * std::abs(report.value) &&
          norm2(trial_gradient) < report.gradient_norm;
      if (sufficient || rounding_level || halvings == 40) {
        theta.swap(trial);
        gradient.swap(trial_gradient);
        report.value = trial_value;
        break;
      }
      t *= 0.5;
    }
    report.gradient_norm = norm2(gradient);
    ++report.steps;
    if (t == 1.0 && system.damping() > settings.damping) {
      const double lowered = 0.1 * system.damping();
      system.set_damping(lowered < 1e-8 ? settings.damping : std::max(settings.damping, lowered));
    }
    if (settings.verbose)
      log::info(
          "  newton step {:2d}: objective {:.12e}  |grad| {:.3e}  step {:g}  cg iterations {}{}",
          report.steps, report.value, report.gradient_norm, t, iterations,
          system.damping() > 0.0 ? fmt::format("  damping {:.1e}", system.damping())
                                 : std::string());
    if (settings.after_step) settings.after_step(report.steps, theta);
  }
  report.converged = report.gradient_norm <= settings.tolerance;
  report.progress = {report.steps, report.cg_iterations, system.damping()};
  return report;
}

int newton_direction(NewtonObjective& objective, const std::vector<double>& theta,
                     const std::vector<double>& gradient, std::vector<double>& direction,
                     double rtol, const NewtonSettings& settings) {
  objective.set_point(theta);
  DampedSystem system(objective, settings);
  direction.resize(gradient.size());
  return system.solve(gradient, direction, rtol).iterations;
}

void InterruptibleNewton::arm(NewtonSettings& settings, std::vector<double>& theta) {
  if (!partial_) return;
  settings.stop_poll = stop_inside_unit_anywhere;
  std::vector<double> scalars;
  const std::vector<double>* from = partial_->resume(key_, &scalars);
  if (!from) return;
  if (scalars.size() != 3 || from->size() != theta.size())
    throw InputError(fmt::format("checkpoint: the interrupted {} does not fit this run", name_));
  theta = *from;
  progress_ = {static_cast<int>(scalars[0]), static_cast<long>(scalars[1]), scalars[2]};
  settings.resume = &progress_;
  log::info("resuming {} after {} Newton steps (from the checkpoint)", name_, progress_.steps);
}

bool InterruptibleNewton::interrupted(const NewtonReport& report,
                                      const std::vector<double>& theta) {
  stopped_ = report.interrupted;
  if (!stopped_) return false;
  const NewtonProgress& at = report.progress;
  partial_->interrupted(
      key_, {static_cast<double>(at.steps), static_cast<double>(at.cg_iterations), at.damping},
      theta, name_, fmt::format("{} Newton steps", at.steps));
  return true;
}

}  // namespace fluence
