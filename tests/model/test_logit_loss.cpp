// Losses on the logits (model.hpp's LogitLoss) and the models' derivatives through them, against
// independent computations: the soft-target head's loss against a plain sum of weighted
// log-probabilities, its dL/dz against central differences of that loss and its d^2L/dz^2 r against
// differences of dL/dz; a model's gradient and Hessian-vector product of a soft-target loss against
// central differences in theta, and against the label path by linearity of cross-entropy in the
// target; the directional logits against differences of logits.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "fluence/model/network.hpp"
#include "fluence/model/softmax_head.hpp"
#include "fluence/model/softmax_regression.hpp"

namespace fluence {
namespace {

std::vector<double> normals(std::size_t n, unsigned seed, double scale = 1.0) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> out(n);
  for (auto& v : out) v = normal(engine);
  return out;
}

// Rows of targets t_r = w_r q_r: q_r a random distribution, w_r in [-1.5, 2] (negative weights are
// rows subtracted, as FLDP's observed rows and what-if's clean records are).
std::vector<double> random_targets(std::size_t rows, int classes, unsigned seed) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> t(rows * classes);
  for (std::size_t r = 0; r < rows; ++r) {
    double total = 0.0;
    for (int c = 0; c < classes; ++c) total += (t[r * classes + c] = uniform(engine));
    const double weight = -1.5 + 3.5 * uniform(engine);
    for (int c = 0; c < classes; ++c) t[r * classes + c] *= weight / total;
  }
  return t;
}

// sum_r sum_c t_rc (-log softmax(z_r)_c), written out directly.
double plain_target_loss(const std::vector<double>& z, const std::vector<double>& t,
                         std::size_t rows, int classes) {
  double loss = 0.0;
  for (std::size_t r = 0; r < rows; ++r) {
    double total = 0.0;
    for (int c = 0; c < classes; ++c) total += std::exp(z[r * classes + c]);
    for (int c = 0; c < classes; ++c)
      loss -= t[r * classes + c] * std::log(std::exp(z[r * classes + c]) / total);
  }
  return loss;
}

TEST(TargetCrossEntropy, LossAndDerivativesMatchAPlainSumAndItsDifferences) {
  const std::size_t rows = 6;
  const int C = 4;
  const auto t = random_targets(rows, C, 1);
  auto z = normals(rows * C, 2, 2.0);
  const auto r_z = normals(rows * C, 3);
  const TargetCrossEntropy loss(t.data());
  std::vector<double> delta(rows * C), delta2(rows * C), r_delta(rows * C);
  const double value = loss.gradient(0, rows, C, z.data(), delta.data(), 0.25);
  // Terms of size ~10: the two orders of summation agree to a few ulps of the sum.
  EXPECT_NEAR(value, 0.25 + plain_target_loss(z, t, rows, C), 1e-12);
  EXPECT_DOUBLE_EQ(loss.gradient(0, rows, C, z.data(), nullptr, 0.25), value);
  loss.hessian(0, rows, C, z.data(), r_z.data(), delta2.data(), r_delta.data());
  for (std::size_t k = 0; k < delta.size(); ++k) EXPECT_NEAR(delta2[k], delta[k], 1e-15) << k;
  // Central differences, h = 1e-5: truncation h^2 |L'''| ~ 1e-10, rounding eps |L| / h ~ 1e-10.
  const double h = 1e-5;
  for (std::size_t k = 0; k < z.size(); ++k) {
    const double saved = z[k];
    z[k] = saved + h;
    const double up = plain_target_loss(z, t, rows, C);
    z[k] = saved - h;
    const double down = plain_target_loss(z, t, rows, C);
    z[k] = saved;
    EXPECT_NEAR(delta[k], (up - down) / (2 * h), 1e-8) << k;
  }
  std::vector<double> z_up(z), z_down(z), d_up(z.size()), d_down(z.size());
  for (std::size_t k = 0; k < z.size(); ++k) {
    z_up[k] += h * r_z[k];
    z_down[k] -= h * r_z[k];
  }
  loss.gradient(0, rows, C, z_up.data(), d_up.data(), 0.0);
  loss.gradient(0, rows, C, z_down.data(), d_down.data(), 0.0);
  for (std::size_t k = 0; k < z.size(); ++k)
    EXPECT_NEAR(r_delta[k], (d_up[k] - d_down[k]) / (2 * h), 1e-9) << k;
}

TEST(TargetCrossEntropy, ReadsTheRowsItIsGiven) {
  // `first` selects the targets of a block of rows, as a model's row blocks pass them.
  const std::size_t rows = 5;
  const int C = 3;
  const auto t = random_targets(rows, C, 4);
  const auto z = normals(rows * C, 5);
  const TargetCrossEntropy loss(t.data());
  std::vector<double> all(rows * C), part(rows * C);
  const double whole = loss.gradient(0, rows, C, z.data(), all.data(), 0.0);
  const double head = loss.gradient(0, 2, C, z.data(), part.data(), 0.0);
  const double tail = loss.gradient(2, rows - 2, C, z.data() + 2 * C, part.data() + 2 * C, head);
  EXPECT_DOUBLE_EQ(tail, whole);
  for (std::size_t k = 0; k < all.size(); ++k) EXPECT_DOUBLE_EQ(part[k], all[k]);
}

TEST(LabelCrossEntropy, EqualsTheSoftTargetHeadWithOneHotTargets) {
  const std::size_t rows = 7;
  const int C = 5;
  const auto z = normals(rows * C, 6, 3.0);
  const auto r_z = normals(rows * C, 7);
  std::vector<std::int32_t> y(rows);
  std::vector<double> t(rows * C, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    y[r] = static_cast<std::int32_t>((3 * r + 1) % C);
    t[r * C + y[r]] = 1.0;
  }
  const LabelCrossEntropy labels(y.data());
  const TargetCrossEntropy targets(t.data());
  std::vector<double> d1(rows * C), d2(rows * C), rd1(rows * C), rd2(rows * C);
  EXPECT_NEAR(labels.gradient(0, rows, C, z.data(), d1.data(), 0.0),
              targets.gradient(0, rows, C, z.data(), d2.data(), 0.0), 1e-12);
  EXPECT_NEAR(labels.gradient(0, rows, C, z.data(), nullptr, 0.0),
              targets.gradient(0, rows, C, z.data(), nullptr, 0.0), 1e-12);
  for (std::size_t k = 0; k < d1.size(); ++k) EXPECT_NEAR(d1[k], d2[k], 1e-15) << k;
  labels.hessian(0, rows, C, z.data(), r_z.data(), d1.data(), rd1.data());
  targets.hessian(0, rows, C, z.data(), r_z.data(), d2.data(), rd2.data());
  for (std::size_t k = 0; k < d1.size(); ++k) {
    EXPECT_NEAR(d1[k], d2[k], 1e-15) << k;
    EXPECT_NEAR(rd1[k], rd2[k], 1e-15) << k;
  }
}

struct NamedModel {
  const char* name;
  std::shared_ptr<const Model> model;
};

void PrintTo(const NamedModel& named, std::ostream* out) {
  *out << named.name;
}

std::vector<NamedModel> models() {
  return {
      {"logistic", std::make_shared<SoftmaxRegression>(5, 3, 0.1)},
      {"mlp_tanh",
       std::make_shared<Network>(NetworkSpec::mlp(5, {4, 3}, Activation::tanh, 3, true), 3, 0.1)},
      {"cnn_tanh", std::make_shared<Network>(NetworkSpec::cnn({4, 4, 1}, {2}, 3, Padding::same,
                                                              true, {3}, Activation::tanh, 3, true),
                                             3, 0.1)},
  };
}

class ModelLogitLossTest : public ::testing::TestWithParam<NamedModel> {
 protected:
  const Model& model() const { return *GetParam().model; }
  std::vector<double> inputs(std::size_t rows, unsigned seed) const {
    return normals(rows * model().features(), seed);
  }
  std::vector<double> parameters(unsigned seed, double scale = 0.5) const {
    return normals(model().parameters(), seed, scale);
  }
  Workspace work;
};

TEST_P(ModelLogitLossTest, SoftTargetGradientMatchesCentralDifferences) {
  const std::size_t rows = 6;
  const int C = model().classes();
  const auto x = inputs(rows, 11);
  auto theta = parameters(12);
  const auto t = random_targets(rows, C, 13);
  const TargetCrossEntropy loss(t.data());
  std::vector<double> gradient(model().parameters());
  const double value =
      model().loss_gradient_sum(x.data(), rows, loss, theta.data(), gradient.data(), work);
  EXPECT_DOUBLE_EQ(model().loss_gradient_sum(x.data(), rows, loss, theta.data(), nullptr, work),
                   value);
  std::vector<double> z(rows * C);
  model().logits(x.data(), rows, theta.data(), z.data(), work);
  EXPECT_NEAR(value, plain_target_loss(z, t, rows, C), 1e-12 * (1.0 + std::abs(value)));
  // h = 1e-6: truncation h^2 |f'''| ~ 1e-12, rounding eps |f| / h ~ 1e-9 for |f| ~ 10.
  const double h = 1e-6;
  for (std::size_t k = 0; k < theta.size(); ++k) {
    const double saved = theta[k];
    theta[k] = saved + h;
    const double up = model().loss_gradient_sum(x.data(), rows, loss, theta.data(), nullptr, work);
    theta[k] = saved - h;
    const double down =
        model().loss_gradient_sum(x.data(), rows, loss, theta.data(), nullptr, work);
    theta[k] = saved;
    EXPECT_NEAR(gradient[k], (up - down) / (2 * h), 1e-7 * (1.0 + std::abs(gradient[k]))) << k;
  }
}

TEST_P(ModelLogitLossTest, SoftTargetHessianProductMatchesDifferencesOfGradients) {
  const std::size_t rows = 6;
  const int C = model().classes();
  const std::size_t p = model().parameters();
  const auto x = inputs(rows, 21);
  const auto theta = parameters(22);
  const auto v = parameters(23, 1.0);
  const auto t = random_targets(rows, C, 24);
  const TargetCrossEntropy loss(t.data());
  std::vector<double> hv(p), up(p), down(p);
  model().loss_hessian_vector_sum(x.data(), rows, loss, theta.data(), v.data(), hv.data(), work);
  // h = 1e-5: truncation h^2 ~ 1e-10 relative, rounding eps |g| / h ~ 1e-10.
  const double h = 1e-5;
  std::vector<double> up_theta(theta), down_theta(theta);
  for (std::size_t k = 0; k < p; ++k) {
    up_theta[k] += h * v[k];
    down_theta[k] -= h * v[k];
  }
  model().loss_gradient_sum(x.data(), rows, loss, up_theta.data(), up.data(), work);
  model().loss_gradient_sum(x.data(), rows, loss, down_theta.data(), down.data(), work);
  double scale = 0.0;
  for (double value : hv) scale = std::max(scale, std::abs(value));
  ASSERT_GT(scale, 0.0);
  for (std::size_t k = 0; k < p; ++k)
    EXPECT_NEAR(hv[k], (up[k] - down[k]) / (2 * h), 1e-6 * scale) << k;
}

// Cross-entropy is linear in the target: a row with target w q has the gradient and Hessian of
// w sum_c q_c times the row labelled c, which the label path computes on its own.
TEST_P(ModelLogitLossTest, SoftTargetsAreTheWeightedSumOfTheLabelPath) {
  const std::size_t rows = 5;
  const int C = model().classes();
  const std::size_t p = model().parameters();
  const auto x = inputs(rows, 31);
  const auto theta = parameters(32);
  const auto v = parameters(33, 1.0);
  const auto t = random_targets(rows, C, 34);
  const TargetCrossEntropy loss(t.data());
  std::vector<double> gradient(p), hv(p), expected_gradient(p, 0.0), expected_hv(p, 0.0), g(p),
      hvc(p);
  const double value =
      model().loss_gradient_sum(x.data(), rows, loss, theta.data(), gradient.data(), work);
  model().loss_hessian_vector_sum(x.data(), rows, loss, theta.data(), v.data(), hv.data(), work);
  double expected_value = 0.0;
  for (std::size_t r = 0; r < rows; ++r)
    for (int c = 0; c < C; ++c) {
      const double weight = t[r * C + c];
      const std::int32_t label = c;
      const double* row = x.data() + r * model().features();
      expected_value += weight * model().gradient_sum(row, &label, 1, theta.data(), g.data(), work);
      model().hessian_vector_sum(row, &label, 1, theta.data(), v.data(), hvc.data(), work);
      for (std::size_t k = 0; k < p; ++k) {
        expected_gradient[k] += weight * g[k];
        expected_hv[k] += weight * hvc[k];
      }
    }
  EXPECT_NEAR(value, expected_value, 1e-12 * (1.0 + std::abs(expected_value)));
  for (std::size_t k = 0; k < p; ++k) {
    EXPECT_NEAR(gradient[k], expected_gradient[k], 1e-12 * (1.0 + std::abs(expected_gradient[k])))
        << k;
    EXPECT_NEAR(hv[k], expected_hv[k], 1e-12 * (1.0 + std::abs(expected_hv[k]))) << k;
  }
}

TEST_P(ModelLogitLossTest, LabelLossEqualsTheLabelPath) {
  const std::size_t rows = 9;
  const std::size_t p = model().parameters();
  const auto x = inputs(rows, 41);
  const auto theta = parameters(42);
  const auto v = parameters(43, 1.0);
  std::vector<std::int32_t> y(rows);
  for (std::size_t r = 0; r < rows; ++r) y[r] = static_cast<std::int32_t>(r % model().classes());
  const LabelCrossEntropy loss(y.data());
  std::vector<double> g1(p), g2(p), h1(p), h2(p);
  const double a = model().loss_gradient_sum(x.data(), rows, loss, theta.data(), g1.data(), work);
  const double b = model().gradient_sum(x.data(), y.data(), rows, theta.data(), g2.data(), work);
  EXPECT_NEAR(a, b, 1e-12 * b);
  model().loss_hessian_vector_sum(x.data(), rows, loss, theta.data(), v.data(), h1.data(), work);
  model().hessian_vector_sum(x.data(), y.data(), rows, theta.data(), v.data(), h2.data(), work);
  for (std::size_t k = 0; k < p; ++k) {
    EXPECT_NEAR(g1[k], g2[k], 1e-12 * (1.0 + std::abs(g2[k]))) << k;
    EXPECT_NEAR(h1[k], h2[k], 1e-12 * (1.0 + std::abs(h2[k]))) << k;
  }
}

TEST_P(ModelLogitLossTest, DirectionalLogitsMatchDifferencesOfLogits) {
  const std::size_t rows = 4;
  const int C = model().classes();
  const std::size_t p = model().parameters();
  const auto x = inputs(rows, 51);
  const auto theta = parameters(52);
  const auto v = parameters(53, 1.0);
  std::vector<double> z(rows * C), r_z(rows * C), expected(rows * C), up(rows * C), down(rows * C);
  model().directional_logits(x.data(), rows, theta.data(), v.data(), z.data(), r_z.data(), work);
  model().logits(x.data(), rows, theta.data(), expected.data(), work);
  for (std::size_t k = 0; k < z.size(); ++k) EXPECT_NEAR(z[k], expected[k], 1e-13) << k;
  const double h = 1e-5;  // truncation h^2 ~ 1e-10, rounding eps |z| / h ~ 1e-11
  std::vector<double> up_theta(theta), down_theta(theta);
  for (std::size_t k = 0; k < p; ++k) {
    up_theta[k] += h * v[k];
    down_theta[k] -= h * v[k];
  }
  model().logits(x.data(), rows, up_theta.data(), up.data(), work);
  model().logits(x.data(), rows, down_theta.data(), down.data(), work);
  for (std::size_t k = 0; k < z.size(); ++k)
    EXPECT_NEAR(r_z[k], (up[k] - down[k]) / (2 * h), 1e-8 * (1.0 + std::abs(r_z[k]))) << k;
}

INSTANTIATE_TEST_SUITE_P(Models, ModelLogitLossTest, ::testing::ValuesIn(models()),
                         [](const ::testing::TestParamInfo<NamedModel>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace fluence
