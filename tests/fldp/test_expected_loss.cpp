// The expected loss under re-randomization (seed 000 Eq. 15, 18) against brute force: every
// combination of the changed attributes' values (label included) is encoded as an ordinary row
// and weighted by its k-RR probability from the original values, and the model's own kernels
// give loss, gradient, Hessian-vector products, diagonal and dense Hessian. The Monte-Carlo form
// is checked for unbiasedness and for the calibration of its batch standard error.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <tuple>

#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/data/source.hpp"
#include "fluence/fldp/expected_loss.hpp"
#include "fluence/model/network.hpp"
#include "fluence/privacy/purposes.hpp"
#include "fluence/privacy/randomized_response.hpp"
#include "support/default_deck.hpp"

namespace fluence {
namespace {

// The expectation settings at their declared defaults ([fldp] keys): exact up to 4096 combinations.
ExpectationConfig default_expectation() {
  return ExpectationConfig::from_deck(default_deck());
}

// A client of 40 synthetic rows with categorical attributes of 3 and 4 values and 3 classes;
// z~ is the original data randomized at eps = 1 (attribute 0, attribute 1 and the label).
struct ClientFixture {
  Table table;
  Encoding encoding;
  SoftmaxRegression model;
  std::vector<std::int64_t> rows;
  std::vector<std::int32_t> randomized_categorical, randomized_labels;
  std::unique_ptr<Client> client;
  std::vector<double> theta;

  explicit ClientFixture(int classes = 3) : model(1, 1, 0.0) {
    SyntheticConfig config = default_data().synthetic;
    config.rows = 40;
    config.numeric = 2;
    config.categorical = {3, 4};
    config.classes = classes;
    table = generate_synthetic(config, 5);
    encoding = Encoding(table, true, true);
    model = SoftmaxRegression(encoding.width(), table.classes(), 1e-3);
    rows.resize(table.rows);
    std::iota(rows.begin(), rows.end(), 0);
    randomized_categorical = table.categorical;
    randomized_labels = table.label;
    for (std::size_t r = 0; r < table.rows; ++r) {
      Stream stream(7, purpose::randomized_response, r);
      randomized_categorical[r * 2] = randomize_value(table.categorical[r * 2], 3, 1.0, stream);
      randomized_categorical[r * 2 + 1] =
          randomize_value(table.categorical[r * 2 + 1], 4, 1.0, stream);
      randomized_labels[r] = randomize_value(table.label[r], classes, 1.0, stream);
    }
    std::vector<double> features(table.rows * encoding.width());
    encoding.encode(table, rows, randomized_categorical.data(), features.data());
    client = std::make_unique<Client>(0, rows, table.categorical, table.label,
                                      randomized_categorical, randomized_labels, features);
    Stream stream(9, purpose::synthetic_model);
    theta.resize(model.parameters());
    for (auto& value : theta) value = 0.5 * stream.normal();
  }

  std::vector<ChangedAttribute> changes(double eps0, double eps1, double eps_label) const {
    std::vector<ChangedAttribute> changed;
    if (eps0 > 0) changed.push_back({0, 3, encoding.categorical_offset(0), eps0});
    if (eps1 > 0) changed.push_back({1, 4, encoding.categorical_offset(1), eps1});
    if (eps_label > 0) changed.push_back({-1, table.classes(), 0, eps_label});
    return changed;
  }
};

// Every combination as an encoded row with its probability; the model's kernels summed.
struct BruteForce {
  std::vector<double> x, weights;
  std::vector<std::int32_t> y;

  BruteForce(const ClientFixture& s, const std::vector<ChangedAttribute>& changed) {
    const int width = s.encoding.width();
    for (std::size_t r = 0; r < s.table.rows; ++r) {
      std::vector<int> value(changed.size(), 0);
      while (true) {
        std::vector<std::int32_t> categorical(s.randomized_categorical.begin() + r * 2,
                                              s.randomized_categorical.begin() + r * 2 + 2);
        std::int32_t label = s.randomized_labels[r];
        double weight = 1.0;
        for (std::size_t a = 0; a < changed.size(); ++a) {
          const auto& c = changed[a];
          const std::int32_t original =
              c.column < 0 ? s.table.label[r] : s.table.categorical[r * 2 + c.column];
          weight *= distortion_matrix(c.epsilon, c.domain)[original * c.domain + value[a]];
          (c.column < 0 ? label : categorical[c.column]) = value[a];
        }
        std::vector<double> row(width);
        s.encoding.encode(s.table, {static_cast<std::int64_t>(r)}, categorical.data(), row.data());
        x.insert(x.end(), row.begin(), row.end());
        y.push_back(label);
        weights.push_back(weight);
        std::size_t a = 0;  // next combination (mixed radix)
        while (a < changed.size() && ++value[a] == changed[a].domain) value[a++] = 0;
        if (a == changed.size()) break;
      }
    }
  }

  double loss(const ClientFixture& s, const double* theta) const {
    Workspace work;
    double total = 0.0;
    const int width = s.encoding.width();
    for (std::size_t e = 0; e < weights.size(); ++e)
      total += weights[e] *
               s.model.loss_sum(x.data() + e * width, y.data() + e, 1, theta, work).loss_sum;
    return total;
  }
  // Applies a kernel row by row, weighting each row's output.
  template <class Kernel>
  std::vector<double> weighted(std::size_t size, Kernel kernel) const {
    std::vector<double> total(size, 0.0), one(size);
    for (std::size_t e = 0; e < weights.size(); ++e) {
      kernel(e, one.data());
      for (std::size_t j = 0; j < size; ++j) total[j] += weights[e] * one[j];
    }
    return total;
  }
};

void expect_close(const std::vector<double>& actual, const std::vector<double>& expected,
                  double tolerance, const char* what) {
  ASSERT_EQ(actual.size(), expected.size());
  double scale = 0.0;
  for (double v : expected) scale = std::max(scale, std::abs(v));
  for (std::size_t j = 0; j < actual.size(); ++j)
    ASSERT_NEAR(actual[j], expected[j], tolerance * scale) << what << " entry " << j;
}

// Sums of up to 40 x 12 x 3 terms of order one: agreement to 1e-12 relative is rounding.
constexpr double kRoundingTolerance = 1e-12;

class ExpectedLossClasses : public ::testing::TestWithParam<std::tuple<int, double>> {};

// Three classes (general softmax) and two (the two-class fast path of the direct evaluation).
TEST_P(ExpectedLossClasses, EnumerationEqualsBruteForceOverAllRandomizations) {
  ClientFixture s(std::get<0>(GetParam()));
  // Scale 1: the factorized exponentials; scale 400: logit spreads beyond 700, the direct path.
  for (auto& value : s.theta) value *= std::get<1>(GetParam());
  const int width = s.encoding.width();
  const std::size_t p = s.model.parameters();
  // Both features and the label; one feature with eps' = inf (kept exactly); the label alone.
  for (const auto& changed :
       {s.changes(0.5, 2.0, 1.0), s.changes(0.3, -1, -1), s.changes(-1, -1, 0.7),
        s.changes(std::numeric_limits<double>::infinity(), 1.5, -1)}) {
    ExpectedLoss expected(s.model, *s.client, changed, default_expectation(), 1, 0);
    ASSERT_TRUE(expected.exact());
    const BruteForce brute(s, changed);
    ExpectationConfig no_table = default_expectation();  // weights formed per row, not tabulated
    no_table.weight_table_entries = 0;
    ExpectedLoss untabulated(s.model, *s.client, changed, no_table, 1, 0);
    Workspace work;
    EXPECT_NEAR(expected.loss_sum(s.theta.data()), brute.loss(s, s.theta.data()),
                kRoundingTolerance * brute.loss(s, s.theta.data()));

    std::vector<double> gradient(p);
    expected.gradient_sum(s.theta.data(), gradient.data());
    expect_close(gradient,
                 brute.weighted(p,
                                [&](std::size_t e, double* out) {
                                  s.model.gradient_sum(brute.x.data() + e * width,
                                                       brute.y.data() + e, 1, s.theta.data(), out,
                                                       work);
                                }),
                 kRoundingTolerance, "gradient");

    // Seed 000 Eq. 14's bracket in one pass: the expected gradient minus the observed rows'
    // gradient (z~: the client's randomized rows and labels), the latter from the model's kernel.
    std::vector<double> observed(p), change(p), difference(p);
    s.model.gradient_sum(s.client->features(), s.randomized_labels.data(), s.table.rows,
                         s.theta.data(), observed.data(), work);
    for (std::size_t j = 0; j < p; ++j) difference[j] = gradient[j] - observed[j];
    expected.change_gradient_sum(s.theta.data(), -1, change.data());
    expect_close(change, difference, kRoundingTolerance, "change gradient");
    untabulated.change_gradient_sum(s.theta.data(), -1, change.data());
    expect_close(change, difference, kRoundingTolerance, "change gradient without the table");

    std::vector<double> v(p), hv(p);
    Stream stream(3, purpose::synthetic_model, 1);
    for (auto& value : v) value = stream.normal();
    expected.hessian_vector_sum(s.theta.data(), v.data(), hv.data());
    expect_close(hv,
                 brute.weighted(p,
                                [&](std::size_t e, double* out) {
                                  s.model.hessian_vector_sum(brute.x.data() + e * width, 1,
                                                             s.theta.data(), v.data(), out, work);
                                }),
                 kRoundingTolerance, "Hessian-vector product");

    std::vector<double> diagonal(p);
    expected.hessian_diagonal_sum(s.theta.data(), diagonal.data());
    expect_close(diagonal,
                 brute.weighted(p,
                                [&](std::size_t e, double* out) {
                                  s.model.hessian_diagonal_sum(brute.x.data() + e * width, 1,
                                                               s.theta.data(), out, work);
                                }),
                 kRoundingTolerance, "Hessian diagonal");

    std::vector<double> dense(p * p);
    expected.hessian_sum(s.theta.data(), dense.data());
    expect_close(dense,
                 brute.weighted(p * p,
                                [&](std::size_t e, double* out) {
                                  s.model.hessian_sum(brute.x.data() + e * width, 1, s.theta.data(),
                                                      out);
                                }),
                 kRoundingTolerance, "dense Hessian");

    // Sampled rows (with a repeat) equal the brute force over those rows' combinations.
    const std::vector<std::int64_t> picked{3, 17, 3, 39};
    expected.sampled_hessian_vector_sum(s.theta.data(), picked.data(), picked.size(), v.data(),
                                        hv.data());
    std::vector<double> reference(p, 0.0);
    for (auto r : picked) {
      const Client single(0, {r}, {s.table.categorical[r * 2], s.table.categorical[r * 2 + 1]},
                          {s.table.label[r]},
                          {s.randomized_categorical[r * 2], s.randomized_categorical[r * 2 + 1]},
                          {s.randomized_labels[r]},
                          std::vector<double>(s.client->features() + r * width,
                                              s.client->features() + (r + 1) * width));
      // Uses `single` in place.
      ExpectedLoss one_row(s.model, single, changed, default_expectation(), 1, 0);
      std::vector<double> one(p);
      one_row.hessian_vector_sum(s.theta.data(), v.data(), one.data());
      for (std::size_t j = 0; j < p; ++j) reference[j] += one[j];
    }
    expect_close(hv, reference, kRoundingTolerance, "sampled Hessian-vector product");
  }
}

INSTANTIATE_TEST_SUITE_P(ExpectedLoss, ExpectedLossClasses,
                         ::testing::Combine(::testing::Values(3, 2),
                                            ::testing::Values(1.0, 400.0)));

TEST(ExpectedLoss, GradientMatchesFiniteDifferencesOfTheLoss) {
  ClientFixture s;
  ExpectedLoss expected(s.model, *s.client, s.changes(0.5, 2.0, 1.0), default_expectation(), 1, 0);
  std::vector<double> gradient(s.model.parameters());
  expected.gradient_sum(s.theta.data(), gradient.data());
  // Central differences: error O(h^2 * third derivative) ~ 1e-10 relative at h = 1e-5.
  const double h = 1e-5;
  for (std::size_t j = 0; j < gradient.size(); j += 5) {
    auto plus = s.theta, minus = s.theta;
    plus[j] += h;
    minus[j] -= h;
    const double fd = (expected.loss_sum(plus.data()) - expected.loss_sum(minus.data())) / (2 * h);
    EXPECT_NEAR(gradient[j], fd, 1e-6 * (1.0 + std::abs(fd))) << "parameter " << j;
  }
}

TEST(ExpectedLoss, MonteCarloIsUnbiasedAndItsStandardErrorCalibrated) {
  ClientFixture s;
  const auto changed = s.changes(0.5, 2.0, 1.0);
  const std::size_t p = s.model.parameters();
  ExpectedLoss exact(s.model, *s.client, changed, default_expectation(), 1, 0);
  std::vector<double> reference(p);
  exact.gradient_sum(s.theta.data(), reference.data());

  // 12 combinations > limit 4: sampled, 16 draws per row in 4 batches.
  const ExpectationConfig config{4, 16, 4};
  const int keys = 400;
  std::vector<double> mean(p, 0.0), second(p, 0.0), batch_variance(p, 0.0);
  std::vector<double> gradient(p), batch(p);
  for (int key = 0; key < keys; ++key) {
    ExpectedLoss sampled(s.model, *s.client, changed, config, 1, static_cast<std::uint64_t>(key));
    ASSERT_FALSE(sampled.exact());
    sampled.gradient_sum(s.theta.data(), gradient.data());
    std::vector<double> batch_mean(p, 0.0), batch_square(p, 0.0);
    if (key == 0) {  // the one-pass bracket of a batch: its expectation minus the observed rows
      std::vector<double> observed(p), change(p);
      Workspace work;
      s.model.gradient_sum(s.client->features(), s.randomized_labels.data(), s.table.rows,
                           s.theta.data(), observed.data(), work);
      sampled.batch_gradient_sum(s.theta.data(), 1, batch.data());
      sampled.change_gradient_sum(s.theta.data(), 1, change.data());
      for (std::size_t j = 0; j < p; ++j) batch[j] -= observed[j];
      expect_close(change, batch, kRoundingTolerance, "Monte-Carlo change gradient");
    }
    for (int b = 0; b < sampled.batches(); ++b) {
      sampled.batch_gradient_sum(s.theta.data(), b, batch.data());
      for (std::size_t j = 0; j < p; ++j) {
        batch_mean[j] += batch[j] / sampled.batches();
        batch_square[j] += batch[j] * batch[j] / sampled.batches();
      }
    }
    for (std::size_t j = 0; j < p; ++j) {
      // The full estimate is the mean of its batches.
      ASSERT_NEAR(gradient[j], batch_mean[j], 1e-12 * (1.0 + std::abs(gradient[j])));
      mean[j] += gradient[j] / keys;
      second[j] += gradient[j] * gradient[j] / keys;
      // Unbiased variance of the full estimate from its B batches: s_B^2 / B.
      const int B = sampled.batches();
      batch_variance[j] +=
          (batch_square[j] - batch_mean[j] * batch_mean[j]) * B / (B - 1) / B / keys;
    }
  }
  for (std::size_t j = 0; j < p; ++j) {
    const double variance = second[j] - mean[j] * mean[j];
    if (variance < 1e-20) continue;  // columns no combination touches
    // Unbiased: the mean of 400 independent estimates lies within 4.5 standard errors of the
    // exact value (two-sided 7e-6 per component; 36 components).
    EXPECT_NEAR(mean[j], reference[j], 4.5 * std::sqrt(variance / keys)) << "component " << j;
    // Calibrated: the batch variance estimate averages to the empirical variance. Both are means
    // of 400 draws; the ratio is within 25% well beyond 4 sigma of its sampling spread (~7%).
    EXPECT_NEAR(batch_variance[j] / variance, 1.0, 0.25) << "component " << j;
  }
}

}  // namespace
}  // namespace fluence

namespace fluence {
namespace {

// Any model's expected loss on expanded rows (ModelExpectedLoss) against the same brute force with
// a network's kernels: a tanh MLP over the fixture's encoded rows.
TEST(ModelExpectedLoss, NetworkEqualsBruteForceOverAllRandomizations) {
  ClientFixture s;
  const int width = s.encoding.width();
  const Network network(NetworkSpec::mlp(width, {5}, Activation::tanh, 3, true), 3, 1e-3);
  const std::size_t p = network.parameters();
  std::vector<double> theta(p), v(p);
  Stream stream(4, purpose::synthetic_model, 2);
  for (auto& value : theta) value = 0.7 * stream.normal();
  for (auto& value : v) value = stream.normal();
  Workspace work;
  for (const auto& changed : {s.changes(0.5, 2.0, 1.0), s.changes(-1, -1, 0.7),
                              s.changes(std::numeric_limits<double>::infinity(), 1.5, -1)}) {
    ModelExpectedLoss expected(network, *s.client, changed, default_expectation(), 1, 0);
    ASSERT_TRUE(expected.exact());
    const BruteForce brute(s, changed);
    double loss = 0.0;
    for (std::size_t e = 0; e < brute.weights.size(); ++e)
      loss +=
          brute.weights[e] *
          network.loss_sum(brute.x.data() + e * width, brute.y.data() + e, 1, theta.data(), work)
              .loss_sum;
    EXPECT_NEAR(expected.loss_sum(theta.data()), loss, kRoundingTolerance * loss);

    std::vector<double> gradient(p);
    expected.gradient_sum(theta.data(), gradient.data());
    expect_close(gradient,
                 brute.weighted(p,
                                [&](std::size_t e, double* out) {
                                  network.gradient_sum(brute.x.data() + e * width,
                                                       brute.y.data() + e, 1, theta.data(), out,
                                                       work);
                                }),
                 kRoundingTolerance, "gradient");
    std::vector<double> observed(p), change(p), difference(p);
    network.gradient_sum(s.client->features(), s.randomized_labels.data(), s.table.rows,
                         theta.data(), observed.data(), work);
    for (std::size_t j = 0; j < p; ++j) difference[j] = gradient[j] - observed[j];
    expected.change_gradient_sum(theta.data(), -1, change.data());
    expect_close(change, difference, kRoundingTolerance, "change gradient");

    std::vector<double> hv(p);
    expected.hessian_vector_sum(theta.data(), v.data(), hv.data());
    expect_close(hv,
                 brute.weighted(p,
                                [&](std::size_t e, double* out) {
                                  network.hessian_vector_sum(brute.x.data() + e * width,
                                                             brute.y.data() + e, 1, theta.data(),
                                                             v.data(), out, work);
                                }),
                 kRoundingTolerance, "Hessian-vector product");
    std::vector<double> dense(p * p);
    expected.hessian_sum(theta.data(), dense.data());
    for (std::size_t j = 0; j < p; ++j)
      ASSERT_NEAR(
          std::inner_product(dense.begin() + j * p, dense.begin() + (j + 1) * p, v.begin(), 0.0),
          hv[j], 1e-12 * (1.0 + std::abs(hv[j])))
          << "dense Hessian row " << j;

    // Sampled rows (a repeat included): the brute force's entries of those rows, whose
    // combinations are contiguous, brute.weights.size() / rows of them per row.
    const std::vector<std::int64_t> picked{3, 17, 3, 39};
    const std::size_t per_row = brute.weights.size() / s.table.rows;
    expected.sampled_hessian_vector_sum(theta.data(), picked.data(), picked.size(), v.data(),
                                        hv.data());
    std::vector<double> reference(p, 0.0), one(p);
    for (auto r : picked)
      for (std::size_t e = r * per_row; e < (r + 1) * per_row; ++e) {
        network.hessian_vector_sum(brute.x.data() + e * width, brute.y.data() + e, 1, theta.data(),
                                   v.data(), one.data(), work);
        for (std::size_t j = 0; j < p; ++j) reference[j] += brute.weights[e] * one[j];
      }
    expect_close(hv, reference, kRoundingTolerance, "sampled Hessian-vector product");
  }
  EXPECT_THROW(
      ModelExpectedLoss(network, *s.client, s.changes(0.5, -1, -1), default_expectation(), 1, 0)
          .hessian_diagonal_sum(theta.data(), v.data()),
      InputError);
}

// On the logistic model both implementations compute the same sums, exact and Monte Carlo (the
// same draws: one enumeration feeds both).
TEST(ModelExpectedLoss, EqualsTheFactorizedKernelsOnTheLogisticModel) {
  ClientFixture s;
  const auto changed = s.changes(0.5, 2.0, 1.0);
  const std::size_t p = s.model.parameters();
  for (const ExpectationConfig& config : {default_expectation(), ExpectationConfig{4, 16, 4}}) {
    ExpectedLoss factorized(s.model, *s.client, changed, config, 1, 5);
    ModelExpectedLoss expanded(s.model, *s.client, changed, config, 1, 5);
    ASSERT_EQ(factorized.exact(), expanded.exact());
    ASSERT_EQ(factorized.batches(), expanded.batches());
    EXPECT_NEAR(expanded.loss_sum(s.theta.data()), factorized.loss_sum(s.theta.data()),
                kRoundingTolerance * factorized.loss_sum(s.theta.data()));
    std::vector<double> a(p), b(p);
    for (int batch = -1; batch < factorized.batches(); ++batch) {
      factorized.change_gradient_sum(s.theta.data(), batch, a.data());
      expanded.change_gradient_sum(s.theta.data(), batch, b.data());
      expect_close(b, a, kRoundingTolerance, "change gradient");
      if (batch < 0) continue;
      factorized.batch_gradient_sum(s.theta.data(), batch, a.data());
      expanded.batch_gradient_sum(s.theta.data(), batch, b.data());
      expect_close(b, a, kRoundingTolerance, "batch gradient");
    }
    const auto made = make_expected_loss(s.model, *s.client, changed, config, 1, 5);
    EXPECT_NE(dynamic_cast<ExpectedLoss*>(made.get()), nullptr);
  }
}

}  // namespace
}  // namespace fluence
