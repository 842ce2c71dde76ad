#pragma once
// The softmax cross-entropy head shared by every model (model.hpp): a row's loss is
// log-sum-exp(z) - z_label, its gradient with respect to the logits softmax(z) - onehot(label), and
// the Hessian with respect to the logits diag(p) - p p^T. Every function works row by row and adds
// row losses in row order, so a sum over chunks of rows does not depend on the chunking.
#include <cstddef>
#include <cstdint>

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

}  // namespace fluence
