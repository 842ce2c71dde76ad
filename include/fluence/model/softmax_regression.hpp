#pragma once
// Multinomial logistic regression with C logits (also for 2 classes, as the seeds' PyTorch
// nn.Linear(d, C) + cross-entropy). Parameters theta are C x D row-major; a bias is an encoded
// constant-1 column, so the L2 term covers it too (the Hessian is then positive definite for
// l2 > 0; with l2 = 0 the C-logit model is invariant to adding one vector to every class row and
// its Hessian is singular along that direction).
//
// Functions named *_sum return sums over rows without regularization; objective-level helpers add
// l2/2 ||theta||^2. All kernels are allocation-free given a Workspace and GEMM-shaped: the tiled
// kernels of dense_kernels.hpp for C <= 16, OpenBLAS (one thread per rank) for more classes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fluence/data/dataset.hpp"
#include "fluence/model/model.hpp"
#include "fluence/model/softmax_head.hpp"

namespace fluence {

class SoftmaxRegression final : public Model {
 public:
  SoftmaxRegression(int features, int classes, double l2);

  std::string type() const override { return "logistic"; }
  std::string describe() const override;
  int features() const override { return features_; }
  int classes() const override { return classes_; }
  double l2() const override { return l2_; }
  std::size_t parameters() const override { return static_cast<std::size_t>(features_) * classes_; }
  std::vector<ParameterBlock> parameter_blocks() const override;
  std::vector<std::size_t> theta_shape() const override {
    return {static_cast<std::size_t>(classes_), static_cast<std::size_t>(features_)};
  }
  bool convex() const override { return true; }
  void initialize(std::uint64_t, double* theta) const override;
  const SoftmaxRegression* linear() const override { return this; }

  /// Sum of cross-entropy losses and number of correct argmax predictions over `rows` rows.
  LossAndAccuracy loss_sum(const double* x, const std::int32_t* y, std::size_t rows,
                           const double* theta, Workspace& work) const override;
  /// Sum of per-row gradients, written to `gradient` (overwritten); returns the loss sum.
  double gradient_sum(const double* x, const std::int32_t* y, std::size_t rows, const double* theta,
                      double* gradient, Workspace& work) const override {
    return gradient_sum(x, y, rows, theta, gradient, work, nullptr);
  }
  /// gradient_sum storing the softmax probabilities (rows x C) in `probabilities` on the way,
  /// saving a Newton method the separate pass of probabilities().
  double gradient_sum(const double* x, const std::int32_t* y, std::size_t rows, const double* theta,
                      double* gradient, Workspace& work, double* probabilities) const;
  /// The Hessian does not depend on the labels: hessian_vector_sum without them.
  void hessian_vector_sum(const double* x, const std::int32_t*, std::size_t rows,
                          const double* theta, const double* v, double* out,
                          Workspace& work) const override {
    hessian_vector_sum(x, rows, theta, v, out, work);
  }
  void logits(const double* x, std::size_t rows, const double* theta, double* out,
              Workspace& work) const override;
  double loss_gradient_sum(const double* x, std::size_t rows, const LogitLoss& loss,
                           const double* theta, double* gradient, Workspace& work) const override;
  void loss_hessian_vector_sum(const double* x, std::size_t rows, const LogitLoss& loss,
                               const double* theta, const double* v, double* out,
                               Workspace& work) const override;
  void directional_logits(const double* x, std::size_t rows, const double* theta, const double* v,
                          double* z, double* r_z, Workspace& work) const override;
  /// Per row g_r = (p_r - e_y) x_r^T, so ||g_r|| = ||p_r - e_y|| ||x_r||.
  void clipped_gradient_sum(const double* x, const std::int32_t* y, std::size_t rows,
                            const double* theta, double clip, double* out, Workspace& work,
                            double* norms = nullptr) const override;
  /// The byte-coded kernels when the rows have codes, else the double rows.
  void sgd_epoch(const TrainingRows& data, const std::int64_t* order, int batch_size,
                 double learning_rate, double* theta, Workspace& work, const StepTerms& terms = {},
                 const double* start = nullptr) const override;
  /// Float SGD runs on byte-coded rows only.
  bool trains_single(const TrainingRows& data) const override { return data.codes != nullptr; }
  void sgd_epoch(const TrainingRows& data, const std::int64_t* order, int batch_size,
                 double learning_rate, float* theta, Workspace& work, const StepTerms& terms = {},
                 const float* start = nullptr) const override;
  void gradient_step(const TrainingRows& data, double learning_rate, double* theta, Workspace& work,
                     const StepTerms& terms = {}) const override {
    gradient_step(data.features, data.labels, data.rows, learning_rate, theta, work, terms);
  }
  /// Sum of per-row Hessian-vector products H_r v (overwritten into `out`).
  void hessian_vector_sum(const double* x, std::size_t rows, const double* theta, const double* v,
                          double* out, Workspace& work) const;
  /// Softmax probabilities at theta, rows x C (what a Hessian at fixed theta can cache).
  void probabilities(const double* x, std::size_t rows, const double* theta, double* out) const;
  /// hessian_vector_sum with the probabilities at theta given: one pass less over x.
  void hessian_vector_sum_at(const double* x, std::size_t rows, const double* probabilities,
                             const double* v, double* out, Workspace& work) const;
  /// Sum of per-row Hessians, p x p row-major with p = C*D (small p only); exactly symmetric.
  void hessian_sum(const double* x, std::size_t rows, const double* theta, double* out) const;
  /// The Kronecker preconditioner's factor sums (docs/math.md §3.1) at the given probabilities
  /// (rows x C): `class_sum` (C x C) = sum_r diag(p_r) - p_r p_r^T and `feature_sum` (D x D, both
  /// triangles) = sum_r t_r x_r x_r^T with t_r = tr(diag(p_r) - p_r p_r^T) = 1 - ||p_r||^2.
  /// Overwritten; the same bits for the same rows whatever else the process holds.
  void kronecker_factor_sums(const double* x, std::size_t rows, const double* probabilities,
                             double* class_sum, double* feature_sum) const;
  /// diag(feature_sum) of kronecker_factor_sums (D values) in one cheap pass.
  void kronecker_feature_diagonal_sum(const double* x, std::size_t rows,
                                      const double* probabilities, double* out) const;
  /// Diagonal of the sum of per-row Hessians (p values): the Jacobi preconditioner's input.
  void hessian_diagonal_sum(const double* x, std::size_t rows, const double* theta, double* out,
                            Workspace& work) const;

  /// One pass of mini-batch SGD over the rows in `order` on
  /// (1/|B|) sum_B loss + l2/2 ||theta||^2, updating theta in place, each step with the step
  /// `terms` (model.hpp: a proximal pull, a constant correction).
  void sgd_epoch(const double* x, const std::int32_t* y, const std::int64_t* order,
                 std::size_t rows, int batch_size, double learning_rate, double* theta,
                 Workspace& work, const StepTerms& terms = {}) const;
  /// sgd_epoch on rows stored as 8-bit codes of `coding` (size() x D, row-major): the same
  /// update up to rounding, with an eighth of the memory traffic.
  /// With `start`, the epoch begins from start instead of theta's contents and writes theta (the
  /// same bits as copying start into theta first: the first step reads start, the others theta).
  void sgd_epoch(const std::uint8_t* codes, const ByteCoding& coding, const std::int32_t* y,
                 const std::int64_t* order, std::size_t rows, int batch_size, double learning_rate,
                 double* theta, Workspace& work, const StepTerms& terms = {},
                 const double* start = nullptr) const;
  /// The byte-coded sgd_epoch in float (federation.local_precision = "single"): logits and the
  /// rank-B update in float (row_kernels.hpp), the softmax in double; theta is float. The step
  /// terms' vectors are rounded to float as they are read; `start` as in the double version.
  void sgd_epoch(const std::uint8_t* codes, const ByteCoding& coding, const std::int32_t* y,
                 const std::int64_t* order, std::size_t rows, int batch_size, double learning_rate,
                 float* theta, Workspace& work, const StepTerms& terms = {},
                 const float* start = nullptr) const;
  /// loss_sum over rows stored as codes of `coding` in the blocked layout of block_codes()
  /// (row_kernels.hpp), starting at a block; each row's loss does not depend on the blocking. With
  /// `fast`, the logits come from float weights (block_logits: a mean loss within about 1e-8
  /// relative), at about twice the speed.
  LossAndAccuracy loss_sum_blocked(const std::uint8_t* blocked, const ByteCoding& coding,
                                   std::size_t rows, const std::int32_t* y, const double* theta,
                                   Workspace& work, bool fast = false) const;
  /// One full-batch gradient step on (1/n) sum loss + l2/2 ||theta||^2.
  void gradient_step(const double* x, const std::int32_t* y, std::size_t rows, double learning_rate,
                     double* theta, Workspace& work, const StepTerms& terms = {}) const;

 private:
  // logits = x theta^T for `rows` rows (row_logits: the tiled kernels for C <= 16, else BLAS).
  void compute_logits(const double* x, std::size_t rows, const double* theta, double* logits) const;
  // out += sum over n rows of the row Hessians at probabilities p applied to v (a: n x C scratch).
  void hessian_vector_chunk(const double* x, std::size_t n, const double* p, const double* v,
                            double* out, double* a) const;
  void sgd_batch(const double* const* rows_x, const std::int32_t* labels, int batch,
                 double learning_rate, double* theta, Workspace& work,
                 const StepTerms& terms) const;
  void sgd_batch_update(const double* const* rows_x, const std::int32_t* labels, int batch,
                        double learning_rate, double shrink, double* theta, Workspace& work) const;

  // One byte-coded step from `source` (theta itself unless given) into theta.
  void sgd_batch(const std::uint8_t* const* rows_k, const std::int32_t* labels, int batch,
                 const ByteCoding& coding, double learning_rate, const double* source,
                 double* theta, Workspace& work, const StepTerms& terms) const;

  // The float step: `source_folded` when work.folded_float and work.single_bias already hold the
  // source folded (the previous step's `fold_result`).
  void sgd_batch(const std::uint8_t* const* rows_k, const std::int32_t* labels, int batch,
                 const float* step, const float* offset, double learning_rate, const float* source,
                 float* theta, Workspace& work, bool source_folded, bool fold_result,
                 const StepTerms& terms) const;

  int features_, classes_;
  double l2_;
};

}  // namespace fluence
