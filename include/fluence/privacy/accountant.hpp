#pragma once
// The privacy accountant as a part (docs/math.md §7, docs/architecture.md "Extension points"): a
// run feeds it the events its sampler and privatizer declare, and asks it for eps at a delta.
// Accountants are registered by name (PETSc's XRegister pattern): `privacy.accountant` and
// `fluence privacy --accountant` choose one, and a new accountant is one class and one
// register_accountant() call. Built in: "rdp" (Mironov et al. 2019, an upper bound), "pld"
// (privacy-loss distributions composed by FFT with the connect-the-dots discretization of
// Doroshenko et al. 2022, an upper bound) and "prv" (Gopi et al. 2021: an estimate with its eps
// bracket).
//
// Every built-in accountant covers the add/remove adjacency of one record (or one client) and the
// Poisson-subsampled Gaussian mechanism: each step includes every record independently with
// probability q and releases the sum of clipped contributions plus N(0, (z S)^2 I).
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fluence {

/// eps at one delta. `epsilon` is the value a privacy claim may quote: a guaranteed upper bound for
/// "rdp" and "pld", and the upper end of the bracket for "prv". `lower` and `upper` bracket the
/// true eps of the composed mechanism where the accountant knows such a bracket (PRV's); otherwise
/// lower = 0 and upper = epsilon (RDP, and PLD, whose discretization error bound is not derived).
struct EpsilonReport {
  double epsilon = 0.0;
  double lower = 0.0;
  double estimate = 0.0;  // the accountant's point estimate (= epsilon for RDP and PLD)
  double upper = 0.0;
  double delta = 0.0;
  double rdp_order = 0.0;      // RDP only: the order attaining the minimum (0 elsewhere)
  bool order_at_edge = false;  // RDP only: that order is the grid's first or last
};

class Accountant {
 public:
  virtual ~Accountant() = default;
  /// The registered name ("rdp", "pld", "prv").
  virtual std::string_view name() const = 0;
  /// `steps` more steps of the Poisson-subsampled Gaussian mechanism at rate q (0 <= q <= 1) and
  /// noise multiplier z (> 0; z = 0 means no noise: eps = inf). Steps of different (q, z) compose.
  virtual void add_steps(double sampling_rate, double noise_multiplier, long steps) = 0;
  /// eps at `delta` (0 < delta < 1) after every step added so far (0 before any).
  virtual EpsilonReport epsilon(double delta) const = 0;
  /// The state a checkpoint keeps, as doubles, and its restoration: restore(state()) gives an
  /// accountant whose every later answer is bitwise the same.
  virtual std::vector<double> state() const = 0;
  virtual void restore(const std::vector<double>& state) = 0;
};

/// The steps an accountant composes, as phases of equal (q, z) in the order added (the FFT
/// accountants' input and their checkpoint state: flat (q, z, steps) triples).
class GaussianPhases {
 public:
  struct Phase {
    double q, z;
    long steps;
  };
  /// Validates q in [0, 1], z >= 0 and steps >= 0 (InputError naming the value); steps = 0 or
  /// q = 0 add nothing; a phase of the last phase's (q, z) extends it.
  void add(double sampling_rate, double noise_multiplier, long steps);
  const std::vector<Phase>& phases() const { return phases_; }
  bool empty() const { return phases_.empty(); }
  /// Some phase has z = 0: no noise, eps = inf.
  bool noiseless() const;
  long total_steps() const;
  std::vector<double> state() const;
  /// InputError naming `accountant` when `state` is not whole (q, z, steps) triples.
  void restore(const std::vector<double>& state, std::string_view accountant);

 private:
  std::vector<Phase> phases_;
};

struct AccountantSpec {
  std::string name;
  std::string help;  // one line for `--help` and inputs/README.md
  std::function<std::unique_ptr<Accountant>()> create;
};

/// Adds an accountant to the registry (a later spec of the same name replaces the earlier one).
void register_accountant(AccountantSpec spec);
/// The registered accountants in registration order ("rdp", "pld", "prv" first).
std::vector<AccountantSpec> registered_accountants();
/// Their names, in the same order.
std::vector<std::string> accountant_names();
/// A new accountant by name; InputError naming `what` (the key or option), the name and the
/// registered names when there is none of that name.
std::unique_ptr<Accountant> make_accountant(std::string_view name,
                                            std::string_view what = "privacy.accountant");

/// eps after `steps` steps at (q, z) by the named accountant.
EpsilonReport accountant_epsilon(std::string_view name, double sampling_rate,
                                 double noise_multiplier, long steps, double delta);

/// The smallest noise multiplier z whose eps(z) is at most `target_epsilon`, eps decreasing in z:
/// bracketed by doubling from 1, then bisected to relative precision `tolerance`; InputError
/// (naming `context`) when no z up to 1e4 reaches it.
double smallest_noise_multiplier(const std::function<double(double)>& epsilon_of_noise,
                                 double target_epsilon, double tolerance, std::string_view context);

/// The smallest noise multiplier whose eps (EpsilonReport::epsilon) after `steps` steps at rate q
/// is at most `target_epsilon`, by the named accountant (bisection to relative precision
/// `tolerance`); InputError when no multiplier up to 1e4 reaches it.
double accountant_noise_for_epsilon(std::string_view name, double sampling_rate, long steps,
                                    double target_epsilon, double delta, double tolerance = 1e-10);

}  // namespace fluence
