#pragma once
// Rényi-DP accountant for the Poisson-subsampled Gaussian mechanism (seed 004 §2.1; seed 002's
// DP-SGD): Mironov, Talwar & Zhang 2019, "Rényi Differential Privacy of the Sampled Gaussian
// Mechanism", with the exact binomial sum at integer orders and the two-sided series at fractional
// orders; composition over steps adds RDP; the conversion to (eps, delta) is the improved bound of
// Balle et al. 2020 / Canonne, Kamath & Steinke 2020:
//   eps = rdp(alpha) + log1p(-1/alpha) - (log delta + log alpha) / (alpha - 1),
// minimized over the orders. docs/math.md §7.
#include <vector>

namespace fluence {

/// dp_accounting's default orders: 1.1, 1.2, ..., 10.9, 11, 12, ..., 63, 128, 256, 512, 1024.
std::vector<double> default_rdp_orders();

/// RDP at `order` of one step of the sampled Gaussian mechanism with sampling rate q and noise
/// multiplier sigma (noise std / sensitivity). q = 1 gives alpha / (2 sigma^2).
double sampled_gaussian_rdp(double q, double noise_multiplier, double order);

struct PrivacySpent {
  double epsilon = 0.0;
  double delta = 0.0;
  double order = 0.0;          // the order attaining the minimum
  bool order_at_edge = false;  // the optimum is the grid's smallest or largest order
};

/// (eps, delta) after composing `rdp` (one value per order, already summed over steps).
PrivacySpent epsilon_from_rdp(const std::vector<double>& orders, const std::vector<double>& rdp,
                              double delta);

/// eps after `steps` steps at rate q and noise multiplier sigma.
PrivacySpent dp_sgd_epsilon(double q, double noise_multiplier, long steps, double delta,
                            const std::vector<double>& orders = default_rdp_orders());

/// The smallest noise multiplier whose eps after `steps` steps is at most `target_epsilon`
/// (bisection to relative precision `tolerance`); InputError when no multiplier up to 1e4 reaches
/// it.
double noise_for_epsilon(double q, long steps, double target_epsilon, double delta,
                         double tolerance = 1e-10,
                         const std::vector<double>& orders = default_rdp_orders());

/// Running RDP of a training run: add the steps as they happen (rates and noise may vary).
class RdpAccountant {
 public:
  explicit RdpAccountant(std::vector<double> orders = default_rdp_orders());
  void add_steps(double q, double noise_multiplier, long steps);
  PrivacySpent spent(double delta) const { return epsilon_from_rdp(orders_, rdp_, delta); }
  const std::vector<double>& orders() const { return orders_; }
  const std::vector<double>& rdp() const { return rdp_; }  // for checkpoints
  /// Restores a checkpointed RDP vector (one value per order).
  void restore(const std::vector<double>& rdp);

 private:
  std::vector<double> orders_, rdp_;
  // One step's RDP at the last (q, sigma): a training run adds the same step every round, and
  // the fractional orders' series cost about a millisecond.
  double step_q_ = -1.0, step_sigma_ = -1.0;
  std::vector<double> step_rdp_;
};

}  // namespace fluence
