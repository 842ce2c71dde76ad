// The PLD accountant: connect-the-dots discretization of each step's privacy loss and FFT
// composition (docs/math.md §7.1).
#include "fluence/privacy/pld_accountant.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "fluence/core/error.hpp"
#include "loss_distribution.hpp"

namespace fluence {

namespace pl = privacy_loss;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A step's loss is cut where its delta(eps) (the mass moved to +inf) or its lower-tail mass (moved
// up to the lowest grid point) falls below this: after 1e5 steps the cut mass is at most 1e-15.
constexpr double kStepTail = 1e-20;
// The FFT window holds all but a Chernoff-bounded kWindowTail * delta of the composed mass.
constexpr double kWindowTail = 1e-10;
// Automatic mesh: h = kMeshScale * clamp(sigma, kMinSpread, 1) / sqrt(T) (sigma the composed
// loss's standard deviation, T the number of steps), rounded down to a power of two and at most
// kMaxMesh. Connect-the-dots adds about h^2/12 of variance to each step's loss, so T steps move
// eps by about T h^2 / 12 times d eps / d(mean loss) (<= 1 for a large loss, ~ 6 / sigma for a
// small one): h ~ 1/sqrt(T) keeps that near kMeshScale^2 / 12 ~ 2e-4 (docs/math.md §7.1; the
// tests in tests/privacy/test_pld_accountant.cpp hold it to 1e-3 against closed forms).
constexpr double kMeshScale = 0.05;
constexpr double kMinSpread = 0.1;
constexpr double kMaxMesh = 1.0 / 128.0;
constexpr double kMinMesh = 1.0 / (1 << 24);
// The largest FFT the accountant will run (2^27 doubles: 1 GiB).
constexpr long kMaxWindow = 1L << 27;

// Chernoff orders lambda = 2^{j/2}, j = -24 .. 24.
constexpr int kOrders = 49;
double order(int j) {
  return std::exp2(0.5 * (j - 24));
}

// A scale for one step's loss spread: log(1 + q^2 (e^{1/z^2} - 1)) is the log of 1 + the
// chi-square divergence, 1/z^2 at q = 1 (the Gaussian loss's variance) and ~ q^2 (e^{1/z^2} - 1)
// (the subsampled loss's variance) for small q.
double step_spread_squared(double q, double z) {
  const double r = 1.0 / (z * z);
  if (r > 700.0) return 2.0 * std::log(q) + r;
  return std::log1p(q * q * std::expm1(r));
}

struct Step {
  int direction;
  double q, z, h;
  pl::GridPmf pmf;
  std::array<double, kOrders> up{}, down{};  // log E[e^{+-lambda L}] of the discrete PMF
};

// The largest t (to 1e-6) with predicate(t) true, given predicate(low) true and predicate(high)
// false.
template <class Predicate>
double bisect(double low, double high, Predicate&& predicate) {
  for (int i = 0; i < 60 && high - low > 1e-6; ++i) {
    const double middle = 0.5 * (low + high);
    (predicate(middle) ? low : high) = middle;
  }
  return low;
}

// Connect-the-dots (Doroshenko et al. 2022, docs/math.md §7.1). With knots eps_k = (k0 + k) h,
// k = 0..n, and exact delta_k = delta(eps_k), masses omega_k at eps_k and m_inf at +inf give
//   delta_D(eps) = m_inf + sum_{i>k} omega_i (1 - e^{eps - eps_i})   on [eps_k, eps_{k+1}],
// linear in x = e^eps with slope -A_k, A_k = sum_{i>k} omega_i e^{-eps_i}. Matching delta_D to
// delta at every knot fixes m_inf = delta_n, A_k = (delta_k - delta_{k+1}) / (e^{eps_{k+1}} -
// e^{eps_k}), omega_{k+1} = e^{eps_{k+1}} (A_k - A_{k+1}) (A_n = 0) and omega_0 from total mass 1.
// delta is convex in e^eps, so the chords lie above it: delta_D >= delta everywhere (below eps_0,
// delta_D is the chord from (x = 0, 1) to (x_0, delta_0)), and a dominating pair composes into a
// dominating pair.
Step discretize(pl::Direction direction, double q, double z, double h) {
  auto delta = [&](double t) { return pl::hockey_stick(direction, q, z, t); };
  // Lowest knot: at or below the loss's lower end log(1 - q) (remove, q < 1), else where the
  // lower tail holds kStepTail (that mass moves up to eps_0: pessimistic).
  double low;
  if (direction == pl::Direction::remove && q < 1.0) {
    low = std::log1p(-q);
  } else {
    auto thin = [&](double t) { return pl::loss_cdf(direction, q, z, t) <= kStepTail; };
    double t = -1.0;
    while (!thin(t) && t > -1e6) t *= 2.0;
    low = t == -1.0 ? t : bisect(t, 0.5 * t, thin);
  }
  // Highest knot: where delta (the mass left at +inf) is at most kStepTail; the add direction's
  // loss ends at -log(1 - q), where delta = 0.
  double high_end = kInf;
  if (direction == pl::Direction::add && q < 1.0) high_end = -std::log1p(-q);
  double t = 1.0;
  while (delta(t) > kStepTail && t < high_end && t < 1e6) t *= 2.0;
  double high = std::min(high_end, bisect(t == 1.0 ? low : t * 0.5, t, [&](double s) {
                                     return delta(s) > kStepTail;
                                   }) + 1e-6);
  const long k0 = static_cast<long>(std::floor(low / h));
  const long kn = std::max(k0 + 1, static_cast<long>(std::ceil(high / h)));
  const long n = kn - k0;
  // In long double: the masses are second differences of delta (see loss_distribution.cpp).
  using Real = long double;
  auto knot = [&](long k) { return static_cast<Real>(k0 + k) * static_cast<Real>(h); };
  std::vector<Real> deltas(n + 1);
  for (long k = 0; k <= n; ++k) deltas[k] = pl::hockey_stick(direction, q, z, knot(k));
  std::vector<Real> slope(n + 1, 0);  // A_k, A_n = 0
  const Real gap = std::expm1(static_cast<Real>(h));
  for (long k = 0; k < n; ++k) slope[k] = (deltas[k] - deltas[k + 1]) / (std::exp(knot(k)) * gap);
  Step step{static_cast<int>(direction), q, z, h, {}, {}, {}};
  step.pmf.offset = k0;
  step.pmf.mass.assign(n + 1, 0.0);
  step.pmf.infinity = static_cast<double>(deltas[n]);
  Real upper = 0;
  for (long k = n; k >= 1; --k) {
    // Rounding can make a difference of nearly equal slopes negative; the exact one is >= 0.
    const Real omega = std::exp(knot(k)) * std::max(Real{0}, slope[k - 1] - slope[k]);
    step.pmf.mass[k] = static_cast<double>(omega);
    upper += omega;
  }
  step.pmf.mass[0] = static_cast<double>(std::max(Real{0}, 1 - deltas[n] - upper));
  // The cumulant generating function of the discrete loss (finite part), in log space.
  for (int j = 0; j < kOrders; ++j)
    for (int sign : {1, -1}) {
      const double lambda = sign * order(j);
      double top = -kInf;
      for (long k = 0; k <= n; ++k)
        if (step.pmf.mass[k] > 0.0)
          top = std::max(top, std::log(step.pmf.mass[k]) + lambda * (k0 + k) * h);
      double sum = 0.0;
      for (long k = 0; k <= n; ++k)
        if (step.pmf.mass[k] > 0.0)
          sum += std::exp(std::log(step.pmf.mass[k]) + lambda * (k0 + k) * h - top);
      (sign > 0 ? step.up : step.down)[j] = top + std::log(sum);
    }
  return step;
}

void check_delta(double delta) {
  if (!(delta > 0.0 && delta < 1.0))
    throw InputError(fmt::format("delta = {} is outside (0, 1)", delta));
}

}  // namespace

struct PldAccountant::Cache {
  // Held by pointer: epsilon() keeps a reference to every phase's step while it asks for the next
  // one, which may add a step (a vector of steps would move them).
  std::vector<std::unique_ptr<Step>> steps;
  const Step& get(pl::Direction direction, double q, double z, double h) {
    // Steps of another mesh will not be asked for again until the mesh changes back (one
    // epsilon() call uses one mesh, so no step it holds is dropped here).
    std::erase_if(steps, [&](const std::unique_ptr<Step>& s) { return s->h != h; });
    for (const auto& s : steps)
      if (s->direction == static_cast<int>(direction) && s->q == q && s->z == z) return *s;
    steps.push_back(std::make_unique<Step>(discretize(direction, q, z, h)));
    return *steps.back();
  }
};

PldAccountant::PldAccountant(double value_mesh)
    : fixed_mesh_(value_mesh), cache_(std::make_unique<Cache>()) {
  if (!(value_mesh >= 0.0) || !std::isfinite(value_mesh))
    throw InputError(fmt::format("PLD value mesh {} must be >= 0 (0: automatic)", value_mesh));
}
PldAccountant::~PldAccountant() = default;
PldAccountant::PldAccountant(PldAccountant&&) noexcept = default;
PldAccountant& PldAccountant::operator=(PldAccountant&&) noexcept = default;

void PldAccountant::add_steps(double sampling_rate, double noise_multiplier, long steps) {
  phases_.add(sampling_rate, noise_multiplier, steps);
}

double PldAccountant::value_mesh() const {
  if (fixed_mesh_ > 0.0) return fixed_mesh_;
  double steps = 0.0, spread = 0.0;
  for (const GaussianPhases::Phase& p : phases_.phases()) {
    if (p.z == 0.0) continue;
    steps += static_cast<double>(p.steps);
    spread += static_cast<double>(p.steps) * step_spread_squared(p.q, p.z);
  }
  if (steps == 0.0) return kMaxMesh;
  const double h = kMeshScale * std::clamp(std::sqrt(spread), kMinSpread, 1.0) / std::sqrt(steps);
  return std::clamp(std::exp2(std::floor(std::log2(h))), kMinMesh, kMaxMesh);
}

double PldAccountant::eps_for_direction(int direction, double h, double delta) const {
  std::vector<std::pair<const pl::GridPmf*, long>> parts;
  std::array<double, kOrders> up{}, down{};
  long lowest = 0, highest = 0;
  double log_finite = 0.0;  // log of the probability that no step's loss is +inf
  for (const GaussianPhases::Phase& p : phases_.phases()) {
    const Step& step = cache_->get(static_cast<pl::Direction>(direction), p.q, p.z, h);
    parts.emplace_back(&step.pmf, p.steps);
    for (int j = 0; j < kOrders; ++j) {
      up[j] += static_cast<double>(p.steps) * step.up[j];
      down[j] += static_cast<double>(p.steps) * step.down[j];
    }
    lowest += p.steps * step.pmf.offset;
    highest += p.steps * (step.pmf.offset + static_cast<long>(step.pmf.mass.size()) - 1);
    log_finite += static_cast<double>(p.steps) * std::log1p(-step.pmf.infinity);
  }
  // The window from Chernoff bounds on the composed (discrete) loss S:
  // P(S >= a) <= exp(K(lambda) - lambda a), P(S <= a) <= exp(K(-lambda) + lambda a).
  const double log_tail = std::log(kWindowTail * delta);
  double a_high = kInf, a_low = -kInf;
  for (int j = 0; j < kOrders; ++j) {
    a_high = std::min(a_high, (up[j] - log_tail) / order(j));
    a_low = std::max(a_low, -(down[j] - log_tail) / order(j));
  }
  const long first = std::max(lowest, static_cast<long>(std::floor(a_low / h)));
  const long last = std::min(highest, static_cast<long>(std::ceil(a_high / h)));
  if (last - first + 1 > kMaxWindow)
    throw InputError(fmt::format(
        "PLD accountant: the composed loss needs {} grid points at mesh {} (more than {})",
        last - first + 1, h, kMaxWindow));
  const pl::GridPmf composed = pl::compose(parts, first, last - first + 1);
  // Mass above the window was cut or wrapped to the bottom: add its Chernoff bound to delta. Mass
  // below it wrapped to the top, where it only adds to delta.
  const long above = composed.offset + static_cast<long>(composed.mass.size());
  double cut = 0.0;
  if (above <= highest) {
    double log_cut = kInf;
    for (int j = 0; j < kOrders; ++j)
      log_cut = std::min(log_cut, up[j] - order(j) * static_cast<double>(above) * h);
    cut = std::exp(log_cut);
  }
  const double infinity = -std::expm1(log_finite);
  return pl::epsilon_for_delta(composed, h, delta, infinity + cut);
}

EpsilonReport PldAccountant::epsilon(double delta) const {
  check_delta(delta);
  EpsilonReport report;
  report.delta = delta;
  if (phases_.empty()) return report;
  double eps = 0.0;
  if (phases_.noiseless()) {
    eps = kInf;
  } else {
    const double h = value_mesh();
    for (int direction : {0, 1}) eps = std::max(eps, eps_for_direction(direction, h, delta));
  }
  report.epsilon = report.estimate = report.upper = eps;
  return report;
}

std::vector<double> PldAccountant::state() const {
  return phases_.state();
}

void PldAccountant::restore(const std::vector<double>& state) {
  phases_.restore(state, "PLD");
}

std::unique_ptr<Accountant> make_pld_accountant() {
  return std::make_unique<PldAccountant>();
}

}  // namespace fluence
