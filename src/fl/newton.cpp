// Federated Newton polish: theta <- theta - t H^{-1} grad h, with H^{-1} g from PETSc CG on a
// matrix-free shell whose MatMult is the federated Hessian-vector product, Jacobi-preconditioned
// from the exact diagonal, or preconditioned by a caller's inverse of a nearby Hessian (a clean
// model's Cholesky factor when the objective changed a little: a few iterations instead of
// hundreds). Every rank runs the same sequential KSP on identical replicated vectors;
// the shell's reductions are the only communication. The solves are inexact Newton (Eisenstat and
// Walker's forcing term rtol = min(0.1, sqrt(|grad h|))): loose far from the optimum, tight near
// it, so the convergence stays superlinear while early steps cost a few CG iterations.
#include <fmt/format.h>
#include <petscksp.h>

#include <algorithm>
#include <cmath>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/vector_ops.hpp"
#include "fluence/fl/federation.hpp"

namespace fluence {

namespace {

struct ShellContext {
  Federation* federation;
  const std::vector<double>* theta;
  Federation::HessianCache cache;  // the probabilities at *theta, cleared when theta moves
  double damping = 0.0;            // the product is (H + damping I) v
};

PetscErrorCode federated_hessian_mult(Mat matrix, Vec x, Vec y) {
  PetscFunctionBeginUser;
  ShellContext* context = nullptr;
  PetscCall(MatShellGetContext(matrix, &context));
  const PetscScalar* in = nullptr;
  PetscScalar* out = nullptr;
  PetscCall(VecGetArrayRead(x, &in));
  PetscCall(VecGetArray(y, &out));
  context->federation->hessian_vector(*context->theta, in, out, &context->cache);
  if (context->damping > 0.0) {
    const auto p = context->theta->size();
    for (std::size_t k = 0; k < p; ++k) out[k] += context->damping * in[k];
  }
  PetscCall(VecRestoreArray(y, &out));
  PetscCall(VecRestoreArrayRead(x, &in));
  PetscFunctionReturn(0);
}

PetscErrorCode federated_hessian_diagonal(Mat matrix, Vec diagonal) {
  PetscFunctionBeginUser;
  ShellContext* context = nullptr;
  PetscCall(MatShellGetContext(matrix, &context));
  std::vector<double> values;
  context->federation->hessian_diagonal(*context->theta, values);
  PetscScalar* out = nullptr;
  PetscCall(VecGetArray(diagonal, &out));
  for (std::size_t k = 0; k < values.size(); ++k) out[k] = values[k] + context->damping;
  PetscCall(VecRestoreArray(diagonal, &out));
  PetscFunctionReturn(0);
}

PetscErrorCode apply_caller_preconditioner(PC pc, Vec r, Vec z) {
  PetscFunctionBeginUser;
  const NewtonPreconditioner* preconditioner = nullptr;
  PetscCall(PCShellGetContext(pc, &preconditioner));
  const PetscScalar* in = nullptr;
  PetscScalar* out = nullptr;
  PetscCall(VecGetArrayRead(r, &in));
  PetscCall(VecGetArray(z, &out));
  (*preconditioner)(in, out);
  PetscCall(VecRestoreArray(z, &out));
  PetscCall(VecRestoreArrayRead(r, &in));
  PetscFunctionReturn(0);
}

// Owns the PETSc objects of one polish run.
class NewtonSolver {
 public:
  NewtonSolver(Federation& federation, const std::vector<double>& theta,
               const NewtonPreconditioner& preconditioner)
      : context_{&federation, &theta, {}} {
    const auto p = static_cast<PetscInt>(federation.parameters());
    petsc_check(MatCreateShell(PETSC_COMM_SELF, p, p, p, p, &context_, &hessian_),
                "MatCreateShell");
    petsc_check(MatShellSetOperation(hessian_, MATOP_MULT,
                                     reinterpret_cast<void (*)(void)>(federated_hessian_mult)),
                "MatShellSetOperation");
    petsc_check(MatShellSetOperation(hessian_, MATOP_GET_DIAGONAL,
                                     reinterpret_cast<void (*)(void)>(federated_hessian_diagonal)),
                "MatShellSetOperation");
    petsc_check(VecCreateSeqWithArray(PETSC_COMM_SELF, 1, p, nullptr, &rhs_), "VecCreateSeq");
    petsc_check(VecCreateSeq(PETSC_COMM_SELF, p, &solution_), "VecCreateSeq");
    petsc_check(KSPCreate(PETSC_COMM_SELF, &ksp_), "KSPCreate");
    petsc_check(KSPSetOperators(ksp_, hessian_, hessian_), "KSPSetOperators");
    petsc_check(KSPSetType(ksp_, KSPCG), "KSPSetType");
    PC pc;
    petsc_check(KSPGetPC(ksp_, &pc), "KSPGetPC");
    if (preconditioner) {
      petsc_check(PCSetType(pc, PCSHELL), "PCSetType");
      petsc_check(PCShellSetContext(pc, const_cast<NewtonPreconditioner*>(&preconditioner)),
                  "PCShellSetContext");
      petsc_check(PCShellSetApply(pc, apply_caller_preconditioner), "PCShellSetApply");
    } else {
      // Jacobi from the exact diagonal where the model has one (the linear model); a network's
      // Hessian diagonal would cost p products, so its CG runs unpreconditioned.
      const bool jacobi = federation.problem().model->linear() != nullptr;
      petsc_check(PCSetType(pc, jacobi ? PCJACOBI : PCNONE), "PCSetType");
    }
    // The true residual decides convergence (the forcing term is about ||H d - g||).
    petsc_check(KSPSetNormType(ksp_, KSP_NORM_UNPRECONDITIONED), "KSPSetNormType");
    petsc_check(KSPSetTolerances(ksp_, 1e-12, 0.0, PETSC_DEFAULT, 10 * p + 100),
                "KSPSetTolerances");
    petsc_check(KSPSetOptionsPrefix(ksp_, "newton_"), "KSPSetOptionsPrefix");
    petsc_check(KSPSetFromOptions(ksp_), "KSPSetFromOptions");
    PetscBool user_rtol = PETSC_FALSE;
    petsc_check(PetscOptionsHasName(nullptr, "newton_", "-ksp_rtol", &user_rtol),
                "PetscOptionsHasName");
    forcing_ = !user_rtol;
  }
  ~NewtonSolver() {
    KSPDestroy(&ksp_);
    VecDestroy(&solution_);
    VecDestroy(&rhs_);
    MatDestroy(&hessian_);
  }

  void limit_iterations(int iterations) {
    petsc_check(KSPSetTolerances(ksp_, PETSC_DEFAULT, PETSC_DEFAULT, PETSC_DEFAULT, iterations),
                "KSPSetTolerances");
  }

  /// The product becomes (H + damping I) v.
  void set_damping(double damping) { context_.damping = damping; }
  /// Did the last solve stop at a direction of non-positive curvature (an indefinite H)?
  bool indefinite() const { return indefinite_; }

  /// direction = H^{-1} gradient to relative residual `rtol` (< 0: the forcing term); returns the
  /// CG iterations.
  int solve(std::vector<double>& gradient, std::vector<double>& direction, double rtol = -1.0) {
    if (rtol >= 0.0 || forcing_) {
      if (rtol < 0.0) rtol = std::max(1e-12, std::min(0.1, std::sqrt(norm2(gradient))));
      petsc_check(KSPSetTolerances(ksp_, rtol, 0.0, PETSC_DEFAULT, PETSC_DEFAULT),
                  "KSPSetTolerances");
    }
    // theta moved: the cached probabilities are stale, and the Jacobi preconditioner must be
    // rebuilt from the new diagonal.
    context_.cache.clear();
    // (MatAssemblyEnd advances the matrix state, which makes KSPSolve set the PC up again.)
    petsc_check(MatAssemblyBegin(hessian_, MAT_FINAL_ASSEMBLY), "MatAssemblyBegin");
    petsc_check(MatAssemblyEnd(hessian_, MAT_FINAL_ASSEMBLY), "MatAssemblyEnd");
    petsc_check(VecPlaceArray(rhs_, gradient.data()), "VecPlaceArray");
    petsc_check(KSPSolve(ksp_, rhs_, solution_), "KSPSolve");
    petsc_check(VecResetArray(rhs_), "VecResetArray");
    PetscInt iterations = 0;
    petsc_check(KSPGetIterationNumber(ksp_, &iterations), "KSPGetIterationNumber");
    KSPConvergedReason reason;
    petsc_check(KSPGetConvergedReason(ksp_, &reason), "KSPGetConvergedReason");
    indefinite_ = reason == KSP_DIVERGED_INDEFINITE_MAT || reason == KSP_DIVERGED_INDEFINITE_PC;
    const PetscScalar* values = nullptr;
    petsc_check(VecGetArrayRead(solution_, &values), "VecGetArrayRead");
    direction.assign(values, values + direction.size());
    petsc_check(VecRestoreArrayRead(solution_, &values), "VecRestoreArrayRead");
    return static_cast<int>(iterations);
  }

 private:
  ShellContext context_;
  Mat hessian_ = nullptr;
  Vec rhs_ = nullptr, solution_ = nullptr;
  KSP ksp_ = nullptr;
  bool forcing_ = true;  // false when -newton_ksp_rtol fixes the tolerance
  bool indefinite_ = false;
};

}  // namespace

int newton_direction(Federation& federation, const std::vector<double>& theta,
                     std::vector<double> gradient, std::vector<double>& direction, double rtol,
                     const NewtonPreconditioner& preconditioner, int max_iterations) {
  NewtonSolver solver(federation, theta, preconditioner);
  if (max_iterations > 0) solver.limit_iterations(max_iterations);
  direction.resize(gradient.size());
  return solver.solve(gradient, direction, rtol);
}

int newton_polish(Federation& federation, std::vector<double>& theta, double tolerance,
                  int max_steps, bool verbose, const NewtonPreconditioner& preconditioner) {
  const std::size_t p = federation.parameters();
  std::vector<double> gradient(p), direction(p), trial(p), trial_gradient(p);
  federation.gradient(theta, gradient);
  double value = federation.objective(theta);
  NewtonSolver solver(federation, theta, preconditioner);
  // Away from a strict local minimum a network's Hessian is indefinite: CG then meets negative
  // curvature, and the step is taken with (H + mu I) instead, mu raised tenfold until CG passes and
  // lowered tenfold after every full step (Levenberg-Marquardt; a local method). A convex
  // objective never needs it, and its steps are plain Newton steps.
  double damping = 0.0;
  int step = 0;
  for (; step < max_steps && norm2(gradient) > tolerance; ++step) {
    int iterations = solver.solve(gradient, direction);
    while (solver.indefinite()) {
      damping = std::max(1e-4, 10.0 * damping);
      if (damping > 1e12)
        throw RuntimeError("Newton: no damping makes the Hessian positive definite");
      solver.set_damping(damping);
      iterations += solver.solve(gradient, direction);
    }
    const double slope = -dot(gradient, direction);  // directional derivative along -direction
    // Backtracking (Armijo). Near the optimum h changes by less than its rounding error, so a step
    // that leaves h unchanged to rounding and shrinks the gradient is accepted as well.
    double t = 1.0;
    for (int halvings = 0;; ++halvings) {
      for (std::size_t k = 0; k < p; ++k) trial[k] = theta[k] - t * direction[k];
      const double trial_value = federation.objective(trial);
      federation.gradient(trial, trial_gradient);
      const bool sufficient = trial_value <= value + 1e-4 * t * slope;
      const bool rounding_level = std::abs(trial_value - value) <= 1e-13 * std::abs(value) &&
                                  norm2(trial_gradient) < norm2(gradient);
      if (sufficient || rounding_level || halvings == 40) {
        theta.swap(trial);
        gradient.swap(trial_gradient);
        value = trial_value;
        break;
      }
      t *= 0.5;
    }
    if (t == 1.0 && damping > 0.0) {
      damping = damping < 1e-8 ? 0.0 : 0.1 * damping;
      solver.set_damping(damping);
    }
    if (verbose)
      log::info(
          "  newton step {:2d}: objective {:.12e}  |grad| {:.3e}  step {:g}  cg iterations {}{}",
          step + 1, value, norm2(gradient), t, iterations,
          damping > 0.0 ? fmt::format("  damping {:.1e}", damping) : std::string());
  }
  if (norm2(gradient) > tolerance)
    log::warn("Newton polish stopped after {} steps with |grad h| = {:.3e} > tolerance {:.1e}",
              step, norm2(gradient), tolerance);
  return step;
}

}  // namespace fluence
