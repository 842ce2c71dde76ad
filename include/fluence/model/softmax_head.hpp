#pragma once
// The softmax cross-entropy head shared by every model (model.hpp): a row's loss is
// log-sum-exp(z) - z_label, its gradient with respect to the logits softmax(z) - onehot(label), and
// the Hessian with respect to the logits diag(p) - p p^T. Every function works row by row and adds
// row losses in row order, so a sum over chunks of rows does not depend on the chunking.
#include <cstddef>
#include <cstdint>

#include "fluence/model/model.hpp"

namespace fluence {

/// Softmax of each row of `logits` in place; with labels, returns `loss` plus each row's
/// log-sum-exp minus its label logit, added in row order.
double softmax_rows(double* logits, std::size_t rows, int classes, const std::int32_t* labels,
                    double loss = 0.0);
/// `loss` plus each row's log-sum-exp(z) - z_label, the logits left as they are (one exponential
/// per logit: evaluation needs no probabilities).
double log_loss_rows(const double* logits, std::size_t rows, int classes,
                     const std::int32_t* labels, double loss = 0.0);
/// Softmax probabilities of each row in place, without the loss (the SGD hot path).
void softmax_probabilities(double* logits, std::size_t rows, int classes);

/// Rows whose first maximal logit is the label.
template <class T>
long correct_rows(const T* logits, std::size_t rows, int classes, const std::int32_t* labels);

/// The head's backward pass on logits of type T (float or double): delta = scale (softmax(z) -
/// onehot(y)) per row, computed in double (for double logits, the bits of softmax_rows' p);
/// returns `loss` plus the rows' losses in row order.
template <class T>
double cross_entropy_delta(const T* logits, std::size_t rows, int classes,
                           const std::int32_t* labels, double scale, T* delta, double loss = 0.0);

/// The head's R-operator (docs/math.md §10): out = scale (diag(p) - p p^T) r per row, for the
/// probabilities p and directional logits r (rows x classes each); `out` may be `r`.
void softmax_jacobian_rows(const double* p, const double* r, std::size_t rows, int classes,
                           double scale, double* out);

/// The head with general targets (docs/math.md §5.2, §10): row r has a target t_r in R^C and weight
/// w_r = sum_c t_rc, its loss w_r lse(z_r) - t_r . z_r, so dL/dz = w_r softmax(z_r) - t_r and
/// d^2L/dz^2 = w_r (diag p - p p^T). A one-hot t is the cross-entropy of its label; w q a soft
/// label q (cross-entropy is linear in the target, so the expectation over a k-RR label is its
/// distribution as target) with weight w; a negative weight a row subtracted.
class TargetCrossEntropy final : public LogitLoss {
 public:
  /// `targets`: rows x C, kept by pointer.
  explicit TargetCrossEntropy(const double* targets) : targets_(targets) {}
  double gradient(std::size_t first, std::size_t rows, int classes, const double* z, double* delta,
                  double loss) const override;
  void hessian(std::size_t first, std::size_t rows, int classes, const double* z, const double* r_z,
               double* delta, double* r_delta) const override;

 private:
  const double* targets_;
};

/// The head of integer labels as a LogitLoss (the same arithmetic as cross_entropy_delta).
class LabelCrossEntropy final : public LogitLoss {
 public:
  explicit LabelCrossEntropy(const std::int32_t* labels) : labels_(labels) {}
  double gradient(std::size_t first, std::size_t rows, int classes, const double* z, double* delta,
                  double loss) const override;
  void hessian(std::size_t first, std::size_t rows, int classes, const double* z, const double* r_z,
               double* delta, double* r_delta) const override;

 private:
  const std::int32_t* labels_;
};

}  // namespace fluence
