#include "fluence/influence/kronecker.hpp"

#include <cblas.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "fluence/core/error.hpp"

extern "C" {
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info);
}

namespace fluence {

// The eigenvalues (ascending, negatives from rounding clamped to 0) of the symmetric n x n
// row-major `matrix`, which is overwritten by its eigenvectors, one per row: column-major "U" of a
// row-major symmetric matrix is the same matrix, and LAPACK's column-major eigenvector columns are
// then rows.
std::vector<double> symmetric_eigendecomposition(std::vector<double>& matrix, int n,
                                                 const std::string& what) {
  std::vector<double> values(static_cast<std::size_t>(n));
  if (n == 0) return values;
  int info = 0, lwork = -1, liwork = -1, iwork_size = 0;
  double work_size = 0.0;
  dsyevd_("V", "U", &n, matrix.data(), &n, values.data(), &work_size, &lwork, &iwork_size, &liwork,
          &info);
  lwork = static_cast<int>(work_size);
  liwork = iwork_size;
  std::vector<double> work(static_cast<std::size_t>(std::max(lwork, 1)));
  std::vector<int> iwork(static_cast<std::size_t>(std::max(liwork, 1)));
  dsyevd_("V", "U", &n, matrix.data(), &n, values.data(), work.data(), &lwork, iwork.data(),
          &liwork, &info);
  if (info != 0)
    throw RuntimeError("the eigendecomposition of the " + what + " failed (LAPACK dsyevd info " +
                       std::to_string(info) + ")");
  for (auto& value : values) value = std::max(value, 0.0);
  return values;
}

KroneckerFactors normalized_kronecker_factors(int classes, int features,
                                              std::vector<double> class_sum,
                                              std::vector<double> feature_sum, double rows,
                                              double shift) {
  KroneckerFactors factors;
  factors.classes = classes;
  factors.features = features;
  double trace = 0.0;
  for (int c = 0; c < classes; ++c) trace += class_sum[static_cast<std::size_t>(c) * classes + c];
  // trace = sum_r t_r = 0 only when every row's prediction is one-hot: no curvature at all.
  const double class_scale = trace > 0.0 ? 1.0 / trace : 0.0;
  for (auto& value : class_sum) value *= class_scale;
  const double feature_scale = rows > 0.0 ? 1.0 / rows : 0.0;
  for (auto& value : feature_sum) value *= feature_scale;
  factors.class_factor = std::move(class_sum);
  factors.feature_factor = std::move(feature_sum);
  factors.shift = shift;
  return factors;
}

KroneckerPreconditioner::KroneckerPreconditioner(const KroneckerFactors& factors)
    : classes_(factors.classes),
      features_(factors.features),
      class_vectors_(factors.class_factor),
      feature_vectors_(factors.feature_factor) {
  const auto C = static_cast<std::size_t>(classes_), D = static_cast<std::size_t>(features_);
  if (class_vectors_.size() != C * C || feature_vectors_.size() != D * D)
    throw std::invalid_argument("KroneckerPreconditioner: factor sizes do not match C and D");
  const auto g = symmetric_eigendecomposition(class_vectors_, classes_,
                                              "Kronecker preconditioner's class factor");
  const auto a = symmetric_eigendecomposition(feature_vectors_, features_,
                                              "Kronecker preconditioner's feature factor");
  inverse_.resize(C * D);
  const double largest = (C > 0 && D > 0 ? g.back() * a.back() : 0.0) + factors.shift;
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t d = 0; d < D; ++d) {
      const double value = g[c] * a[d] + factors.shift;
      inverse_[c * D + d] = value > 1e-14 * largest ? 1.0 / value : 0.0;
    }
  work_.resize(C * D);
  rotated_.resize(C * D);
}

void KroneckerPreconditioner::apply(const double* r, double* z) const {
  // With R the C x D matrix of r, Q_G and Q_A the eigenvectors as rows:
  // Z = Q_G^T [(Q_G R Q_A^T) ./ (g a^T + shift)] Q_A.
  const int C = classes_, D = features_;
  const double* qg = class_vectors_.data();
  const double* qa = feature_vectors_.data();
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, C, D, C, 1.0, qg, C, r, D, 0.0,
              work_.data(), D);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, C, D, D, 1.0, work_.data(), D, qa, D, 0.0,
              rotated_.data(), D);
  for (std::size_t k = 0; k < rotated_.size(); ++k) rotated_[k] *= inverse_[k];
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, C, D, D, 1.0, rotated_.data(), D, qa, D,
              0.0, work_.data(), D);
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, D, C, 1.0, qg, C, work_.data(), D, 0.0, z,
              D);
}

}  // namespace fluence
