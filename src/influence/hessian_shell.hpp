#pragma once
// A PETSc MatShell over a HessianOperator (internal to the influence module). The Mat lives on
// PETSC_COMM_SELF: every rank runs the same sequential Krylov method on identical replicated
// vectors, and the operator's own reduction is the only communication, which keeps results
// bitwise independent of the rank count.
#include <petscmat.h>

#include "fluence/core/error.hpp"
#include "fluence/influence/hessian_operator.hpp"

namespace fluence {

class HessianShell {
 public:
  explicit HessianShell(HessianOperator& hessian) : hessian_(hessian) {
    const auto p = static_cast<PetscInt>(hessian.parameters());
    petsc_check(MatCreateShell(PETSC_COMM_SELF, p, p, p, p, &hessian_, &matrix_), "MatCreateShell");
    petsc_check(MatShellSetOperation(matrix_, MATOP_MULT, reinterpret_cast<void (*)(void)>(&mult)),
                "MatShellSetOperation(MULT)");
    petsc_check(MatShellSetOperation(matrix_, MATOP_GET_DIAGONAL,
                                     reinterpret_cast<void (*)(void)>(&get_diagonal)),
                "MatShellSetOperation(GET_DIAGONAL)");
    petsc_check(MatSetOption(matrix_, MAT_SYMMETRIC, PETSC_TRUE), "MatSetOption(SYMMETRIC)");
    petsc_check(MatSetOption(matrix_, MAT_SYMMETRY_ETERNAL, PETSC_TRUE), "MatSetOption");
  }
  ~HessianShell() { MatDestroy(&matrix_); }
  HessianShell(const HessianShell&) = delete;
  HessianShell& operator=(const HessianShell&) = delete;

  Mat matrix() const { return matrix_; }

 private:
  static PetscErrorCode mult(Mat matrix, Vec x, Vec y) {
    PetscFunctionBeginUser;
    HessianOperator* hessian = nullptr;
    PetscCall(MatShellGetContext(matrix, &hessian));
    const PetscScalar* in = nullptr;
    PetscScalar* out = nullptr;
    PetscCall(VecGetArrayRead(x, &in));
    PetscCall(VecGetArray(y, &out));
    hessian->apply(in, out);
    PetscCall(VecRestoreArray(y, &out));
    PetscCall(VecRestoreArrayRead(x, &in));
    PetscFunctionReturn(0);
  }
  static PetscErrorCode get_diagonal(Mat matrix, Vec d) {
    PetscFunctionBeginUser;
    HessianOperator* hessian = nullptr;
    PetscCall(MatShellGetContext(matrix, &hessian));
    std::vector<double> diagonal;
    hessian->diagonal(diagonal);
    PetscScalar* out = nullptr;
    PetscCall(VecGetArray(d, &out));
    std::copy(diagonal.begin(), diagonal.end(), out);
    PetscCall(VecRestoreArray(d, &out));
    PetscFunctionReturn(0);
  }

  HessianOperator& hessian_;
  Mat matrix_ = nullptr;
};

}  // namespace fluence
