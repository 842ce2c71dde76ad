#pragma once
// Dense references for tests, independent of PETSc, SLEPc, the federation and the ordered
// reductions: Newton with LAPACK Cholesky solves, dense linear solves and symmetric eigenvalues.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "fluence/model/softmax_regression.hpp"

extern "C" {
void dposv_(const char* uplo, const int* n, const int* nrhs, double* a, const int* lda, double* b,
            const int* ldb, int* info);
void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
            double* work, const int* lwork, int* info);
}

namespace fluence::testing {

/// x = A^{-1} b for a symmetric positive definite A (p x p).
inline std::vector<double> dense_solve(std::vector<double> a, std::vector<double> b) {
  const int n = static_cast<int>(b.size()), one = 1;
  int info = 0;
  dposv_("L", &n, &one, a.data(), &n, b.data(), &n, &info);
  EXPECT_EQ(info, 0) << "dense reference: matrix not positive definite";
  return b;
}

/// Eigenvalues of a symmetric matrix, ascending.
inline std::vector<double> symmetric_eigenvalues(std::vector<double> a) {
  const int n = static_cast<int>(std::sqrt(static_cast<double>(a.size())));
  std::vector<double> w(n);
  int lwork = -1, info = 0;
  double query = 0.0;
  dsyev_("N", "L", &n, a.data(), &n, w.data(), &query, &lwork, &info);
  lwork = static_cast<int>(query);
  std::vector<double> work(lwork);
  dsyev_("N", "L", &n, a.data(), &n, w.data(), work.data(), &lwork, &info);
  EXPECT_EQ(info, 0);
  return w;
}

/// Hessian of (1/rows) sum loss + l2/2 ||theta||^2 at theta, dense.
inline std::vector<double> dense_objective_hessian(const SoftmaxRegression& model, const double* x,
                                                   std::size_t rows, const double* theta) {
  const std::size_t p = model.parameters();
  std::vector<double> hessian(p * p);
  model.hessian_sum(x, rows, theta, hessian.data());
  for (std::size_t i = 0; i < p; ++i)
    for (std::size_t k = 0; k < p; ++k)
      hessian[i * p + k] = hessian[i * p + k] / rows + (i == k ? model.l2() : 0.0);
  return hessian;
}

/// Minimizer of (1/rows) sum loss + l2/2 ||theta||^2 by Newton from `start` (zeros when empty).
inline std::vector<double> dense_minimizer(const SoftmaxRegression& model, const double* x,
                                           const std::int32_t* y, std::size_t rows,
                                           std::vector<double> theta = {}) {
  const std::size_t p = model.parameters();
  if (theta.empty()) theta.assign(p, 0.0);
  std::vector<double> gradient(p);
  Workspace work;
  for (int step = 0; step < 50; ++step) {
    model.gradient_sum(x, y, rows, theta.data(), gradient.data(), work);
    double norm = 0.0;
    for (std::size_t k = 0; k < p; ++k) {
      gradient[k] = gradient[k] / rows + model.l2() * theta[k];
      norm += gradient[k] * gradient[k];
    }
    if (std::sqrt(norm) < 1e-13) break;
    const auto step_vector =
        dense_solve(dense_objective_hessian(model, x, rows, theta.data()), gradient);
    for (std::size_t k = 0; k < p; ++k) theta[k] -= step_vector[k];
  }
  return theta;
}

}  // namespace fluence::testing
