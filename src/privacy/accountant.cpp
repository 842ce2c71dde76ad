// The accountant registry and the RDP accountant as a registered part (docs/math.md §7).
#include "fluence/privacy/accountant.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "fluence/core/error.hpp"
#include "fluence/core/registry.hpp"
#include "fluence/privacy/pld_accountant.hpp"
#include "fluence/privacy/prv_accountant.hpp"
#include "fluence/privacy/rdp_accountant.hpp"

namespace fluence {

namespace {

// RdpAccountant behind the interface: the same calls in the same order as before the interface,
// so that runs with `privacy.accountant = "rdp"` (the default) keep their bits.
class RdpPart final : public Accountant {
 public:
  std::string_view name() const override { return "rdp"; }
  void add_steps(double sampling_rate, double noise_multiplier, long steps) override {
    accountant_.add_steps(sampling_rate, noise_multiplier, steps);
  }
  EpsilonReport epsilon(double delta) const override {
    const PrivacySpent spent = accountant_.spent(delta);
    EpsilonReport report;
    report.epsilon = report.estimate = report.upper = spent.epsilon;
    report.delta = spent.delta;
    report.rdp_order = spent.order;
    report.order_at_edge = spent.order_at_edge;
    return report;
  }
  std::vector<double> state() const override { return accountant_.rdp(); }
  void restore(const std::vector<double>& state) override { accountant_.restore(state); }

 private:
  RdpAccountant accountant_;
};

Registry<AccountantSpec>& registry() {
  // The built-ins, in a fixed order, registered on first use (a static library drops none).
  static Registry<AccountantSpec> instance(
      "an accountant",
      {{"rdp",
        "Rényi DP of the sampled Gaussian mechanism (Mironov et al. 2019): an upper bound, loose "
        "by a few percent to tens of percent",
        [] { return std::unique_ptr<Accountant>(new RdpPart()); }},
       {"pld",
        "privacy-loss distributions composed by FFT, pessimistic connect-the-dots "
        "discretization (Doroshenko et al. 2022): a tight upper bound",
        make_pld_accountant},
       {"prv",
        "privacy random variables composed by FFT (Gopi et al. 2021): an estimate with its eps "
        "bracket; the upper end is reported",
        make_prv_accountant}});
  return instance;
}

}  // namespace

void register_accountant(AccountantSpec spec) {
  if (!spec.create) throw InputError("register_accountant: an accountant needs a factory");
  registry().add(std::move(spec));
}

std::vector<AccountantSpec> registered_accountants() {
  return registry().specs();
}

std::vector<std::string> accountant_names() {
  return registry().names();
}

std::unique_ptr<Accountant> make_accountant(std::string_view name, std::string_view what) {
  return registry().find(name, what).create();
}

EpsilonReport accountant_epsilon(std::string_view name, double sampling_rate,
                                 double noise_multiplier, long steps, double delta) {
  const auto accountant = make_accountant(name, "accountant");
  accountant->add_steps(sampling_rate, noise_multiplier, steps);
  return accountant->epsilon(delta);
}

void GaussianPhases::add(double q, double z, long steps) {
  if (!(q >= 0.0 && q <= 1.0))
    throw InputError(fmt::format("sampling rate q = {} is outside [0, 1]", q));
  if (!(z >= 0.0)) throw InputError(fmt::format("noise multiplier z = {} must be >= 0", z));
  if (steps < 0) throw InputError(fmt::format("steps = {} must be >= 0", steps));
  if (steps == 0 || q == 0.0) return;
  if (!phases_.empty() && phases_.back().q == q && phases_.back().z == z) {
    phases_.back().steps += steps;
    return;
  }
  phases_.push_back({q, z, steps});
}

bool GaussianPhases::noiseless() const {
  return std::any_of(phases_.begin(), phases_.end(), [](const Phase& p) { return p.z == 0.0; });
}

long GaussianPhases::total_steps() const {
  long steps = 0;
  for (const Phase& p : phases_) steps += p.steps;
  return steps;
}

std::vector<double> GaussianPhases::state() const {
  std::vector<double> out;
  for (const Phase& p : phases_) out.insert(out.end(), {p.q, p.z, static_cast<double>(p.steps)});
  return out;
}

void GaussianPhases::restore(const std::vector<double>& state, std::string_view accountant) {
  if (state.size() % 3 != 0)
    throw InputError(
        fmt::format("checkpoint: {} accountant state has {} values, not (q, z, steps) "
                    "triples",
                    accountant, state.size()));
  GaussianPhases restored;
  for (std::size_t i = 0; i < state.size(); i += 3) {
    const double steps = state[i + 2];
    if (steps != std::floor(steps))
      throw InputError(
          fmt::format("checkpoint: {} accountant steps {} is not whole", accountant, steps));
    restored.add(state[i], state[i + 1], static_cast<long>(steps));
  }
  *this = std::move(restored);
}

double smallest_noise_multiplier(const std::function<double(double)>& epsilon_of_noise,
                                 double target_epsilon, double tolerance,
                                 std::string_view context) {
  if (!(target_epsilon > 0.0))
    throw InputError(fmt::format("target epsilon {} must be > 0", target_epsilon));
  double high = 1.0;
  while (epsilon_of_noise(high) > target_epsilon) {
    high *= 2.0;
    if (high > 1e4)
      throw InputError(fmt::format("no noise multiplier up to 1e4 reaches epsilon {} ({})",
                                   target_epsilon, context));
  }
  double low = high / 2.0;
  while (low > 1e-6 && epsilon_of_noise(low) <= target_epsilon) low /= 2.0;
  // eps(z) decreases in z: keep eps(low) > target >= eps(high).
  while (high - low > tolerance * high) {
    const double middle = 0.5 * (low + high);
    (epsilon_of_noise(middle) > target_epsilon ? low : high) = middle;
  }
  return high;
}

double accountant_noise_for_epsilon(std::string_view name, double sampling_rate, long steps,
                                    double target_epsilon, double delta, double tolerance) {
  make_accountant(name, "accountant");  // an unknown name fails before the search
  return smallest_noise_multiplier(
      [&](double sigma) {
        return accountant_epsilon(name, sampling_rate, sigma, steps, delta).epsilon;
      },
      target_epsilon, tolerance,
      fmt::format("{} accountant, q = {}, steps = {}, delta = {}", name, sampling_rate, steps,
                  delta));
}

}  // namespace fluence
