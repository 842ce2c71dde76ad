#include "fluence/influence/spectrum.hpp"

#include <slepceps.h>
#include "fluence/influence/purposes.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/core/solver_options.hpp"

namespace fluence {

namespace {

// One SLEPc eigensolve on the shell. The start vector comes from a keyed stream so that every
// rank (each running the same sequential solver) starts identically.
class EigenSolve {
 public:
  EigenSolve(HessianOperator& hessian, EPSWhich which, int count, double tolerance)
      : shell_(as_linear_operator(hessian)), p_(hessian.parameters()) {
    petsc_check(EPSCreate(PETSC_COMM_SELF, &eps_), "EPSCreate");
    petsc_check(EPSSetOperators(eps_, shell_.matrix(), nullptr), "EPSSetOperators");
    petsc_check(EPSSetProblemType(eps_, EPS_HEP), "EPSSetProblemType");
    petsc_check(EPSSetType(eps_, EPSKRYLOVSCHUR), "EPSSetType");
    petsc_check(EPSSetWhichEigenpairs(eps_, which), "EPSSetWhichEigenpairs");
    petsc_check(EPSSetDimensions(eps_, count, PETSC_DEFAULT, PETSC_DEFAULT), "EPSSetDimensions");
    petsc_check(EPSSetTolerances(eps_, tolerance, 100000), "EPSSetTolerances");
    petsc_check(EPSSetOptionsPrefix(eps_, kSpectrumPrefix), "EPSSetOptionsPrefix");
    petsc_check(EPSSetFromOptions(eps_), "EPSSetFromOptions");
    Vec start;
    petsc_check(MatCreateVecs(shell_.matrix(), &start, nullptr), "MatCreateVecs");
    PetscScalar* values = nullptr;
    petsc_check(VecGetArray(start, &values), "VecGetArray");
    Stream stream(0, purpose::spectrum_start, p_, static_cast<std::uint64_t>(which));
    for (std::size_t k = 0; k < p_; ++k) values[k] = stream.normal();
    petsc_check(VecRestoreArray(start, &values), "VecRestoreArray");
    petsc_check(EPSSetInitialSpace(eps_, 1, &start), "EPSSetInitialSpace");
    petsc_check(VecDestroy(&start), "VecDestroy");
    petsc_check(EPSSolve(eps_), "EPSSolve");
    petsc_check(EPSGetConverged(eps_, &converged_), "EPSGetConverged");
    if (converged_ < count)
      throw RuntimeError(fmt::format(
          "SLEPc found {} of {} Hessian eigenvalues; raise -hessian_eps_max_it or loosen "
          "influence.eigen_tolerance",
          converged_, count));
  }
  ~EigenSolve() { EPSDestroy(&eps_); }

  double value(int k) const {
    PetscScalar real, imaginary;
    petsc_check(EPSGetEigenvalue(eps_, k, &real, &imaginary), "EPSGetEigenvalue");
    return real;
  }
  void vector(int k, double* out) const {
    Vec v;
    petsc_check(MatCreateVecs(shell_.matrix(), &v, nullptr), "MatCreateVecs");
    petsc_check(EPSGetEigenvector(eps_, k, v, nullptr), "EPSGetEigenvector");
    const PetscScalar* values = nullptr;
    petsc_check(VecGetArrayRead(v, &values), "VecGetArrayRead");
    std::copy(values, values + p_, out);
    petsc_check(VecRestoreArrayRead(v, &values), "VecRestoreArrayRead");
    petsc_check(VecDestroy(&v), "VecDestroy");
  }
  int iterations() const {
    PetscInt iterations = 0;
    EPSGetIterationNumber(eps_, &iterations);
    return static_cast<int>(iterations);
  }

 private:
  OperatorShell shell_;
  std::size_t p_;
  EPS eps_ = nullptr;
  PetscInt converged_ = 0;
};

}  // namespace

HessianSpectrum hessian_spectrum(HessianOperator& hessian, double tolerance) {
  HessianSpectrum spectrum;
  {
    EigenSolve largest(hessian, EPS_LARGEST_REAL, 1, tolerance);
    spectrum.eigenvalue_max = largest.value(0);
    spectrum.iterations += largest.iterations();
  }
  {
    EigenSolve smallest(hessian, EPS_SMALLEST_REAL, 1, tolerance);
    spectrum.eigenvalue_min = smallest.value(0);
    spectrum.iterations += smallest.iterations();
  }
  spectrum.condition_number = spectrum.eigenvalue_min > 0.0
                                  ? spectrum.eigenvalue_max / spectrum.eigenvalue_min
                                  : std::numeric_limits<double>::infinity();
  return spectrum;
}

double smallest_eigenvalue(HessianOperator& hessian, double tolerance) {
  return EigenSolve(hessian, EPS_SMALLEST_REAL, 1, tolerance).value(0);
}

Eigenpairs top_eigenpairs(HessianOperator& hessian, int k, double tolerance) {
  const std::size_t p = hessian.parameters();
  if (k < 1 || static_cast<std::size_t>(k) > p)
    throw InputError(
        fmt::format("influence.lowrank_rank = {} must be in [1, {}] (the parameters)", k, p));
  EigenSolve solve(hessian, EPS_LARGEST_REAL, k, tolerance);
  Eigenpairs pairs;
  pairs.values.resize(static_cast<std::size_t>(k));
  pairs.vectors.resize(static_cast<std::size_t>(k) * p);
  for (int i = 0; i < k; ++i) {
    pairs.values[i] = solve.value(i);
    solve.vector(i, pairs.vectors.data() + i * p);
  }
  return pairs;
}

double damping_for(const HessianSpectrum& spectrum, double floor) {
  const double relative = 1e-8 * spectrum.eigenvalue_max;
  // With a floor, a smallest eigenvalue below it (beyond 1e-12 lambda_max, the rounding the
  // relative rule ignores too) is lifted: the spectrum given is the damped operator's, so below
  // the deck's damping means a negative eigenvalue of H itself.
  if (floor > 0.0) {
    const double target = std::max(floor, relative);
    return spectrum.eigenvalue_min < target - 1e-12 * spectrum.eigenvalue_max
               ? target - spectrum.eigenvalue_min
               : 0.0;
  }
  if (spectrum.eigenvalue_min > 1e-12 * spectrum.eigenvalue_max) return 0.0;
  return relative - spectrum.eigenvalue_min;
}

}  // namespace fluence
