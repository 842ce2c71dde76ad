// Seed 001's estimators per record, in closed form (docs/math.md §6).
#include "fluence/whatif/row_influence.hpp"

#include <algorithm>
#include <cmath>

namespace fluence {

KrrProbabilities::KrrProbabilities(double epsilon, int domain) {
  // keep = e^eps / (d - 1 + e^eps) written with e^-eps, so eps up to any size stays finite.
  const double tail = std::isinf(epsilon) ? 0.0 : std::exp(-epsilon);
  const double denominator = 1.0 + (domain - 1) * tail;
  keep = 1.0 / denominator;
  other = tail / denominator;
}

namespace {

void softmax(const double* z, int C, double* p) {
  const double top = *std::max_element(z, z + C);
  double total = 0.0;
  for (int k = 0; k < C; ++k) total += p[k] = std::exp(z[k] - top);
  for (int k = 0; k < C; ++k) p[k] /= total;
}

double dot(const double* a, const double* b, int n) {
  double s = 0.0;
  for (int k = 0; k < n; ++k) s += a[k] * b[k];
  return s;
}

}  // namespace

RowInfluence::RowInfluence(const Model& model, const double* theta, const double* s,
                           const std::vector<WhatifAttribute>& attributes)
    : model_(model),
      theta_(theta),
      s_(s),
      C_(model.classes()),
      D_(model.features()),
      z_(C_),
      p_(C_),
      u_(C_),
      zf_(C_),
      pf_(C_) {
  for (const auto& attribute : attributes) {
    if (attribute.column < 0) {
      label_randomized_ = true;
      label_domain_ = attribute.domain;
    } else {
      features_.push_back(attribute);
      combos_ *= static_cast<std::size_t>(attribute.domain);
    }
  }
  const std::size_t F = features_.size();
  combo_values_.resize(combos_ * F);
  for (std::size_t c = 0; c < combos_; ++c) {
    std::size_t rest = c;
    for (std::size_t f = F; f-- > 0;) {
      const auto d = static_cast<std::size_t>(features_[f].domain);
      combo_values_[c * F + f] = static_cast<std::int32_t>(rest % d);
      rest /= d;
    }
  }
  original_.resize(F);
  krr_.reserve(F);
  a_.resize(combos_);
  uf_.resize(combos_ * C_);
  if (!model.linear()) {
    rows_.resize(combos_ * D_);
    row_z_.resize(combos_ * C_);
  }
}

void RowInfluence::combination_logits(const double* x) {
  // Combination c's row: x with each randomized feature's one-hot entry moved from the original
  // value's column to c's.
  const std::size_t F = features_.size();
  for (std::size_t c = 0; c < combos_; ++c) {
    double* row = rows_.data() + c * D_;
    std::copy(x, x + D_, row);
    for (std::size_t f = 0; f < F; ++f) {
      const std::int32_t value = combo_values_[c * F + f];
      if (value != original_[f])
        std::swap(row[features_[f].offset + original_[f]], row[features_[f].offset + value]);
    }
  }
  model_.directional_logits(rows_.data(), combos_, theta_, s_, row_z_.data(), uf_.data(), work_);
  std::copy_n(row_z_.begin() + alpha_ * C_, C_, z_.begin());
  std::copy_n(uf_.begin() + alpha_ * C_, C_, u_.begin());
  softmax(z_.data(), C_, p_.data());
  for (std::size_t c = 0; c < combos_; ++c) {
    softmax(row_z_.data() + c * C_, C_, pf_.data());
    a_[c] = dot(uf_.data() + c * C_, pf_.data(), C_);
  }
}

void RowInfluence::set_row(const double* x, std::int32_t label, const std::int32_t* categorical) {
  y_ = label;
  const std::size_t F = features_.size();
  alpha_ = 0;
  for (std::size_t f = 0; f < F; ++f) {
    original_[f] = categorical[features_[f].column];
    alpha_ = alpha_ * static_cast<std::size_t>(features_[f].domain) +
             static_cast<std::size_t>(original_[f]);
  }
  if (!model_.linear()) return combination_logits(x);
  for (int k = 0; k < C_; ++k) {
    z_[k] = dot(theta_ + static_cast<std::size_t>(k) * D_, x, D_);
    u_[k] = dot(s_ + static_cast<std::size_t>(k) * D_, x, D_);
  }
  softmax(z_.data(), C_, p_.data());
  // Combination f moves each changed one-hot entry from the original value's column to f's:
  // theta x_f = theta x + sum over features of (column at f's value - column at the original).
  double* zf = zf_.data();
  double* pf = pf_.data();
  for (std::size_t c = 0; c < combos_; ++c) {
    double* uf = uf_.data() + c * C_;
    for (int k = 0; k < C_; ++k) {
      zf[k] = z_[k];
      uf[k] = u_[k];
    }
    for (std::size_t f = 0; f < F; ++f) {
      const std::int32_t value = combo_values_[c * F + f];
      if (value == original_[f]) continue;
      const std::size_t from = static_cast<std::size_t>(features_[f].offset + original_[f]);
      const std::size_t to = static_cast<std::size_t>(features_[f].offset + value);
      const double one_hot = x[from];
      for (int k = 0; k < C_; ++k) {
        const std::size_t row = static_cast<std::size_t>(k) * D_;
        zf[k] += (theta_[row + to] - theta_[row + from]) * one_hot;
        uf[k] += (s_[row + to] - s_[row + from]) * one_hot;
      }
    }
    softmax(zf, C_, pf);
    a_[c] = dot(uf, pf, C_);
  }
}

double RowInfluence::rr_l(double epsilon) const {
  const KrrProbabilities krr(epsilon, C_);
  double total = 0.0;
  for (int k = 0; k < C_; ++k) total += u_[k];
  return krr.other * (C_ * u_[y_] - total);
}

double RowInfluence::rr(double epsilon, EstimateForm form) const {
  const std::size_t F = features_.size();
  std::vector<KrrProbabilities>& krr = krr_;  // capacity reserved: no allocation per call
  krr.clear();
  for (const auto& feature : features_) krr.emplace_back(epsilon, feature.domain);
  const KrrProbabilities label_krr(epsilon, label_domain_);
  // T_f = s^T grad E_y l(x_f, y) = u_f . (p_f - q), q the label's k-RR distribution (or e_y).
  auto label_term = [&](const double* uf) {
    if (!label_randomized_) return uf[y_];
    double total = 0.0;
    for (int k = 0; k < C_; ++k) total += uf[k];
    return label_krr.other * total + (label_krr.keep - label_krr.other) * uf[y_];
  };
  if (form == EstimateForm::paper) {
    // seed 001 Eq. 13: (1 - prod keep) sum over every (feature combination, label) other than the
    // original of [s^T grad l(f, c) - s^T grad l(z)], unweighted.
    // 1 - prod keep as -expm1(sum log keep), log keep = -log1p((d - 1) e^-eps): no cancellation
    // against 1 at large eps.
    auto log_keep = [&](int domain) {
      return std::isinf(epsilon) ? 0.0 : -std::log1p((domain - 1) * std::exp(-epsilon));
    };
    double log_keep_all = label_randomized_ ? log_keep(label_domain_) : 0.0;
    for (const auto& feature : features_) log_keep_all += log_keep(feature.domain);
    const double base = dot(u_.data(), p_.data(), C_) - u_[y_];
    double bracket = 0.0;
    for (std::size_t c = 0; c < combos_; ++c) {
      const double* uf = uf_.data() + c * C_;
      if (label_randomized_) {
        for (int k = 0; k < C_; ++k) bracket += a_[c] - uf[k] - base;
      } else {
        bracket += a_[c] - uf[y_] - base;
      }
    }
    return -std::expm1(log_keep_all) * bracket;
  }
  // Expected: sum_{f != alpha} P(f) (T_f - T_alpha) + (T_alpha - s^T grad l(z)); the second
  // term is the label's u . (e_y - q) = other (d u_y - sum_k u_k) (keep + (d - 1) other = 1).
  // Written as differences and multiples of `other`, so large eps loses no digits.
  const double t_alpha = a_[alpha_] - label_term(uf_.data() + alpha_ * C_);
  double total = 0.0;
  for (std::size_t c = 0; c < combos_; ++c) {
    if (c == alpha_) continue;
    double weight = 1.0;
    for (std::size_t f = 0; f < F; ++f)
      weight *= combo_values_[c * F + f] == original_[f] ? krr[f].keep : krr[f].other;
    total += weight * (a_[c] - label_term(uf_.data() + c * C_) - t_alpha);
  }
  double label_gap = 0.0;
  if (label_randomized_) {
    double sum = 0.0;
    for (int k = 0; k < C_; ++k) sum += u_[k];
    label_gap = label_krr.other * (label_domain_ * u_[y_] - sum);
  }
  return total + label_gap;
}

double RowInfluence::rr_flc(double epsilon, EstimateForm form) const {
  // l_FLC(x, c) = -log m_c with m = P^T p; for k-RR, m_c = other + (keep - other) p_c and
  // s^T grad l_FLC(x, c) = u . p - w_c / m_c with w_c = sum_k u_k p_k P_kc
  //                                               = other (u . p) + (keep - other) u_c p_c.
  const KrrProbabilities krr(epsilon, C_);
  const double up = dot(u_.data(), p_.data(), C_);
  const double gap = krr.keep - krr.other;
  // s^T grad l_FLC(x, c) - s^T grad l(x, y) = u_y - w_c / m_c, written as
  // [other (u_y - u . p) + gap p_c (u_y - u_c)] / m_c: for c = y a multiple of `other`, so
  // large eps loses no digits to u_y - w_y / m_y.
  auto flc_minus_clean = [&](int c) {
    const double m = krr.other + gap * p_[c];
    return (krr.other * (u_[y_] - up) + gap * p_[c] * (u_[y_] - u_[c])) / m;
  };
  double total = 0.0;
  for (int c = 0; c < C_; ++c) {
    if (form == EstimateForm::paper) {
      if (c != y_) total += krr.other * flc_minus_clean(c);
    } else {
      total += (c == y_ ? krr.keep : krr.other) * flc_minus_clean(c);
    }
  }
  return total;
}

}  // namespace fluence
