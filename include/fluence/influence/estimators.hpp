#pragma once
// First-order influence estimators (docs/math.md §1 has the derivation and the sign and 1/n
// conventions; the seeds are not consistent about them). With the objective
//   h(theta) = (1/n) sum_j l~_j(theta),   l~_j = l_j + (l2/2) ||theta||^2,
// and H its Hessian at the minimizer theta^:
//   removing group G:           d theta = +(1/n) H^{-1} sum_G grad l~_j        (seed 000 Eq. 3-4, 8
//                                                                                 with the sign
//                                                                                 fixed)
//   perturbing G -> G_beta:     d theta = -(1/n) H^{-1} sum_G grad(l_beta - l)  (seed 000 Eq. 6-7,
//   9) change of the test loss:    d L_test = grad L_test^T d theta = s_test^T (...)
//                               with s_test = H^{-1} grad L_test solved once    (seed 001 Eq. 5,
//                               9-11)
#include <cstdint>
#include <string>
#include <vector>

#include "fluence/influence/ihvp.hpp"
#include "fluence/model/model.hpp"

namespace fluence {

/// Which per-point gradient a removal uses. `regularized` (default) is grad l~_j, which makes the
/// estimate consistent with retraining on the remaining data under the same objective;
/// `loss` is the seeds' grad l_j (the regularizer's share of the removed points ignored).
enum class RemovalGradient { regularized, loss };
RemovalGradient parse_removal_gradient(const std::string& name);

/// sum_{rows} grad l_j(theta) (+ rows * l2 * theta when regularized) for the given encoded rows.
void group_gradient_sum(const Model& model, const double* x, const std::int32_t* y,
                        std::size_t rows, const double* theta, RemovalGradient kind,
                        std::vector<double>& out, Workspace& work);

/// d theta of removing a group whose gradient sum is `group_gradient` from n training rows.
SolveReport removal_parameter_change(IhvpSolver& solver, const std::vector<double>& group_gradient,
                                     std::int64_t n, std::vector<double>& delta);

/// d theta of perturbing a group: gradient sums of the perturbed and of the original points.
SolveReport perturbation_parameter_change(IhvpSolver& solver,
                                          const std::vector<double>& perturbed_gradient,
                                          const std::vector<double>& original_gradient,
                                          std::int64_t n, std::vector<double>& delta);

/// s_test = H^{-1} grad L_test.
SolveReport solve_s_test(IhvpSolver& solver, const std::vector<double>& test_gradient,
                         std::vector<double>& s_test);

/// d L_test of removing the group, from s_test: +(1/n) s_test^T group_gradient.
double removal_loss_change(const std::vector<double>& s_test,
                           const std::vector<double>& group_gradient, std::int64_t n);
/// d L_test of perturbing the group: -(1/n) s_test^T (perturbed - original).
double perturbation_loss_change(const std::vector<double>& s_test,
                                const std::vector<double>& perturbed_gradient,
                                const std::vector<double>& original_gradient, std::int64_t n);
/// d L_test to first order for a parameter change: grad L_test^T d theta.
double loss_change(const std::vector<double>& test_gradient, const std::vector<double>& delta);

/// Spearman rank correlation (ties get their mean rank) and mean absolute error.
double spearman(const std::vector<double>& a, const std::vector<double>& b);
double mean_absolute_error(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace fluence
