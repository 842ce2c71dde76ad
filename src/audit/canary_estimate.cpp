// The canary-client estimate of Andrew et al. 2024 and the privacy profile of two Gaussians
// (docs/math.md §11.3).
#include "fluence/audit/canary_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "fluence/audit/purposes.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"

namespace fluence {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// log Phi(z) for the standard normal CDF, accurate in both tails: erfc where it is representable,
// its asymptotic series erfc(y) ~ e^{-y^2} / (y sqrt(pi)) (1 - 1/(2y^2) + 3/(4y^4) - 15/(8y^6))
// beyond (y = -z / sqrt 2 > 26, where erfc underflows below 1e-300), and log1p(-Phi-bar) on the
// upper side, where Phi is within rounding of 1.
double log_normal_cdf(double z) {
  if (z > 0.0) return std::log1p(-0.5 * std::erfc(z / std::numbers::sqrt2));
  const double y = -z / std::numbers::sqrt2;
  if (y < 26.0) return std::log(0.5 * std::erfc(y));
  const double r = 1.0 / (y * y);
  return std::log(0.5) - y * y - std::log(y) - 0.5 * std::log(std::numbers::pi) +
         std::log1p(-0.5 * r + 0.75 * r * r - 1.875 * r * r * r);
}

double log_add(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == kNegInf) return a;
  return a + std::log1p(std::exp(b - a));
}

// log(e^a - e^b) for a >= b.
double log_subtract(double a, double b) {
  if (b == kNegInf) return a;
  if (b >= a) return kNegInf;
  return a + std::log1p(-std::exp(b - a));
}

// log of the mass N(mean, std^2) puts on the interval (low, high); either end may be infinite.
// Differences are taken on the side of the tail the interval lies in, so that a mass of 1e-200
// far out in a tail is not the difference of two numbers near 1.
double log_normal_mass(double mean, double std, double low, double high) {
  const double z_low = (low - mean) / std, z_high = (high - mean) / std;
  if (z_low >= 0.0)  // upper tail: Phi-bar(z_low) - Phi-bar(z_high), Phi-bar(z) = Phi(-z)
    return log_subtract(log_normal_cdf(-z_low), log_normal_cdf(-z_high));
  return log_subtract(log_normal_cdf(z_high), log_normal_cdf(z_low));
}

void check_std(double std, const char* which) {
  if (!(std > 0.0) || !std::isfinite(std))
    throw InputError(
        fmt::format("Gaussian pair: {} standard deviation {} must be finite and > 0", which, std));
}

}  // namespace

GaussianFit fit_gaussian(std::span<const double> values) {
  if (values.size() < 2)
    throw InputError(fmt::format("Gaussian fit: {} values (at least 2 needed)", values.size()));
  double sum = 0.0;
  for (const double v : values) {
    if (!std::isfinite(v)) throw InputError("Gaussian fit: a value is not finite");
    sum += v;
  }
  const double n = static_cast<double>(values.size());
  GaussianFit fit;
  fit.count = static_cast<long>(values.size());
  fit.mean = sum / n;
  double squares = 0.0;  // second pass about the mean: no cancellation of large sums
  for (const double v : values) squares += (v - fit.mean) * (v - fit.mean);
  fit.std = std::sqrt(squares / (n - 1.0));
  return fit;
}

double gaussian_pair_delta(double mean_p, double std_p, double mean_q, double std_q,
                           double epsilon) {
  check_std(std_p, "first");
  check_std(std_q, "second");
  // log(p/q)(x) - eps = a x^2 + b x + c.
  const double vp = std_p * std_p, vq = std_q * std_q;
  const double a = 0.5 / vq - 0.5 / vp;
  const double b = mean_p / vp - mean_q / vq;
  const double c =
      0.5 * mean_q * mean_q / vq - 0.5 * mean_p * mean_p / vp + std::log(std_q / std_p) - epsilon;
  constexpr double inf = std::numeric_limits<double>::infinity();
  // S = {x : a x^2 + b x + c > 0} as at most two intervals.
  double first_low = 0.0, first_high = 0.0, second_low = 0.0, second_high = 0.0;
  int intervals = 0;
  if (a == 0.0) {
    if (b == 0.0) return 0.0;  // P = Q: delta = max(0, 1 - e^eps) = 0 for eps >= 0
    const double root = -c / b;
    if (b > 0.0) {
      first_low = root;
      first_high = inf;
    } else {
      first_low = -inf;
      first_high = root;
    }
    intervals = 1;
  } else {
    const double discriminant = b * b - 4.0 * a * c;
    // No real root: the sign is a's everywhere, S is everything (delta = 1 - e^eps <= 0) or
    // nothing (delta = 0).
    if (discriminant <= 0.0) return 0.0;
    // The roots without cancellation (Numerical Recipes §5.6): q = -(b + sign(b) sqrt(D)) / 2.
    const double q = -0.5 * (b + std::copysign(std::sqrt(discriminant), b));
    const double root_1 = q / a, root_2 = c / q;
    const double low = std::min(root_1, root_2), high = std::max(root_1, root_2);
    if (a > 0.0) {  // opens upwards: S is outside the roots
      first_low = -inf;
      first_high = low;
      second_low = high;
      second_high = inf;
      intervals = 2;
    } else {
      first_low = low;
      first_high = high;
      intervals = 1;
    }
  }
  auto log_mass = [&](double mean, double std) {
    double m = log_normal_mass(mean, std, first_low, first_high);
    if (intervals == 2) m = log_add(m, log_normal_mass(mean, std, second_low, second_high));
    return m;
  };
  const double log_p = log_mass(mean_p, std_p), log_q = log_mass(mean_q, std_q);
  if (log_p == kNegInf) return 0.0;
  const double exponent = epsilon + log_q - log_p;  // e^eps Q(S) / P(S)
  if (exponent >= 0.0) return 0.0;
  return std::exp(log_p) * -std::expm1(exponent);
}

double gaussian_pair_epsilon(double mean_0, double std_0, double mean_1, double std_1,
                             double delta) {
  if (!(delta > 0.0 && delta < 1.0))
    throw InputError(fmt::format("Gaussian pair: delta {} outside (0, 1)", delta));
  // Each direction's delta(eps) is non-increasing in eps (the hockey-stick divergence), and so is
  // their maximum: one crossing.
  auto profile = [&](double epsilon) {
    return std::max(gaussian_pair_delta(mean_0, std_0, mean_1, std_1, epsilon),
                    gaussian_pair_delta(mean_1, std_1, mean_0, std_0, epsilon));
  };
  if (profile(0.0) <= delta) return 0.0;
  double low = 0.0, high = 1.0;
  while (profile(high) > delta) {
    if (high >= 1e4) return std::numeric_limits<double>::infinity();
    low = high;
    high *= 2.0;
  }
  for (int i = 0; i < 200 && high - low > 1e-12 * std::max(1.0, high); ++i) {
    const double middle = 0.5 * (low + high);
    (profile(middle) > delta ? low : high) = middle;
  }
  return high;  // delta(high) <= delta: the side where the pair is (eps, delta)
}

double canary_cosine(std::span<const double> direction, std::span<const double> model_delta) {
  if (direction.size() != model_delta.size())
    throw InputError(
        fmt::format("canary cosine: a direction of {} coordinates against a model "
                    "delta of {}",
                    direction.size(), model_delta.size()));
  double dot = 0.0, direction_norm = 0.0, delta_norm = 0.0;
  for (std::size_t i = 0; i < direction.size(); ++i) {
    dot += direction[i] * model_delta[i];
    direction_norm += direction[i] * direction[i];
    delta_norm += model_delta[i] * model_delta[i];
  }
  if (direction_norm == 0.0 || delta_norm == 0.0) return 0.0;
  return dot / (std::sqrt(direction_norm) * std::sqrt(delta_norm));
}

std::vector<double> max_over_rounds(std::span<const double> cosines, std::size_t rounds) {
  if (rounds == 0 || cosines.size() % rounds != 0)
    throw InputError(fmt::format("canary statistics: {} cosines are not whole rows of {} rounds",
                                 cosines.size(), rounds));
  std::vector<double> statistic(cosines.size() / rounds);
  for (std::size_t c = 0; c < statistic.size(); ++c) {
    const auto row = cosines.subspan(c * rounds, rounds);
    statistic[c] = *std::max_element(row.begin(), row.end());
  }
  return statistic;
}

CanaryEstimate canary_epsilon_estimate(std::span<const double> inserted,
                                       std::span<const double> held_out, double delta) {
  CanaryEstimate estimate;
  estimate.inserted = fit_gaussian(inserted);
  estimate.held_out = fit_gaussian(held_out);
  estimate.delta = delta;
  // A fit of zero spread (identical statistics) leaves no Gaussian to compare with.
  if (estimate.inserted.std == 0.0 || estimate.held_out.std == 0.0)
    throw InputError("canary estimate: the canary statistics have no spread");
  estimate.epsilon = gaussian_pair_epsilon(estimate.held_out.mean, estimate.held_out.std,
                                           estimate.inserted.mean, estimate.inserted.std, delta);
  return estimate;
}

CanaryEstimate canary_epsilon_estimate_isotropic_null(std::span<const double> inserted,
                                                      long dimension, double delta) {
  if (dimension < 2)
    throw InputError(fmt::format("canary estimate: dimension {} (at least 2 needed)", dimension));
  CanaryEstimate estimate;
  estimate.inserted = fit_gaussian(inserted);
  if (estimate.inserted.std == 0.0)
    throw InputError("canary estimate: the canary statistics have no spread");
  estimate.held_out = {0.0, 1.0 / std::sqrt(static_cast<double>(dimension)), 0};
  estimate.delta = delta;
  estimate.epsilon = gaussian_pair_epsilon(0.0, estimate.held_out.std, estimate.inserted.mean,
                                           estimate.inserted.std, delta);
  return estimate;
}

std::vector<double> draw_canary_direction(std::uint64_t seed, long canary, std::size_t dimension) {
  if (dimension == 0 || canary < 0)
    throw InputError(fmt::format("canary direction: canary {} in dimension {}", canary, dimension));
  std::vector<double> direction(dimension);
  Stream stream(seed, purpose::canary_direction, static_cast<std::uint64_t>(canary));
  stream.fill_normal(direction);
  double norm = 0.0;
  for (const double v : direction) norm += v * v;
  norm = std::sqrt(norm);
  for (double& v : direction) v /= norm;
  return direction;
}

}  // namespace fluence
