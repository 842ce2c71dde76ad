#pragma once
#include <vector>

#include "fluence/audit/canary_clients.hpp"
#include "fluence/audit/ldp_audit.hpp"
#include "fluence/io/results.hpp"

namespace fluence {

/// /audit/ldp/* of `fluence audit` (docs/outputs.md). Rank 0 writes.
void write_ldp_audit_output(ResultsFile& file, const std::vector<LdpAuditCase>& cases,
                            const AuditConfig& config);

/// /audit/canary* and the canary audit's bounds of a private `fluence train` run with
/// audit.canaries (docs/outputs.md). Rank 0 writes.
void write_canary_audit_output(ResultsFile& file, const CanaryAuditResult& result);

}  // namespace fluence
