#pragma once
// The exact minimizer of (1/n) sum_i CE(z_i, theta) + l2/2 ||theta||^2 on rows held by one rank:
// M0 on the warm-up data and the retrained models of the exact-influence check (seed 002 Eq. 4).
// The one Newton's method (core/newton.hpp) on the rows' exact Hessian products, Jacobi
// preconditioned; serial, so every rank that runs it gets the same bits.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fluence/model/softmax_regression.hpp"

namespace fluence::lia {

struct ExactFitReport {
  int newton_steps = 0;
  int hessian_products = 0;
  double gradient_norm = 0.0;
};

/// Minimizes from `theta` (in/out) until the gradient norm is below `tolerance`.
ExactFitReport exact_fit(const SoftmaxRegression& model, const double* x, const std::int32_t* y,
                         std::size_t rows, double tolerance, std::vector<double>& theta);

/// The regularized objective (1/n) sum CE + l2/2 ||theta||^2.
double regularized_objective(const SoftmaxRegression& model, const double* x, const std::int32_t* y,
                             std::size_t rows, const double* theta, Workspace& work);

}  // namespace fluence::lia
