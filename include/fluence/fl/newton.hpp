#pragma once
// The federated objective h(theta) (seed 000 Eq. 1 plus L2, Federation::objective) for the one
// Newton's method (core/newton.hpp): the polish, the retrains and FLDP's refinement.
#include <vector>

#include "fluence/core/newton.hpp"
#include "fluence/fl/federation.hpp"

namespace fluence {

/// h over the federation's included clients (and their local objectives) as a NewtonObjective.
/// Every function is a collective.
class FederatedObjective final : public NewtonObjective {
 public:
  explicit FederatedObjective(Federation& federation);
  std::size_t parameters() const override;
  double value_and_gradient(const std::vector<double>& theta,
                            std::vector<double>& gradient) override;
  void set_point(const std::vector<double>& theta) override;
  void hessian_vector(const double* v, double* out) override;
  bool has_hessian_diagonal() const override;
  bool hessian_diagonal(double* out) override;

 private:
  Federation& federation_;
  std::vector<double> point_, diagonal_;
  Federation::HessianCache cache_;  // the probabilities at point_, cleared when it moves
};

}  // namespace fluence
