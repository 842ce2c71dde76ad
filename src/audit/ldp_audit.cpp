// The LDP audit of k-ary randomized response (docs/math.md §11.1).
#include "fluence/audit/ldp_audit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "fluence/audit/purposes.hpp"
#include "fluence/core/deck_keys.hpp"
#include "fluence/core/error.hpp"
#include "fluence/privacy/randomized_response.hpp"

namespace fluence {

namespace {

// The continued fraction of the regularized incomplete beta function I_x(a, b), evaluated by the
// modified Lentz method (converges fast for x < (a + 1) / (a + b + 2); the caller uses the
// symmetry I_x(a, b) = 1 - I_{1-x}(b, a) elsewhere).
double beta_continued_fraction(double a, double b, double x) {
  constexpr double tiny = 1e-300, tolerance = 1e-15;
  auto guard = [&](double v) { return std::abs(v) < tiny ? tiny : v; };
  double c = 1.0, d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0)), h = d;
  for (int m = 1; m <= 1'000'000; ++m) {
    const double m2 = 2.0 * m;
    double term = m * (b - m) * x / ((a - 1.0 + m2) * (a + m2));  // even step
    d = 1.0 / guard(1.0 + term * d);
    c = guard(1.0 + term / c);
    h *= d * c;
    term = -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1.0 + m2));  // odd step
    d = 1.0 / guard(1.0 + term * d);
    c = guard(1.0 + term / c);
    const double change = d * c;
    h *= change;
    if (std::abs(change - 1.0) < tolerance) break;
  }
  return h;
}

// I_x(a, b) = P(Beta(a, b) <= x).
double regularized_beta(double a, double b, double x) {
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x < (a + 1.0) / (a + b + 2.0))
    return std::exp(log_front) * beta_continued_fraction(a, b, x) / a;
  return 1.0 - std::exp(log_front) * beta_continued_fraction(b, a, 1.0 - x) / b;
}

// The p in (0, 1) where the increasing function f(p) crosses `target`, by bisection to 1e-14.
template <class F>
double crossing(F&& f, double target) {
  double low = 0.0, high = 1.0;
  for (int i = 0; i < 200 && high - low > 1e-14 * std::max(high, 1e-300); ++i) {
    const double middle = 0.5 * (low + high);
    (f(middle) < target ? low : high) = middle;
  }
  return 0.5 * (low + high);
}

}  // namespace

// P(X >= x | p) = I_p(x, n - x + 1) increases in p: the lower bound is where it reaches alpha.
double clopper_pearson_lower(long successes, long trials, double alpha) {
  if (successes <= 0) return 0.0;
  const double x = static_cast<double>(successes), n = static_cast<double>(trials);
  return crossing([&](double p) { return regularized_beta(x, n - x + 1.0, p); }, alpha);
}

// P(X <= x | p) = 1 - I_p(x + 1, n - x) decreases in p: the upper bound is where it falls to
// alpha, i.e. where I_p(x + 1, n - x) reaches 1 - alpha.
double clopper_pearson_upper(long successes, long trials, double alpha) {
  if (successes >= trials) return 1.0;
  const double x = static_cast<double>(successes), n = static_cast<double>(trials);
  return crossing([&](double p) { return regularized_beta(x + 1.0, n - x, p); }, 1.0 - alpha);
}

long ldp_audit_draws(int domain, double epsilon, double relative_error) {
  // The distinguishing output o = u has P(o | u) = e^eps / m and P(o | v) = 1 / m, m = e^eps + k
  // - 1; the standard error of the log of their estimated ratio is about
  // sqrt((1 + e^-eps) m / N). Three of them within relative_error * eps:
  //   N = 9 (1 + e^-eps) m / (relative_error eps)^2.
  const double m = std::exp(std::min(epsilon, 30.0)) + domain - 1.0;
  const double needed =
      9.0 * (1.0 + std::exp(-epsilon)) * m / std::pow(relative_error * epsilon, 2.0);
  return std::max(10'000L, static_cast<long>(std::ceil(std::min(needed, 1e12))));
}

LdpAuditResult audit_randomized_response(int domain, double epsilon, long draws, std::uint64_t seed,
                                         double beta, const LocalRandomizer& randomizer) {
  if (domain < 2) throw InputError(fmt::format("LDP audit: domain {} must be >= 2", domain));
  if (!(epsilon > 0.0) || !std::isfinite(epsilon))
    throw InputError(fmt::format("LDP audit: epsilon {} must be finite and > 0", epsilon));
  if (draws < 1) throw InputError(fmt::format("LDP audit: draws {} must be >= 1", draws));
  if (!(beta > 0.0 && beta < 1.0))
    throw InputError(fmt::format("LDP audit: beta {} is outside (0, 1)", beta));
  const LocalRandomizer mechanism =
      randomizer ? randomizer : [&](std::int32_t value, Stream& stream) {
        return randomize_value(value, domain, epsilon, stream);
      };
  // counts[input][output] for inputs u = 0 and v = 1; each draw its own stream (the draw index
  // keys it), as a client's (row, attribute) draw is.
  std::vector<long> counts[2] = {std::vector<long>(domain, 0), std::vector<long>(domain, 0)};
  long correct = 0;
  for (long i = 0; i < draws; ++i) {
    for (int input = 0; input < 2; ++input) {
      Stream stream(seed, purpose::ldp_audit_draws, static_cast<std::uint64_t>(input),
                    static_cast<std::uint64_t>(i));
      const std::int32_t output = mechanism(input, stream);
      if (output < 0 || output >= domain)
        throw RuntimeError(
            fmt::format("LDP audit: the mechanism reported {} outside [0, {})", output, domain));
      ++counts[input][static_cast<std::size_t>(output)];
    }
    // The attribute-inference game: a uniformly drawn true value, one report, the report guessed.
    Stream stream(seed, purpose::ldp_audit_draws, 2, static_cast<std::uint64_t>(i));
    const auto value = static_cast<std::int32_t>(stream.below(static_cast<std::uint64_t>(domain)));
    correct += mechanism(value, stream) == value;
  }
  LdpAuditResult result;
  result.domain = domain;
  result.epsilon_configured = epsilon;
  result.draws = draws;
  result.confidence = 1.0 - beta;
  const double alpha = beta / (4.0 * domain);
  const double n = static_cast<double>(draws);
  double lower = 0.0, estimate = 0.0;
  for (int o = 0; o < domain; ++o) {
    for (int a = 0; a < 2; ++a) {
      const long mine = counts[a][o], other = counts[1 - a][o];
      if (mine > 0 && other > 0)
        estimate = std::max(estimate, std::log(static_cast<double>(mine) / other));
      const double low = clopper_pearson_lower(mine, draws, alpha);
      const double high = clopper_pearson_upper(other, draws, alpha);
      if (low > 0.0 && high > 0.0) lower = std::max(lower, std::log(low / high));
    }
  }
  // An output never seen from one input leaves the estimate at its other outputs' ratios.
  result.epsilon_estimate = estimate;
  result.epsilon_lower = lower;
  result.inference_accuracy = static_cast<double>(correct) / n;
  result.bayes_accuracy = rr_keep_probability(epsilon, domain);  // e^eps / (e^eps + k - 1)
  return result;
}

void register_audit_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      section("audit",
              "privacy measured, not only bounded: the LDP audit of the deck's randomized "
              "response ([ldp]) as it runs, canary clients in private training and canary "
              "records in LIA's DP-SGD (docs/math.md §11)"),
      key("audit.draws", T::integer, "0",
          "runs of the mechanism per input (0 = enough for three standard errors within "
          "`relative_error` of each configured eps)",
          0),
      below_maximum(key("audit.confidence", T::real, "0.95",
                        "confidence 1 − β of `epsilon_lower` (Clopper–Pearson, Bonferroni over "
                        "outputs)",
                        0.0, 1.0, true)),
      below_maximum(key("audit.relative_error", T::real, "0.05",
                        "with `draws = 0`: the target relative error of `epsilon_estimate`", 0.0,
                        1.0, true)),
      key("audit.canaries", T::integer, "0",
          "`fluence train` with privacy: canary clients inserted with probability 1/2 each, "
          "scored after every round and at the end: the one-run lower bound and the canary "
          "estimate of eps (0 = none; 1 = the target of a multi-run audit); `fluence lia` with "
          "a finite `lia.epsilon_train`: canary records (gradient canaries) in contributor 0's "
          "DP-SGD, scored white box and from its final layer (docs/math.md §11.3b)",
          0),
      choice("audit.canary_inclusion", "\"random\"", {"random", "all", "none"},
             "which canaries a run inserts: each with probability 1/2 (`random`), every one "
             "(`all`) or none (`none`): a multi-run audit's runs with and without its target "
             "(docs/math.md §11.4)"),
      key("audit.lira_shadows", T::integer, "0",
          "`fluence audit --membership`: also LiRA with this many shadow models (even, at least "
          "4; 0 = none), each shadow and the target trained on a random half of the clients or "
          "of the examples (`membership_level`; docs/math.md §11.5)",
          0),
      choice("audit.membership_level", "\"client\"", {"client", "example"},
             "what LiRA's halves are made of: clients, each shadow and the target trained by "
             "FedAvg (softmax regression only), or every client's examples, each model trained "
             "as the deck trains (FedAvg or its private training; any model)"),
  });
}

AuditConfig AuditConfig::from_deck(const Deck& deck) {
  AuditConfig config;
  config.draws = static_cast<long>(deck.integer("audit.draws"));
  config.confidence = deck.real("audit.confidence");
  config.relative_error = deck.real("audit.relative_error");
  return config;
}

std::vector<LdpAuditCase> audit_ldp_plan(const LdpPlan& plan, const AuditConfig& config,
                                         std::uint64_t seed) {
  std::vector<LdpAuditCase> cases;
  for (std::size_t a = 0; a < plan.attributes.size(); ++a) {
    std::vector<double> levels;
    for (int client = 0; client < plan.clients; ++client) {
      const double eps = plan.epsilon_of(client, static_cast<int>(a));
      if (std::isfinite(eps)) levels.push_back(eps);
    }
    std::sort(levels.begin(), levels.end());
    levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
    for (const double eps : levels) {
      const int domain = plan.domain[a];
      const long draws =
          config.draws > 0 ? config.draws : ldp_audit_draws(domain, eps, config.relative_error);
      cases.push_back({plan.attributes[a], audit_randomized_response(domain, eps, draws, seed,
                                                                     1.0 - config.confidence)});
    }
  }
  return cases;
}

}  // namespace fluence
