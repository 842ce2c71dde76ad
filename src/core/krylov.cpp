#include "fluence/core/krylov.hpp"

// KSP's internals (its work vectors, the convergence test's tolerances): an interrupted KSPCG
// solve is saved and continued from them (ConjugateGradient::set_stop_poll).
#include <petsc/private/kspimpl.h>

#include <stdexcept>
#include <utility>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/core/solver_options.hpp"

namespace fluence {

namespace {

PetscErrorCode shell_mult(Mat matrix, Vec x, Vec y) {
  PetscFunctionBeginUser;
  const LinearOperator* op = nullptr;
  PetscCall(MatShellGetContext(matrix, &op));
  const PetscScalar* in = nullptr;
  PetscScalar* out = nullptr;
  PetscCall(VecGetArrayRead(x, &in));
  PetscCall(VecGetArray(y, &out));
  const int failed = guarded_callback([&] { op->apply(in, out); });
  PetscCall(VecRestoreArray(y, &out));
  PetscCall(VecRestoreArrayRead(x, &in));
  PetscFunctionReturn(failed);
}

PetscErrorCode shell_diagonal(Mat matrix, Vec diagonal) {
  PetscFunctionBeginUser;
  const LinearOperator* op = nullptr;
  PetscCall(MatShellGetContext(matrix, &op));
  PetscScalar* out = nullptr;
  PetscCall(VecGetArray(diagonal, &out));
  const int failed = guarded_callback([&] { op->diagonal(out); });
  PetscCall(VecRestoreArray(diagonal, &out));
  PetscFunctionReturn(failed);
}

PetscErrorCode apply_custom_preconditioner(PC pc, Vec r, Vec z) {
  PetscFunctionBeginUser;
  const CgSettings* settings = nullptr;
  PetscCall(PCShellGetContext(pc, &settings));
  const PetscScalar* in = nullptr;
  PetscScalar* out = nullptr;
  PetscCall(VecGetArrayRead(r, &in));
  PetscCall(VecGetArray(z, &out));
  const int failed = guarded_callback([&] { settings->apply_preconditioner(in, out); });
  PetscCall(VecRestoreArray(z, &out));
  PetscCall(VecRestoreArrayRead(r, &in));
  PetscFunctionReturn(failed);
}

// An interrupted solve's state: its iteration count, KSPCG's scalars beta (of the previous
// iteration: the next step's betaold) and dpi (the sign test's dpiold), the convergence test's
// ttol and rnorm0, then x, r and p.
enum StateSlot : std::size_t { kIterations, kBetaOld, kDpi, kTtol, kRnorm0, kScalars };

// PetscSign as KSPCG uses it.
int sign_of(double value) {
  return value >= 0.0 ? (value == 0.0 ? 0 : 1) : -1;
}

}  // namespace

// The convergence test of a pollable solve: KSPConvergedDefault, then the poll. KSPCG computes
// beta = z'r right after the test; the state to continue needs the previous beta too, so the
// stop falls one iteration after the poll: at the poll the next beta is computed as KSPCG will
// (the same operations on the same data), and at the next test x, r, p are saved with it.
struct ConjugateGradient::StopTest {
  void* default_context = nullptr;
  std::function<bool()> poll;
  bool stop_next = false, interrupted = false;
  double next_beta = 0.0;
  Vec scratch = nullptr;
  Vec x = nullptr, r = nullptr, w = nullptr, p = nullptr;  // null: KSPCG's own vectors
  std::vector<double> state;

  ~StopTest() {
    KSPConvergedDefaultDestroy(default_context);
    VecDestroy(&scratch);
  }

  PetscErrorCode test(KSP ksp, PetscInt n, PetscReal rnorm, KSPConvergedReason* reason) {
    PetscFunctionBeginUser;
    PetscCall(KSPConvergedDefault(ksp, n, rnorm, reason, default_context));
    if (n == 0 || *reason != KSP_CONVERGED_ITERATING || !poll) PetscFunctionReturn(0);
    // KSPSolve_CG: R = work[0], Z = W = work[1], P = work[2] (no single reduction).
    Vec X = x ? x : ksp->vec_sol, R = r ? r : ksp->work[0], W = w ? w : ksp->work[1],
        P = p ? p : ksp->work[2];
    if (stop_next) {
      PetscInt length = 0;
      PetscCall(VecGetSize(X, &length));
      const auto p_size = static_cast<std::size_t>(length);
      state.assign(kScalars + 3 * p_size, 0.0);
      PetscScalar dpi = 0.0;
      PetscCall(VecTDot(P, W, &dpi));  // W = A p: KSPCG's dpi of this iteration
      state[kIterations] = static_cast<double>(n);
      state[kBetaOld] = next_beta;
      state[kDpi] = dpi;
      state[kTtol] = ksp->ttol;
      state[kRnorm0] = ksp->rnorm0;
      Vec vectors[3] = {X, R, P};
      for (std::size_t k = 0; k < 3; ++k) {
        const PetscScalar* values = nullptr;
        PetscCall(VecGetArrayRead(vectors[k], &values));
        std::copy_n(values, p_size,
                    state.begin() + static_cast<std::ptrdiff_t>(kScalars + k * p_size));
        PetscCall(VecRestoreArrayRead(vectors[k], &values));
      }
      interrupted = true;
      stop_next = false;
      *reason = KSP_DIVERGED_BREAKDOWN;  // any reason ends KSPSolve_CG; solve() reads `interrupted`
      PetscFunctionReturn(0);
    }
    if (n >= ksp->max_it) PetscFunctionReturn(0);  // the last iteration: the solve ends anyway
    bool stop = false;
    if (guarded_callback([&] { stop = poll(); }) != 0) PetscFunctionReturn(PETSC_ERR_LIB);
    if (!stop) PetscFunctionReturn(0);
    if (!scratch) PetscCall(VecDuplicate(R, &scratch));
    PetscCall(KSP_PCApply(ksp, R, scratch));
    PetscScalar beta = 0.0;
    PetscCall(VecTDot(scratch, R, &beta));
    next_beta = beta;
    stop_next = true;
    PetscFunctionReturn(0);
  }
};

namespace {

PetscErrorCode stop_test(KSP ksp, PetscInt n, PetscReal rnorm, KSPConvergedReason* reason,
                         void* context) {
  return static_cast<ConjugateGradient::StopTest*>(context)->test(ksp, n, rnorm, reason);
}

}  // namespace

OperatorShell::OperatorShell(LinearOperator op) : op_(std::move(op)) {
  const auto p = static_cast<PetscInt>(op_.size);
  petsc_check(MatCreateShell(PETSC_COMM_SELF, p, p, p, p, &op_, &matrix_), "MatCreateShell");
  petsc_check(
      MatShellSetOperation(matrix_, MATOP_MULT, reinterpret_cast<void (*)(void)>(&shell_mult)),
      "MatShellSetOperation(MULT)");
  if (op_.diagonal)
    petsc_check(MatShellSetOperation(matrix_, MATOP_GET_DIAGONAL,
                                     reinterpret_cast<void (*)(void)>(&shell_diagonal)),
                "MatShellSetOperation(GET_DIAGONAL)");
  petsc_check(MatSetOption(matrix_, MAT_SYMMETRIC, PETSC_TRUE), "MatSetOption(SYMMETRIC)");
  petsc_check(MatSetOption(matrix_, MAT_SYMMETRY_ETERNAL, PETSC_TRUE), "MatSetOption");
}

OperatorShell::~OperatorShell() {
  MatDestroy(&matrix_);
}

void OperatorShell::changed() {
  // MatAssemblyEnd advances the matrix state, which makes KSPSolve set the PC up again.
  petsc_check(MatAssemblyBegin(matrix_, MAT_FINAL_ASSEMBLY), "MatAssemblyBegin");
  petsc_check(MatAssemblyEnd(matrix_, MAT_FINAL_ASSEMBLY), "MatAssemblyEnd");
}

ConjugateGradient::ConjugateGradient(LinearOperator op, CgSettings settings)
    : shell_(std::move(op)), settings_(std::move(settings)) {
  const auto p = static_cast<PetscInt>(shell_.op().size);
  if (settings_.preconditioner == CgPreconditioner::jacobi && !shell_.op().diagonal)
    throw std::logic_error("Jacobi preconditioning needs the operator's diagonal");
  petsc_check(VecCreateSeqWithArray(PETSC_COMM_SELF, 1, p, nullptr, &rhs_), "VecCreateSeq");
  petsc_check(VecCreateSeqWithArray(PETSC_COMM_SELF, 1, p, nullptr, &solution_), "VecCreateSeq");
  petsc_check(KSPCreate(PETSC_COMM_SELF, &ksp_), "KSPCreate");
  petsc_check(KSPSetOperators(ksp_, shell_.matrix(), shell_.matrix()), "KSPSetOperators");
  petsc_check(KSPSetType(ksp_, KSPCG), "KSPSetType");
  PC pc;
  petsc_check(KSPGetPC(ksp_, &pc), "KSPGetPC");
  switch (settings_.preconditioner) {
    case CgPreconditioner::none:
      petsc_check(PCSetType(pc, PCNONE), "PCSetType");
      break;
    case CgPreconditioner::jacobi:
      petsc_check(PCSetType(pc, PCJACOBI), "PCSetType");
      break;
    case CgPreconditioner::custom:
      use_custom_shell(pc);
      break;
  }
  // -<prefix>pc_type NAME must parse: NAME is registered as a shell (PETSc keeps one registry).
  if (!settings_.custom_name.empty())
    petsc_check(register_named_pc_type(settings_.custom_name.c_str()), "PCRegister");
  // Converge on the true residual ||b - A x|| / ||b||, the quantity callers report.
  petsc_check(KSPSetNormType(ksp_, KSP_NORM_UNPRECONDITIONED), "KSPSetNormType");
  const PetscInt most = settings_.max_iterations > 0 ? settings_.max_iterations : 10 * p + 100;
  petsc_check(KSPSetTolerances(ksp_, settings_.rtol, 0.0, PETSC_DEFAULT, most), "KSPSetTolerances");
  petsc_check(KSPSetInitialGuessNonzero(ksp_, settings_.initial_guess ? PETSC_TRUE : PETSC_FALSE),
              "KSPSetInitialGuessNonzero");
  petsc_check(KSPSetOptionsPrefix(ksp_, settings_.prefix.c_str()), "KSPSetOptionsPrefix");
  petsc_check(KSPSetFromOptions(ksp_), "KSPSetFromOptions");
  PetscBool named = PETSC_FALSE;
  if (!settings_.custom_name.empty())
    petsc_check(PetscObjectTypeCompare(reinterpret_cast<PetscObject>(pc),
                                       settings_.custom_name.c_str(), &named),
                "PetscObjectTypeCompare");
  if (named == PETSC_TRUE) {  // chosen by -<prefix>pc_type NAME
    if (!settings_.apply_preconditioner)
      throw std::logic_error("-" + settings_.prefix + "pc_type " + settings_.custom_name +
                             " without its application");
    use_custom_shell(pc);
  }
  PetscBool user_rtol = PETSC_FALSE;
  petsc_check(PetscOptionsHasName(nullptr, settings_.prefix.c_str(), "-ksp_rtol", &user_rtol),
              "PetscOptionsHasName");
  user_rtol_ = user_rtol == PETSC_TRUE;
}

void ConjugateGradient::use_custom_shell(PC pc) {
  petsc_check(PCSetType(pc, PCSHELL), "PCSetType");
  petsc_check(PCShellSetContext(pc, &settings_), "PCShellSetContext");
  petsc_check(PCShellSetApply(pc, apply_custom_preconditioner), "PCShellSetApply");
  if (!settings_.custom_name.empty())
    petsc_check(PCShellSetName(pc, settings_.custom_name.c_str()), "PCShellSetName");
}

ConjugateGradient::~ConjugateGradient() {
  KSPDestroy(&ksp_);
  VecDestroy(&solution_);
  VecDestroy(&rhs_);
}

void ConjugateGradient::operator_changed() {
  shell_.changed();
}

void ConjugateGradient::set_rtol(double rtol) {
  if (user_rtol_) return;
  petsc_check(KSPSetTolerances(ksp_, rtol, PETSC_DEFAULT, PETSC_DEFAULT, PETSC_DEFAULT),
              "KSPSetTolerances");
}

void ConjugateGradient::set_max_iterations(int iterations) {
  petsc_check(KSPSetTolerances(ksp_, PETSC_DEFAULT, PETSC_DEFAULT, PETSC_DEFAULT, iterations),
              "KSPSetTolerances");
}

bool ConjugateGradient::set_stop_poll(std::function<bool()> poll) {
  // Only KSPCG as the constructor sets it up can be continued bitwise (resume()); options that
  // change its operations or its test leave the solves uninterruptible.
  PetscBool cg = PETSC_FALSE, single = PETSC_FALSE, changed_test = PETSC_FALSE;
  petsc_check(PetscObjectTypeCompare(reinterpret_cast<PetscObject>(ksp_), KSPCG, &cg),
              "PetscObjectTypeCompare");
  petsc_check(
      PetscOptionsHasName(nullptr, settings_.prefix.c_str(), "-ksp_cg_single_reduction", &single),
      "PetscOptionsHasName");
  for (const char* option :
       {"-ksp_converged_use_initial_residual_norm", "-ksp_converged_use_min_initial_residual_norm",
        "-ksp_converged_maxits"}) {
    PetscBool given = PETSC_FALSE;
    petsc_check(PetscOptionsHasName(nullptr, settings_.prefix.c_str(), option, &given),
                "PetscOptionsHasName");
    if (given == PETSC_TRUE) changed_test = PETSC_TRUE;
  }
  const bool resumable = cg == PETSC_TRUE && single != PETSC_TRUE && changed_test != PETSC_TRUE &&
                         ksp_->normtype == KSP_NORM_UNPRECONDITIONED && ksp_->chknorm == -1 &&
                         ksp_->calc_sings == PETSC_FALSE && ksp_->transpose_solve == PETSC_FALSE &&
                         ksp_->dscale == PETSC_FALSE &&
                         (ksp_->pc_side == PC_LEFT || ksp_->pc_side == PC_SIDE_DEFAULT) &&
                         (stop_ || ksp_->converged == KSPConvergedDefault);
  if (!resumable) return false;
  if (!stop_) {
    stop_ = std::make_unique<StopTest>();
    petsc_check(KSPConvergedDefaultCreate(&stop_->default_context), "KSPConvergedDefaultCreate");
    petsc_check(KSPSetConvergenceTest(ksp_, stop_test, stop_.get(), nullptr),
                "KSPSetConvergenceTest");
  }
  stop_->poll = std::move(poll);
  return true;
}

const std::vector<double>& ConjugateGradient::interrupted_state() const {
  static const std::vector<double> none;
  return stop_ && stop_->interrupted ? stop_->state : none;
}

void ConjugateGradient::resume_next(std::vector<double> state) {
  const std::size_t p = shell_.op().size;
  if (state.size() != kScalars + 3 * p || !stop_)
    throw InputError("checkpoint: the interrupted CG solve does not fit this problem");
  resume_ = std::move(state);
}

int ConjugateGradient::interrupted_iterations(const std::vector<double>& state) {
  return state.size() > kIterations ? static_cast<int>(state[kIterations]) : 0;
}

// KSPSolve_CG (PETSc 3.18) from the top of an iteration after its convergence test, on the saved
// x, r, p: the same operations on the same data in the same order, so the iterates are the same
// bits as the uninterrupted solve's.
CgOutcome ConjugateGradient::resume(const std::vector<double>& state, double* x) {
  const std::size_t p = shell_.op().size;
  KSP ksp = ksp_;
  petsc_check(KSPSetUp(ksp), "KSPSetUp");
  petsc_check(PCSetUpOnBlocks(ksp->pc), "PCSetUpOnBlocks");
  Vec R = nullptr, Z = nullptr, P = nullptr;
  petsc_check(VecDuplicate(rhs_, &R), "VecDuplicate");
  petsc_check(VecDuplicate(rhs_, &Z), "VecDuplicate");
  petsc_check(VecDuplicate(rhs_, &P), "VecDuplicate");
  std::copy_n(state.begin() + kScalars, p, x);
  const auto fill = [&](Vec v, std::size_t k) {
    PetscScalar* values = nullptr;
    petsc_check(VecGetArray(v, &values), "VecGetArray");
    std::copy_n(state.begin() + static_cast<std::ptrdiff_t>(kScalars + k * p), p, values);
    petsc_check(VecRestoreArray(v, &values), "VecRestoreArray");
  };
  fill(R, 1);
  fill(P, 2);
  ksp->ttol = state[kTtol];
  ksp->rnorm0 = state[kRnorm0];
  stop_->x = solution_;
  stop_->r = R;
  stop_->w = Z;
  stop_->p = P;
  Vec X = solution_, W = Z;
  Mat A = shell_.matrix();
  const auto run = [&]() -> PetscErrorCode {
    PetscFunctionBeginUser;
    PetscScalar beta = 0.0, betaold = state[kBetaOld], dpi = state[kDpi], dpiold = 0.0, a = 0.0,
                b = 0.0;
    PetscReal dp = 0.0;
    PetscInt i = static_cast<PetscInt>(state[kIterations]);
    ksp->reason = KSP_CONVERGED_ITERATING;
    // The end of iteration i: z <- Br, beta <- z'r, then the loop of KSPSolve_CG from i.
    PetscCall(KSP_PCApply(ksp, R, Z));
    PetscCall(VecTDot(Z, R, &beta));
    if (PetscIsInfOrNanScalar(beta)) {
      ksp->reason = KSP_DIVERGED_NANORINF;
      PetscFunctionReturn(0);
    }
    for (; i < ksp->max_it; ++i) {
      ksp->its = i + 1;
      if (beta == 0.0) {
        ksp->reason = KSP_CONVERGED_ATOL;
        break;
      } else if (beta * betaold < 0.0) {
        ksp->reason = KSP_DIVERGED_INDEFINITE_PC;
        break;
      }
      b = beta / betaold;
      PetscCall(VecAYPX(P, b, Z));
      dpiold = dpi;
      PetscCall(KSP_MatMult(ksp, A, P, W));
      PetscCall(VecTDot(P, W, &dpi));
      betaold = beta;
      if (PetscIsInfOrNanScalar(dpi)) {
        ksp->reason = KSP_DIVERGED_NANORINF;
        break;
      }
      if (dpi == 0.0 || sign_of(dpi) * sign_of(dpiold) < 0) {
        ksp->reason = KSP_DIVERGED_INDEFINITE_MAT;
        break;
      }
      a = beta / dpi;
      PetscCall(VecAXPY(X, a, P));
      PetscCall(VecAXPY(R, -a, W));
      PetscCall(VecNorm(R, NORM_2, &dp));
      ksp->rnorm = dp;
      PetscCall(KSPMonitor(ksp, i + 1, dp));
      PetscCall(stop_test(ksp, i + 1, dp, &ksp->reason, stop_.get()));
      if (ksp->reason) break;
      PetscCall(KSP_PCApply(ksp, R, Z));
      PetscCall(VecTDot(Z, R, &beta));
      if (PetscIsInfOrNanScalar(beta)) {
        ksp->reason = KSP_DIVERGED_NANORINF;
        break;
      }
    }
    if (i >= ksp->max_it && !ksp->reason) ksp->reason = KSP_DIVERGED_ITS;
    PetscFunctionReturn(0);
  };
  petsc_check(VecPlaceArray(solution_, x), "VecPlaceArray");
  const PetscErrorCode solved = run();
  petsc_check(VecResetArray(solution_), "VecResetArray");
  stop_->x = stop_->r = stop_->w = stop_->p = nullptr;
  VecDestroy(&R);
  VecDestroy(&Z);
  VecDestroy(&P);
  petsc_check(solved, "KSPSolve (resumed CG)");
  CgOutcome outcome;
  outcome.iterations = static_cast<int>(ksp->its);
  outcome.converged = ksp->reason > 0;
  outcome.indefinite =
      ksp->reason == KSP_DIVERGED_INDEFINITE_MAT || ksp->reason == KSP_DIVERGED_INDEFINITE_PC;
  outcome.interrupted = stop_->interrupted;
  return outcome;
}

CgOutcome ConjugateGradient::solve(const double* b, double* x) {
  if (stop_) {
    stop_->interrupted = false;
    stop_->stop_next = false;
  }
  if (!resume_.empty()) {
    const std::vector<double> state = std::move(resume_);
    resume_.clear();
    return resume(state, x);
  }
  petsc_check(VecPlaceArray(rhs_, b), "VecPlaceArray");
  petsc_check(VecPlaceArray(solution_, x), "VecPlaceArray");
  // The arrays go back before any error is raised (an exception from the operator, say), so that
  // the solver can be used again.
  const PetscErrorCode solved = KSPSolve(ksp_, rhs_, solution_);
  petsc_check(VecResetArray(solution_), "VecResetArray");
  petsc_check(VecResetArray(rhs_), "VecResetArray");
  petsc_check(solved, "KSPSolve");
  PetscInt iterations = 0;
  petsc_check(KSPGetIterationNumber(ksp_, &iterations), "KSPGetIterationNumber");
  KSPConvergedReason reason;
  petsc_check(KSPGetConvergedReason(ksp_, &reason), "KSPGetConvergedReason");
  CgOutcome outcome;
  outcome.iterations = static_cast<int>(iterations);
  outcome.converged = reason > 0;
  outcome.indefinite =
      reason == KSP_DIVERGED_INDEFINITE_MAT || reason == KSP_DIVERGED_INDEFINITE_PC;
  outcome.interrupted = stop_ && stop_->interrupted;
  if (outcome.interrupted) outcome.converged = false;
  return outcome;
}

void dense_from_products(const LinearOperator& op, double* out) {
  const std::size_t p = op.size;
  std::vector<double> unit(p, 0.0), column(p);
  for (std::size_t j = 0; j < p; ++j) {
    unit[j] = 1.0;
    op.apply(unit.data(), column.data());
    unit[j] = 0.0;
    for (std::size_t i = 0; i < p; ++i) out[i * p + j] = column[i];
  }
  for (std::size_t i = 0; i < p; ++i)
    for (std::size_t j = i + 1; j < p; ++j)
      out[i * p + j] = out[j * p + i] = 0.5 * (out[i * p + j] + out[j * p + i]);
}

}  // namespace fluence
