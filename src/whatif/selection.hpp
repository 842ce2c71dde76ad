#pragma once
// Which records a what-if cell perturbs, and the test rows S_te (docs/math.md §6).
#include <cstdint>
#include <vector>

#include "fluence/fl/federation.hpp"
#include "fluence/whatif/whatif.hpp"

namespace fluence::whatif_detail {

/// The group G and its perturbed subsets S_1 ⊂ S_2 ⊂ ... (one per fraction, nested): every group
/// record gets a key u from stream (seed, whatif_group_sample, global row), and S_k is the
/// round(k |G|) records with the smallest (u, row). The seed's code samples from the whole
/// training set by mistake; this samples from the group (issue 5).
struct GroupSelection {
  std::int64_t group_size = 0;
  std::vector<std::int64_t> selected;  // per fraction: |S_k|
  // Per local client: its records in the largest S_k, in selection order (local row indices), and
  // per fraction how many of them are in S_k (a prefix).
  std::vector<std::vector<std::size_t>> rows;
  std::vector<std::vector<std::size_t>> prefix;  // [client][fraction]
};

/// Collective.
GroupSelection select_group(const FederatedProblem& problem, const WhatifConfig& config);

/// S_te: the whole test set, or `sample` rows with the smallest keys from stream
/// (seed, whatif_test_sample, test row). Loss and gradient are means over S_te, reduced in test
/// chunk order (rank-count independent).
class TestSelection {
 public:
  TestSelection(Federation& federation, std::int64_t sample);
  std::int64_t rows() const { return rows_; }
  /// Collective: mean loss and accuracy on S_te.
  std::pair<double, double> evaluate(const std::vector<double>& theta);
  /// Collective: gradient of the mean loss on S_te.
  void gradient(const std::vector<double>& theta, std::vector<double>& out);

 private:
  Federation& federation_;
  bool whole_ = true;
  std::int64_t rows_ = 0;
  std::vector<std::vector<double>> chunk_x_;  // per local chunk: its selected rows
  std::vector<std::vector<std::int32_t>> chunk_y_;
  Workspace work_;
};

}  // namespace fluence::whatif_detail
