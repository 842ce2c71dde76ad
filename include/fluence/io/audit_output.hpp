#pragma once
#include <vector>

#include "fluence/audit/ldp_audit.hpp"
#include "fluence/io/results.hpp"

namespace fluence {

/// /audit/ldp/* of `fluence audit` (docs/outputs.md). Rank 0 writes.
void write_ldp_audit_output(ResultsFile& file, const std::vector<LdpAuditCase>& cases,
                            const AuditConfig& config);

}  // namespace fluence
