// fluence audit DECK: the deck's local randomizers measured as they run (docs/math.md §11): for
// every attribute of [ldp] and every eps a client uses, the empirical eps of randomized response
// (estimate and lower bound) and the attribute-inference accuracy against the Bayes bound; write
// <out>/results.h5. Every rank computes the same audit (it is small next to the set-up).
#include "fluence/audit/ldp_audit.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/fl/problem.hpp"
#include "fluence/io/audit_output.hpp"
#include "fluence/io/results.hpp"
#include "run_context.hpp"

namespace fluence::app {

int run_audit(const CommandLine& command_line) {
  RunContext run(command_line);
  const Deck& deck = run.deck();
  const AuditConfig config = AuditConfig::from_deck(deck);
  run.prepare_output();
  const FederatedProblem problem = run.set_up();
  if (problem.ldp.attributes.empty())
    throw InputError(deck.origin() +
                     ": [ldp] randomizes no attribute (ldp.attributes is empty): nothing to audit");
  Stopwatch clock;
  const auto cases =
      audit_ldp_plan(problem.ldp, config, static_cast<std::uint64_t>(deck.integer("seed")));
  log::info("LDP audit of randomized response ({} case(s), {:.0f}% confidence, {}):", cases.size(),
            100.0 * config.confidence, format_duration(clock.seconds()));
  if (!command_line.quiet)
    log::info("{:>12} {:>3} {:>8} {:>10} {:>10} {:>9} {:>9} {:>10}", "attribute", "k", "eps",
              "estimate", "lower", "accuracy", "Bayes", "draws");
  for (const auto& c : cases)
    if (!command_line.quiet)
      log::info("{:>12} {:>3} {:>8.4g} {:>10.4f} {:>10.4f} {:>9.4f} {:>9.4f} {:>10}", c.attribute,
                c.result.domain, c.result.epsilon_configured, c.result.epsilon_estimate,
                c.result.epsilon_lower, c.result.inference_accuracy, c.result.bayes_accuracy,
                c.result.draws);
  for (const auto& c : cases)
    if (c.result.epsilon_lower > c.result.epsilon_configured)
      log::warn("{} at eps = {}: the measured lower bound {:.4f} exceeds the configured eps",
                c.attribute, c.result.epsilon_configured, c.result.epsilon_lower);
  return run.finish([&](ResultsFile& file) { write_ldp_audit_output(file, cases, config); });
}

}  // namespace fluence::app
