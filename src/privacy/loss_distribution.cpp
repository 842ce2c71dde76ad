// The privacy loss of the subsampled Gaussian mechanism, FFT composition and delta <-> eps of a
// loss PMF (docs/math.md §7.1, §7.2).
#include "loss_distribution.hpp"

#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <memory>
#include <mutex>

namespace fluence::privacy_loss {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The single-step formulas run in long double (64-bit mantissa on x86-64): connect-the-dots takes
// second differences of delta over a mesh h ~ 1e-4, which magnify delta's rounding by ~ 1/h^2,
// and in double that rounding moved eps by 2e-3 after 1e5 steps (docs/math.md §7.1).
using Real = long double;

// log Phi-bar(x) (the standard normal survival function), also where erfc underflows: the
// asymptotic series erfc(y) ~ e^{-y^2} / (y sqrt(pi)) (1 - 1/(2y^2) + 3/(4y^4) - 15/(8y^6)).
Real log_normal_sf(Real x) {
  const Real y = x / std::sqrt(Real{2});
  if (y < 100) return std::log(std::erfc(y) / 2);
  const Real r = 1 / (y * y);
  return std::log(Real{0.5}) - y * y - std::log(y) - std::log(std::acos(Real{-1})) / 2 +
         std::log1p(-r / 2 + Real{0.75} * r * r - Real{1.875} * r * r * r);
}

Real normal_sf(Real x) {
  return std::erfc(x / std::sqrt(Real{2})) / 2;
}
Real normal_cdf(Real x) {
  return std::erfc(-x / std::sqrt(Real{2})) / 2;
}

// The Gaussian mechanism's hockey-stick divergence (sensitivity 1, noise std z; Balle & Wang 2018
// Theorem 8): Phi-bar(eps z - 1/(2z)) - e^eps Phi-bar(eps z + 1/(2z)). The second term is formed
// in log space only where e^eps or Phi-bar would leave the floating-point range, since exp(log)
// costs digits.
Real gaussian_hockey_stick(Real eps, Real z) {
  const Real a = eps * z - 1 / (2 * z), b = eps * z + 1 / (2 * z);
  const Real second =
      eps < 11000 && b < 140 ? std::exp(eps) * normal_sf(b) : std::exp(eps + log_normal_sf(b));
  return std::max(Real{0}, normal_sf(a) - second);
}

// log((e^t - 1 + q) / q) = log1p(expm1(t) / q), also where e^t overflows.
Real mixture_exponent(Real t, Real q) {
  if (t > 11000) return t - std::log(q) + std::log1p((q - 1) * std::exp(-t));
  return std::log1p(std::expm1(t) / q);
}

// One FFTW plan at a time: FFTW's planner is not thread-safe.
std::mutex& planner_mutex() {
  static std::mutex mutex;
  return mutex;
}

struct FftwFree {
  void operator()(void* p) const { fftw_free(p); }
};

std::complex<double> power(std::complex<double> base, long exponent) {
  // Binary exponentiation: a fixed sequence of products, so the result is bitwise reproducible.
  std::complex<double> result = 1.0;
  while (exponent > 0) {
    if (exponent & 1) result *= base;
    base *= base;
    exponent >>= 1;
  }
  return result;
}

}  // namespace

long double hockey_stick(Direction direction, double q_in, double z_in, long double eps) {
  const Real q = q_in, z = z_in;
  if (direction == Direction::remove) {
    // L = log(1 - q + q e^{(2x-1)/(2z^2)}) >= log(1 - q): below that every outcome counts.
    if (q < 1 && eps <= std::log1p(-q)) return -std::expm1(eps);
    // L > eps iff x > x*, and the two Gaussian tails combine into q times the Gaussian
    // mechanism's divergence at eps' = log(1 + (e^eps - 1) / q) (docs/math.md §7.1).
    return q * gaussian_hockey_stick(mixture_exponent(eps, q), z);
  }
  // Add: L = -log(1 - q + q e^{(2x-1)/(2z^2)}) < -log(1 - q), and with
  // eps'' = -log(1 + (e^{-eps} - 1) / q), delta = (1 - e^eps (1 - q)) delta_G(eps'').
  if (q < 1 && eps >= -std::log1p(-q)) return 0;
  const Real factor = -std::expm1(eps + std::log1p(-q));
  return factor * gaussian_hockey_stick(-mixture_exponent(-eps, q), z);
}

long double loss_cdf(Direction direction, double q_in, double z_in, long double t) {
  const Real q = q_in, z = z_in;
  if (direction == Direction::remove) {
    if (q < 1 && t <= std::log1p(-q)) return 0;
    const Real x = z * z * mixture_exponent(t, q) + Real{0.5};  // L <= t iff x <= x*
    return (1 - q) * normal_cdf(x / z) + q * normal_cdf((x - 1) / z);
  }
  if (q < 1 && t >= -std::log1p(-q)) return 1;
  const Real x = z * z * mixture_exponent(-t, q) + Real{0.5};  // L <= t iff x >= x*
  return normal_sf(x / z);
}

long double loss_sf(Direction direction, double q_in, double z_in, long double t) {
  const Real q = q_in, z = z_in;
  if (direction == Direction::remove) {
    if (q < 1 && t <= std::log1p(-q)) return 1;
    const Real x = z * z * mixture_exponent(t, q) + Real{0.5};
    return (1 - q) * normal_sf(x / z) + q * normal_sf((x - 1) / z);
  }
  if (q < 1 && t >= -std::log1p(-q)) return 0;
  const Real x = z * z * mixture_exponent(-t, q) + Real{0.5};
  return normal_cdf(x / z);
}

long fft_length(long n) {
  long best = std::numeric_limits<long>::max();
  for (long a = 1; a < 2 * n + 2; a *= 2)
    for (long b = a; b < 2 * n + 2; b *= 3)
      for (long c = b; c < 2 * n + 2; c *= 5)
        if (c >= n) best = std::min(best, c);
  return std::max(2L, best);
}

GridPmf compose(const std::vector<std::pair<const GridPmf*, long>>& parts, long first, long size) {
  long length = size;
  for (const auto& [pmf, count] : parts)
    length = std::max(length, static_cast<long>(pmf->mass.size()));
  const long n = fft_length(length), half = n / 2 + 1;
  // fftw_malloc'd arrays have the same alignment on every call, so FFTW_ESTIMATE picks the same
  // codelets and the composition is bitwise reproducible (restore(state()) relies on it).
  std::unique_ptr<double, FftwFree> real(fftw_alloc_real(n));
  std::unique_ptr<fftw_complex, FftwFree> spectrum(fftw_alloc_complex(half));
  std::unique_ptr<fftw_complex, FftwFree> product(fftw_alloc_complex(half));
  fftw_plan forward, backward;
  {
    const std::lock_guard lock(planner_mutex());
    forward = fftw_plan_dft_r2c_1d(static_cast<int>(n), real.get(), spectrum.get(), FFTW_ESTIMATE);
    backward = fftw_plan_dft_c2r_1d(static_cast<int>(n), product.get(), real.get(), FFTW_ESTIMATE);
  }
  auto* acc = reinterpret_cast<std::complex<double>*>(product.get());
  const auto* step = reinterpret_cast<const std::complex<double>*>(spectrum.get());
  std::fill(acc, acc + half, std::complex<double>(1.0, 0.0));
  long base = 0;
  GridPmf out;
  for (const auto& [pmf, count] : parts) {
    std::fill(real.get(), real.get() + n, 0.0);
    for (std::size_t i = 0; i < pmf->mass.size(); ++i) real.get()[i % n] += pmf->mass[i];
    fftw_execute(forward);
    for (long k = 0; k < half; ++k) acc[k] *= power(step[k], count);
    base += count * pmf->offset;
    out.shift += static_cast<double>(count) * pmf->shift;
  }
  fftw_execute(backward);
  {
    const std::lock_guard lock(planner_mutex());
    fftw_destroy_plan(forward);
    fftw_destroy_plan(backward);
  }
  // Composed index m (loss m h + shift) sits at position (m - base) mod n of the circular result.
  out.offset = first;
  out.mass.resize(n);
  for (long j = 0; j < n; ++j) {
    const long position = (((first + j - base) % n) + n) % n;
    out.mass[j] = real.get()[position] / static_cast<double>(n);
  }
  return out;
}

double epsilon_for_delta(const GridPmf& pmf, double h, double delta, double extra) {
  const double target = delta - extra;
  if (!(target > 0.0)) return kInf;
  // From the top down, with s_k the k-th grid point: C_k = sum_{j>k} p_j e^{-(s_j - s_k)} and
  // D_k = delta(s_k) = sum_{j>k} p_j (1 - e^{-(s_j - s_k)}), both by recurrences of positive terms
  // (D_k = D_{k+1} + (1 - e^{-h})(p_{k+1} + C_{k+1})), so a small delta keeps its digits. On
  // [s_k, s_{k+1}], delta(eps) = D_k + C_k - e^{eps - s_k} C_k: solved exactly for eps.
  const double decay = std::exp(-h), gain = -std::expm1(-h);
  const long size = static_cast<long>(pmf.mass.size());
  double c = 0.0, d = 0.0;
  for (long k = size - 1; k >= 0; --k) {
    if (k < size - 1) {
      const double carried = pmf.mass[k + 1] + c;
      d += gain * carried;
      c = decay * carried;
    }
    if (d > target) {
      const double s = (static_cast<double>(pmf.offset + k)) * h + pmf.shift;
      return s + std::log1p((d - target) / c);
    }
  }
  // Below the lowest grid point delta(eps) = M - e^{eps - s_0} (p_0 + C_0), M the total mass.
  const double total = d + c + pmf.mass[0], weight = pmf.mass[0] + c;
  if (!(total > target) || !(weight > 0.0)) return -kInf;
  return static_cast<double>(pmf.offset) * h + pmf.shift + std::log((total - target) / weight);
}

}  // namespace fluence::privacy_loss
