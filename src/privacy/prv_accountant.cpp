// The PRV accountant of Gopi, Lee & Wutschitz 2021 (docs/math.md §7.2).
#include "fluence/privacy/prv_accountant.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "fluence/core/error.hpp"
#include "fluence/privacy/rdp_accountant.hpp"
#include "loss_distribution.hpp"

namespace fluence {

namespace pl = privacy_loss;

namespace {

using Real = long double;
constexpr double kInf = std::numeric_limits<double>::infinity();
// The largest mesh the accountant will build (2^25 points, 256 MiB of doubles per array).
constexpr long kMaxPoints = 1L << 25;

// Adaptive Simpson quadrature of a smooth integrand to absolute tolerance `tolerance`.
template <class F>
Real simpson_step(F& f, Real a, Real b, Real fa, Real fm, Real fb, Real whole, Real tolerance,
                  int depth) {
  const Real m = (a + b) / 2, lm = (a + m) / 2, rm = (m + b) / 2;
  const Real flm = f(lm), frm = f(rm);
  const Real left = (m - a) / 6 * (fa + 4 * flm + fm), right = (b - m) / 6 * (fm + 4 * frm + fb);
  if (depth <= 0 || std::abs(left + right - whole) <= 15 * tolerance)
    return left + right + (left + right - whole) / 15;  // Richardson's correction
  return simpson_step(f, a, m, fa, flm, fm, left, tolerance / 2, depth - 1) +
         simpson_step(f, m, b, fm, frm, fb, right, tolerance / 2, depth - 1);
}

template <class F>
Real integrate(F f, Real a, Real b, Real tolerance) {
  if (!(b > a)) return 0;
  // Start from 64 panels, so that a narrow bump (a small q's loss is concentrated near 0) is seen.
  Real sum = 0;
  const int panels = 64;
  for (int i = 0; i < panels; ++i) {
    const Real lo = a + (b - a) * i / panels, hi = a + (b - a) * (i + 1) / panels;
    const Real flo = f(lo), fm = f((lo + hi) / 2), fhi = f(hi);
    sum += simpson_step(f, lo, hi, flo, fm, fhi, (hi - lo) / 6 * (flo + 4 * fm + fhi),
                        tolerance / panels, 50);
  }
  return sum;
}

// The mean of the PRV conditioned on [-l, l], from its CDF F and survival function S:
// int t dF = int_0^l (S(t) - S(l)) dt - int_{-l}^0 (F(t) - F(-l)) dt, each piece split at the
// kink of F at the loss's end (log(1 - q) for remove, -log(1 - q) for add).
Real truncated_mean(pl::Direction direction, double q, double z, Real l) {
  const Real f_low = pl::loss_cdf(direction, q, z, -l), s_high = pl::loss_sf(direction, q, z, l);
  auto upper = [&](Real t) { return pl::loss_sf(direction, q, z, t) - s_high; };
  auto lower = [&](Real t) { return pl::loss_cdf(direction, q, z, t) - f_low; };
  Real kink = direction == pl::Direction::remove ? std::log1p(-Real{q}) : -std::log1p(-Real{q});
  const Real tolerance = 1e-17L;
  Real positive = 0, negative = 0;
  if (kink > 0 && kink < l)
    positive = integrate(upper, 0, kink, tolerance) + integrate(upper, kink, l, tolerance);
  else
    positive = integrate(upper, 0, l, tolerance);
  if (kink < 0 && kink > -l)
    negative = integrate(lower, -l, kink, tolerance) + integrate(lower, kink, 0, tolerance);
  else
    negative = integrate(lower, -l, 0, tolerance);
  return (positive - negative) / (1 - f_low - s_high);
}

// One step's PRV on bins [(i - 1/2) h, (i + 1/2) h), i = -n..n, conditioned on their union, with
// the grid shifted so that its mean is the conditioned PRV's (Gopi et al. 2021 Algorithm 1).
pl::GridPmf discretize(pl::Direction direction, double q, double z, double h, long n) {
  const long edges = 2 * n + 2;
  auto edge = [&](long e) { return (static_cast<Real>(e - n) - Real{0.5}) * static_cast<Real>(h); };
  // CDF differences below the median, survival-function differences above it: each bin's mass
  // keeps its digits in its tail.
  std::vector<Real> cdf(edges, -1), sf(edges, -1);
  long split = edges;
  for (long e = 0; e < edges; ++e) {
    cdf[e] = pl::loss_cdf(direction, q, z, edge(e));
    if (cdf[e] > 0.5L) {
      split = e;
      break;
    }
  }
  for (long e = std::max(0L, split - 1); e < edges; ++e)
    sf[e] = pl::loss_sf(direction, q, z, edge(e));
  const Real kept = 1 - cdf[0] - sf[edges - 1];
  pl::GridPmf pmf;
  pmf.offset = -n;
  pmf.mass.resize(2 * n + 1);
  Real mean = 0;
  for (long i = 0; i <= 2 * n; ++i) {
    Real mass;
    if (i + 1 < split)
      mass = cdf[i + 1] - cdf[i];
    else if (i >= split)
      mass = sf[i] - sf[i + 1];
    else
      mass = 1 - cdf[i] - sf[i + 1];
    mass = std::max(Real{0}, mass) / kept;
    pmf.mass[i] = static_cast<double>(mass);
    mean += mass * static_cast<Real>(i - n) * static_cast<Real>(h);
  }
  const Real shift = truncated_mean(direction, q, z, (static_cast<Real>(n) + 0.5L) * h) - mean;
  if (!(std::abs(shift) < h / 2))
    throw InputError(fmt::format(
        "PRV accountant: the discretized mean at q = {}, z = {} is off by {} (mesh {}): beyond "
        "its floating-point limits (use pld)",
        q, z, static_cast<double>(shift), h));
  pmf.shift = static_cast<double>(shift);
  return pmf;
}

}  // namespace

PrvAccountant::PrvAccountant(double eps_error, double delta_error_ratio)
    : eps_error_(eps_error), delta_error_ratio_(delta_error_ratio) {
  if (!(eps_error > 0.0))
    throw InputError(fmt::format("PRV eps_error = {} must be > 0", eps_error));
  if (!(delta_error_ratio > 0.0 && delta_error_ratio < 1.0))
    throw InputError(
        fmt::format("PRV delta_error / delta = {} is outside (0, 1)", delta_error_ratio));
}

void PrvAccountant::add_steps(double sampling_rate, double noise_multiplier, long steps) {
  phases_.add(sampling_rate, noise_multiplier, steps);
}

EpsilonReport PrvAccountant::epsilon(double delta) const {
  if (!(delta > 0.0 && delta < 1.0))
    throw InputError(fmt::format("delta = {} is outside (0, 1)", delta));
  EpsilonReport report;
  report.delta = delta;
  if (phases_.empty()) return report;
  if (phases_.noiseless()) {
    report.epsilon = report.lower = report.estimate = report.upper = kInf;
    return report;
  }
  const double delta_error = delta * delta_error_ratio_;
  const long steps = phases_.total_steps();
  // The domain (Gopi et al. 2021 Remark 5.6): the RDP eps of the whole composition at
  // delta_error / 4 and of any one step at delta_error / (8 T), plus 3.
  const std::vector<double> orders = default_rdp_orders();
  std::vector<double> total(orders.size(), 0.0);
  double one_step = 0.0;
  for (const GaussianPhases::Phase& p : phases_.phases()) {
    std::vector<double> step(orders.size());
    for (std::size_t k = 0; k < orders.size(); ++k) {
      step[k] = sampled_gaussian_rdp(p.q, p.z, orders[k]);
      total[k] += static_cast<double>(p.steps) * step[k];
    }
    one_step = std::max(
        one_step,
        epsilon_from_rdp(orders, step, delta_error / (8.0 * static_cast<double>(steps))).epsilon);
  }
  const double domain =
      std::max(epsilon_from_rdp(orders, total, delta_error / 4.0).epsilon, one_step) + 3.0;
  const double h =
      eps_error_ / std::sqrt(static_cast<double>(steps) * std::log(12.0 / delta_error) / 2.0);
  const double half_points = std::ceil(domain / h);
  if (!(2.0 * half_points + 1.0 <= static_cast<double>(kMaxPoints)))
    throw InputError(fmt::format(
        "PRV accountant: domain [-{:.4g}, {:.4g}] at mesh {:.3g} needs {:.3g} points (more than "
        "{}; use pld)",
        domain, domain, h, 2.0 * half_points + 1.0, kMaxPoints));
  const long n = static_cast<long>(half_points);
  report.lower = report.estimate = report.upper = -kInf;
  for (pl::Direction direction : {pl::Direction::remove, pl::Direction::add}) {
    std::vector<pl::GridPmf> pmfs;
    pmfs.reserve(phases_.phases().size());
    std::vector<std::pair<const pl::GridPmf*, long>> parts;
    for (const GaussianPhases::Phase& p : phases_.phases()) {
      pmfs.push_back(discretize(direction, p.q, p.z, h, n));
      parts.emplace_back(&pmfs.back(), p.steps);
    }
    // Circular composition on the same domain: the RDP bound keeps the composed PRV inside it
    // but for delta_error / 4 (Remark 5.6), which Theorem 5.5's bracket accounts for.
    const pl::GridPmf composed = pl::compose(parts, -n, 2 * n + 1);
    report.estimate = std::max(report.estimate, pl::epsilon_for_delta(composed, h, delta, 0.0));
    report.upper = std::max(
        report.upper, pl::epsilon_for_delta(composed, h, delta - delta_error, 0.0) + eps_error_);
    report.lower = std::max(
        report.lower, pl::epsilon_for_delta(composed, h, delta + delta_error, 0.0) - eps_error_);
  }
  report.lower = std::max(0.0, report.lower);
  report.estimate = std::max(0.0, report.estimate);
  report.upper = std::max(0.0, report.upper);
  report.epsilon = report.upper;
  return report;
}

std::vector<double> PrvAccountant::state() const {
  return phases_.state();
}

void PrvAccountant::restore(const std::vector<double>& state) {
  phases_.restore(state, "PRV");
}

std::unique_ptr<Accountant> make_prv_accountant() {
  return std::make_unique<PrvAccountant>();
}

}  // namespace fluence
