#pragma once
// Both extreme eigenvalues of the Hessian operator from one Krylov space (docs/math.md §4):
// Lanczos without restarts, every new vector orthogonalized twice against all earlier ones (full
// reorthogonalization, so the Ritz values carry no ghost copies), until the smallest and the
// largest Ritz pairs both meet SLEPc's relative criterion ||H y - θ y|| <= tolerance |θ|.
// Krylov–Schur (spectrum.hpp) solves for each end separately and restarts every 16 vectors; one
// unrestarted space pays for the slower end only (`influence.spectrum_solver = "lanczos"`).
#include "fluence/influence/spectrum.hpp"

namespace fluence {

/// RuntimeError when `max_steps` products do not meet the tolerance at both ends. Memory: one
/// p-vector per step (replicated on every rank, which all run the same arithmetic).
HessianSpectrum lanczos_spectrum(HessianOperator& hessian, double tolerance, int max_steps);

}  // namespace fluence
