#pragma once
// A client's data term replaced by another function of theta: FLDP's expected loss under
// re-randomization (seed 000 Eq. 18) is one. While a Federation holds one for a client, every
// objective, gradient and Hessian uses it instead of the client's rows; the client's size n_i (its
// weight in h) is unchanged.
#include <cstddef>
#include <cstdint>

namespace fluence {

class LocalObjective {
 public:
  virtual ~LocalObjective() = default;
  /// Sums over the client's rows, without regularization (as SoftmaxRegression's *_sum kernels).
  virtual double loss_sum(const double* theta) = 0;
  virtual void gradient_sum(const double* theta, double* out) = 0;
  virtual void hessian_vector_sum(const double* theta, const double* v, double* out) = 0;
  /// The same over the listed rows only (indices into the client's rows; repeats allowed).
  virtual void sampled_hessian_vector_sum(const double* theta, const std::int64_t* rows,
                                          std::size_t count, const double* v, double* out) = 0;
  virtual void hessian_diagonal_sum(const double* theta, double* out) = 0;
  /// p x p row-major (small p only).
  virtual void hessian_sum(const double* theta, double* out) = 0;
};

}  // namespace fluence
