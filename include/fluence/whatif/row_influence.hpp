#pragma once
// The per-record scalar of seed 001's estimators (docs/math.md §6):
//   c(z, eps) = s^T grad_theta [E_eps l~(z, theta) - l(z, theta)]
// for one training record z = (x, y) at theta, with s = s_test. With u = (dz/dtheta) s the
// directional derivative of the logits along s, p = softmax(z) and a soft target t,
// s^T grad l = u . (p - t) for cross-entropy (the chain rule through the logits), so every variant
// is a few dot products in R^C per record and eps: a (k, eps) cell costs a sum over the perturbed
// records, not a gradient in R^p. For the linear model u = S x (S: s reshaped C x D) and a value
// combination moves z and u by columns of theta and S; any other model computes z and u of each
// combination's row by its forward R-operator (Model::directional_logits).
#include <cstdint>
#include <vector>

#include "fluence/model/model.hpp"
#include "fluence/whatif/whatif.hpp"

namespace fluence {

/// k-RR probabilities of reporting the true value / one given other value, stable for large eps.
struct KrrProbabilities {
  double keep, other;
  KrrProbabilities(double epsilon, int domain);
};

class RowInfluence {
 public:
  /// `model`, `theta` and `s` (laid out as theta) are kept by pointer. `attributes` are the rr
  /// variant's.
  RowInfluence(const Model& model, const double* theta, const double* s,
               const std::vector<WhatifAttribute>& attributes);

  /// The record: encoded row x, label y, categorical values (Table::categorical's row).
  void set_row(const double* x, std::int32_t label, const std::int32_t* categorical);

  /// rr: k-RR at eps over every attribute; `expected` = sum over value combinations f != alpha of
  /// P(f) (T_f - T_alpha) plus the label term, `paper` = seed 001 Eq. 13's (1 - prod keep) times
  /// the unweighted sum over f != alpha.
  double rr(double epsilon, EstimateForm form) const;
  /// rr_l: (C u_y - sum_c u_c) / (C - 1 + e^eps) (seed 001 Eq. 14 with the minus sign restored).
  double rr_l(double epsilon) const;
  /// rr_flc: sum_c P_yc s^T grad l_FLC(x, c) - s^T grad l(x, y) (expected), or
  /// seed 001 Eq. 22's
  /// other * sum_{c != y} [...] (paper).
  double rr_flc(double epsilon, EstimateForm form) const;

  /// The rr variant's value combinations (product of the randomized features' domains).
  std::size_t combinations() const { return combos_; }

 private:
  // z and u of every combination's row by the model's forward R-operator (not the linear model).
  void combination_logits(const double* x);

  const Model& model_;
  const double* theta_;
  const double* s_;
  int C_, D_;
  std::vector<WhatifAttribute> features_;  // the rr variant's randomized features
  bool label_randomized_ = false;
  int label_domain_ = 2;
  std::size_t combos_ = 1;
  std::vector<std::int32_t> combo_values_;  // combos x F, last feature fastest
  // The current record.
  std::int32_t y_ = 0;
  std::vector<std::int32_t> original_;        // F
  std::size_t alpha_ = 0;                     // index of the original combination
  std::vector<double> z_, p_, u_;             // C
  std::vector<double> a_, uf_;                // combos, combos x C: u_f . p_f and u_f
  std::vector<double> zf_, pf_;               // scratch
  std::vector<double> rows_, row_z_, row_u_;  // combos x D, combos x C twice (networks)
  Workspace work_;
  mutable std::vector<KrrProbabilities> krr_;  // per feature, for the eps of the current call
};

}  // namespace fluence
