#include "fluence/fldp/expected_loss.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "fluence/core/error.hpp"
#include "fluence/core/lanes.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/fldp/purposes.hpp"
#include "fluence/model/dense_kernels.hpp"
#include "fluence/privacy/randomized_response.hpp"

namespace fluence {

namespace {

constexpr std::size_t kChunkRows = 256;

// Softmax of z (C values) in place; returns log-sum-exp of the input when asked (the log is a
// third of the cost of a two-class combination, and gradients and Hessians do not need it).
double softmax_in_place(double* z, int C, bool want_lse) {
  double top = z[0];
  for (int k = 1; k < C; ++k) top = std::max(top, z[k]);
  double sum = 0.0;
  for (int k = 0; k < C; ++k) {
    z[k] = std::exp(z[k] - top);
    sum += z[k];
  }
  const double inverse = 1.0 / sum;
  for (int k = 0; k < C; ++k) z[k] *= inverse;
  return want_lse ? top + std::log(sum) : 0.0;
}

}  // namespace

ExpectedChange::ExpectedChange(int classes, const Client& client,
                               const std::vector<ChangedAttribute>& changed,
                               const ExpectationConfig& config, std::uint64_t seed,
                               std::uint64_t key)
    : C_(classes),
      rows_(client.size()),
      rows_x_(client.features()),
      observed_labels_(client.labels().data()) {
  const std::size_t n = rows_;
  targets_.assign(n * C_, 0.0);
  for (std::size_t r = 0; r < n; ++r) targets_[r * C_ + client.labels()[r]] = 1.0;
  const std::size_t nc = n == 0 ? 0 : client.original_categorical().size() / n;
  std::vector<int> columns;
  for (const auto& attribute : changed) {
    const double keep = rr_keep_probability(attribute.epsilon, attribute.domain);
    const double other = attribute.domain > 1 ? (1.0 - keep) / (attribute.domain - 1) : 0.0;
    if (attribute.column < 0) {
      // Soft target: the k-RR distribution of the original label (seed 000 Eq. 15 for the label).
      for (std::size_t r = 0; r < n; ++r) {
        std::fill_n(targets_.begin() + r * C_, C_, other);
        targets_[r * C_ + client.original_labels()[r]] = keep;
      }
      continue;
    }
    features_.push_back({attribute.offset, attribute.domain, attribute.epsilon, keep, other});
    columns.push_back(attribute.column);
  }
  const std::size_t F = features_.size();
  original_.resize(n * F);
  randomized_.resize(n * F);
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t f = 0; f < F; ++f) {
      original_[r * F + f] = client.original_categorical()[r * nc + columns[f]];
      randomized_[r * F + f] = client.categorical()[r * nc + columns[f]];
    }

  // |F_x|, saturating, to decide between enumeration and sampling.
  std::uint64_t product = 1;
  for (const auto& feature : features_)
    product = product > config.enumeration_limit ? product : product * feature.domain;
  exact_ = product <= config.enumeration_limit;
  if (exact_) {
    combos_ = product;
    combo_values_.resize(combos_ * F);
    for (std::size_t c = 0; c < combos_; ++c) {
      std::size_t index = c;  // mixed radix, the last feature fastest
      for (std::size_t f = F; f-- > 0;) {
        combo_values_[c * F + f] = static_cast<std::int32_t>(index % features_[f].domain);
        index /= features_[f].domain;
      }
    }
    // Each row's original and observed values as combination indices; the k-RR weights of
    // every combination given every original one, w(c | o) = prod_f k-RR(v_f(c) | v_f(o)), as
    // a table when it is small.
    const auto combination_of = [&](const std::vector<std::int32_t>& values, std::size_t r) {
      std::size_t index = 0;
      for (std::size_t f = 0; f < F; ++f)
        index = index * features_[f].domain + static_cast<std::size_t>(values[r * F + f]);
      return static_cast<std::int32_t>(index);
    };
    observed_combination_.resize(n);
    original_combination_.resize(n);
    for (std::size_t r = 0; r < n; ++r) {
      observed_combination_[r] = combination_of(randomized_, r);
      original_combination_[r] = combination_of(original_, r);
    }
    if (combos_ * combos_ <= config.weight_table_entries) {
      weight_table_.resize(combos_ * combos_);
      for (std::size_t o = 0; o < combos_; ++o)
        for (std::size_t c = 0; c < combos_; ++c) {
          double weight = 1.0;
          for (std::size_t f = 0; f < F; ++f)
            weight *= combo_values_[c * F + f] == combo_values_[o * F + f] ? features_[f].keep
                                                                           : features_[f].other;
          weight_table_[o * combos_ + c] = weight;
        }
    }
  } else {
    if (config.samples < config.batches || config.samples % config.batches != 0)
      throw InputError(
          "fldp.monte_carlo_samples must be a positive multiple of "
          "fldp.monte_carlo_batches");
    samples_ = config.samples;
    batches_ = config.batches;
    sample_values_.resize(n * samples_ * F);
    for (std::size_t r = 0; r < n; ++r) {
      // One stream per (row, key): the draws do not depend on the rank or on the other rows.
      Stream stream(seed, purpose::fldp_expectation_sample,
                    static_cast<std::uint64_t>(client.rows()[r]), key);
      for (int s = 0; s < samples_; ++s)
        for (std::size_t f = 0; f < F; ++f)
          sample_values_[(r * samples_ + s) * F + f] = randomize_value(
              original_[r * F + f], features_[f].domain, features_[f].epsilon, stream);
    }
  }
}

ExpectedLoss::ExpectedLoss(const SoftmaxRegression& model, const Client& client,
                           const std::vector<ChangedAttribute>& changed,
                           const ExpectationConfig& config, std::uint64_t seed, std::uint64_t key)
    : ExpectedChange(model.classes(), client, changed, config, seed, key),
      model_(model),
      D_(model.features()) {
  chunk_.resize(kChunkRows * D_);
  logits_.resize(kChunkRows * C_);
  second_.resize(kChunkRows * C_);
  accumulated_.resize(kChunkRows * C_);
  z_.resize(C_);
  u_.resize(C_);
  v_scratch_.resize(C_);
}

double ExpectedLoss::top_minus_bottom(const double* logits) const {
  double top = logits[0], bottom = logits[0];
  for (int k = 1; k < C_; ++k) {
    top = std::max(top, logits[k]);
    bottom = std::min(bottom, logits[k]);
  }
  return top - bottom;
}

void ExpectedLoss::prepare_factors(const double* theta) {
  // factor[f][v][k] = exp(theta[k, offset_f + v] - max_k theta[k, offset_f + v]) in (0, 1]; the
  // per-(f, v) shift is the same for every class, so it cancels in the softmax.
  factors_.clear();
  spread_bound_ = 0.0;
  table_start_.clear();
  for (const auto& feature : features_) {
    table_start_.push_back(factors_.size());
    double widest = 0.0;
    for (int v = 0; v < feature.domain; ++v) {
      double top = -std::numeric_limits<double>::infinity(), bottom = -top;
      for (int k = 0; k < C_; ++k) {
        const double t = theta[static_cast<std::size_t>(k) * D_ + feature.offset + v];
        top = std::max(top, t);
        bottom = std::min(bottom, t);
      }
      for (int k = 0; k < C_; ++k)
        factors_.push_back(
            std::exp(theta[static_cast<std::size_t>(k) * D_ + feature.offset + v] - top));
      widest = std::max(widest, top - bottom);
    }
    spread_bound_ += widest;
  }
  table_rows_ = factors_.size() / static_cast<std::size_t>(C_);
}

template <class Visit>
void ExpectedLoss::for_each_probability(std::size_t r, int batch, const double* base_logits,
                                        const double* theta, Visit&& visit) {
  const std::size_t F = features_.size();
  double top = base_logits[0];
  for (int k = 1; k < C_; ++k) top = std::max(top, base_logits[k]);
  // e^z of a combination factorizes: e^(b_k) prod_f e^(theta[k, offset_f + v_f]). With every
  // factor shifted into (0, 1], a product underflows only if the logit spread exceeds ~700; such
  // rows take the direct path (an exponential per class and combination).
  if (top_minus_bottom(base_logits) + spread_bound_ > 700.0) {
    double* z = z_.data();
    for_each_combination(r, batch, [&](double weight, const std::int32_t* values) {
      combination_logits(base_logits, theta, values, z, false);
      visit(weight, values, static_cast<const double*>(z));
    });
    return;
  }
  // level[f] holds the partial products of the first f features (level[0]: the base row).
  level_.resize((F + 1) * C_);
  for (int k = 0; k < C_; ++k) level_[k] = std::exp(base_logits[k] - top);
  double* p = u_.data();
  const auto leaf = [&](double weight, const std::int32_t* values, const double* product) {
    double sum = 0.0;
    for (int k = 0; k < C_; ++k) sum += product[k];
    const double inverse = 1.0 / sum;
    for (int k = 0; k < C_; ++k) p[k] = product[k] * inverse;
    visit(weight, values, static_cast<const double*>(p));
  };
  const auto extend = [&](std::size_t f, std::int32_t v) {
    const double* factor = factors_.data() + table_start_[f] + static_cast<std::size_t>(v) * C_;
    const double* from = level_.data() + f * C_;
    double* to = level_.data() + (f + 1) * C_;
    for (int k = 0; k < C_; ++k) to[k] = from[k] * factor[k];
  };
  if (!exact_) {
    const int per_batch = samples_ / batches_;
    const int first = batch < 0 ? 0 : batch * per_batch;
    const int end = batch < 0 ? samples_ : first + per_batch;
    const double weight = 1.0 / (end - first);
    for (int s = first; s < end; ++s) {
      const std::int32_t* values = sample_values_.data() + (r * samples_ + s) * F;
      for (std::size_t f = 0; f < F; ++f) extend(f, values[f]);
      leaf(weight, values, level_.data() + F * C_);
    }
    return;
  }
  // Exact: a flat, branch-light pass over the combinations (a depth-first walk reuses partial
  // products but mispredicts its branches; this loop is faster for the small |F| of practice).
  // Per row, each feature's k-RR weight of every value is tabulated once.
  const std::int32_t* original = original_.data() + r * F;
  row_weights_.resize(table_rows_);
  for (std::size_t f = 0; f < F; ++f) {
    double* w = row_weights_.data() + table_start_[f] / C_;
    std::fill_n(w, features_[f].domain, features_[f].other);
    w[original[f]] = features_[f].keep;
  }
  double* product = level_.data() + F * C_;
  for (std::size_t c = 0; c < combos_; ++c) {
    const std::int32_t* values = combo_values_.data() + c * F;
    double weight = 1.0;
    for (std::size_t f = 0; f < F; ++f) weight *= row_weights_[table_start_[f] / C_ + values[f]];
    if (weight == 0.0) continue;  // eps' = inf: only the original value
    for (int k = 0; k < C_; ++k) product[k] = level_[k];
    for (std::size_t f = 0; f < F; ++f) {
      const double* factor =
          factors_.data() + table_start_[f] + static_cast<std::size_t>(values[f]) * C_;
      for (int k = 0; k < C_; ++k) product[k] *= factor[k];
    }
    leaf(weight, values, product);
  }
}

double ExpectedLoss::combination_logits(const double* base_logits, const double* theta,
                                        const std::int32_t* values, double* logits,
                                        bool want_lse) const {
  for (int k = 0; k < C_; ++k) {
    double z = base_logits[k];
    for (std::size_t f = 0; f < features_.size(); ++f) z += theta[entry(k, f, values[f])];
    logits[k] = z;
  }
  if (C_ == 2) {
    // Two classes: p_1 = 1 / (1 + e^(z_0 - z_1)), one exponential instead of two (the hot path of
    // the binary tasks of seed 000); lse = max + log1p(e^-|z_0 - z_1|).
    const double difference = logits[0] - logits[1];
    const double top = std::max(logits[0], logits[1]);
    const double exponential = std::exp(-std::abs(difference));
    const double minority = exponential / (1.0 + exponential);
    logits[0] = difference >= 0 ? 1.0 - minority : minority;
    logits[1] = 1.0 - logits[0];
    return want_lse ? top + std::log1p(exponential) : 0.0;
  }
  return softmax_in_place(logits, C_, want_lse);
}

void ExpectedLoss::prepare_combinations(const double* theta) {
  // Per combination c and class k: T_k(c) = sum_f theta[k, offset_f + v_f(c)], stored as
  // e^(T_k(c) - max_k T_k(c)) (class-major, contiguous over c). The per-c shift cancels in the
  // softmax; combination_spread_ bounds max_k T - min_k T for the underflow check.
  const std::size_t F = features_.size();
  const std::size_t K = combos_;
  combination_factor_.resize(K * C_);
  combination_spread_ = 0.0;
  std::vector<double> t(C_);
  for (std::size_t c = 0; c < K; ++c) {
    double top = -std::numeric_limits<double>::infinity(), bottom = -top;
    for (int k = 0; k < C_; ++k) {
      double sum = 0.0;
      for (std::size_t f = 0; f < F; ++f) sum += theta[entry(k, f, combo_values_[c * F + f])];
      t[k] = sum;
      top = std::max(top, sum);
      bottom = std::min(bottom, sum);
    }
    for (int k = 0; k < C_; ++k)
      combination_factor_[static_cast<std::size_t>(k) * K + c] = std::exp(t[k] - top);
    combination_spread_ = std::max(combination_spread_, top - bottom);
  }
}

template <int Classes>
void ExpectedLoss::exact_block_gradient(std::size_t first, const std::int32_t* block, int count,
                                        double* observed_gradient) {
  // Up to eight rows at once, one per lane (lanes::Lanes), over all |F_x| combinations: weights
  // w(c | o_row) from the table, unnormalized probabilities u_k(c) = e^(b_k - max b) e^(T_k(c) -
  // shift(c)), then a_k(c) = w (p_k(c) - q_k). A row's sum of a_k over c is its lane's, and goes to
  // the base row's part (multiplied by x-bar later); the per-combination totals over the rows are
  // kept per lane and added in lane order at the end of the evaluation, and the one-hot columns'
  // gradient (each feature's marginal over the other features' values) is read off them.
  // Classes > 0 fixes C at compile time (the lanes stay in registers); 0 reads C_. Unused lanes
  // have weight 0.
  using lanes::Lanes;
  constexpr int L = lanes::kLanes;
  const int C = Classes > 0 ? Classes : C_;
  const std::size_t K = combos_;
  Lanes registers[Classes > 0 ? 4 * Classes : 1];
  Lanes* scale = Classes > 0 ? registers : class_lanes_.data();
  Lanes* target = scale + C;
  Lanes* sums = target + C;
  Lanes* terms = sums + C;
  Lanes present{};
  std::size_t table_row[L] = {};
  Lanes top;
  for (int l = 0; l < L; ++l) {
    const bool used = l < count;
    const std::size_t i = static_cast<std::size_t>(block[used ? l : 0]);
    const double* b = logits_.data() + i * C_;
    const double* q = targets_.data() + (first + i) * C_;
    top[l] = b[0];
    for (int k = 1; k < C; ++k) top[l] = std::max(top[l], b[k]);
    for (int k = 0; k < C; ++k) {
      scale[k][l] = b[k];
      target[k][l] = q[k];
    }
    present[l] = used ? 1.0 : 0.0;
    table_row[l] = static_cast<std::size_t>(original_combination_[first + i]) * K;
  }
  // e^(b_k - max b) lane-wise (within about an ulp of std::exp; exactly 1 at the maximum).
  for (int k = 0; k < C; ++k) scale[k] = lanes::exp_nonpositive(scale[k] - top);
  for (int k = 0; k < C; ++k) sums[k] = Lanes{};
  const double* factor = combination_factor_.data();
  Lanes* totals = combination_lanes_.data();
  for (std::size_t c = 0; c < K; ++c) {
    Lanes weight;
    for (int l = 0; l < L; ++l) weight[l] = weight_table_[table_row[l] + c];
    weight *= present;
    Lanes denominator{};
    for (int k = 0; k < C; ++k) {
      terms[k] = scale[k] * factor[static_cast<std::size_t>(k) * K + c];
      denominator += terms[k];
    }
    // denominator >= the top class's term >= e^-700 (the caller's spread check): normal.
    const Lanes inverse = lanes::reciprocal(denominator);
    for (int k = 0; k < C; ++k) {
      const Lanes a = weight * (terms[k] * inverse - target[k]);
      sums[k] += a;
      totals[static_cast<std::size_t>(k) * K + c] += a;
    }
  }
  for (int l = 0; l < count; ++l) {
    const std::size_t i = static_cast<std::size_t>(block[l]);
    double* a_row = accumulated_.data() + i * C_;
    for (int k = 0; k < C; ++k) a_row[k] += sums[k][l];
    if (!observed_gradient) continue;
    // The observed row z~ is one of the combinations: its probabilities come from the same
    // factors, without an exponential.
    const std::size_t r = first + i;
    const std::size_t observed = static_cast<std::size_t>(observed_combination_[r]);
    double* p = z_.data();
    double total = 0.0;
    for (int k = 0; k < C; ++k) {
      p[k] = scale[k][l] * factor[static_cast<std::size_t>(k) * K + observed];
      total += p[k];
    }
    for (int k = 0; k < C; ++k) p[k] /= total;
    subtract_observed_gradient(r, p, a_row, observed_gradient);
  }
}

void ExpectedLoss::base_logits(const double* x, const std::int64_t* ids, std::size_t first,
                               std::size_t m, const double* matrix, double* out) const {
  // The client's rows x~ hold a one in each changed block (its randomized value); the base row
  // x-bar has none, so the logits lose that column of `matrix`.
  row_logits(x, m, D_, C_, matrix, out);
  const std::size_t F = features_.size();
  for (std::size_t i = 0; i < m; ++i) {
    const std::size_t r = row_index(ids, first + i);
    for (std::size_t f = 0; f < F; ++f)
      for (int k = 0; k < C_; ++k) out[i * C_ + k] -= matrix[entry(k, f, randomized_[r * F + f])];
  }
}

void ExpectedLoss::add_base_outer(const double* a, const double* x, const std::int64_t* ids,
                                  std::size_t first, std::size_t m, double* out) const {
  // out += a^T x-bar = a^T x~ minus each row's a at its randomized one-hot columns (also right
  // for x~ squared, whose entries there are 1 too).
  add_outer(a, x, m, D_, C_, out);
  const std::size_t F = features_.size();
  for (std::size_t i = 0; i < m; ++i) {
    const std::size_t r = row_index(ids, first + i);
    for (std::size_t f = 0; f < F; ++f)
      for (int k = 0; k < C_; ++k) out[entry(k, f, randomized_[r * F + f])] -= a[i * C_ + k];
  }
}

void ExpectedLoss::subtract_observed_row(std::size_t r, const double* base_logits,
                                         const double* theta, double* a_row, double* gradient) {
  const std::size_t F = features_.size();
  const std::int32_t* randomized = randomized_.data() + r * F;
  double* z = z_.data();
  for (int k = 0; k < C_; ++k) {
    double logit = base_logits[k];
    for (std::size_t f = 0; f < F; ++f) logit += theta[entry(k, f, randomized[f])];
    z[k] = logit;
  }
  softmax_in_place(z, C_, false);
  subtract_observed_gradient(r, z, a_row, gradient);
}

void ExpectedLoss::subtract_observed_gradient(std::size_t r, const double* probabilities,
                                              double* a_row, double* gradient) const {
  // grad l(z~_r) = (p~ - e_y) x~^T with x~ = x-bar plus the randomized one-hots: its base part
  // leaves a_row (multiplied by x-bar later), its one-hot part leaves those columns directly.
  const std::size_t F = features_.size();
  const std::int32_t* randomized = randomized_.data() + r * F;
  for (int k = 0; k < C_; ++k) {
    const double residual = probabilities[k] - (k == observed_labels_[r] ? 1.0 : 0.0);
    a_row[k] -= residual;
    for (std::size_t f = 0; f < F; ++f) gradient[entry(k, f, randomized[f])] -= residual;
  }
}

double ExpectedLoss::evaluate(const double* theta, double* gradient, int batch,
                              bool subtract_observed) {
  const std::size_t p = model_.parameters();
  if (gradient) {
    std::fill(gradient, gradient + p, 0.0);
    prepare_factors(theta);
    marginals_.assign(factors_.size(), 0.0);
    if (exact_) prepare_combinations(theta);
    class_lanes_.resize(4 * static_cast<std::size_t>(C_));
    combination_lanes_.assign(combos_ * C_, lanes::Lanes{});
  }
  // Rows go through the block kernel when their weights are tabulated (exact expectation) and
  // their factorized exponentials cannot underflow; the others take the per-row paths.
  const bool tabulated = gradient && exact_ && !weight_table_.empty();
  double loss = 0.0;
  double* z = z_.data();
  for (std::size_t first = 0; first < rows_; first += kChunkRows) {
    const std::size_t m = std::min(kChunkRows, rows_ - first);
    const double* x = rows_x_ + first * D_;
    base_logits(x, nullptr, first, m, theta, logits_.data());
    std::fill_n(accumulated_.begin(), m * C_, 0.0);
    int blocked = 0;
    const auto flush_block = [&] {
      double* observed = subtract_observed ? gradient : nullptr;
      if (C_ == 2)  // the binary tasks of seed 000
        exact_block_gradient<2>(first, block_rows_.data(), blocked, observed);
      else
        exact_block_gradient<0>(first, block_rows_.data(), blocked, observed);
      blocked = 0;
    };
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t r = first + i;
      const double* q = targets_.data() + r * C_;
      const double* base_logits = logits_.data() + i * C_;
      if (!gradient) {
        for_each_combination(r, batch, [&](double weight, const std::int32_t* values) {
          // lse(theta x) - q . theta x; theta x = the base logits plus the combination's columns.
          const double lse = combination_logits(base_logits, theta, values, z, true);
          double target_logit = 0.0;
          for (int k = 0; k < C_; ++k) target_logit += q[k] * base_logits[k];
          for (std::size_t f = 0; f < features_.size(); ++f)
            for (int k = 0; k < C_; ++k) target_logit += q[k] * theta[entry(k, f, values[f])];
          loss += weight * (lse - target_logit);
        });
        continue;
      }
      double* a_row = accumulated_.data() + i * C_;
      if (tabulated && top_minus_bottom(base_logits) + combination_spread_ <= 700.0) {
        block_rows_[blocked++] = static_cast<std::int32_t>(i);  // the block kernel, below
        if (blocked == lanes::kLanes) flush_block();
        continue;
      }
      if (subtract_observed) subtract_observed_row(r, base_logits, theta, a_row, gradient);
      for_each_probability(
          r, batch, base_logits, theta,
          [&](double weight, const std::int32_t* values, const double* probabilities) {
            // d/dtheta [lse - q.theta x] = (p - q) x^T; x = base row + the combination's one-hots.
            for (int k = 0; k < C_; ++k) {
              const double a = weight * (probabilities[k] - q[k]);
              a_row[k] += a;
              for (std::size_t f = 0; f < features_.size(); ++f)
                gradient[entry(k, f, values[f])] += a;
            }
          });
    }
    if (blocked > 0) flush_block();
    if (gradient) add_base_outer(accumulated_.data(), x, nullptr, first, m, gradient);
  }
  if (gradient && exact_) {
    const std::size_t F = features_.size();
    for (int k = 0; k < C_; ++k)
      for (std::size_t c = 0; c < combos_; ++c) {
        const double total =
            lanes::lane_sum(combination_lanes_[static_cast<std::size_t>(k) * combos_ + c]);
        for (std::size_t f = 0; f < F; ++f)
          marginals_[table_start_[f] + static_cast<std::size_t>(combo_values_[c * F + f]) * C_ +
                     k] += total;
      }
    for (std::size_t f = 0; f < F; ++f)
      for (int v = 0; v < features_[f].domain; ++v)
        for (int k = 0; k < C_; ++k)
          gradient[entry(k, f, v)] +=
              marginals_[table_start_[f] + static_cast<std::size_t>(v) * C_ + k];
  }
  return loss;
}

double ExpectedChange::loss_sum(const double* theta) {
  return evaluate(theta, nullptr, -1, false);
}

void ExpectedChange::gradient_sum(const double* theta, double* out) {
  evaluate(theta, out, -1, false);
}

void ExpectedChange::batch_gradient_sum(const double* theta, int batch, double* out) {
  if (batch < 0 || batch >= batches()) throw RuntimeError("Monte-Carlo batch out of range");
  evaluate(theta, out, exact_ ? -1 : batch, false);
}

void ExpectedChange::change_gradient_sum(const double* theta, int batch, double* out) {
  if (batch >= batches()) throw RuntimeError("Monte-Carlo batch out of range");
  evaluate(theta, out, exact_ ? -1 : batch, true);
}

void ExpectedChange::hessian_vector_sum(const double* theta, const double* v, double* out) {
  hessian_vector_rows(theta, nullptr, rows_, v, out);
}

void ExpectedChange::sampled_hessian_vector_sum(const double* theta, const std::int64_t* rows,
                                                std::size_t count, const double* v, double* out) {
  hessian_vector_rows(theta, rows, count, v, out);
}

const double* ExpectedLoss::gather(const std::int64_t* ids, std::size_t first, std::size_t count) {
  if (!ids) return rows_x_ + first * D_;
  for (std::size_t i = 0; i < count; ++i)
    std::copy_n(rows_x_ + ids[first + i] * D_, D_, chunk_.begin() + i * D_);
  return chunk_.data();
}

void ExpectedLoss::hessian_vector_rows(const double* theta, const std::int64_t* ids,
                                       std::size_t count, const double* v, double* out) {
  const std::size_t p = model_.parameters();
  std::fill(out, out + p, 0.0);
  prepare_factors(theta);
  double* u = v_scratch_.data();
  for (std::size_t first = 0; first < count; first += kChunkRows) {
    const std::size_t m = std::min(kChunkRows, count - first);
    const double* x = gather(ids, first, m);
    base_logits(x, ids, first, m, theta, logits_.data());
    base_logits(x, ids, first, m, v, second_.data());  // V x-bar
    std::fill_n(accumulated_.begin(), m * C_, 0.0);
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t r = row_index(ids, first + i);
      double* s_row = accumulated_.data() + i * C_;
      for_each_probability(r, -1, logits_.data() + i * C_, theta,
                           [&](double weight, const std::int32_t* values, const double* z) {
                             // Row Hessian (diag(p) - p p^T) (x) x x^T applied to V: s = (diag(p) -
                             // p p^T) V x.
                             double pu = 0.0;
                             for (int k = 0; k < C_; ++k) {
                               double vx = second_[i * C_ + k];
                               for (std::size_t f = 0; f < features_.size(); ++f)
                                 vx += v[entry(k, f, values[f])];
                               u[k] = vx;
                               pu += z[k] * vx;
                             }
                             for (int k = 0; k < C_; ++k) {
                               const double s = weight * z[k] * (u[k] - pu);
                               s_row[k] += s;
                               for (std::size_t f = 0; f < features_.size(); ++f)
                                 out[entry(k, f, values[f])] += s;
                             }
                           });
    }
    add_base_outer(accumulated_.data(), x, ids, first, m, out);
  }
}

void ExpectedLoss::hessian_diagonal_sum(const double* theta, double* out) {
  const std::size_t p = model_.parameters();
  std::fill(out, out + p, 0.0);
  for (std::size_t first = 0; first < rows_; first += kChunkRows) {
    const std::size_t m = std::min(kChunkRows, rows_ - first);
    const double* x = rows_x_ + first * D_;
    base_logits(x, nullptr, first, m, theta, logits_.data());
    std::fill_n(accumulated_.begin(), m * C_, 0.0);
    for (std::size_t i = 0; i < m; ++i) {
      double* d_row = accumulated_.data() + i * C_;
      for_each_probability(first + i, -1, logits_.data() + i * C_, theta,
                           [&](double weight, const std::int32_t* values, const double* z) {
                             for (int k = 0; k < C_; ++k) {
                               const double d = weight * z[k] * (1.0 - z[k]);
                               d_row[k] +=
                                   d;  // x_j^2 of the base columns; the one-hot entries square to 1
                               for (std::size_t f = 0; f < features_.size(); ++f)
                                 out[entry(k, f, values[f])] += d;
                             }
                           });
    }
    for (std::size_t j = 0; j < m * D_; ++j) chunk_[j] = x[j] * x[j];
    add_base_outer(accumulated_.data(), chunk_.data(), nullptr, first, m, out);
  }
}

void ExpectedLoss::hessian_sum(const double* theta, double* out) {
  // Dense assembly over expanded rows x_{f_x} (a chunk at a time): block (k, l) of the Hessian is
  // sum w (p_k delta_kl - p_k p_l) x x^T, one GEMM per block k <= l, then mirrored.
  const std::size_t p = model_.parameters();
  std::fill(out, out + p * p, 0.0);
  std::vector<double> expanded, weighted, coefficients;
  std::vector<double> probabilities;
  const auto flush = [&](std::size_t m) {
    if (m == 0) return;
    weighted.resize(m * D_);
    for (int k = 0; k < C_; ++k)
      for (int l = k; l < C_; ++l) {
        for (std::size_t e = 0; e < m; ++e) {
          const double* pe = probabilities.data() + e * C_;
          const double c = coefficients[e] * ((k == l ? pe[k] : 0.0) - pe[k] * pe[l]);
          for (int j = 0; j < D_; ++j) weighted[e * D_ + j] = c * expanded[e * D_ + j];
        }
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, D_, D_, static_cast<int>(m), 1.0,
                    expanded.data(), D_, weighted.data(), D_, 1.0,
                    out + static_cast<std::size_t>(k) * D_ * p + static_cast<std::size_t>(l) * D_,
                    static_cast<int>(p));
      }
  };
  const std::size_t limit = 1024;  // expanded rows per GEMM
  expanded.reserve(limit * D_);
  for (std::size_t first = 0; first < rows_; first += kChunkRows) {
    const std::size_t m = std::min(kChunkRows, rows_ - first);
    const double* x = rows_x_ + first * D_;
    base_logits(x, nullptr, first, m, theta, logits_.data());
    for (std::size_t i = 0; i < m; ++i)
      for_each_probability(
          first + i, -1, logits_.data() + i * C_, theta,
          [&](double weight, const std::int32_t* values, const double* z) {
            expanded.insert(expanded.end(), x + i * D_, x + (i + 1) * D_);
            const std::size_t e = coefficients.size();
            const std::size_t F = features_.size();
            for (std::size_t f = 0; f < F; ++f)  // x~ -> x-bar -> x_{f_x}
              expanded[e * D_ + features_[f].offset + randomized_[(first + i) * F + f]] = 0.0;
            for (std::size_t f = 0; f < F; ++f)
              expanded[e * D_ + features_[f].offset + values[f]] = 1.0;
            coefficients.push_back(weight);
            probabilities.insert(probabilities.end(), z, z + C_);
            if (coefficients.size() == limit) {
              flush(limit);
              expanded.clear();
              coefficients.clear();
              probabilities.clear();
            }
          });
  }
  flush(coefficients.size());
  // Mirror the upper blocks: H[(l, j), (k, i)] = H[(k, i), (l, j)].
  for (int k = 0; k < C_; ++k)
    for (int l = k + 1; l < C_; ++l)
      for (int i = 0; i < D_; ++i)
        for (int j = 0; j < D_; ++j)
          out[(static_cast<std::size_t>(l) * D_ + j) * p + static_cast<std::size_t>(k) * D_ + i] =
              out[(static_cast<std::size_t>(k) * D_ + i) * p + static_cast<std::size_t>(l) * D_ +
                  j];
}

}  // namespace fluence
