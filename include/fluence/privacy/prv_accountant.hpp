#pragma once
// The privacy-random-variable accountant ("prv", docs/math.md §7.2): Gopi, Lee & Wutschitz 2021,
// "Numerical Composition of Differential Privacy". Each step's privacy random variable (the
// privacy loss under P) is truncated to [-L, L] (L from the RDP bound, their Remark 5.6),
// discretized on a mesh h = eps_error / sqrt(T log(12 / delta_error) / 2) with its mean kept, and
// composed by FFT; eps(delta) of the result is an estimate whose error their Theorem 5.5 bounds,
// giving the bracket [eps(delta + delta_error) - eps_error, eps(delta - delta_error) + eps_error].
// Both directions of add/remove adjacency are bracketed and the larger ends are reported.
#include <memory>
#include <vector>

#include "fluence/privacy/accountant.hpp"

namespace fluence {

class PrvAccountant final : public Accountant {
 public:
  /// Opacus's defaults: eps_error = 0.01, delta_error = delta / 1000.
  explicit PrvAccountant(double eps_error = 0.01, double delta_error_ratio = 1e-3);

  std::string_view name() const override { return "prv"; }
  void add_steps(double sampling_rate, double noise_multiplier, long steps) override;
  /// epsilon = upper; lower, estimate and upper as named. InputError when the mesh would need more
  /// than 2^25 points (Opacus refuses such cases too; use "pld").
  EpsilonReport epsilon(double delta) const override;
  /// (q, z, steps) of every phase, flattened.
  std::vector<double> state() const override;
  void restore(const std::vector<double>& state) override;

 private:
  GaussianPhases phases_;
  double eps_error_, delta_error_ratio_;
};

/// A new "prv" accountant with Opacus's default errors.
std::unique_ptr<Accountant> make_prv_accountant();

}  // namespace fluence
