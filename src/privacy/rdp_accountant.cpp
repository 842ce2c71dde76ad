// RDP of the sampled Gaussian mechanism and its conversion to (eps, delta) (docs/math.md §7).
#include "fluence/privacy/rdp_accountant.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "fluence/core/error.hpp"
#include "fluence/privacy/accountant.hpp"

namespace fluence {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double log_add(double a, double b) {
  if (a == -kInf) return b;
  if (b == -kInf) return a;
  const double top = std::max(a, b);
  return top + std::log1p(std::exp(std::min(a, b) - top));
}

// log(e^a - e^b) for a >= b.
double log_sub(double a, double b) {
  if (b == -kInf) return a;
  if (a <= b) return -kInf;  // the exact difference is 0 (or rounding made it negative)
  return a + std::log(-std::expm1(b - a));
}

// log erfc(x), also where erfc underflows: the asymptotic series
// erfc(x) ~ e^{-x^2} / (x sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6)).
double log_erfc(double x) {
  if (x < 25.0) return std::log(std::erfc(x));
  const double r = 1.0 / (x * x);
  return -x * x - std::log(x) - 0.5 * std::log(M_PI) +
         std::log1p(-0.5 * r + 0.75 * r * r - 1.875 * r * r * r);
}

// log A_alpha for integer alpha: the exact binomial sum of Mironov et al. 2019
// (that paper's Eq. 3 and §3.3)
//   A = sum_i C(alpha, i) (1-q)^{alpha-i} q^i exp((i^2 - i) / (2 sigma^2)).
double log_a_integer(double q, double sigma, long alpha) {
  double log_a = -kInf;
  for (long i = 0; i <= alpha; ++i) {
    const double log_binomial = std::lgamma(alpha + 1.0) - std::lgamma(i + 1.0) -
                                std::lgamma(static_cast<double>(alpha - i) + 1.0);
    const double term = log_binomial + i * std::log(q) + (alpha - i) * std::log1p(-q) +
                        static_cast<double>(i * i - i) / (2.0 * sigma * sigma);
    log_a = log_add(log_a, term);
  }
  return log_a;
}

// log A_alpha for fractional alpha: the two-sided series of Mironov et al. 2019 §3.3, summed until
// both terms fall below e^-30 relative to 1; binomial coefficients of a real alpha change sign, so
// positive and negative terms are accumulated in log space separately.
double log_a_fractional(double q, double sigma, double alpha) {
  double log_a0 = -kInf, log_a1 = -kInf;
  const double z0 = sigma * sigma * std::log(1.0 / q - 1.0) + 0.5;
  double log_coef = 0.0;  // log |C(alpha, i)|
  bool positive = true;
  for (long i = 0;; ++i) {
    if (i > 0) {
      const double factor = (alpha - static_cast<double>(i) + 1.0) / static_cast<double>(i);
      log_coef += std::log(std::abs(factor));
      if (factor < 0) positive = !positive;
    }
    const double j = alpha - static_cast<double>(i);
    const double log_t0 = log_coef + i * std::log(q) + j * std::log1p(-q);
    const double log_t1 = log_coef + j * std::log(q) + i * std::log1p(-q);
    const double log_e0 = std::log(0.5) + log_erfc((i - z0) / (M_SQRT2 * sigma));
    const double log_e1 = std::log(0.5) + log_erfc((z0 - j) / (M_SQRT2 * sigma));
    const double log_s0 = log_t0 + (static_cast<double>(i) * i - i) / (2 * sigma * sigma) + log_e0;
    const double log_s1 = log_t1 + (j * j - j) / (2 * sigma * sigma) + log_e1;
    if (positive) {
      log_a0 = log_add(log_a0, log_s0);
      log_a1 = log_add(log_a1, log_s1);
    } else {
      log_a0 = log_sub(log_a0, log_s0);
      log_a1 = log_sub(log_a1, log_s1);
    }
    if (std::max(log_s0, log_s1) < -30.0 || i > 100000) break;
  }
  return log_add(log_a0, log_a1);
}

}  // namespace

std::vector<double> default_rdp_orders() {
  std::vector<double> orders;
  for (int x = 1; x < 100; ++x) orders.push_back(1.0 + x / 10.0);
  for (int a = 11; a < 64; ++a) orders.push_back(a);
  for (double a : {128.0, 256.0, 512.0, 1024.0}) orders.push_back(a);
  return orders;
}

double sampled_gaussian_rdp(double q, double noise_multiplier, double order) {
  if (!(q >= 0.0 && q <= 1.0))
    throw InputError(fmt::format("sampling rate {} is outside [0, 1]", q));
  if (!(order > 1.0)) throw InputError(fmt::format("RDP order {} must be > 1", order));
  if (q == 0.0) return 0.0;
  if (!(noise_multiplier > 0.0)) return kInf;
  const double sigma = noise_multiplier;
  if (q == 1.0) return order / (2.0 * sigma * sigma);
  const double log_a = order == std::floor(order)
                           ? log_a_integer(q, sigma, static_cast<long>(order))
                           : log_a_fractional(q, sigma, order);
  return log_a / (order - 1.0);
}

PrivacySpent epsilon_from_rdp(const std::vector<double>& orders, const std::vector<double>& rdp,
                              double delta) {
  if (!(delta > 0.0 && delta < 1.0))
    throw InputError(fmt::format("delta = {} is outside (0, 1)", delta));
  PrivacySpent best;
  best.epsilon = kInf;
  best.delta = delta;
  for (std::size_t k = 0; k < orders.size(); ++k) {
    const double a = orders[k], r = rdp[k];
    double eps = kInf;
    if (delta * delta + std::expm1(-r) >= 0.0)
      eps = 0.0;  // delta >= sqrt(1 - e^-r): the pair holds with eps = 0
    else if (a > 1.01)
      eps = r + std::log1p(-1.0 / a) - (std::log(delta) + std::log(a)) / (a - 1.0);
    if (eps < best.epsilon) {
      best.epsilon = eps;
      best.order = a;
      best.order_at_edge = k == 0 || k + 1 == orders.size();
    }
  }
  best.epsilon = std::max(0.0, best.epsilon);
  return best;
}

PrivacySpent dp_sgd_epsilon(double q, double noise_multiplier, long steps, double delta,
                            const std::vector<double>& orders) {
  RdpAccountant accountant(orders);
  accountant.add_steps(q, noise_multiplier, steps);
  return accountant.spent(delta);
}

double noise_for_epsilon(double q, long steps, double target_epsilon, double delta,
                         double tolerance, const std::vector<double>& orders) {
  return smallest_noise_multiplier(
      [&](double sigma) { return dp_sgd_epsilon(q, sigma, steps, delta, orders).epsilon; },
      target_epsilon, tolerance, fmt::format("q = {}, steps = {}, delta = {}", q, steps, delta));
}

RdpAccountant::RdpAccountant(std::vector<double> orders)
    : orders_(std::move(orders)), rdp_(orders_.size(), 0.0) {}

void RdpAccountant::restore(const std::vector<double>& rdp) {
  if (rdp.size() != orders_.size())
    throw InputError(fmt::format("checkpoint: accountant state has {} orders, expected {}",
                                 rdp.size(), orders_.size()));
  rdp_ = rdp;
}

void RdpAccountant::add_steps(double q, double noise_multiplier, long steps) {
  if (steps < 0) throw InputError(fmt::format("steps = {} must be >= 0", steps));
  if (step_rdp_.empty() || q != step_q_ || noise_multiplier != step_sigma_) {
    step_rdp_.resize(orders_.size());
    for (std::size_t k = 0; k < orders_.size(); ++k)
      step_rdp_[k] = sampled_gaussian_rdp(q, noise_multiplier, orders_[k]);
    step_q_ = q;
    step_sigma_ = noise_multiplier;
  }
  for (std::size_t k = 0; k < orders_.size(); ++k)
    rdp_[k] += static_cast<double>(steps) * step_rdp_[k];
}

}  // namespace fluence
