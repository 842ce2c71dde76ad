#pragma once
// The expected loss of one client's data after re-randomizing some attributes under new privacy
// levels eps' (seed 000 Eq. 15, 18), as a function of theta:
//   E[l(z_eps', theta)] = sum_{f_x in F_x} p_{f_x} l(z_{f_x}, theta),
// where F_x is the Cartesian product of the changed attributes' values, p_{f_x} the product of
// k-RR probabilities from the ORIGINAL values (keep e^eps'/(d-1+e^eps'), else 1/(d-1+e^eps')), and
// z_{f_x} equals the client's randomized point z~ except in the changed attributes.
//
// Two exact reductions keep this cheap (docs/math.md §5.2):
//  - the label enters the cross-entropy linearly, so its expectation is a soft target q (the k-RR
//    distribution of the original label): E_y l(x, y) = lse(theta x) - q . theta x. Only the
//    changed *features* are enumerated;
//  - a changed categorical feature moves only its one-hot block, so theta x_{f_x} is the logit of
//    the base row (changed blocks zeroed) plus one column of theta per changed attribute. Every
//    kernel is a GEMM over the base rows plus O(C F) work per combination; no expanded rows are
//    stored.
// Above `enumeration_limit` combinations the feature expectation is a Monte-Carlo average over
// `samples` draws per row from the k-RR mechanism itself (unbiased; the label stays exact). The
// draws are split into `batches` independent batches whose spread gives a standard error.
#include <cstdint>
#include <memory>
#include <vector>

#include "fluence/core/lanes.hpp"
#include "fluence/fl/client.hpp"
#include "fluence/fl/local_objective.hpp"
#include "fluence/model/softmax_regression.hpp"

namespace fluence {

struct ChangedAttribute {
  int column = -1;      // column in Table::categorical; -1 = the label
  int domain = 2;       // number of values d_f
  int offset = 0;       // first encoded column of the one-hot block (features only)
  double epsilon = 1.;  // the new eps'; +inf keeps the original value
};

class Deck;

// The first three are filled in by from_deck; their defaults are the declared keys'
// (register_fldp_keys).
struct ExpectationConfig {
  std::uint64_t enumeration_limit{};  // largest |F_x| over the changed features enumerated
  int samples{};                      // Monte-Carlo draws per row above the limit
  int batches{};                      // independent batches of draws (standard error)
  // Largest table of k-RR combination weights w(c | o) (|F_x|^2 doubles; 512 KB, so up to
  // |F_x| = 256): not a deck key. The exact gradient's block kernel reads its weights from the
  // table; without one, rows take the per-row path.
  std::size_t weight_table_entries = std::size_t{1} << 16;

  /// fldp.enumeration_limit, fldp.monte_carlo_samples and fldp.monte_carlo_batches; InputError
  /// when the samples are not a multiple of the batches.
  static ExpectationConfig from_deck(const Deck& deck);
};

/// The expected loss of one client's data under the k-RR re-randomization of its changed
/// attributes, as a LocalObjective (Federation uses it in place of the client's rows): the soft
/// label targets, and the changed features' value combinations with their weights (every
/// combination, or Monte-Carlo draws above `enumeration_limit`). Two implementations share this
/// enumeration: ExpectedLoss, the linear model's factorized kernels, and ModelExpectedLoss, any
/// model on expanded rows. make_expected_loss picks one.
class ExpectedChange : public LocalObjective {
 public:
  bool exact() const { return exact_; }
  /// |F_x| when exact, else the draws per row.
  std::size_t combinations() const { return exact_ ? combos_ : samples_; }
  /// Monte-Carlo batches (1 when exact).
  int batches() const { return exact_ ? 1 : batches_; }
  std::size_t rows() const { return rows_; }

  double loss_sum(const double* theta) final;
  void gradient_sum(const double* theta, double* out) final;
  /// The gradient from Monte-Carlo batch `batch` alone (an independent unbiased estimate); when
  /// exact, the gradient.
  void batch_gradient_sum(const double* theta, int batch, double* out);
  /// sum_r [grad E l(z_eps', theta) - grad l(z~_r, theta)]: seed 000 Eq. 14's bracket. batch < 0:
  /// every combination or draw; else one Monte-Carlo batch.
  void change_gradient_sum(const double* theta, int batch, double* out);
  void hessian_vector_sum(const double* theta, const double* v, double* out) final;
  void sampled_hessian_vector_sum(const double* theta, const std::int64_t* rows, std::size_t count,
                                  const double* v, double* out) final;

 protected:
  // The loss over the rows (gradient == nullptr) or the gradient (into `gradient`; returns 0),
  // draws from `batch` (-1 = all), minus the observed rows z~ when `subtract_observed`.
  virtual double evaluate(const double* theta, double* gradient, int batch,
                          bool subtract_observed) = 0;
  // The Hessian-vector product over client rows ids[0 .. count) (every row without ids).
  virtual void hessian_vector_rows(const double* theta, const std::int64_t* ids, std::size_t count,
                                   const double* v, double* out) = 0;

  /// `client` supplies z~ (features and labels as trained) and the original values; its encoded
  /// rows are used in place, so it must outlive this object. `seed` and `key` select the
  /// Monte-Carlo streams (seed, fldp_expectation_sample, global row, key).
  ExpectedChange(int classes, const Client& client, const std::vector<ChangedAttribute>& changed,
                 const ExpectationConfig& config, std::uint64_t seed, std::uint64_t key);

  struct Feature {
    int offset, domain;
    double epsilon;
    double keep, other;  // k-RR probabilities of reporting the original / one other value
  };
  // Calls visit(weight, values) for each combination of row r (values: one per changed feature),
  // in a fixed order: the combinations in mixed radix (the last feature fastest), or the row's
  // draws of batch `batch` (-1 = all).
  template <class Visit>
  void for_each_combination(std::size_t r, int batch, Visit&& visit) const {
    const std::size_t F = features_.size();
    if (exact_) {
      const std::int32_t* original = original_.data() + r * F;
      for (std::size_t c = 0; c < combos_; ++c) {
        const std::int32_t* values = combo_values_.data() + c * F;
        double weight = 1.0;
        for (std::size_t f = 0; f < F; ++f)
          weight *= values[f] == original[f] ? features_[f].keep : features_[f].other;
        if (weight != 0.0) visit(weight, values);  // eps' = inf: only the original value
      }
      return;
    }
    const int per_batch = samples_ / batches_;
    const int first = batch < 0 ? 0 : batch * per_batch;
    const int end = batch < 0 ? samples_ : first + per_batch;
    const double weight = 1.0 / (end - first);
    for (int s = first; s < end; ++s) visit(weight, sample_values_.data() + (r * samples_ + s) * F);
  }

  int C_;
  std::size_t rows_;
  std::vector<Feature> features_;
  const double* rows_x_;                  // the client's encoded rows x~ (used in place)
  std::vector<std::int32_t> randomized_;  // rows x F: z~'s values of the changed features
  std::vector<std::int32_t> original_;    // rows x F: original values of the changed features
  std::vector<double> targets_;           // rows x C: soft label q (or one-hot of the z~ label)
  const std::int32_t* observed_labels_;   // z~'s labels (the client's, used in place)
  bool exact_ = true;
  std::size_t combos_ = 1;
  std::vector<std::int32_t> combo_values_;          // combos x F (exact)
  std::vector<std::int32_t> observed_combination_;  // rows: the combination z~ reports (exact)
  std::vector<std::int32_t> original_combination_;  // rows: the original values' combination
  std::vector<double> weight_table_;                // combos x combos: w(c | original o), if small
  int samples_ = 0, batches_ = 1;
  std::vector<std::int32_t> sample_values_;  // rows x samples x F (Monte Carlo)
};

/// The linear model's expected loss: every kernel a GEMM over the base rows plus O(C F) work per
/// combination and row (the reductions above).
class ExpectedLoss final : public ExpectedChange {
 public:
  ExpectedLoss(const SoftmaxRegression& model, const Client& client,
               const std::vector<ChangedAttribute>& changed, const ExpectationConfig& config,
               std::uint64_t seed, std::uint64_t key);
  ExpectedLoss(const SoftmaxRegression&, Client&&, const std::vector<ChangedAttribute>&,
               const ExpectationConfig&, std::uint64_t,
               std::uint64_t) = delete;  // a temporary client would dangle

  void hessian_diagonal_sum(const double* theta, double* out) override;
  void hessian_sum(const double* theta, double* out) override;

 private:
  // One pass over the rows; subtracting the observed rows costs a softmax per row, not a second
  // pass (their logits are the base logits plus their randomized one-hots).
  double evaluate(const double* theta, double* gradient, int batch,
                  bool subtract_observed) override;
  void hessian_vector_rows(const double* theta, const std::int64_t* ids, std::size_t count,
                           const double* v, double* out) override;
  // Minus grad l(z~_r), its probabilities from the base logits and theta.
  void subtract_observed_row(std::size_t r, const double* base_logits, const double* theta,
                             double* a_row, double* gradient);
  // Minus grad l(z~_r) given its probabilities p~: a_row loses p~ - e_y, the randomized one-hot
  // columns of `gradient` too.
  void subtract_observed_gradient(std::size_t r, const double* probabilities, double* a_row,
                                  double* gradient) const;
  const double* gather(const std::int64_t* ids, std::size_t first, std::size_t count);
  // Logits of the base rows x-bar (x~ without its changed one-hot entries) for rows `first` ..
  // `first + m` (of `ids` when given) from x~ = `x`; and out += a^T x-bar.
  void base_logits(const double* x, const std::int64_t* ids, std::size_t first, std::size_t m,
                   const double* matrix, double* out) const;
  void add_base_outer(const double* a, const double* x, const std::int64_t* ids, std::size_t first,
                      std::size_t m, double* out) const;
  // Calls visit(weight, values, probabilities) for each combination of row r, the softmax
  // probabilities from factorized exponentials (prepare_factors(theta) first).
  template <class Visit>
  void for_each_probability(std::size_t r, int batch, const double* base_logits,
                            const double* theta, Visit&& visit);
  void prepare_factors(const double* theta);
  // The exact expectation's gradient terms of up to eight rows of the current chunk (indices
  // `block` into it, base logits in logits_), into accumulated_ and combination_lanes_; with
  // observed_gradient, minus the observed rows' own gradient.
  template <int Classes>
  void exact_block_gradient(std::size_t first, const std::int32_t* block, int count,
                            double* observed_gradient);
  double top_minus_bottom(const double* logits) const;
  // Index into theta (C x D) of class k's column for value `value` of changed feature f.
  std::size_t entry(int k, std::size_t f, std::int32_t value) const {
    return static_cast<std::size_t>(k) * D_ + static_cast<std::size_t>(features_[f].offset) +
           static_cast<std::size_t>(value);
  }
  // The client row of position i of a chunk: ids[i] for sampled rows, else i itself.
  static std::size_t row_index(const std::int64_t* ids, std::size_t i) {
    return ids ? static_cast<std::size_t>(ids[i]) : i;
  }
  void prepare_combinations(const double* theta);
  // Softmax probabilities of one combination into `logits`; returns the log-sum-exp if asked.
  double combination_logits(const double* base_logits, const double* theta,
                            const std::int32_t* values, double* logits, bool want_lse) const;

  const SoftmaxRegression& model_;
  int D_;
  std::vector<double> combination_factor_;  // C x combos: e^(T_k(c) - max_k T_k(c))
  double combination_spread_ = 0.0;
  std::vector<double> factors_;  // [f][v][k]: e^(theta[k, offset_f + v] - max over k)
  double spread_bound_ = 0.0;    // sum over f of the widest class spread of theta's columns
  std::vector<std::size_t> table_start_;  // feature f's first entry in factors_
  std::size_t table_rows_ = 0;            // sum of the changed features' domains
  std::vector<double> level_, row_weights_;
  std::vector<lanes::Lanes> class_lanes_;  // 4C: the block kernel's scale, target, sums, terms
  std::vector<double> marginals_;          // [f][v][k] gradient of the one-hot columns
  std::vector<lanes::Lanes> combination_lanes_;  // C x combos: a_k(c) over the rows, per lane
  std::vector<std::int32_t> block_rows_ = std::vector<std::int32_t>(lanes::kLanes);
  // Scratch, sized once.
  std::vector<double> chunk_, logits_, second_, accumulated_, z_, u_, v_scratch_;
};

/// Any model's expected loss (docs/math.md §5.2, §10): each row's value combinations become
/// expanded rows x_{f_x} (x~ with the changed one-hot blocks set to f_x) with the soft target
/// P(f_x) q, and the model's loss on logits (TargetCrossEntropy) gives every sum: gradients and
/// exact Hessian-vector products by the model's own passes (the R-operator for networks). The
/// expanded rows are built a block at a time, never stored, in a fixed order (row, then
/// combination), so the sums do not depend on the rank.
class ModelExpectedLoss final : public ExpectedChange {
 public:
  ModelExpectedLoss(const Model& model, const Client& client,
                    const std::vector<ChangedAttribute>& changed, const ExpectationConfig& config,
                    std::uint64_t seed, std::uint64_t key);
  ModelExpectedLoss(const Model&, Client&&, const std::vector<ChangedAttribute>&,
                    const ExpectationConfig&, std::uint64_t, std::uint64_t) = delete;

  /// A network has no cheap diagonal: InputError naming influence.preconditioner.
  void hessian_diagonal_sum(const double* theta, double* out) override;
  /// From p Hessian-vector products (small p only).
  void hessian_sum(const double* theta, double* out) override;

 private:
  // The expanded rows of client rows ids[0 .. count) (or 0 .. count without ids), draws of
  // `batch`, with the observed rows when `observed`, a block at a time into block_x_ and
  // block_targets_: calls flush(rows) per block.
  template <class Flush>
  void for_each_block(const std::int64_t* ids, std::size_t count, int batch, bool observed,
                      Flush&& flush);
  // The expanded rows' loss and gradient; the observed row z~ joins each row's expanded rows with
  // the target -e_y (weight -1).
  double evaluate(const double* theta, double* gradient, int batch, bool observed) override;
  void hessian_vector_rows(const double* theta, const std::int64_t* ids, std::size_t count,
                           const double* v, double* out) override;

  const Model& model_;
  int D_;
  std::vector<double> block_x_, block_targets_, block_sum_;
  Workspace work_;
};

/// The expected loss of `client` under the re-randomization `changed` for `model`: the linear
/// model's factorized kernels when it has them, else the expanded rows.
std::shared_ptr<ExpectedChange> make_expected_loss(const Model& model, const Client& client,
                                                   const std::vector<ChangedAttribute>& changed,
                                                   const ExpectationConfig& config,
                                                   std::uint64_t seed, std::uint64_t key);

}  // namespace fluence
