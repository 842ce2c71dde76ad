#pragma once
// The one matrix-free operator shell and the one conjugate-gradient solver of the code (PETSc's
// MatShell and KSPCG): Newton's method (core/newton.hpp), the influence IHVPs (influence/ihvp.hpp)
// and the SLEPc spectrum (influence/spectrum.hpp) all run on them. Every rank runs the same
// sequential Krylov method on replicated vectors (PETSC_COMM_SELF); the operator's own reductions
// (a federated Hessian product, say) are the only communication, so the iterates are the same bits
// for any rank count.
#include <petscksp.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fluence {

/// A symmetric operator on p-vectors.
struct LinearOperator {
  std::size_t size = 0;
  /// out = A v.
  std::function<void(const double* v, double* out)> apply;
  /// diag(A), for Jacobi preconditioning; empty when the operator has no cheap diagonal.
  std::function<void(double* out)> diagonal;
};

/// The operator's dense matrix (size x size, row-major, into `out`) from its products with the
/// unit vectors, symmetrized: the products of a symmetric operator agree with their transposes
/// only to rounding. Size passes over whatever the operator reads: small operators only (a
/// network's Hessian up to influence.explicit_max_parameters).
void dense_from_products(const LinearOperator& op, double* out);

/// A PETSc Mat (PETSC_COMM_SELF, symmetric) whose product is the operator's.
class OperatorShell {
 public:
  explicit OperatorShell(LinearOperator op);
  ~OperatorShell();
  OperatorShell(const OperatorShell&) = delete;
  OperatorShell& operator=(const OperatorShell&) = delete;
  Mat matrix() const { return matrix_; }
  const LinearOperator& op() const { return op_; }
  /// The operator changed (a new point): PETSc then takes the diagonal again for Jacobi.
  void changed();

 private:
  LinearOperator op_;
  Mat matrix_ = nullptr;
};

enum class CgPreconditioner { none, jacobi, custom };

struct CgSettings {
  std::string prefix;      // PETSc options prefix ("newton_", "ihvp_"): -<prefix>ksp_* apply
  double rtol = 1e-10;     // on the true residual, ||b - A x|| <= rtol ||b||
  int max_iterations = 0;  // 0 = 10 p + 100
  CgPreconditioner preconditioner = CgPreconditioner::none;
  std::function<void(const double* r, double* z)> apply_preconditioner;  // custom: z = M^-1 r
  // custom: a PC type name ("kronecker") registered for the custom preconditioner, so that
  // -<prefix>pc_type NAME selects it too (as a PCSHELL); empty: only PCSHELL.
  std::string custom_name;
  bool initial_guess = false;  // solve() starts from x's contents (else from 0)
};

struct CgOutcome {
  int iterations = 0;
  bool converged = false;
  bool indefinite = false;   // CG met non-positive curvature: A (or M) is not positive definite
  bool interrupted = false;  // a stop poll ended it: ConjugateGradient::interrupted_state()
};

class ConjugateGradient {
 public:
  ConjugateGradient(LinearOperator op, CgSettings settings);
  ~ConjugateGradient();
  ConjugateGradient(const ConjugateGradient&) = delete;
  ConjugateGradient& operator=(const ConjugateGradient&) = delete;

  /// The operator changed (Newton's next point): Jacobi's diagonal is taken again.
  void operator_changed();
  /// The relative tolerance of the next solves, unless -<prefix>ksp_rtol fixed it.
  void set_rtol(double rtol);
  void set_max_iterations(int iterations);
  /// Did the user fix the tolerance with -<prefix>ksp_rtol?
  bool user_rtol() const { return user_rtol_; }
  /// x = A^-1 b (x: the initial guess when settings.initial_guess).
  CgOutcome solve(const double* b, double* x);

  /// Stops inside a solve (docs/operations.md "Stops inside a unit"): `poll` is called after
  /// every iteration that did not converge (collective when the operator is: every rank polls at
  /// the same iteration). When it says stop, the solve ends after one more iteration (whose
  /// scalars the state needs) with CgOutcome::interrupted, and interrupted_state() holds
  /// everything KSPCG would carry on with. Resumable only with PETSc's CG as this class sets it
  /// up (type cg, unpreconditioned norm, the default convergence test); PETSc options that change
  /// those turn the poll off (every solve then runs to its end). False when the poll is off.
  bool set_stop_poll(std::function<bool()> poll);
  const std::vector<double>& interrupted_state() const;
  /// The next solve, of the same b, continues the interrupted solve `state` describes: the same
  /// operations in the same order as KSPCG's, so the result is the same bits as an uninterrupted
  /// solve.
  void resume_next(std::vector<double> state);
  /// The iterations done before the interruption `state` describes.
  static int interrupted_iterations(const std::vector<double>& state);

  struct StopTest;  // the convergence test that polls (krylov.cpp)

 private:
  void use_custom_shell(PC pc);
  CgOutcome resume(const std::vector<double>& state, double* x);

  OperatorShell shell_;
  CgSettings settings_;
  KSP ksp_ = nullptr;
  Vec rhs_ = nullptr, solution_ = nullptr;
  bool user_rtol_ = false;
  std::unique_ptr<StopTest> stop_;
  std::vector<double> resume_;
};

}  // namespace fluence
