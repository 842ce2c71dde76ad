// The Kronecker preconditioner (influence/kronecker.hpp, docs/math.md §3.1) against dense
// references: its application against (G ⊗ A + shift I)^{-1} v solved densely (LAPACK dposv), its
// factor sums against row-by-row loops, its exactness where the Hessian is one Kronecker product
// (two classes; equal probabilities on every row), and preconditioned CG against the dense solve
// with fewer iterations than none and Jacobi.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/influence/ihvp.hpp"
#include "fluence/influence/kronecker.hpp"
#include "pooled_hessian.hpp"
#include "support/default_deck.hpp"

namespace fluence {
namespace {

using testing::PooledHessian;
using testing::relative_error;

std::vector<double> random_vector(std::size_t n, std::uint64_t key) {
  Stream stream(7, purpose::synthetic_model, key);
  std::vector<double> v(n);
  for (auto& value : v) value = stream.normal();
  return v;
}

// B B^T / n for an n x n Gaussian B: symmetric positive definite (almost surely).
std::vector<double> random_spd(int n, std::uint64_t key) {
  const auto b = random_vector(static_cast<std::size_t>(n) * n, key);
  std::vector<double> m(static_cast<std::size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < n; ++k) m[i * n + j] += b[i * n + k] * b[j * n + k] / n;
  return m;
}

// The dense (G ⊗ A + shift I), classes outside: entry ((c, d), (c', d')) = G_cc' A_dd'.
std::vector<double> dense_kronecker(const KroneckerFactors& f) {
  const int C = f.classes, D = f.features;
  const std::size_t p = f.parameters();
  std::vector<double> m(p * p);
  for (int c = 0; c < C; ++c)
    for (int d = 0; d < D; ++d)
      for (int e = 0; e < C; ++e)
        for (int k = 0; k < D; ++k)
          m[(c * D + d) * p + e * D + k] = f.class_factor[c * C + e] * f.feature_factor[d * D + k] +
                                           (c == e && d == k ? f.shift : 0.0);
  return m;
}

// The planted rows with correlated, unevenly scaled features (x_j += 0.9 x_{j-1}, then times
// 1 + j): A is then far from diagonal, which Jacobi cannot undo.
testing::PooledData correlated_data(std::size_t rows, int features, int classes,
                                    std::uint64_t seed) {
  auto data = testing::planted_data(rows, features, classes, seed);
  for (std::size_t r = 0; r < rows; ++r) {
    double* xr = data.x.data() + r * features;
    for (int j = 1; j + 1 < features; ++j) xr[j] += 0.9 * xr[j - 1];
    for (int j = 0; j + 1 < features; ++j) xr[j] *= 1.0 + j;
  }
  return data;
}

TEST(Kronecker, ApplicationIsTheDenseInverse) {
  // A class factor with the softmax covariance's null vector (1, ..., 1) and a generic feature
  // factor: the null direction is then inverted through the shift alone.
  KroneckerFactors f;
  f.classes = 3;
  f.features = 5;
  const auto g = random_spd(3, 1);
  f.class_factor.assign(9, 0.0);
  std::vector<double> centering(9);  // I - 1 1^T / 3
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) centering[i * 3 + j] = (i == j ? 1.0 : 0.0) - 1.0 / 3.0;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k)
        for (int l = 0; l < 3; ++l)
          f.class_factor[i * 3 + j] += centering[i * 3 + k] * g[k * 3 + l] * centering[l * 3 + j];
  f.feature_factor = random_spd(5, 2);
  for (double shift : {1e-3, 0.5}) {
    f.shift = shift;
    const KroneckerPreconditioner preconditioner(f);
    const auto v = random_vector(f.parameters(), 3);
    std::vector<double> z(v.size());
    preconditioner.apply(v.data(), z.data());
    // cond(G ⊗ A + shift I) <= (|G| |A| + shift) / shift ~ 1e4 at shift 1e-3: eigendecomposition
    // and dposv each lose ~cond * eps ~ 1e-12.
    EXPECT_LE(relative_error(z, testing::dense_solve(dense_kronecker(f), v)), 1e-11) << shift;
  }
}

TEST(Kronecker, FactorSumsMatchRowByRowLoops) {
  const auto data = correlated_data(700, 5, 4, 4);  // 700 rows: a partial chunk of 2048
  const SoftmaxRegression model(5, 4, 1e-2);
  const auto theta = random_vector(model.parameters(), 5);
  PooledHessian hessian(model, data.x, data.rows(), theta);
  const KroneckerFactors expected = hessian.kronecker_factors();
  std::vector<double> p(data.rows() * 4), class_sum(16), feature_sum(25), diagonal(5);
  model.probabilities(data.x.data(), data.rows(), theta.data(), p.data());
  model.kronecker_factor_sums(data.x.data(), data.rows(), p.data(), class_sum.data(),
                              feature_sum.data());
  model.kronecker_feature_diagonal_sum(data.x.data(), data.rows(), p.data(), diagonal.data());
  const KroneckerFactors f = normalized_kronecker_factors(4, 5, class_sum, feature_sum,
                                                          static_cast<double>(data.rows()), 0.01);
  // Sums of 700 terms of size <= 25 (x up to ~5 sigma times 5): ~1e-13 relative rounding.
  for (std::size_t k = 0; k < 16; ++k)
    EXPECT_NEAR(f.class_factor[k], expected.class_factor[k], 1e-13) << k;
  for (std::size_t k = 0; k < 25; ++k)
    EXPECT_NEAR(f.feature_factor[k], expected.feature_factor[k],
                1e-12 * std::abs(expected.feature_factor[k]) + 1e-13)
        << k;
  for (int d = 0; d < 5; ++d)
    EXPECT_NEAR(diagonal[d], feature_sum[d * 5 + d], 1e-12 * feature_sum[d * 5 + d]) << d;
  EXPECT_DOUBLE_EQ(f.shift, 0.01);
}

// M^{-1} H v = v for every v where the Hessian is exactly G ⊗ A + shift I.
void expect_exact_inverse(const SoftmaxRegression& model, const testing::PooledData& data,
                          const std::vector<double>& theta) {
  PooledHessian hessian(model, data.x, data.rows(), theta);
  hessian.set_damping(1e-4);
  const KroneckerPreconditioner preconditioner(hessian.kronecker_factors());
  std::vector<double> dense;
  hessian.dense(dense);
  const std::size_t p = model.parameters();
  for (std::uint64_t key = 0; key < 3; ++key) {
    const auto v = random_vector(p, 10 + key);
    std::vector<double> hv(p, 0.0), back(p);
    for (std::size_t i = 0; i < p; ++i)
      for (std::size_t k = 0; k < p; ++k) hv[i] += dense[i * p + k] * v[k];
    preconditioner.apply(hv.data(), back.data());
    // cond(H) ~ 1e3-1e4 with l2 1e-3: the round trip loses cond * eps.
    EXPECT_LE(relative_error(back, v), 1e-10) << key;
  }
}

TEST(Kronecker, ExactForTwoClasses) {
  // Two classes: every S_r = p_r0 p_r1 [1 -1; -1 1], one Kronecker product with weighted rows.
  const auto data = correlated_data(800, 5, 2, 6);
  const SoftmaxRegression model(5, 2, 1e-3);
  const auto theta = testing::dense_minimizer(model, data.x.data(), data.y.data(), data.rows());
  expect_exact_inverse(model, data, theta);
}

TEST(Kronecker, ExactWhenEveryRowHasTheSameProbabilities) {
  // theta = 0: p_r = 1/C on every row, S_r = (I - 1 1^T / C) / C for all r.
  const auto data = correlated_data(600, 4, 5, 7);
  const SoftmaxRegression model(4, 5, 1e-3);
  expect_exact_inverse(model, data, std::vector<double>(model.parameters(), 0.0));
}

TEST(Kronecker, ConjugateGradientMatchesDenseSolveInFewerIterations) {
  const auto data = correlated_data(2000, 8, 4, 8);
  const SoftmaxRegression model(8, 4, 1e-3);
  const auto theta = testing::dense_minimizer(model, data.x.data(), data.y.data(), data.rows());
  PooledHessian hessian(model, data.x, data.rows(), theta);
  const std::size_t p = model.parameters();
  std::vector<double> dense;
  hessian.dense(dense);
  const auto b = random_vector(p, 20);
  const auto exact = testing::dense_solve(dense, b);
  const auto eigenvalues = testing::symmetric_eigenvalues(dense);
  const double condition = eigenvalues.back() / eigenvalues.front();
  IhvpConfig config = IhvpConfig::from_deck(default_deck());
  config.rtol = 1e-12;
  config.warm_start = false;
  int iterations[3] = {};
  for (auto kind :
       {IhvpPreconditioner::none, IhvpPreconditioner::jacobi, IhvpPreconditioner::kronecker}) {
    config.preconditioner = kind;
    auto solver = make_ihvp_solver(config, hessian);
    std::vector<double> x(p);
    const auto report = solver->solve(b.data(), x.data());
    // CG stops on its recursively updated residual (rtol 1e-12); the one recomputed after the
    // solve carries the rounding of ~cond(H) ~ 1e4 products: 1e-11. Then
    // ||x - x*|| / ||x*|| <= cond(H) ||r|| / ||b||.
    EXPECT_LE(report.relative_residual, 1e-11) << to_string(kind);
    EXPECT_LE(relative_error(x, exact), condition * 1e-11) << to_string(kind);
    iterations[static_cast<int>(kind)] = report.iterations;
  }
  // The class coupling and the feature correlations are what CG spends its iterations on here;
  // the Kronecker factors carry both, the diagonal neither.
  std::printf("CG iterations: none %d, Jacobi %d, Kronecker %d (condition %.3g)\n", iterations[0],
              iterations[1], iterations[2], condition);
  EXPECT_LT(2 * iterations[2], iterations[1]) << iterations[2] << " vs Jacobi " << iterations[1];
  EXPECT_LT(2 * iterations[2], iterations[0]) << iterations[2] << " vs none " << iterations[0];
}

TEST(Kronecker, RefusedWhereTheHessianHasNoFactors) {
  // The operator's default: a network's Hessian, FLDP's expected-loss clients.
  class NoFactors final : public HessianOperator {
   public:
    std::size_t parameters() const override { return 4; }
    bool collective() const override { return false; }
    void apply(const double* v, double* out) override { std::copy_n(v, 4, out); }
    void apply_sampled(const double* v, double* out, int, std::uint64_t, std::uint64_t) override {
      std::copy_n(v, 4, out);
    }
    void diagonal(std::vector<double>& out) override { out.assign(4, 1.0); }
    void dense(std::vector<double>& out) override { out.assign(16, 0.0); }
  } identity;
  IhvpConfig config = IhvpConfig::from_deck(default_deck());
  config.preconditioner = IhvpPreconditioner::kronecker;
  auto solver = make_ihvp_solver(config, identity);
  std::vector<double> b{1.0, 2.0, 3.0, 4.0}, x(4);
  EXPECT_THROW(solver->solve(b.data(), x.data()), InputError);
}

}  // namespace
}  // namespace fluence
