#pragma once
// The one Newton's method of the code: inexact Newton steps by CG (core/krylov.hpp) on exact
// Hessian-vector products, with a backtracking line search. Every minimizer runs on it through an
// adapter of its objective: the federated polish and retrains (fl/newton.cpp), FLDP's refinement,
// what-if's perturbed retrains and LIA's exact fits.
//
// Each step solves (H + mu I) d = grad h to the relative residual min(0.1, sqrt(|grad h|))
// (Eisenstat and Walker's forcing term: loose far from the optimum, tight near it, so the
// convergence stays superlinear; |grad h| itself gives quadratic convergence, Dembo, Eisenstat
// and Steihaug 1982) and takes theta - t d with t halved from 1 until Armijo's
// sufficient decrease holds, or until h changes by less than its rounding and the gradient
// shrinks (near the optimum the decrease falls below the rounding of h). mu is the settings'
// damping, raised tenfold from 1e-4 whenever CG meets non-positive curvature (a network's
// indefinite Hessian: Levenberg-Marquardt) and lowered tenfold back towards the settings' value
// after every full step. A convex objective never raises it.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "fluence/core/resume.hpp"

#include "fluence/core/solver_options.hpp"

namespace fluence {

/// A twice-differentiable objective for Newton's method. Collective operations stay collective:
/// every rank calls each function with the same arguments.
class NewtonObjective {
 public:
  virtual ~NewtonObjective() = default;
  virtual std::size_t parameters() const = 0;
  /// h(theta), with grad h(theta) written to `gradient`.
  virtual double value_and_gradient(const std::vector<double>& theta,
                                    std::vector<double>& gradient) = 0;
  /// Makes theta the point the Hessian products are taken at (where caches are filled).
  virtual void set_point(const std::vector<double>& theta) = 0;
  /// out = Hessian of h at the point times v.
  virtual void hessian_vector(const double* v, double* out) = 0;
  /// diag of that Hessian, for Jacobi preconditioning; false when it is not cheap to compute.
  virtual bool hessian_diagonal(double* /*out*/) { return false; }
  virtual bool has_hessian_diagonal() const { return false; }
};

/// Where a Newton run stands between steps: with its theta, what it needs to continue bitwise
/// (docs/operations.md "Stops inside a unit").
struct NewtonProgress {
  int steps = 0;
  long cg_iterations = 0;
  double damping = 0.0;  // the Levenberg-Marquardt damping reached
};

struct NewtonSettings {
  double tolerance = 1e-10;  // stop when ||grad h|| <= tolerance
  int max_steps = 50;
  bool verbose = false;                // a line per step on the rank-0 stream
  std::string prefix = kNewtonPrefix;  // the CG's PETSc options prefix
  /// z = M^-1 r, a caller's preconditioner (an inverse of a nearby Hessian); without it Jacobi
  /// where the objective has a diagonal, else none.
  std::function<void(const double* r, double* z)> preconditioner;
  double damping = 0.0;       // always added to the Hessian's diagonal
  int max_cg_iterations = 0;  // per step (0 = 10 p + 100)
  /// Each step's CG stops at the relative residual max(floor, min(0.1, |grad h|^power)): power
  /// 1/2 (superlinear) by default, 1 for quadratic convergence when every step counts.
  double forcing_power = 0.5, forcing_floor = 1e-12;
  /// Called after every step with the step number (from 1) and the new theta.
  std::function<void(int, const std::vector<double>&)> after_step;
  /// Polled (collectively: every rank alike) before every step: true ends the run there with
  /// NewtonReport::interrupted; theta and NewtonReport::progress then continue it.
  std::function<bool()> stop_poll;
  /// Continue an interrupted run from theta with this progress (null: a fresh start).
  const NewtonProgress* resume = nullptr;
};

struct NewtonReport {
  int steps = 0;
  long cg_iterations = 0;
  double value = 0.0, gradient_norm = 0.0;
  bool converged = false;
  bool interrupted = false;  // stop_poll ended it
  NewtonProgress progress;   // where it stopped
};

/// Minimizes from theta (in/out).
NewtonReport minimize_newton(NewtonObjective& objective, std::vector<double>& theta,
                             const NewtonSettings& settings);

/// A Newton run as the unit `key` of a sweep's PartialUnit that a stop may end between steps
/// (docs/operations.md "Stops inside a unit"): its state is the iterate, its scalars the
/// NewtonProgress. With a null `partial` the run is not interruptible and runs to its end.
class InterruptibleNewton {
 public:
  InterruptibleNewton(PartialUnit* partial, std::vector<double> key, std::string name)
      : partial_(partial), key_(std::move(key)), name_(std::move(name)) {}
  /// Sets `settings`' collective stop poll and, when `partial` holds this unit, its progress to
  /// resume from and `theta` to the saved iterate (InputError when they do not fit). Logs
  /// "resuming NAME after k Newton steps".
  void arm(NewtonSettings& settings, std::vector<double>& theta);
  /// After the run: true when the poll ended it; `partial` then holds theta and the progress
  /// (the caller writes the checkpoint and returns).
  bool interrupted(const NewtonReport& report, const std::vector<double>& theta);
  bool stopped() const { return stopped_; }

 private:
  PartialUnit* partial_;
  std::vector<double> key_;
  std::string name_;
  NewtonProgress progress_;
  bool stopped_ = false;
};

/// One Newton direction: direction = (H + settings.damping I)^-1 gradient at theta by the same CG,
/// to relative residual `rtol`, or CG's iterate after settings.max_cg_iterations (a descent
/// direction all the same). Returns the CG iterations.
int newton_direction(NewtonObjective& objective, const std::vector<double>& theta,
                     const std::vector<double>& gradient, std::vector<double>& direction,
                     double rtol, const NewtonSettings& settings);

}  // namespace fluence
