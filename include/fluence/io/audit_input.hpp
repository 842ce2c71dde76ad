#pragma once
// Reading the canary audit of a finished `fluence train` run (docs/outputs.md): what a multi-run
// audit collects from each of its runs.
#include <cstdint>
#include <string>
#include <vector>

namespace fluence {

struct CanaryRun {
  std::string path;
  std::string deck;  // the resolved deck (root attribute "deck")
  std::int64_t seed = 0;
  std::vector<std::int64_t> inserted;      // /audit/canary_inserted
  std::vector<double> score_all_iterates;  // /audit/canary_score_all_iterates
  std::vector<double> score_final;         // /audit/canary_score_final
  double epsilon = 0.0;                    // the accountant's final /privacy/epsilon
  double delta = 0.0;                      // /privacy/delta
};

/// Local (no collective). InputError naming `path` when it is not a readable results file of a
/// private `fluence train` run with canaries.
CanaryRun read_canary_run(const std::string& path);

/// Whether `path` is the output of an earlier multi-run audit (it holds /audit/multi_run), which a
/// collection below the same folder skips. Local; false for anything unreadable.
bool holds_multi_run_audit(const std::string& path);

}  // namespace fluence
