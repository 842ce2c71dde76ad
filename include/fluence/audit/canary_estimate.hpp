#pragma once
// The canary-client estimate of Andrew et al. 2024 ("One-shot empirical privacy estimation for
// federated learning", docs/math.md §11.3), and the (eps, delta) of a pair of Gaussians it rests
// on. k canary clients each send a fixed random unit direction c_j as their update; the statistic
// of a canary is the cosine of c_j with the model delta (the final model's, theta_T - theta_0), or,
// when every round's model is released, the maximum over rounds of its cosine with that round's
// delta. Canaries drawn but never inserted give the statistic's null distribution (for the final
// model in dimension d it is close to N(0, 1/d) for isotropic directions). Gaussians fitted to
// both, the estimate is the eps at delta of distinguishing N(mu_0, sigma_0^2) from N(mu_1,
// sigma_1^2). It is an estimate, not a bound: no confidence is attached, and the Gaussian shape is
// an assumption (exact for the Gaussian mechanism in high dimension, Andrew et al. §4).
#include <cstdint>
#include <span>
#include <vector>

namespace fluence {

/// Sample mean and standard deviation (divisor n - 1) of `values`.
struct GaussianFit {
  double mean = 0.0;
  double std = 0.0;
  long count = 0;
};
/// InputError for fewer than two values or a non-finite one.
GaussianFit fit_gaussian(std::span<const double> values);

/// The hockey-stick divergence delta(eps) = sup_S P(S) - e^eps Q(S) from P = N(mean_p, std_p^2) to
/// Q = N(mean_q, std_q^2), exactly: the privacy loss log(p/q)(x) - eps is a quadratic in x (linear
/// for equal variances), S = {x : it is > 0} is a half-line, two half-lines or an interval, and
/// delta = P(S) - e^eps Q(S) with the normal masses taken in log space. For equal variances it is
/// the Gaussian mechanism's delta(eps) of Balle & Wang 2018 (Theorem 8) at sensitivity / noise =
/// |mean_p - mean_q| / std. InputError for a non-positive std.
double gaussian_pair_delta(double mean_p, double std_p, double mean_q, double std_q,
                           double epsilon);

/// The smallest eps >= 0 with max(delta(P || Q), delta(Q || P)) <= delta (the pair's privacy
/// profile: both directions, as add/remove DP requires), by bisection to a relative tolerance of
/// 1e-12 (absolute 1e-12 near 0); +inf when even eps = 1e4 leaves more than delta (only when delta
/// is below what double can resolve). InputError for delta outside (0, 1).
double gaussian_pair_epsilon(double mean_0, double std_0, double mean_1, double std_1,
                             double delta);

/// cos(direction, model_delta); 0 when either vector is zero (no update carries no signal).
/// InputError for sizes that differ.
double canary_cosine(std::span<const double> direction, std::span<const double> model_delta);

/// The all-iterates statistic of each canary: the maximum over rounds of its cosines, `cosines`
/// row-major [canaries][rounds]. InputError when the size is not a multiple of `rounds` (>= 1).
std::vector<double> max_over_rounds(std::span<const double> cosines, std::size_t rounds);

struct CanaryEstimate {
  GaussianFit inserted;  // the statistic of the canaries that were inserted
  GaussianFit held_out;  // of those never inserted (the null); mean 0, std 1/sqrt(d) when known
  double delta = 0.0;
  double epsilon = 0.0;  // eps at delta between the two fitted Gaussians
};

/// The estimate from both fits (Andrew et al.'s all-iterates form, whose null, a maximum over
/// rounds, has no closed form; and usable for the final model too): the statistics of the
/// inserted canaries and of held-out ones.
CanaryEstimate canary_epsilon_estimate(std::span<const double> inserted,
                                       std::span<const double> held_out, double delta);

/// The final-model estimate with the null known in closed form: the cosine of a uniformly random
/// unit direction in dimension d with any fixed vector has mean 0 and variance 1/d, and is
/// N(0, 1/d) to high accuracy for large d (Andrew et al. §4). InputError for dimension < 2.
CanaryEstimate canary_epsilon_estimate_isotropic_null(std::span<const double> inserted,
                                                      long dimension, double delta);

/// Canary `canary`'s unit direction in `dimension` coordinates: isotropic (normalized standard
/// normals) from the stream keyed (seed, canary_direction, canary), the same on every rank.
std::vector<double> draw_canary_direction(std::uint64_t seed, long canary, std::size_t dimension);

}  // namespace fluence
