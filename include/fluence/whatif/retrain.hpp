#pragma once
// Exact retraining for the what-if ground truth (docs/math.md §6). The perturbed objective is the
// clean one plus, per perturbed record, weighted pseudo-records:
//   h_S(theta) = h(theta) + (1/n) sum_j w_j l_j(theta),
// where the original record enters with w = -1 (cross-entropy at its label) and its perturbed
// version(s) with their probabilities: one randomized record (w = 1) for a draw, every value
// combination (w = P(f), soft label q) for the exact expectation. A pseudo-record's loss is the
// cross-entropy or the forward-corrected loss l_FLC(x, t) = -sum_c t_c log (P^T p)_c
// (seed 001 Eq. 18). Only the perturbed records are stored; the clean rows are the clients' own.
// Any model: the linear model's products use its cached probabilities and per-row blocks, a
// network's its R-operator through PseudoRowLoss.
#include <cstdint>
#include <vector>

#include "fluence/fl/federation.hpp"
#include "fluence/influence/ihvp.hpp"

namespace fluence {

/// One client's pseudo-records, grouped by perturbed record (in the group's selection order).
struct PseudoRows {
  int classes = 2, width = 0;
  std::vector<double> x;                // rows x width
  std::vector<double> weight;           // rows
  std::vector<double> target;           // rows x classes, a distribution over labels
  std::vector<std::uint8_t> flc;        // rows: 1 = forward-corrected loss with `distortion`
  std::vector<std::size_t> record_end;  // per record: one past its last pseudo-row
  std::vector<double> distortion;       // classes x classes, P[u][v] = P(report v | true u)

  void reset(int classes_, int width_);
  /// Appends a pseudo-row; `finish_record` closes the current record's group.
  void add(const double* row, double w, const double* t, bool forward_corrected);
  void finish_record() { record_end.push_back(weight.size()); }
  std::size_t rows_of_records(std::size_t records) const {
    return records == 0 ? 0 : record_end[records - 1];
  }
};

/// The pseudo-rows' loss on their logits (model.hpp's LogitLoss), from pseudo-row `first` on:
/// row j contributes w_j l_j(z_j), l_j the cross-entropy with the soft target t_j or l_FLC, so any
/// model differentiates it (docs/math.md §6.5, §10).
class PseudoRowLoss final : public LogitLoss {
 public:
  explicit PseudoRowLoss(const PseudoRows& rows, std::size_t first = 0)
      : rows_(rows), first_(first) {}
  double gradient(std::size_t first, std::size_t rows, int classes, const double* z, double* delta,
                  double loss) const override;
  void hessian(std::size_t first, std::size_t rows, int classes, const double* z, const double* r_z,
               double* delta, double* r_delta) const override;

 private:
  const PseudoRows& rows_;
  std::size_t first_;
};

/// sum_j w_j l_j(theta) over pseudo-rows [first, first + rows), and its gradient added to
/// `gradient`. `scratch` holds the linear model's rows x C logits or a network's gradient.
double pseudo_rows_loss_gradient(const Model& model, const PseudoRows& rows_in, std::size_t first,
                                 std::size_t rows, const double* theta, double* gradient,
                                 std::vector<double>& scratch, Workspace& work);

class PerturbedObjective {
 public:
  /// `pseudo` holds one PseudoRows per client hosted on this rank (kept by reference).
  PerturbedObjective(Federation& federation, const std::vector<PseudoRows>& pseudo);
  /// The perturbed records of each local client that are active (a prefix of its records).
  void set_active_records(const std::vector<std::size_t>& records) { active_ = records; }
  /// Collective: h_S(theta) and its gradient.
  double value_and_gradient(const std::vector<double>& theta, std::vector<double>& gradient);
  /// Caches what products by the Hessian of h_S at theta need (probabilities, per-row blocks).
  void prepare_hessian(const std::vector<double>& theta);
  /// Collective: out = Hessian of h_S at the prepared theta times v.
  void hessian_vector(const double* v, double* out);

 private:
  Federation& federation_;
  const std::vector<PseudoRows>& pseudo_;
  std::vector<std::size_t> active_;
  Workspace work_;
  std::vector<double> scratch_, sums_, product_;
  // The linear model's cache at the prepared point: probabilities and per-row C x C blocks per
  // local client; a network's products are taken at `point_` by its R-operator.
  std::vector<std::vector<double>> probabilities_, blocks_;
  std::vector<double> probabilities_theta_;  // where probabilities_ were taken
  std::vector<double> point_;
};

/// Collective: the smallest eigenvalue of the Hessian of h_S at `theta` (the active records' as
/// set; SLEPc, influence/spectrum.hpp), the curvature where a retrain stopped.
double perturbed_min_eigenvalue(PerturbedObjective& objective, const std::vector<double>& theta,
                                double tolerance);

struct RetrainReport {
  int iterations = 0;  // Newton steps
  long hessian_products = 0;
  double gradient_norm = 0.0;
  bool converged = false;
  bool interrupted = false;  // a stop ended it between Newton steps: theta is its iterate
};

/// Minimizes the perturbed objective from `theta` (in/out) by the one Newton's method
/// (core/newton.hpp) until ||grad h_S|| <= tolerance. Each step solves with the exact Hessian of
/// h_S by CG preconditioned with the clean Hessian at the trained optimum (`clean_hessian`,
/// factored once): the two differ only on the perturbed records and by the move of theta, so one
/// or two products usually suffice. Where forward loss correction makes h_S non-convex and CG
/// meets negative curvature, the step is damped (Levenberg-Marquardt). With `stop`, a stop may end
/// it between steps and a restart continue it (core/newton.hpp).
RetrainReport newton_retrain(PerturbedObjective& objective, IhvpSolver& clean_hessian,
                             std::vector<double>& theta, double tolerance, int max_iterations,
                             InterruptibleNewton* stop = nullptr);

}  // namespace fluence
