// Influence estimators against exact retraining (dense Newton on the remaining or perturbed data):
// the first-order estimate's error must shrink quadratically with the group (the sign and 1/n
// conventions of docs/math.md are right), and the seeds' loss-only removal gradient only linearly.
#include <gtest/gtest.h>

#include <cmath>

#include "fluence/influence/estimators.hpp"
#include "pooled_hessian.hpp"
#include "support/default_deck.hpp"

namespace fluence {
namespace {

using testing::PooledData;

double distance(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t k = 0; k < a.size(); ++k) s += (a[k] - b[k]) * (a[k] - b[k]);
  return std::sqrt(s);
}

// Least-squares slope of log(error) against log(group size).
double log_log_slope(const std::vector<double>& sizes, const std::vector<double>& errors) {
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    mx += std::log(sizes[i]) / sizes.size();
    my += std::log(errors[i]) / sizes.size();
  }
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    sxy += (std::log(sizes[i]) - mx) * (std::log(errors[i]) - my);
    sxx += (std::log(sizes[i]) - mx) * (std::log(sizes[i]) - mx);
  }
  return sxy / sxx;
}

// The removed (or perturbed) group: m identical copies of one training point, appended to 2000
// planted rows. Its gradient sum then grows exactly like m, so the first-order remainder is
// O((m/n)^2). (For a group of dissimilar points the gradient sum grows like sqrt(m) while the
// curvature term grows like m, and the remainder goes like m^1.5 instead.)
constexpr std::size_t kCopies = 64;
constexpr int kWidth = 6;

struct RemovalSetup {
  PooledData data = testing::planted_data(2000, kWidth, 3, 21);
  SoftmaxRegression model{kWidth, 3, 1e-2};
  std::vector<double> theta;
  std::size_t first_copy = 0;
  RemovalSetup() {
    first_copy = data.rows();
    const std::vector<double> point(data.x.begin() + 7 * kWidth, data.x.begin() + 8 * kWidth);
    for (std::size_t c = 0; c < kCopies; ++c) {
      data.x.insert(data.x.end(), point.begin(), point.end());
      data.y.push_back(data.y[7]);
    }
    theta = testing::dense_minimizer(model, data.x.data(), data.y.data(), data.rows());
  }
  // Encoded rows and labels of m copies, and of everything else.
  void split(std::size_t m, std::vector<double>& gx, std::vector<std::int32_t>& gy,
             std::vector<double>& rx, std::vector<std::int32_t>& ry) const {
    for (std::size_t r = 0; r < data.rows(); ++r) {
      const bool in = r >= first_copy && r < first_copy + m;
      auto& x = in ? gx : rx;
      auto& y = in ? gy : ry;
      x.insert(x.end(), data.x.begin() + r * kWidth, data.x.begin() + (r + 1) * kWidth);
      y.push_back(data.y[r]);
    }
  }
};

std::vector<double> removal_errors(const RemovalSetup& s, RemovalGradient kind,
                                   const std::vector<double>& sizes) {
  testing::PooledHessian hessian(s.model, s.data.x, s.data.rows(), s.theta);
  IhvpConfig config = IhvpConfig::from_deck(default_deck());
  config.method = IhvpMethod::explicit_cholesky;
  auto solver = make_ihvp_solver(config, hessian);
  std::vector<double> errors;
  Workspace work;
  for (double size : sizes) {
    std::vector<double> gx, rx, gradient, delta;
    std::vector<std::int32_t> gy, ry;
    s.split(static_cast<std::size_t>(size), gx, gy, rx, ry);
    // Exact retraining: the same objective (mean loss + L2) on the remaining rows.
    const auto retrained =
        testing::dense_minimizer(s.model, rx.data(), ry.data(), ry.size(), s.theta);
    group_gradient_sum(s.model, gx.data(), gy.data(), gy.size(), s.theta.data(), kind, gradient,
                       work);
    removal_parameter_change(*solver, gradient, static_cast<std::int64_t>(s.data.rows()), delta);
    std::vector<double> estimated = s.theta;
    for (std::size_t k = 0; k < delta.size(); ++k) estimated[k] += delta[k];
    errors.push_back(distance(estimated, retrained));
    // First order: the estimate captures most of the actual change.
    EXPECT_LT(errors.back(), 0.5 * distance(retrained, s.theta)) << "group of " << size;
  }
  return errors;
}

TEST(Estimators, GroupRemovalErrorShrinksQuadratically) {
  RemovalSetup s;
  const std::vector<double> sizes = {64, 32, 16, 8, 4};
  const auto errors = removal_errors(s, RemovalGradient::regularized, sizes);
  // Second-order remainder: error ~ (|G|/n)^2, slope 2 on a log-log plot. A wrong sign or a
  // missing term leaves a first-order error (slope 1).
  EXPECT_NEAR(log_log_slope(sizes, errors), 2.0, 0.25);
}

TEST(Estimators, LossOnlyRemovalGradientIsOnlyFirstOrderAccurate) {
  RemovalSetup s;
  // Small groups, where the first-order term dominates the second-order one.
  const std::vector<double> sizes = {8, 4, 2, 1};
  const auto errors = removal_errors(s, RemovalGradient::loss, sizes);
  // The seeds' variant drops the removed points' share of the L2 term, (1/n) H^{-1} |G| l2 theta:
  // a first-order error, slope 1 (docs/math.md §1.3).
  EXPECT_NEAR(log_log_slope(sizes, errors), 1.0, 0.25);
  const auto exact_errors = removal_errors(s, RemovalGradient::regularized, sizes);
  EXPECT_GT(errors.back(), 10.0 * exact_errors.back());
}

TEST(Estimators, GroupPerturbationErrorShrinksQuadratically) {
  RemovalSetup s;
  testing::PooledHessian hessian(s.model, s.data.x, s.data.rows(), s.theta);
  IhvpConfig config = IhvpConfig::from_deck(default_deck());
  auto solver = make_ihvp_solver(config, hessian);  // CG this time
  const std::vector<double> sizes = {64, 32, 16, 8, 4};
  std::vector<double> errors;
  Workspace work;
  for (double size : sizes) {
    // z -> z_beta: the group's labels move to the next class (seed 000 Eq. 5-7, 9).
    auto labels = s.data.y;
    std::vector<double> gx;
    std::vector<std::int32_t> original, perturbed;
    for (std::size_t i = 0; i < static_cast<std::size_t>(size); ++i) {
      const std::size_t r = s.first_copy + i;
      gx.insert(gx.end(), s.data.x.begin() + r * kWidth, s.data.x.begin() + (r + 1) * kWidth);
      original.push_back(labels[r]);
      labels[r] = (labels[r] + 1) % 3;
      perturbed.push_back(labels[r]);
    }
    const auto retrained =
        testing::dense_minimizer(s.model, s.data.x.data(), labels.data(), labels.size(), s.theta);
    std::vector<double> g_beta, g, delta;
    group_gradient_sum(s.model, gx.data(), perturbed.data(), perturbed.size(), s.theta.data(),
                       RemovalGradient::loss, g_beta, work);
    group_gradient_sum(s.model, gx.data(), original.data(), original.size(), s.theta.data(),
                       RemovalGradient::loss, g, work);
    perturbation_parameter_change(*solver, g_beta, g, static_cast<std::int64_t>(s.data.rows()),
                                  delta);
    std::vector<double> estimated = s.theta;
    for (std::size_t k = 0; k < delta.size(); ++k) estimated[k] += delta[k];
    errors.push_back(distance(estimated, retrained));
    EXPECT_LT(errors.back(), 0.5 * distance(retrained, s.theta)) << "group of " << size;
  }
  EXPECT_NEAR(log_log_slope(sizes, errors), 2.0, 0.25);
}

TEST(Estimators, TestLossChangeFromSTestEqualsGradientDotParameterChange) {
  RemovalSetup s;
  testing::PooledHessian hessian(s.model, s.data.x, s.data.rows(), s.theta);
  IhvpConfig config = IhvpConfig::from_deck(default_deck());
  config.method = IhvpMethod::explicit_cholesky;
  auto solver = make_ihvp_solver(config, hessian);
  // A "test set": the last 300 rows. Two routes to d L_test: s_test^T g / n, and
  // grad L_test^T d theta; they agree by the symmetry of H.
  Workspace work;
  std::vector<double> test_gradient, group_gradient, s_test, delta;
  group_gradient_sum(s.model, s.data.x.data() + 1700 * kWidth, s.data.y.data() + 1700, 300,
                     s.theta.data(), RemovalGradient::loss, test_gradient, work);
  for (auto& v : test_gradient) v /= 300.0;
  group_gradient_sum(s.model, s.data.x.data(), s.data.y.data(), 50, s.theta.data(),
                     RemovalGradient::regularized, group_gradient, work);
  solve_s_test(*solver, test_gradient, s_test);
  removal_parameter_change(*solver, group_gradient, 2064, delta);
  const double via_s_test = removal_loss_change(s_test, group_gradient, 2064);
  EXPECT_NEAR(via_s_test, loss_change(test_gradient, delta), 1e-12 * std::abs(via_s_test) + 1e-16);
  // Perturbation is minus the removal of the original plus the addition of the perturbed points.
  EXPECT_NEAR(
      perturbation_loss_change(s_test, group_gradient, std::vector<double>(delta.size()), 2064),
      -via_s_test, 1e-15);
}

TEST(Estimators, SpearmanAndMeanAbsoluteError) {
  // Hand-computed: ranks (0, 2, 1, 3) vs (0, 1, 2, 3): rho = 1 - 6 * 2 / (4 * 15) = 0.8.
  EXPECT_NEAR(spearman({1.0, 3.0, 2.0, 4.0}, {10.0, 20.0, 30.0, 40.0}), 0.8, 1e-15);
  // Ties take their mean rank: (0.5, 0.5, 2) against (0, 1, 2).
  EXPECT_NEAR(spearman({5.0, 5.0, 7.0}, {1.0, 2.0, 3.0}), 0.8660254037844386, 1e-12);
  EXPECT_NEAR(spearman({1.0, 2.0, 3.0}, {3.0, 2.0, 1.0}), -1.0, 1e-15);
  EXPECT_DOUBLE_EQ(mean_absolute_error({1.0, -2.0}, {0.5, 1.0}), 1.75);
}

}  // namespace
}  // namespace fluence
