#pragma once
// The privacy-loss-distribution accountant ("pld", docs/math.md §7.1): the add/remove privacy loss
// of each step of the Poisson-subsampled Gaussian mechanism, discretized on a uniform grid of loss
// values by the connect-the-dots construction of Doroshenko, Ghazi, Kamath, Kumar & Manurangsi
// 2022 ("Connect the Dots: Tighter Discrete Approximations of Privacy Loss Distributions"), whose
// delta(eps) interpolates the exact one at the grid points and lies above it in between, composed
// over the steps by FFT (Koskela, Jälkö & Honkela 2020). Both directions of the adjacency are
// composed separately and the larger eps is reported: an upper bound on the true eps up to
// floating-point rounding.
#include <memory>
#include <vector>

#include "fluence/privacy/accountant.hpp"

namespace fluence {

class PldAccountant final : public Accountant {
 public:
  /// `value_mesh` > 0 fixes the loss grid's spacing h; 0 (the default) chooses it from the steps
  /// added so far (value_mesh()).
  explicit PldAccountant(double value_mesh = 0.0);
  ~PldAccountant() override;
  PldAccountant(PldAccountant&&) noexcept;
  PldAccountant& operator=(PldAccountant&&) noexcept;

  std::string_view name() const override { return "pld"; }
  void add_steps(double sampling_rate, double noise_multiplier, long steps) override;
  /// epsilon = estimate = upper = the PLD bound; lower = 0 (no rigorous discretization error bound
  /// is derived; see docs/math.md §7.1).
  EpsilonReport epsilon(double delta) const override;
  /// (q, z, steps) of every phase, flattened.
  std::vector<double> state() const override;
  void restore(const std::vector<double>& state) override;

  /// The grid spacing h epsilon() uses for the steps added so far: a power of two, the fixed one
  /// when the constructor was given one.
  double value_mesh() const;

 private:
  struct Cache;
  double eps_for_direction(int direction, double h, double delta) const;

  GaussianPhases phases_;
  double fixed_mesh_ = 0.0;
  // One step's discretized PMF and its cumulant generating function per (direction, q, z, h): a
  // training run asks for eps after every round, and these do not change between rounds.
  std::unique_ptr<Cache> cache_;
};

/// A new "pld" accountant with the automatic grid.
std::unique_ptr<Accountant> make_pld_accountant();

}  // namespace fluence
