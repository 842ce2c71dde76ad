#pragma once
// Extreme eigenvalues of the Hessian operator with SLEPc (Krylov-Schur on the same MatShell the
// CG solver uses; options prefix "hessian_"), and top-k eigenpairs for the low-rank IHVP.
#include <vector>

#include "fluence/influence/hessian_operator.hpp"

namespace fluence {

struct HessianSpectrum {
  double eigenvalue_min = 0.0;
  double eigenvalue_max = 0.0;
  double condition_number = 0.0;  // max / min; inf when min <= 0
  int iterations = 0;             // SLEPc outer iterations (both solves)
};

/// Smallest and largest eigenvalues to relative accuracy `tolerance`. RuntimeError if SLEPc does
/// not converge.
HessianSpectrum hessian_spectrum(HessianOperator& hessian, double tolerance);

/// The smallest eigenvalue alone (half of hessian_spectrum's work).
double smallest_eigenvalue(HessianOperator& hessian, double tolerance);

struct Eigenpairs {
  std::vector<double> values;   // k, descending
  std::vector<double> vectors;  // k x p row-major, orthonormal
};

/// The k largest eigenpairs.
Eigenpairs top_eigenpairs(HessianOperator& hessian, int k, double tolerance);

/// The damping rule for a Hessian that is not safely positive definite (docs/math.md §4). With
/// floor = 0: when lambda_min <= 1e-12 lambda_max, 1e-8 lambda_max - lambda_min (condition number
/// about 1e8), otherwise 0. With floor > 0: what lifts lambda_min to max(floor, 1e-8 lambda_max)
/// when it lies below that, otherwise 0.
double damping_for(const HessianSpectrum& spectrum, double floor = 0.0);

}  // namespace fluence
