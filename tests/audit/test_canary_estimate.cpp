// The canary-client estimate (Andrew et al. 2024) and the privacy profile of two Gaussians: equal
// variances against privacy/'s exact Gaussian-mechanism delta(eps) (Balle & Wang 2018, the PLD
// tests' reference), unequal variances against quadrature of the hockey-stick integral, and a
// simulated canary game in 40,000 dimensions whose estimate lands near the analytic eps.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../../src/privacy/loss_distribution.hpp"
#include "fluence/audit/canary_estimate.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/fl/purposes.hpp"

namespace fluence {
namespace {

// The Gaussian mechanism of sensitivity 1 and noise z: delta(eps) from privacy/ (q = 1: no
// subsampling), and its eps(delta) by bisection on it.
double balle_wang_delta(double z, double eps) {
  return static_cast<double>(
      privacy_loss::hockey_stick(privacy_loss::Direction::remove, 1.0, z, eps));
}
double balle_wang_epsilon(double z, double delta) {
  double low = 0.0, high = 100.0;
  for (int i = 0; i < 200; ++i) {
    const double middle = 0.5 * (low + high);
    (balle_wang_delta(z, middle) > delta ? low : high) = middle;
  }
  return high;
}

// Equal variances: N(mu, s^2) against N(0, s^2) is the Gaussian mechanism at z = s / mu. Relative
// agreement to 1e-9 (privacy/ works in long double, this code in double: erfc's ~1e-16 relative
// error, amplified by at most the ratio of the two terms of Balle & Wang's difference, here < 1e5).
TEST(GaussianPair, EqualVariancesGiveBalleWang) {
  for (double mu : {0.1, 0.5, 1.0, 3.0}) {
    for (double s : {0.5, 1.0, 2.0}) {
      for (double eps : {0.0, 0.3, 1.0, 4.0, 10.0}) {
        const double expected = balle_wang_delta(s / mu, eps);
        if (expected < 1e-250) continue;
        EXPECT_NEAR(gaussian_pair_delta(mu, s, 0.0, s, eps), expected, 1e-9 * expected)
            << mu << " " << s << " " << eps;
        // The Gaussian mechanism is symmetric: the other direction has the same delta(eps).
        EXPECT_NEAR(gaussian_pair_delta(0.0, s, mu, s, eps), expected, 1e-9 * expected);
      }
    }
  }
  for (double z : {0.5, 1.0, 4.4}) {
    for (double delta : {1e-5, 1e-10}) {
      EXPECT_NEAR(gaussian_pair_epsilon(0.0, z, 1.0, z, delta), balle_wang_epsilon(z, delta), 1e-9)
          << z << " " << delta;
    }
  }
  EXPECT_EQ(gaussian_pair_epsilon(1.0, 2.0, 1.0, 2.0, 1e-5), 0.0);  // the same distribution
}

// Unequal variances against sup_S P(S) - e^eps Q(S) = integral of (p - e^eps q)_+, by composite
// Simpson on 4 10^5 intervals over +-40 standard deviations (the integrand is smooth except at the
// two kinks where p = e^eps q, which cost O(h^2) = 1e-8 of a relative error near the kink; the
// check allows 1e-6 relative plus 1e-12 absolute).
double hockey_stick_by_quadrature(double mp, double sp, double mq, double sq, double eps) {
  const double low = std::min(mp - 40 * sp, mq - 40 * sq),
               high = std::max(mp + 40 * sp, mq + 40 * sq);
  const long intervals = 400'000;
  const double h = (high - low) / intervals;
  auto density = [](double x, double m, double s) {
    const double z = (x - m) / s;
    return std::exp(-0.5 * z * z) / (s * std::sqrt(2.0 * M_PI));
  };
  auto f = [&](double x) {
    return std::max(0.0, density(x, mp, sp) - std::exp(eps) * density(x, mq, sq));
  };
  double sum = f(low) + f(high);
  for (long i = 1; i < intervals; ++i) sum += (i % 2 ? 4.0 : 2.0) * f(low + i * h);
  return sum * h / 3.0;
}

TEST(GaussianPair, UnequalVariancesMatchQuadrature) {
  struct Pair {
    double mp, sp, mq, sq;
  };
  const Pair pairs[] = {{1.0, 1.2, 0.0, 1.0}, {0.0, 1.0, 1.0, 1.2}, {0.5, 0.7, 0.0, 1.0},
                        {2.0, 1.0, 0.0, 0.5}, {0.0, 1.0, 0.0, 1.5}, {0.3, 1.0, 0.0, 1.0001}};
  for (const auto& [mp, sp, mq, sq] : pairs) {
    for (double eps : {0.0, 0.5, 1.0, 2.0, 4.0}) {
      const double expected = hockey_stick_by_quadrature(mp, sp, mq, sq, eps);
      EXPECT_NEAR(gaussian_pair_delta(mp, sp, mq, sq, eps), expected, 1e-6 * expected + 1e-12)
          << mp << " " << sp << " " << mq << " " << sq << " eps " << eps;
    }
  }
}

// eps(delta) is the crossing of the larger direction's delta(eps); unequal variances make the
// privacy loss unbounded, so eps still falls as delta does.
TEST(GaussianPair, EpsilonIsWhereTheProfileCrossesDelta) {
  const double eps = gaussian_pair_epsilon(0.0, 1.0, 1.0, 1.3, 1e-5);
  const double at = std::max(gaussian_pair_delta(0.0, 1.0, 1.0, 1.3, eps),
                             gaussian_pair_delta(1.0, 1.3, 0.0, 1.0, eps));
  EXPECT_LE(at, 1e-5);
  const double before = std::max(gaussian_pair_delta(0.0, 1.0, 1.0, 1.3, eps * (1 - 1e-9)),
                                 gaussian_pair_delta(1.0, 1.3, 0.0, 1.0, eps * (1 - 1e-9)));
  EXPECT_GT(before, 1e-5);
  EXPECT_EQ(eps, gaussian_pair_epsilon(1.0, 1.3, 0.0, 1.0, 1e-5));  // both directions: symmetric
  EXPECT_GT(gaussian_pair_epsilon(0.0, 1.0, 1.0, 1.3, 1e-8), eps);
  EXPECT_THROW(gaussian_pair_epsilon(0.0, 1.0, 1.0, 1.0, 0.0), InputError);
  EXPECT_THROW(gaussian_pair_delta(0.0, 0.0, 1.0, 1.0, 1.0), InputError);
}

TEST(CanaryEstimate, FitsAndStatistics) {
  const std::vector<double> values = {1.0, 2.0, 4.0, 9.0};
  const GaussianFit fit = fit_gaussian(values);
  EXPECT_DOUBLE_EQ(fit.mean, 4.0);
  EXPECT_DOUBLE_EQ(fit.std, std::sqrt((9.0 + 4.0 + 0.0 + 25.0) / 3.0));
  EXPECT_EQ(fit.count, 4);
  const std::vector<double> a = {1.0, 0.0, 0.0}, b = {1.0, 1.0, 0.0}, zero = {0.0, 0.0, 0.0};
  EXPECT_NEAR(canary_cosine(a, b), 1.0 / std::sqrt(2.0), 1e-15);
  EXPECT_EQ(canary_cosine(a, zero), 0.0);
  // [2 canaries][3 rounds]
  const std::vector<double> cosines = {0.1, -0.3, 0.2, -0.5, -0.1, -0.4};
  EXPECT_EQ(max_over_rounds(cosines, 3), (std::vector<double>{0.2, -0.1}));
  EXPECT_THROW(max_over_rounds(cosines, 4), InputError);
  EXPECT_THROW(fit_gaussian(std::vector<double>{1.0}), InputError);
  EXPECT_THROW(canary_cosine(a, std::vector<double>{1.0}), InputError);
}

// Directions are unit, reproducible by key, and isotropic: cosines of independent ones in d = 2000
// have mean 0 and variance 1/d (both within 5 standard errors over 2000 pairs).
TEST(CanaryEstimate, DirectionsAreIsotropicUnitVectors) {
  const std::size_t d = 2000;
  EXPECT_EQ(draw_canary_direction(5, 3, d), draw_canary_direction(5, 3, d));
  double sum = 0.0, squares = 0.0;
  const int pairs = 2000;
  for (int i = 0; i < pairs; ++i) {
    const auto a = draw_canary_direction(5, 2 * i, d), b = draw_canary_direction(5, 2 * i + 1, d);
    double norm = 0.0;
    for (double v : a) norm += v * v;
    ASSERT_NEAR(norm, 1.0, 1e-12);
    const double c = canary_cosine(a, b);
    sum += c;
    squares += c * c;
  }
  EXPECT_NEAR(sum / pairs, 0.0, 5.0 / std::sqrt(d * pairs));
  // Var(c^2) = 2/d^2 for large d: 5 standard errors of the mean of c^2.
  EXPECT_NEAR(squares / pairs, 1.0 / d, 5.0 * std::sqrt(2.0 / pairs) / d);
}

// The final-model canary game on the Gaussian mechanism: k = 1000 canaries inserted (each a unit
// direction, sensitivity 1), 1000 held out, the released delta = sum of inserted directions +
// N(0, sigma^2 I) in d = 40,000, sigma chosen for eps = 4 at delta = 1e-5. A canary's cosine is
// (1 + sigma xi + interference) / |Delta|, so the estimate is the Gaussian mechanism's eps up to
// the interference of the other canaries (variance k/d = 0.025 against sigma^2 ~ 1.2: ~1% on mu)
// and sampling: the fitted mu has a standard error of about sqrt(2/k) = 4.5% (held-out null) and
// 3.5% (closed-form null), ~6% and ~5% on eps. The check allows 20%: three to four standard errors.
TEST(CanaryEstimate, FinalModelEstimateIsNearTheAnalyticEpsilon) {
  const double delta = 1e-5, target = 4.0;
  double low = 0.1, high = 10.0;  // sigma with Balle-Wang eps(sigma) = 4
  for (int i = 0; i < 100; ++i) {
    const double middle = 0.5 * (low + high);
    (balle_wang_epsilon(middle, delta) > target ? low : high) = middle;
  }
  const double sigma = high;
  const std::size_t d = 40'000;
  const long k = 1000;
  std::vector<double> released(d);
  Stream noise(17, purpose::server_noise);
  noise.fill_normal(released);
  for (double& v : released) v *= sigma;
  for (long c = 0; c < k; ++c) {
    const auto direction = draw_canary_direction(17, c, d);
    for (std::size_t i = 0; i < d; ++i) released[i] += direction[i];
  }
  std::vector<double> inserted, held_out;
  for (long c = 0; c < 2 * k; ++c)
    (c < k ? inserted : held_out)
        .push_back(canary_cosine(draw_canary_direction(17, c, d), released));
  const CanaryEstimate fitted = canary_epsilon_estimate(inserted, held_out, delta);
  EXPECT_NEAR(fitted.epsilon, target, 0.2 * target);
  const CanaryEstimate closed =
      canary_epsilon_estimate_isotropic_null(inserted, static_cast<long>(d), delta);
  EXPECT_NEAR(closed.epsilon, target, 0.2 * target);
  EXPECT_NEAR(fitted.held_out.std, 1.0 / std::sqrt(static_cast<double>(d)),
              0.1 / std::sqrt(d * 1.0));
}

}  // namespace
}  // namespace fluence
