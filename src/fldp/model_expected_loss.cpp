// Any model's expected loss under re-randomization, on expanded rows (docs/math.md §5.2, §10).
#include <algorithm>
#include <cmath>

#include "fluence/core/error.hpp"
#include "fluence/core/krylov.hpp"
#include "fluence/fldp/expected_loss.hpp"
#include "fluence/model/softmax_head.hpp"

namespace fluence {

namespace {

// Expanded rows per call of the model: large enough that a network's passes run whole blocks of
// its own, small enough that the block (rows x D doubles) stays a few MB for image rows.
constexpr std::size_t kExpandedRows = 512;

}  // namespace

ModelExpectedLoss::ModelExpectedLoss(const Model& model, const Client& client,
                                     const std::vector<ChangedAttribute>& changed,
                                     const ExpectationConfig& config, std::uint64_t seed,
                                     std::uint64_t key)
    : ExpectedChange(model.classes(), client, changed, config, seed, key),
      model_(model),
      D_(model.features()) {
  block_x_.resize(kExpandedRows * D_);
  block_targets_.resize(kExpandedRows * C_);
  block_sum_.resize(model.parameters());
}

template <class Flush>
void ModelExpectedLoss::for_each_block(const std::int64_t* ids, std::size_t count, int batch,
                                       bool observed, Flush&& flush) {
  const std::size_t F = features_.size();
  std::size_t filled = 0;
  const auto add_row = [&](std::size_t r, const std::int32_t* values, const double* target,
                           double weight) {
    double* x = block_x_.data() + filled * D_;
    std::copy_n(rows_x_ + r * D_, D_, x);
    if (values)  // x~ -> x_{f_x}: the randomized one-hot entries move to the combination's
      for (std::size_t f = 0; f < F; ++f) {
        x[features_[f].offset + randomized_[r * F + f]] = 0.0;
        x[features_[f].offset + values[f]] = 1.0;
      }
    double* t = block_targets_.data() + filled * C_;
    for (int c = 0; c < C_; ++c) t[c] = weight * target[c];
    if (++filled == kExpandedRows) {
      flush(filled);
      filled = 0;
    }
  };
  std::vector<double> observed_target(C_);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t r = ids ? static_cast<std::size_t>(ids[i]) : i;
    const double* q = targets_.data() + r * C_;
    for_each_combination(r, batch, [&](double weight, const std::int32_t* values) {
      add_row(r, values, q, weight);
    });
    if (observed) {
      // Minus the row as trained: the target -e_y (cross-entropy is linear in the target).
      std::fill(observed_target.begin(), observed_target.end(), 0.0);
      observed_target[observed_labels_[r]] = -1.0;
      add_row(r, nullptr, observed_target.data(), 1.0);
    }
  }
  if (filled > 0) flush(filled);
}

double ModelExpectedLoss::evaluate(const double* theta, double* gradient, int batch,
                                   bool observed) {
  const std::size_t p = model_.parameters();
  if (gradient) std::fill(gradient, gradient + p, 0.0);
  double loss = 0.0;
  for_each_block(nullptr, rows_, batch, observed, [&](std::size_t rows) {
    const TargetCrossEntropy head(block_targets_.data());
    loss += model_.loss_gradient_sum(block_x_.data(), rows, head, theta,
                                     gradient ? block_sum_.data() : nullptr, work_);
    if (gradient)
      for (std::size_t k = 0; k < p; ++k) gradient[k] += block_sum_[k];
  });
  return loss;
}

void ModelExpectedLoss::hessian_vector_rows(const double* theta, const std::int64_t* ids,
                                            std::size_t count, const double* v, double* out) {
  const std::size_t p = model_.parameters();
  std::fill(out, out + p, 0.0);
  for_each_block(ids, count, -1, false, [&](std::size_t rows) {
    const TargetCrossEntropy head(block_targets_.data());
    model_.loss_hessian_vector_sum(block_x_.data(), rows, head, theta, v, block_sum_.data(), work_);
    for (std::size_t k = 0; k < p; ++k) out[k] += block_sum_[k];
  });
}

void ModelExpectedLoss::hessian_diagonal_sum(const double*, double*) {
  throw InputError(
      "influence.preconditioner = \"jacobi\" needs model.type = \"logistic\" (a network's "
      "Hessian diagonal would cost p products); use \"auto\" or \"none\"");
}

void ModelExpectedLoss::hessian_sum(const double* theta, double* out) {
  dense_from_products({model_.parameters(),
                       [&](const double* v, double* w) { hessian_vector_sum(theta, v, w); },
                       {}},
                      out);
}

std::shared_ptr<ExpectedChange> make_expected_loss(const Model& model, const Client& client,
                                                   const std::vector<ChangedAttribute>& changed,
                                                   const ExpectationConfig& config,
                                                   std::uint64_t seed, std::uint64_t key) {
  if (const SoftmaxRegression* linear = model.linear())
    return std::make_shared<ExpectedLoss>(*linear, client, changed, config, seed, key);
  return std::make_shared<ModelExpectedLoss>(model, client, changed, config, seed, key);
}

}  // namespace fluence
