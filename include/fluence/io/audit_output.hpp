#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fluence/audit/canary_clients.hpp"
#include "fluence/audit/ldp_audit.hpp"
#include "fluence/audit/membership_inference.hpp"
#include "fluence/audit/multi_run.hpp"
#include "fluence/io/results.hpp"

namespace fluence {

/// /audit/ldp/* of `fluence audit` (docs/outputs.md). Rank 0 writes.
void write_ldp_audit_output(ResultsFile& file, const std::vector<LdpAuditCase>& cases,
                            const AuditConfig& config);

/// /audit/canary* and the canary audit's bounds of a private `fluence train` or `fluence lia` run
/// with audit.canaries (docs/outputs.md); the two scores' descriptions default to the canary
/// clients' of `fluence train`. Rank 0 writes.
void write_canary_audit_output(ResultsFile& file, const CanaryAuditResult& result,
                               const std::string& all_iterates_meaning =
                                   "max over rounds of the cosine of the canary's "
                                   "direction with the round's model delta (white box)",
                               const std::string& final_meaning =
                                   "cosine of the canary's direction with the final model "
                                   "minus the initial one (black box)");

/// The runs of a multi-run audit, in run order, as `fluence audit --collect` read them.
struct MultiRunRuns {
  std::vector<std::string> names;  // each run's results file, relative to the collected folder
  std::vector<std::int64_t> seed, inserted;
  std::vector<double> score_all_iterates, score_final;
  double epsilon = 0.0;  // the accountant's eps of the runs' deck (the first run's)
  double delta = 0.0;
  double confidence = 0.0;
};

/// /audit/multi_run/* and /audit/confidence of `fluence audit --collect` (docs/outputs.md).
void write_multi_run_output(ResultsFile& file, const MultiRunRuns& runs,
                            const MultiRunAudit& all_iterates, const MultiRunAudit& final_model);

/// /audit/membership/* of `fluence audit --membership` (docs/outputs.md): the loss-threshold
/// attack's scores (members first, in row order) and its ROC.
void write_membership_output(ResultsFile& file, const std::vector<double>& member_losses,
                             const std::vector<double>& nonmember_losses,
                             const RocSummary& summary);

/// /audit/membership/client_lira/* (docs/outputs.md): client-level LiRA against the loss threshold
/// on the same target federation.
void write_client_lira_output(ResultsFile& file, const std::vector<std::uint8_t>& member,
                              const std::vector<double>& lira,
                              const std::vector<double>& loss_threshold, const RocSummary& lira_roc,
                              const RocSummary& loss_roc);

/// Example-level LiRA (fluence audit --membership with audit.membership_level = "example"): the
/// training rows in client-id order (each client's rows in its order), the target's half of them,
/// every model's scaled confidence of every row, and both attacks on the same target.
struct ExampleLiraOutput {
  std::vector<std::int64_t> row, client;  // per example: global training row, its client
  std::vector<std::uint8_t> member;       // per example: in the target's half
  std::vector<double> target_confidence;  // per example: phi under the target
  std::vector<double> shadow_confidence;  // [shadow][example]: phi under each shadow
  std::vector<std::uint8_t> shadow_in;    // [shadow][example]: the shadow trained on it
  std::vector<double> lira, loss_threshold;
  RocSummary lira_roc, loss_roc;
  bool global_variance = false;
  double epsilon = 0.0, delta = 0.0;  // the target's accountant (NaN, 0 without privacy)
};

/// /audit/membership/example_lira/* (docs/outputs.md).
void write_example_lira_output(ResultsFile& file, const ExampleLiraOutput& lira);

}  // namespace fluence
