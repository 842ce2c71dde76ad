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

void write_canary_audit_output(ResultsFile& file, const CanaryAuditResult& result,
                               const std::string& all_iterates_meaning,
                               const std::string& final_meaning) {
  std::vector<std::int64_t> ids(result.inserted.size()), inserted(result.inserted.size());
  for (std::size_t c = 0; c < ids.size(); ++c) {
    ids[c] = static_cast<std::int64_t>(c);
    inserted[c] = result.inserted[c];
  }
  file.coordinate("/audit/canary", ids, "1", "canary client index");
  file.dataset("/audit/canary_inserted", inserted,
               {{"canary"}, "1", "1 = the canary was inserted into the run (probability 1/2)"});
  file.dataset("/audit/canary_score_all_iterates", result.score_all_iterates,
               {{"canary"}, "1", all_iterates_meaning});
  file.dataset("/audit/canary_score_final", result.score_final, {{"canary"}, "1", final_meaning});
  file.scalar("/audit/epsilon_lower", result.epsilon_lower_all_iterates, "1",
              "one-run lower bound on eps from the all-iterates scores at /audit/confidence");
  file.scalar("/audit/epsilon_lower_final", result.epsilon_lower_final, "1",
              "one-run lower bound on eps from the final-model scores at /audit/confidence");
  file.scalar("/audit/epsilon_estimate", result.epsilon_estimate_all_iterates, "1",
              "canary-client estimate of eps from the all-iterates scores (Gaussian fits)");
  file.scalar("/audit/epsilon_estimate_final", result.epsilon_estimate_final, "1",
              "canary-client estimate of eps from the final-model scores (Gaussian fits)");
  if (!result.score_likelihood.empty()) {
    file.dataset("/audit/canary_score_likelihood", result.score_likelihood,
                 {{"canary"},
                  "1",
                  "sum over rounds of log(1 - q + q exp(mu zeta_t - mu^2/2)), zeta_t = sqrt(p) "
                  "cos(u_c, theta_t - theta_t-1), mu = 1/z_update: the subsampled Gaussian "
                  "mechanism's likelihood ratio (white box)"});
    file.scalar("/audit/epsilon_lower_likelihood", result.epsilon_lower_likelihood, "1",
                "one-run lower bound on eps from the likelihood scores at /audit/confidence");
    file.scalar("/audit/epsilon_estimate_likelihood", result.epsilon_estimate_likelihood, "1",
                "canary-client estimate of eps from the likelihood scores (Gaussian fits)");
  }
  file.scalar("/audit/delta", result.delta, "1", "delta of the bounds and the estimates");
  file.scalar("/audit/confidence", result.confidence, "1", "confidence of the lower bounds");
}

namespace {

// The ROC and its summary under `group` (its own "roc_point" dimension).
void write_roc(ResultsFile& file, const std::string& group, const RocSummary& summary) {
  const RocCurve& roc = summary.roc;
  std::vector<std::int64_t> points(roc.threshold.size());
  for (std::size_t i = 0; i < points.size(); ++i) points[i] = static_cast<std::int64_t>(i);
  file.coordinate(group + "/roc_point", points, "1", "ROC point, from the strictest threshold");
  file.dataset(group + "/roc_fpr", roc.false_positive_rate,
               {{"roc_point"}, "1", "false-positive rate of the test score >= roc_threshold"});
  file.dataset(group + "/roc_tpr", roc.true_positive_rate,
               {{"roc_point"}, "1", "true-positive rate of the test score >= roc_threshold"});
  file.dataset(group + "/roc_threshold", roc.threshold,
               {{"roc_point"}, "1", "the threshold of each ROC point (+inf first)"});
  file.scalar(group + "/auc", summary.auc, "1", "area under the ROC curve");
  file.scalar(group + "/tpr_at_fpr_0.001", summary.tpr_at_fpr_0_001, "1",
              "largest TPR of a threshold with FPR <= 0.1%");
  file.scalar(group + "/tpr_at_fpr_0.01", summary.tpr_at_fpr_0_01, "1",
              "largest TPR of a threshold with FPR <= 1%");
}

void write_multi_run_attack(ResultsFile& file, const std::string& group,
                            const MultiRunAudit& audit) {
  const MultiRunBound& bound = audit.bound;
  file.scalar(group + "/epsilon_lower", bound.epsilon_lower, "1",
              "Clopper-Pearson lower bound on eps at /audit/confidence and /audit/multi_run/delta");
  file.scalar(group + "/threshold", bound.threshold, "1",
              "the bound's test: score >= threshold (chosen on the first half of each side)");
  file.scalar(group + "/from_negatives", bound.from_negatives ? 1.0 : 0.0, "1",
              "1 = the bound came from TNR <= e^eps FNR + delta");
  file.scalar(group + "/evaluation_runs_with", static_cast<double>(bound.with_runs), "count",
              "runs with the target in the evaluation half");
  file.scalar(group + "/evaluation_runs_without", static_cast<double>(bound.without_runs), "count",
              "runs without the target in the evaluation half");
  file.scalar(group + "/epsilon_estimate", audit.estimate.epsilon, "1",
              "Gaussian-fit estimate of eps at /audit/multi_run/delta (NaN without spread)");
  file.scalar(group + "/mu", audit.estimate.mu, "1",
              "|mean difference| / pooled standard deviation of the two sides' scores");
  write_roc(file, group, audit.roc);
}

}  // namespace

void write_multi_run_output(ResultsFile& file, const MultiRunRuns& runs,
                            const MultiRunAudit& all_iterates, const MultiRunAudit& final_model) {
  const std::string group = "/audit/multi_run";
  file.coordinate(group + "/run", runs.names,
                  "each run's results file, relative to the collected folder, in run order");
  file.dataset(group + "/seed", runs.seed, {{"run"}, "1", "the run's seed"});
  file.dataset(group + "/inserted", runs.inserted,
               {{"run"}, "1", "1 = the target canary was inserted into the run"});
  file.dataset(group + "/score_all_iterates", runs.score_all_iterates,
               {{"run"}, "1", "the target's all-iterates score (white box)"});
  file.dataset(group + "/score_final", runs.score_final,
               {{"run"}, "1", "the target's final-model score (black box)"});
  file.scalar(group + "/epsilon", runs.epsilon, "1", "the accountant's eps of the runs");
  file.scalar(group + "/delta", runs.delta, "1", "delta of the bounds and estimates");
  write_multi_run_attack(file, group + "/all_iterates", all_iterates);
  write_multi_run_attack(file, group + "/final", final_model);
  file.scalar("/audit/confidence", runs.confidence, "1", "confidence of the lower bounds");
}

void write_membership_output(ResultsFile& file, const std::vector<double>& member_losses,
                             const std::vector<double>& nonmember_losses,
                             const RocSummary& summary) {
  const std::string group = "/audit/membership";
  file.dimension(group + "/member", member_losses.size());
  file.dimension(group + "/nonmember", nonmember_losses.size());
  file.dataset(group + "/member_loss", member_losses,
               {{"member"}, "1", "per-example loss of each training row, clients in id order"});
  file.dataset(group + "/nonmember_loss", nonmember_losses,
               {{"nonmember"}, "1", "per-example loss of each test row"});
  write_roc(file, group, summary);
}

void write_client_lira_output(ResultsFile& file, const std::vector<std::uint8_t>& member,
                              const std::vector<double>& lira,
                              const std::vector<double>& loss_threshold, const RocSummary& lira_roc,
                              const RocSummary& loss_roc) {
  const std::string group = "/audit/membership/client_lira";
  std::vector<std::int64_t> ids(member.size()), in(member.size());
  for (std::size_t c = 0; c < member.size(); ++c) {
    ids[c] = static_cast<std::int64_t>(c);
    in[c] = member[c];
  }
  file.coordinate(group + "/client", ids, "1", "client id");
  file.dataset(group + "/member", in,
               {{"client"}, "1", "1 = the target federation trained on the client"});
  file.dataset(group + "/lira_score", lira,
               {{"client"}, "1", "LiRA's score (likelihood ratio of IN and OUT shadows)"});
  file.dataset(group + "/loss_score", loss_threshold,
               {{"client"}, "1", "minus the client's mean loss under the target"});
  write_roc(file, group + "/lira", lira_roc);
  write_roc(file, group + "/loss_threshold", loss_roc);
}

void write_example_lira_output(ResultsFile& file, const ExampleLiraOutput& lira) {
  const std::string group = "/audit/membership/example_lira";
  const std::size_t examples = lira.member.size();
  const std::size_t shadows = examples ? lira.shadow_in.size() / examples : 0;
  auto as_int = [](const std::vector<std::uint8_t>& bits) {
    return std::vector<std::int64_t>(bits.begin(), bits.end());
  };
  file.dimension(group + "/example", examples);
  file.dimension(group + "/shadow", shadows);
  file.dataset(group + "/row", lira.row,
               {{"example"}, "1", "the example's training row (clients in id order)"});
  file.dataset(group + "/client", lira.client,
               {{"example"}, "1", "the client holding the example"});
  file.dataset(group + "/member", as_int(lira.member),
               {{"example"}, "1", "1 = the target model trained on the example"});
  file.dataset(group + "/target_confidence", lira.target_confidence,
               {{"example"}, "1", "phi = log(p_y / (1 - p_y)) under the target model"});
  file.dataset(group + "/shadow_confidence", lira.shadow_confidence,
               {{"shadow", "example"}, "1", "phi under each shadow model"});
  file.dataset(group + "/shadow_in", as_int(lira.shadow_in),
               {{"shadow", "example"}, "1", "1 = the shadow model trained on the example"});
  file.dataset(group + "/lira_score", lira.lira,
               {{"example"}, "1", "LiRA's score (log likelihood ratio of IN and OUT Gaussians)"});
  file.dataset(group + "/loss_score", lira.loss_threshold,
               {{"example"}, "1", "minus the example's loss under the target"});
  file.scalar(group + "/global_variance", lira.global_variance ? 1.0 : 0.0, "1",
              "1 = one variance per side pooled over all examples (fewer than 16 shadows)");
  file.scalar(group + "/epsilon", lira.epsilon, "1",
              "the target's accountant eps (NaN: trained without privacy)");
  file.scalar(group + "/delta", lira.delta, "1", "delta of that eps (0 without privacy)");
  write_roc(file, group + "/lira", lira.lira_roc);
  write_roc(file, group + "/loss_threshold", lira.loss_roc);
}

}  // namespace fluence
