#include "fluence/core/krylov.hpp"

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

CgOutcome ConjugateGradient::solve(const double* b, double* x) {
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
