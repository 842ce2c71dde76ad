#include "fluence/io/audit_output.hpp"

#include <cstdint>
#include <string>

namespace fluence {

void write_ldp_audit_output(ResultsFile& file, const std::vector<LdpAuditCase>& cases,
                            const AuditConfig& config) {
  std::vector<std::string> attributes;
  std::vector<std::int64_t> domain, draws;
  std::vector<double> configured, estimate, lower, accuracy, bayes;
  for (const auto& c : cases) {
    attributes.push_back(c.attribute);
    domain.push_back(c.result.domain);
    draws.push_back(c.result.draws);
    configured.push_back(c.result.epsilon_configured);
    estimate.push_back(c.result.epsilon_estimate);
    lower.push_back(c.result.epsilon_lower);
    accuracy.push_back(c.result.inference_accuracy);
    bayes.push_back(c.result.bayes_accuracy);
  }
  file.coordinate("/audit/ldp/case", attributes, "the randomized attribute of each audited case");
  file.dataset("/audit/ldp/domain", domain, {{"case"}, "1", "number of values k"});
  file.dataset("/audit/ldp/epsilon", configured, {{"case"}, "1", "the configured epsilon"});
  file.dataset("/audit/ldp/epsilon_estimate", estimate,
               {{"case"}, "1", "max over outputs of the log ratio of the two inputs' frequencies"});
  file.dataset("/audit/ldp/epsilon_lower", lower,
               {{"case"}, "1", "lower bound on the mechanism's epsilon at /audit/confidence"});
  file.dataset(
      "/audit/ldp/inference_accuracy", accuracy,
      {{"case"}, "1", "attribute-inference accuracy of the adversary guessing the report"});
  file.dataset("/audit/ldp/bayes_accuracy", bayes,
               {{"case"}, "1", "the Bayes bound e^eps / (e^eps + k - 1)"});
  file.dataset("/audit/ldp/draws", draws, {{"case"}, "count", "runs of the mechanism per input"});
  file.scalar("/audit/confidence", config.confidence, "1", "confidence of the lower bounds");
}

void write_canary_audit_output(ResultsFile& file, const CanaryAuditResult& result) {
  std::vector<std::int64_t> ids(result.inserted.size()), inserted(result.inserted.size());
  for (std::size_t c = 0; c < ids.size(); ++c) {
    ids[c] = static_cast<std::int64_t>(c);
    inserted[c] = result.inserted[c];
  }
  file.coordinate("/audit/canary", ids, "1", "canary client index");
  file.dataset("/audit/canary_inserted", inserted,
               {{"canary"}, "1", "1 = the canary was inserted into the run (probability 1/2)"});
  file.dataset("/audit/canary_score_all_iterates", result.score_all_iterates,
               {{"canary"},
                "1",
                "max over rounds of the cosine of the canary's direction with the round's model "
                "delta (white box)"});
  file.dataset("/audit/canary_score_final", result.score_final,
               {{"canary"},
                "1",
                "cosine of the canary's direction with the final model minus the initial one "
                "(black box)"});
  file.scalar("/audit/epsilon_lower", result.epsilon_lower_all_iterates, "1",
              "one-run lower bound on eps from the all-iterates scores at /audit/confidence");
  file.scalar("/audit/epsilon_lower_final", result.epsilon_lower_final, "1",
              "one-run lower bound on eps from the final-model scores at /audit/confidence");
  file.scalar("/audit/epsilon_estimate", result.epsilon_estimate_all_iterates, "1",
              "canary-client estimate of eps from the all-iterates scores (Gaussian fits)");
  file.scalar("/audit/epsilon_estimate_final", result.epsilon_estimate_final, "1",
              "canary-client estimate of eps from the final-model scores (Gaussian fits)");
  file.scalar("/audit/delta", result.delta, "1", "delta of the bounds and the estimates");
  file.scalar("/audit/confidence", result.confidence, "1", "confidence of the lower bounds");
}

}  // namespace fluence
