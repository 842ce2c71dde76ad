#pragma once
// The empirical privacy of a local randomizer as it runs (docs/math.md §11.1): k-ary randomized
// response on one attribute, audited by a distinguishing test. The mechanism is run `draws` times
// on each of two neighbouring inputs u and v (every pair of values is neighbouring for LDP; by
// symmetry of randomized response u = 0, v = 1 is the worst case, and the audit checks the
// mechanism as given, so a broken one shows up); for every output o the counts estimate P(o | u)
// and P(o | v), and
//   epsilon_estimate = max_o |log(P^(o | u) / P^(o | v))|,
//   epsilon_lower    = max_o log(lower_{beta'}(P(o | u)) / upper_{beta'}(P(o | v))) (and u, v
//                      swapped), with exact Clopper-Pearson bounds at beta' = beta / (4 k): a
//                      lower bound on the mechanism's epsilon at confidence 1 - beta (Bonferroni
//                      over the k outputs, both directions and both bounds).
// The attribute-inference adversary sees one report of a value drawn uniformly from the k values
// and guesses the report (the Bayes-optimal guess when keeping is likelier than any one switch);
// its accuracy is compared with the Bayes bound e^eps / (e^eps + k - 1).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fluence/core/config.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/privacy/randomized_response.hpp"

namespace fluence {

/// A local randomizer of one value in [0, domain) drawing from `stream`.
using LocalRandomizer = std::function<std::int32_t(std::int32_t value, Stream& stream)>;

struct LdpAuditResult {
  int domain = 0;
  double epsilon_configured = 0.0;
  long draws = 0;  // per input (and for the attribute-inference game)
  double confidence = 0.0;
  double epsilon_estimate = 0.0;
  double epsilon_lower = 0.0;
  double inference_accuracy = 0.0;  // the adversary's measured accuracy
  double bayes_accuracy = 0.0;      // e^eps / (e^eps + k - 1) at the configured eps
};

/// The draws per input that bring three standard errors of epsilon_estimate within
/// `relative_error` of `epsilon` for k-ary randomized response (at least 10^4): about 4 10^5 for
/// k = 16 at eps = 0.5, 1.7 10^5 at eps = 8, with relative_error = 0.05.
long ldp_audit_draws(int domain, double epsilon, double relative_error = 0.05);

/// Audits `randomizer` (default: privacy/randomized_response's randomize_value at `epsilon`) as a
/// k-ary mechanism claiming `epsilon`. Streams keyed by (seed, ldp_audit_draws, input, draw): the
/// result does not depend on anything else. InputError for domain < 2, a non-positive or
/// non-finite epsilon, draws < 1 or beta outside (0, 1).
LdpAuditResult audit_randomized_response(int domain, double epsilon, long draws, std::uint64_t seed,
                                         double beta = 0.05,
                                         const LocalRandomizer& randomizer = {});

/// The exact Clopper-Pearson bounds of a binomial proportion: the lower bound at one-sided level
/// alpha for `successes` of `trials` (0 for none), and the upper bound (1 for all).
double clopper_pearson_lower(long successes, long trials, double alpha);
double clopper_pearson_upper(long successes, long trials, double alpha);

/// What `fluence audit` does with a deck's [ldp] plan: one audit per attribute and distinct finite
/// epsilon some client uses, in the plan's attribute order and ascending epsilon.
struct LdpAuditCase {
  std::string attribute;  // as the deck names it ("label" for the label)
  LdpAuditResult result;
};

struct AuditConfig {
  long draws = 0;            // per input; 0: ldp_audit_draws at relative_error
  double confidence = 0.95;  // 1 - beta of the lower bound
  double relative_error = 0.05;

  static AuditConfig from_deck(const Deck& deck);
};

/// Declares the [audit] keys AuditConfig::from_deck reads (inputs/README.md's tables).
void register_audit_keys(DeckSchema& schema);

std::vector<LdpAuditCase> audit_ldp_plan(const LdpPlan& plan, const AuditConfig& config,
                                         std::uint64_t seed);

}  // namespace fluence
