#include "fluence/influence/lanczos.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/influence/purposes.hpp"

extern "C" {
void dstev_(const char* jobz, const int* n, double* d, double* e, double* z, const int* ldz,
            double* work, int* info);
}

namespace fluence {

namespace {

double dot(const std::vector<double>& a, const double* b) {
  double s = 0.0;
  for (std::size_t k = 0; k < a.size(); ++k) s += a[k] * b[k];
  return s;
}

struct RitzEnds {
  double smallest = 0.0, largest = 0.0;
  double smallest_residual = 0.0, largest_residual = 0.0;  // beta_k |last entry of y|
};

// The extreme eigenpairs of the (k x k) tridiagonal T (alpha on the diagonal, beta below it), and
// their Ritz residual norms beta_k |s_k| (beta_k: the norm of the next Lanczos vector's direction).
RitzEnds ritz_ends(const std::vector<double>& alpha, const std::vector<double>& beta, double next) {
  int n = static_cast<int>(alpha.size()), info = 0;
  std::vector<double> d = alpha, e(beta.begin(), beta.begin() + (n - 1)), z(std::size_t(n) * n),
                      work(std::max(1, 2 * n - 2));
  dstev_("V", &n, d.data(), e.data(), z.data(), &n, work.data(), &info);
  if (info != 0)
    throw RuntimeError(fmt::format("Lanczos spectrum: LAPACK dstev failed (info {})", info));
  // Column-major: eigenvector i is z[i n .. i n + n - 1]; its last entry is z[i n + n - 1].
  RitzEnds ends;
  ends.smallest = d[0];
  ends.largest = d[n - 1];
  ends.smallest_residual = std::abs(next * z[n - 1]);
  ends.largest_residual = std::abs(next * z[std::size_t(n - 1) * n + n - 1]);
  return ends;
}

}  // namespace

HessianSpectrum lanczos_spectrum(HessianOperator& hessian, double tolerance, int max_steps) {
  const std::size_t p = hessian.parameters();
  std::vector<std::vector<double>> basis;
  std::vector<double> alpha, beta, w(p);
  std::vector<double> v(p);
  // A keyed start (the same on every rank), distinct from Krylov–Schur's two streams.
  Stream stream(0, purpose::spectrum_start, p, 1000);
  for (auto& value : v) value = stream.normal();
  double size = std::sqrt(dot(v, v.data()));
  for (auto& value : v) value /= size;
  basis.push_back(v);
  const int steps = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(max_steps), p));
  for (int k = 0; k < steps; ++k) {
    const std::vector<double>& q = basis.back();
    hessian.apply(q.data(), w.data());
    alpha.push_back(dot(q, w.data()));
    // Twice against every earlier vector (Kahan's "twice is enough"): the three-term recurrence's
    // alpha_k q_k + beta_{k-1} q_{k-1} is part of the first sweep.
    for (int sweep = 0; sweep < 2; ++sweep)
      for (const auto& u : basis) {
        const double c = dot(u, w.data());
        for (std::size_t i = 0; i < p; ++i) w[i] -= c * u[i];
      }
    const double next = std::sqrt(dot(w, w.data()));
    const RitzEnds ends = ritz_ends(alpha, beta, next);
    const bool converged = ends.smallest_residual <= tolerance * std::abs(ends.smallest) &&
                           ends.largest_residual <= tolerance * std::abs(ends.largest);
    if (converged || next == 0.0 || k + 1 == steps) {
      if (!converged && next != 0.0)
        throw RuntimeError(fmt::format(
            "Lanczos spectrum: the extreme eigenvalues did not reach the relative tolerance {:g} "
            "in {} products (residuals {:.3e}, {:.3e}); loosen influence.eigen_tolerance or use "
            "influence.spectrum_solver = \"krylovschur\"",
            tolerance, steps, ends.smallest_residual, ends.largest_residual));
      HessianSpectrum spectrum;
      spectrum.eigenvalue_min = ends.smallest;
      spectrum.eigenvalue_max = ends.largest;
      spectrum.condition_number = ends.smallest > 0.0 ? ends.largest / ends.smallest
                                                      : std::numeric_limits<double>::infinity();
      spectrum.iterations = k + 1;
      return spectrum;
    }
    beta.push_back(next);
    for (auto& value : w) value /= next;
    basis.push_back(w);
  }
  throw RuntimeError("Lanczos spectrum: no steps");
}

}  // namespace fluence
