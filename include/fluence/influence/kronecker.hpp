#pragma once
// The Kronecker-factored preconditioner of softmax regression's Hessian (docs/math.md §3.1).
// With theta laid out C x D row-major (class c's weights at c D .. c D + D - 1), the data Hessian
// (1/n) sum_r S_r ⊗ x_r x_r^T, S_r = diag(p_r) - p_r p_r^T, is approximated by G ⊗ A with
//   G = sum_r S_r / sum_r tr(S_r)   (C x C, trace 1)
//   A = (1/n) sum_r tr(S_r) x_r x_r^T   (D x D),
// which is exact when every S_r is a multiple of one matrix (two classes, or equal probabilities
// on every row). M = G ⊗ A + shift I, shift = l2 + damping as in the Hessian, is inverted through
// the eigendecompositions of G and A: two small GEMMs on each side per application.
#include <cstddef>
#include <string>
#include <vector>

namespace fluence {

struct KroneckerFactors {
  int classes = 0, features = 0;
  std::vector<double> class_factor;    // G, classes x classes, row-major, symmetric PSD
  std::vector<double> feature_factor;  // A, features x features, row-major, symmetric PSD
  double shift = 0.0;                  // added to G ⊗ A's diagonal: l2 + damping

  std::size_t parameters() const {
    return static_cast<std::size_t>(classes) * static_cast<std::size_t>(features);
  }
};

/// G and A from the sums of SoftmaxRegression::kronecker_factor_sums over `rows` rows (the sums
/// are moved in and normalized: G = class_sum / tr(class_sum), A = feature_sum / rows).
KroneckerFactors normalized_kronecker_factors(int classes, int features,
                                              std::vector<double> class_sum,
                                              std::vector<double> feature_sum, double rows,
                                              double shift);

/// The eigenvalues (ascending, negatives from rounding clamped to 0) of the symmetric n x n
/// row-major `matrix`, which is overwritten by its eigenvectors, one per row (LAPACK dsyevd: the
/// same bits on every rank for the same matrix, one BLAS thread per rank). RuntimeError naming
/// `what` when LAPACK fails. Shared by the Kronecker and the K-FAC preconditioners.
std::vector<double> symmetric_eigendecomposition(std::vector<double>& matrix, int n,
                                                 const std::string& what);

class KroneckerPreconditioner {
 public:
  /// Eigendecomposes both factors (LAPACK dsyevd: the same bits on every rank for the same
  /// factors, one BLAS thread per rank). With shift = 0 (no l2, no damping) G ⊗ A is singular,
  /// as the Hessian is: eigenvalues below 1e-14 of the largest are then left out (pseudo-inverse).
  explicit KroneckerPreconditioner(const KroneckerFactors& factors);

  std::size_t parameters() const { return static_cast<std::size_t>(classes_) * features_; }
  /// z = (G ⊗ A + shift I)^{-1} r (z must not alias r).
  void apply(const double* r, double* z) const;

 private:
  int classes_, features_;
  std::vector<double> class_vectors_, feature_vectors_;  // rows are the eigenvectors
  std::vector<double> inverse_;                          // 1 / (g_c a_d + shift), C x D
  mutable std::vector<double> work_, rotated_;
};

}  // namespace fluence
