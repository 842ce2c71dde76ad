// Seed 001's per-record scalars c(z, eps) = s^T grad_theta [E_eps l~(z) - l(z)] (Eq. 12-14, 18-22)
// against independent computations: every k-RR outcome of the randomized attributes (label
// included) is encoded as an ordinary row by the Encoding, its gradient taken with the model's own
// kernel and weighted by its probability computed here from e^eps; the forward-corrected loss is
// written from its definition and differentiated by central finite differences. The pseudo-rows of
// the exact retrain are checked against finite differences of their loss and gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "fluence/core/rng.hpp"
#include "fluence/data/dataset.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/model/network.hpp"
#include "fluence/model/softmax_regression.hpp"
#include "fluence/privacy/randomized_response.hpp"
#include "fluence/whatif/retrain.hpp"
#include "fluence/whatif/row_influence.hpp"

namespace fluence {
namespace {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t j = 0; j < a.size(); ++j) s += a[j] * b[j];
  return s;
}

// k-RR from the definition (Eq. 12): keep e^eps / (d - 1 + e^eps), each other value
// 1 / (d - 1 + e^eps). Only moderate eps reach here, so e^eps is finite.
double keep_probability(double eps, int domain) {
  return std::exp(eps) / (domain - 1 + std::exp(eps));
}
double other_probability(double eps, int domain) {
  return 1.0 / (domain - 1 + std::exp(eps));
}

// Schema: numeric "x" (encoded column 0), categorical A with 3 values (columns 1-3), categorical B
// with 2 values (columns 4-5) and the bias (column 6); records with varied (A, B, y) so that the
// original combination is not always the first one enumerated.
// With `network`, the model is a tanh MLP (4 hidden units) instead of the logistic model: its
// record scalars come from the forward R-operator (Model::directional_logits).
struct Fixture {
  int C;
  Table table;
  Encoding encoding;
  std::shared_ptr<const Model> model;
  std::vector<double> theta, s;
  WhatifAttribute label, a, b;

  explicit Fixture(int classes, bool network = false) : C(classes) {
    table.attributes = {{"x", AttributeKind::numeric, {}, 0},
                        {"A", AttributeKind::categorical, {"a0", "a1", "a2"}, 0},
                        {"B", AttributeKind::categorical, {"b0", "b1"}, 1}};
    const char* names[] = {"c0", "c1", "c2"};
    for (int c = 0; c < C; ++c) table.class_names.emplace_back(names[c]);
    const double numeric[] = {0.3, -1.2, 2.0, 0.7, -0.4};
    const std::int32_t categorical[][2] = {{0, 0}, {2, 1}, {1, 0}, {2, 0}, {1, 1}};
    const std::int32_t labels[] = {0, 1, 2 % C, 1, 0};
    for (int r = 0; r < 5; ++r) table.append_row(&numeric[r], categorical[r], labels[r]);
    encoding = Encoding(table, true, true);
    if (network)
      model = std::make_shared<Network>(
          NetworkSpec::mlp(encoding.width(), {4}, Activation::tanh, C, true), C, 1e-3);
    else
      model = std::make_shared<SoftmaxRegression>(encoding.width(), C, 1e-3);
    Stream stream(11, purpose::synthetic_model, static_cast<std::uint64_t>(C));
    theta.resize(model->parameters());
    s.resize(model->parameters());
    for (auto& value : theta) value = 0.8 * stream.normal();
    for (auto& value : s) value = stream.normal();
    label = {"label", -1, C, 0};
    a = {"A", 0, 3, encoding.categorical_offset(0)};
    b = {"B", 1, 2, encoding.categorical_offset(1)};
  }

  std::size_t records() const { return table.rows; }

  std::vector<double> encode(std::size_t r, const std::int32_t* categorical) const {
    std::vector<double> row(encoding.width());
    encoding.encode(table, {static_cast<std::int64_t>(r)}, categorical, row.data());
    return row;
  }
  std::vector<double> clean_row(std::size_t r) const {
    return encode(r, table.categorical.data() + r * 2);
  }

  // grad_theta l(x, y) of the cross-entropy, by the model's kernel on a single row.
  std::vector<double> gradient(const std::vector<double>& x, std::int32_t y) const {
    Workspace work;
    std::vector<double> g(model->parameters());
    model->gradient_sum(x.data(), &y, 1, theta.data(), g.data(), work);
    return g;
  }

  // l_FLC(x, c) = -log (P^T softmax(theta x))_c from the definition, at theta + h s.
  double flc_loss(const std::vector<double>& x, int c, const std::vector<double>& P,
                  double h) const {
    std::vector<double> moved(theta.size()), p(C);
    for (std::size_t j = 0; j < theta.size(); ++j) moved[j] = theta[j] + h * s[j];
    Workspace work;
    model->logits(x.data(), 1, moved.data(), p.data(), work);
    double total = 0.0;
    for (int k = 0; k < C; ++k) total += p[k] = std::exp(p[k]);  // logits are O(5): no overflow
    double m = 0.0;
    for (int u = 0; u < C; ++u) m += P[u * C + c] * p[u] / total;
    return -std::log(m);
  }
  // s^T grad l_FLC(x, c): the derivative of l_FLC(theta + h s) in h, by central differences.
  double flc_directional(const std::vector<double>& x, int c, const std::vector<double>& P) const {
    // Fourth-order central differences (Richardson on the 2h and h stencils).
    const double near = flc_loss(x, c, P, kStep) - flc_loss(x, c, P, -kStep);
    const double far = flc_loss(x, c, P, 2 * kStep) - flc_loss(x, c, P, -2 * kStep);
    return (8 * near - far) / (12 * kStep);
  }
  static constexpr double kStep = 1e-4;

  RowInfluence influence(const std::vector<WhatifAttribute>& attributes,
                         const std::vector<double>& x, std::size_t r) const {
    RowInfluence row(*model, theta.data(), s.data(), attributes);
    row.set_row(x.data(), table.label[r], table.categorical.data() + r * 2);
    return row;
  }
};

// Both forms of Eq. 13 by enumerating every outcome of k-RR over `attributes` for record r.
struct Enumeration {
  double expected = 0.0;  // sum_o P(o) s^T grad l(o) - s^T grad l(z)
  double paper = 0.0;     // (1 - prod keep) sum_{o != z} [s^T grad l(o) - s^T grad l(z)]
  std::size_t outcomes = 0;

  Enumeration(const Fixture& f, std::size_t r, const std::vector<WhatifAttribute>& attributes,
              double eps) {
    const std::vector<double> clean = f.gradient(f.clean_row(r), f.table.label[r]);
    const double clean_directional = dot(f.s, clean);
    std::vector<double> weighted(clean.size(), 0.0);
    double keep_all = 1.0, unweighted = 0.0;
    for (const auto& attribute : attributes) keep_all *= keep_probability(eps, attribute.domain);
    std::vector<std::int32_t> value(attributes.size(), 0);
    for (;;) {
      std::int32_t categorical[2] = {f.table.categorical[r * 2], f.table.categorical[r * 2 + 1]};
      std::int32_t label = f.table.label[r];
      double probability = 1.0;
      bool original = true;
      for (std::size_t i = 0; i < attributes.size(); ++i) {
        std::int32_t& slot = attributes[i].column < 0 ? label : categorical[attributes[i].column];
        const bool kept = value[i] == slot;
        probability *= kept ? keep_probability(eps, attributes[i].domain)
                            : other_probability(eps, attributes[i].domain);
        original = original && kept;
        slot = value[i];
      }
      const std::vector<double> g = f.gradient(f.encode(r, categorical), label);
      for (std::size_t j = 0; j < g.size(); ++j) weighted[j] += probability * g[j];
      if (!original) unweighted += dot(f.s, g) - clean_directional;
      ++outcomes;
      std::size_t i = 0;  // next outcome (mixed radix)
      while (i < attributes.size() && ++value[i] == attributes[i].domain) value[i++] = 0;
      if (i == attributes.size()) break;
    }
    for (std::size_t j = 0; j < clean.size(); ++j) weighted[j] -= clean[j];
    expected = dot(f.s, weighted);
    paper = (1.0 - keep_all) * unweighted;
  }
};

const double kEpsilons[] = {0.01, 0.5, 2.0, 8.0};

// The scalars are sums of at most 18 outcomes' s^T grad l, each O(10) (|u_k| <= ||s_k||_1 ~ 5),
// so rounding leaves ~1e-14 absolute; 1e-12 is a 100x margin, and still a relative 3e-9 of the
// smallest scalar compared (~e^-8 at eps = 8), so a wrong probability or sign cannot pass.
constexpr double kRounding = 1e-12;

// Fourth-order central differences along s at h = 1e-4: truncation h^4/30 |d^5 l_FLC / dh^5|,
// which for both models here is below 1e-14 (h = 1e-3 measured 6e-10, so the fifth derivative is
// O(1e4) at most), and rounding 18 eps |l_FLC| / (12 h) ~ 1e-12 for losses of a few units. The
// weights sum to at most one, so 1e-10 bounds both forms (measured: 7e-12) while a wrong scalar
// (the smallest compared, at eps = 8, are ~1e-3) misses by orders of magnitude.
constexpr double kFiniteDifference = 1e-10;

TEST(WhatifRowInfluence, EncodingHasTheKnownLayout) {
  const Fixture f(3);
  ASSERT_EQ(f.encoding.width(), 7);
  EXPECT_EQ(f.a.offset, 1);
  EXPECT_EQ(f.b.offset, 4);
  const auto x = f.clean_row(1);  // A = 2, B = 1
  EXPECT_EQ(x[3], 1.0);
  EXPECT_EQ(x[5], 1.0);
  EXPECT_EQ(x[6], 1.0);
}

// Each for the logistic model and for the MLP.
TEST(WhatifRowInfluence, RrMatchesEnumeration) {
  for (bool network : {false, true}) {
    const Fixture f(3, network);
    for (const auto& attributes : std::vector<std::vector<WhatifAttribute>>{
             {f.label}, {f.a}, {f.a, f.b, f.label}, {f.b, f.a}}) {
      for (std::size_t r = 0; r < f.records(); ++r) {
        const auto x = f.clean_row(r);
        const RowInfluence row = f.influence(attributes, x, r);
        for (double eps : kEpsilons) {
          const Enumeration brute(f, r, attributes, eps);
          // combinations() counts the features' values only; the label multiplies the outcomes.
          const std::size_t label_outcomes = attributes.back().column < 0 ? f.C : 1;
          EXPECT_EQ(row.combinations() * label_outcomes, brute.outcomes);
          EXPECT_NEAR(row.rr(eps, EstimateForm::expected), brute.expected, kRounding)
              << "record " << r << " eps " << eps << " attributes " << attributes.size();
        }
      }
    }
  }
}

TEST(WhatifRowInfluence, RrLMatchesEnumeration) {
  for (bool network : {false, true})
    for (int classes : {2, 3}) {
      const Fixture f(classes, network);
      for (std::size_t r = 0; r < f.records(); ++r) {
        const auto x = f.clean_row(r);
        const RowInfluence row = f.influence({f.label}, x, r);
        for (double eps : kEpsilons) {
          const Enumeration brute(f, r, {f.label}, eps);
          EXPECT_NEAR(row.rr_l(eps), brute.expected, kRounding)
              << "C " << classes << " record " << r << " eps " << eps;
        }
      }
    }
}

TEST(WhatifRowInfluence, RrFlcMatchesFiniteDifferencesOfTheCorrectedLoss) {
  for (bool network : {false, true})
    for (int classes : {2, 3}) {
      const Fixture f(classes, network);
      for (std::size_t r = 0; r < f.records(); ++r) {
        const auto x = f.clean_row(r);
        const int y = f.table.label[r];
        const double clean = dot(f.s, f.gradient(x, y));
        const RowInfluence row = f.influence({f.label}, x, r);
        for (double eps : kEpsilons) {
          const std::vector<double> P = distortion_matrix(eps, classes);
          // Eq. 18's expectation over the reported label c ~ P[y][.]; Eq. 22 keeps c != y only,
          // each with the probability of one other label.
          double expected = -clean, paper = 0.0;
          for (int c = 0; c < classes; ++c) {
            const double flc = f.flc_directional(x, c, P);
            expected += P[y * classes + c] * flc;
            if (c != y) paper += other_probability(eps, classes) * (flc - clean);
          }
          EXPECT_NEAR(row.rr_flc(eps, EstimateForm::expected), expected, kFiniteDifference)
              << "C " << classes << " record " << r << " eps " << eps;
          EXPECT_NEAR(row.rr_flc(eps, EstimateForm::paper), paper, kFiniteDifference)
              << "C " << classes << " record " << r << " eps " << eps;
        }
      }
    }
}

TEST(WhatifRowInfluence, RrPaperFormMatchesEq13) {
  for (bool network : {false, true}) {
    const Fixture f(3, network);
    for (const auto& attributes :
         std::vector<std::vector<WhatifAttribute>>{{f.label}, {f.a}, {f.a, f.b, f.label}}) {
      for (std::size_t r = 0; r < f.records(); ++r) {
        const auto x = f.clean_row(r);
        const RowInfluence row = f.influence(attributes, x, r);
        for (double eps : kEpsilons) {
          const Enumeration brute(f, r, attributes, eps);
          // Unweighted sum of up to 17 terms of O(10), scaled by a factor <= 1: as kRounding.
          EXPECT_NEAR(row.rr(eps, EstimateForm::paper), brute.paper, kRounding)
              << "record " << r << " eps " << eps << " attributes " << attributes.size();
        }
      }
    }
  }
}

// With the label alone, the exact expectation is Eq. 14 for any C: sum_{c != y} other (u_y - u_c).
// Eq. 13 scales the same unweighted sum by 1 - keep = (C - 1) other instead of Eq. 14's other, so
// its paper form is (C - 1) rr_l: equal for C = 2, twice rr_l for C = 3.
TEST(WhatifRowInfluence, LabelOnlyFormsCoincideForTwoClasses) {
  const Fixture f(2);
  for (std::size_t r = 0; r < f.records(); ++r) {
    const auto x = f.clean_row(r);
    const RowInfluence row = f.influence({f.label}, x, r);
    for (double eps : kEpsilons) {
      const double rr_l = row.rr_l(eps);
      // Three closed forms of a two-term expression: rounding only.
      EXPECT_NEAR(row.rr(eps, EstimateForm::expected), rr_l, 1e-14 * (1 + std::abs(rr_l)));
      EXPECT_NEAR(row.rr(eps, EstimateForm::paper), rr_l, 1e-14 * (1 + std::abs(rr_l)));
    }
  }
}

TEST(WhatifRowInfluence, LabelOnlyPaperFormIsCMinusOneTimesRrLForThreeClasses) {
  const Fixture f(3);
  for (std::size_t r = 0; r < f.records(); ++r) {
    const auto x = f.clean_row(r);
    const RowInfluence row = f.influence({f.label}, x, r);
    for (double eps : kEpsilons) {
      const double rr_l = row.rr_l(eps);
      EXPECT_NEAR(row.rr(eps, EstimateForm::expected), rr_l, 1e-14 * (1 + std::abs(rr_l)));
      EXPECT_NEAR(row.rr(eps, EstimateForm::paper), 2.0 * rr_l, 1e-14 * (1 + std::abs(rr_l)));
    }
  }
}

// Every outcome other than the original has probability O(e^-eps) and the paper forms scale by
// 1 - keep or other, both O(e^-eps): c(10) / c(12) = e^2 (1 + O(e^-10 / p_min)), the next order
// at most 8e-4 here (rr_flc, whose corrections divide by p_c), so 1% is a bound that a scalar
// decaying at another rate (e^-eps/2, e^-2 eps) fails by far.
TEST(WhatifRowInfluence, ScalarsDecayLikeExpMinusEpsilon) {
  const Fixture f(3);
  for (std::size_t r = 0; r < f.records(); ++r) {
    const auto x = f.clean_row(r);
    for (const auto& attributes :
         std::vector<std::vector<WhatifAttribute>>{{f.label}, {f.a}, {f.a, f.b, f.label}}) {
      const RowInfluence row = f.influence(attributes, x, r);
      for (auto form : {EstimateForm::expected, EstimateForm::paper})
        EXPECT_NEAR(row.rr(10.0, form) / row.rr(12.0, form), std::exp(2.0), 0.01 * std::exp(2.0))
            << "record " << r << " attributes " << attributes.size();
    }
    const RowInfluence row = f.influence({f.label}, x, r);
    EXPECT_NEAR(row.rr_l(10.0) / row.rr_l(12.0), std::exp(2.0), 0.01 * std::exp(2.0));
    for (auto form : {EstimateForm::expected, EstimateForm::paper})
      EXPECT_NEAR(row.rr_flc(10.0, form) / row.rr_flc(12.0, form), std::exp(2.0),
                  0.01 * std::exp(2.0))
          << "record " << r;
  }
}

// Far beyond the seed's grid (eps <= 10) the scalars are ~e^-eps ~ 1e-17: they must come out as
// multiples of `other`, not as differences of O(1) terms (whose rounding, ~1e-16, would swamp
// them). Against rr_l = other (C u_y - sum u), and by the exact e^-2 decay from 38 to 40 (the next
// order, e^-38 / p_min, and rounding are below 1e-14; 1e-9 leaves a wide margin).
TEST(WhatifRowInfluence, ScalarsKeepTheirDigitsAtVeryLargeEpsilon) {
  const Fixture f(3);
  for (std::size_t r = 0; r < f.records(); ++r) {
    const auto x = f.clean_row(r);
    const RowInfluence label = f.influence({f.label}, x, r);
    for (double eps : {30.0, 35.0, 40.0}) {
      const double rr_l = label.rr_l(eps);
      EXPECT_NEAR(label.rr(eps, EstimateForm::expected), rr_l, 1e-12 * std::abs(rr_l));
      EXPECT_NEAR(label.rr(eps, EstimateForm::paper), 2.0 * rr_l, 1e-12 * std::abs(rr_l));
    }
    const RowInfluence all = f.influence({f.a, f.b, f.label}, x, r);
    for (auto form : {EstimateForm::expected, EstimateForm::paper}) {
      EXPECT_NEAR(all.rr(38.0, form) / all.rr(40.0, form), std::exp(2.0), 1e-9) << "record " << r;
      EXPECT_NEAR(label.rr_flc(38.0, form) / label.rr_flc(40.0, form), std::exp(2.0), 1e-9)
          << "record " << r;
    }
  }
}

TEST(WhatifRowInfluence, InfiniteEpsilonGivesZero) {
  const double inf = std::numeric_limits<double>::infinity();
  const Fixture f(3);
  for (std::size_t r = 0; r < f.records(); ++r) {
    const auto x = f.clean_row(r);
    for (const auto& attributes :
         std::vector<std::vector<WhatifAttribute>>{{f.label}, {f.a}, {f.a, f.b, f.label}}) {
      const RowInfluence row = f.influence(attributes, x, r);
      // Every weight is a product with other = 0 (or 1 - keep = 0): exactly zero.
      EXPECT_EQ(row.rr(inf, EstimateForm::expected), 0.0) << "record " << r;
      EXPECT_EQ(row.rr(inf, EstimateForm::paper), 0.0) << "record " << r;
    }
    const RowInfluence row = f.influence({f.label}, x, r);
    EXPECT_EQ(row.rr_l(inf), 0.0);
    EXPECT_EQ(row.rr_flc(inf, EstimateForm::paper), 0.0);
    EXPECT_EQ(row.rr_flc(inf, EstimateForm::expected), 0.0);
  }
}

// Pseudo-rows of every kind the retrain builds: the clean record leaving (w = -1, one-hot), soft
// targets (the expected retrain's label distribution), a fractional weight, and forward-corrected
// rows, one with a negative weight (where l_FLC's non-convexity shows). The losses are linear in
// the target and the kernels take any target mass T = sum t: two targets with T != 1 exercise the
// T terms that distributions would hide.
// With `network`, the model is a tanh MLP (4 hidden units): PseudoRowLoss through its R-operator.
struct PseudoFixture {
  static constexpr int C = 3, D = 5;
  PseudoRows rows;
  std::shared_ptr<const Model> model;
  std::vector<double> theta;

  PseudoFixture(std::vector<double> distortion, bool network) {
    if (network)
      model =
          std::make_shared<Network>(NetworkSpec::mlp(D, {4}, Activation::tanh, C, true), C, 0.0);
    else
      model = std::make_shared<SoftmaxRegression>(D, C, 0.0);
    rows.reset(C, D);
    rows.distortion = std::move(distortion);
    Stream stream(21, purpose::synthetic_model);
    std::vector<double> x(D);
    auto add = [&](double w, std::vector<double> t, bool flc) {
      for (auto& value : x) value = stream.normal();
      rows.add(x.data(), w, t.data(), flc);
    };
    add(-1.0, {0, 1, 0}, false);
    add(1.0, {0.2, 0.5, 0.3}, false);
    add(0.35, {0.1, 0.1, 0.6}, false);
    add(1.0, {0, 0, 1}, true);
    add(0.6, {0.25, 0.6, 0.15}, true);
    add(-0.5, {1, 0, 0}, true);
    add(0.8, {0.5, 0.4, 0.4}, true);
    theta.resize(model->parameters());
    for (auto& value : theta) value = 0.8 * stream.normal();
  }

  // sum_j w_j l_j from the definitions: sum_c t_c (-log p_c), or -sum_c t_c log (P^T p)_c.
  double reference_loss(std::size_t first, std::size_t count) const {
    double total = 0.0;
    Workspace work;
    for (std::size_t r = first; r < first + count; ++r) {
      std::vector<double> p(C);
      model->logits(rows.x.data() + r * D, 1, theta.data(), p.data(), work);
      double norm = 0.0;
      for (int k = 0; k < C; ++k) norm += p[k] = std::exp(p[k]);
      for (int c = 0; c < C; ++c) {
        double m = p[c] / norm;
        if (rows.flc[r]) {
          m = 0.0;
          for (int u = 0; u < C; ++u) m += rows.distortion[u * C + c] * p[u] / norm;
        }
        total -= rows.weight[r] * rows.target[r * C + c] * std::log(m);
      }
    }
    return total;
  }
  double loss(const std::vector<double>& at, std::size_t first, std::size_t count) const {
    std::vector<double> gradient(at.size(), 0.0), scratch;
    Workspace work;
    return pseudo_rows_loss_gradient(*model, rows, first, count, at.data(), gradient.data(),
                                     scratch, work);
  }
  std::vector<double> gradient(const std::vector<double>& at, std::size_t first,
                               std::size_t count) const {
    std::vector<double> gradient(at.size(), 0.0), scratch;
    Workspace work;
    pseudo_rows_loss_gradient(*model, rows, first, count, at.data(), gradient.data(), scratch,
                              work);
    return gradient;
  }
  // The model's exact Hessian of the rows' loss times v, through PseudoRowLoss.
  std::vector<double> hessian_vector(const std::vector<double>& v, std::size_t first,
                                     std::size_t count) const {
    std::vector<double> out(v.size());
    Workspace work;
    model->loss_hessian_vector_sum(rows.x.data() + first * D, count, PseudoRowLoss(rows, first),
                                   theta.data(), v.data(), out.data(), work);
    return out;
  }
};

// k-RR's distortion at eps = 0.7 (symmetric, what the retrain uses) and a general row-stochastic
// P (asymmetric, so that a P / P^T mix-up shows).
const std::vector<double> kDistortions[] = {distortion_matrix(0.7, 3),
                                            {0.7, 0.2, 0.1, 0.15, 0.8, 0.05, 0.3, 0.1, 0.6}};

// Every row, the forward-corrected rows alone, the cross-entropy rows alone, a middle range.
const std::pair<std::size_t, std::size_t> kRanges[] = {{0, 7}, {3, 4}, {0, 3}, {1, 4}};

// Each for the logistic model and for the MLP.
TEST(WhatifPseudoRows, GradientMatchesFiniteDifferencesOfTheLoss) {
  for (bool network : {false, true})
    for (const auto& P : kDistortions) {
      const PseudoFixture f(P, network);
      for (auto [first, count] : kRanges) {
        // `gradient` is accumulated into: start from ones and subtract them.
        std::vector<double> gradient(f.theta.size(), 1.0), scratch;
        Workspace work;
        const double loss = pseudo_rows_loss_gradient(
            *f.model, f.rows, first, count, f.theta.data(), gradient.data(), scratch, work);
        // Sums of 7 O(1) terms: rounding only.
        EXPECT_NEAR(loss, f.reference_loss(first, count), 1e-13);
        // Central differences at h = 1e-5: truncation h^2/6 |f'''| ~ 2e-11 * O(10), rounding
        // 1e-16 |loss| / h ~ 5e-11; 1e-8 is a 100x margin (measured: 1e-10), and 1e-8 of the
        // gradient's O(1) entries.
        const double h = 1e-5;
        for (std::size_t j = 0; j < f.theta.size(); ++j) {
          auto plus = f.theta, minus = f.theta;
          plus[j] += h;
          minus[j] -= h;
          const double fd = (f.loss(plus, first, count) - f.loss(minus, first, count)) / (2 * h);
          EXPECT_NEAR(gradient[j] - 1.0, fd, 1e-8) << "P[0][1] " << P[1] << " rows [" << first
                                                   << ", " << first + count << ") parameter " << j;
        }
      }
    }
}

TEST(WhatifPseudoRows, HessianVectorMatchesFiniteDifferencesOfTheGradient) {
  for (bool network : {false, true})
    for (const auto& P : kDistortions) {
      const PseudoFixture f(P, network);
      Stream stream(22, purpose::synthetic_model);
      std::vector<double> v(f.theta.size()), w(f.theta.size());
      for (auto& value : v) value = stream.normal();
      for (auto& value : w) value = stream.normal();
      for (auto [first, count] : kRanges) {
        const std::vector<double> hv = f.hessian_vector(v, first, count);
        // Central differences of the gradient along v at h = 1e-5: truncation h^2/6 |d^3 grad| ~
        // 2e-11 * O(100) (|v x| ~ 3), rounding 1e-16 |grad| / h ~ 1e-10; 1e-8 is a 5x margin over
        // that bound (measured: 5e-11).
        const double h = 1e-5;
        auto plus = f.theta, minus = f.theta;
        for (std::size_t j = 0; j < v.size(); ++j) {
          plus[j] += h * v[j];
          minus[j] -= h * v[j];
        }
        const auto g_plus = f.gradient(plus, first, count),
                   g_minus = f.gradient(minus, first, count);
        for (std::size_t j = 0; j < v.size(); ++j)
          EXPECT_NEAR(hv[j], (g_plus[j] - g_minus[j]) / (2 * h), 1e-8)
              << "P[0][1] " << P[1] << " rows [" << first << ", " << first + count << ") parameter "
              << j;
        // A Hessian is symmetric: w^T (H v) = v^T (H w) up to rounding of 15-term sums.
        const std::vector<double> hw = f.hessian_vector(w, first, count);
        EXPECT_NEAR(dot(w, hv), dot(v, hw), 1e-12 * (1 + std::abs(dot(w, hv))));
      }
    }
}

}  // namespace
}  // namespace fluence
