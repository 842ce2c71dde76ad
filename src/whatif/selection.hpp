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
  /// Collective: the Hessian of the mean loss on S_te, p x p row-major (small p; a network's from
  /// p products).
  void hessian(const std::vector<double>& theta, std::vector<double>& out);
  /// Collective: that Hessian times v (the linear model's probabilities cached at the first theta
  /// given).
  void hessian_vector(const std::vector<double>& theta, const double* v, double* out);

 private:
  struct Chunk {
    const double* x;
    const std::int32_t* y;
    std::size_t rows;
  };
  const Model& model() const { return *federation_.problem().model; }

  Federation& federation_;
  std::int64_t rows_ = 0;
  std::vector<Chunk> chunks_;                  // this rank's test chunks, in order
  std::vector<std::vector<double>> sample_x_;  // a sample's rows per chunk
  std::vector<std::vector<std::int32_t>> sample_y_;
  std::vector<std::vector<double>> probabilities_;  // per chunk, for hessian_vector
  Workspace work_;
};

}  // namespace fluence::whatif_detail
