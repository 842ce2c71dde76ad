// The one CG and the one Newton's method (core/krylov.hpp, core/newton.hpp) against independent
// computations: CG against a dense Cholesky solve, with each preconditioner, its detection of an
// indefinite operator and an operator's exception passed through PETSc; Newton on a strictly convex
// objective against the dense solution of its stationarity conditions, and on Rosenbrock's
// function, whose Hessian is indefinite on the way, to its known minimizer (1, 1).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/core/krylov.hpp"
#include "fluence/core/newton.hpp"
#include "support/dense_reference.hpp"

namespace fluence {
namespace {

// A = B B^T + n I: symmetric positive definite, condition number in the tens.
std::vector<double> spd_matrix(std::size_t n, unsigned seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<double> normal;
  std::vector<double> b(n * n), a(n * n, 0.0);
  for (auto& v : b) v = normal(engine);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t k = 0; k < n; ++k) a[i * n + j] += b[i * n + k] * b[j * n + k];
      if (i == j) a[i * n + j] += static_cast<double>(n);
    }
  return a;
}

LinearOperator dense_operator(const std::vector<double>& a, std::size_t n) {
  LinearOperator op;
  op.size = n;
  op.apply = [&a, n](const double* v, double* out) {
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = 0.0;
      for (std::size_t j = 0; j < n; ++j) out[i] += a[i * n + j] * v[j];
    }
  };
  op.diagonal = [&a, n](double* out) {
    for (std::size_t i = 0; i < n; ++i) out[i] = a[i * n + i];
  };
  return op;
}

TEST(ConjugateGradient, SolvesASymmetricPositiveDefiniteSystemWithEachPreconditioner) {
  const std::size_t n = 30;
  const auto a = spd_matrix(n, 1);
  std::vector<double> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = std::sin(1.0 + static_cast<double>(i));
  const auto reference = testing::dense_solve(a, b);
  for (auto kind : {CgPreconditioner::none, CgPreconditioner::jacobi, CgPreconditioner::custom}) {
    CgSettings settings;
    settings.prefix = "test_cg_";
    settings.rtol = 1e-12;
    settings.preconditioner = kind;
    // The custom preconditioner: the exact inverse, so CG converges in one iteration.
    settings.apply_preconditioner = [&](const double* r, double* z) {
      const auto solved = testing::dense_solve(a, std::vector<double>(r, r + n));
      std::copy(solved.begin(), solved.end(), z);
    };
    ConjugateGradient cg(dense_operator(a, n), settings);
    std::vector<double> x(n, 0.0);
    const CgOutcome outcome = cg.solve(b.data(), x.data());
    EXPECT_TRUE(outcome.converged);
    EXPECT_FALSE(outcome.indefinite);
    if (kind == CgPreconditioner::custom) {
      EXPECT_LE(outcome.iterations, 2);
    }
    // ||x - x*|| <= ||A^-1|| ||r|| <= rtol ||b|| / lambda_min, lambda_min >= n = 30.
    for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(x[i], reference[i], 1e-12) << i;
  }
}

TEST(ConjugateGradient, ReportsAnIndefiniteOperator) {
  const std::size_t n = 10;
  std::vector<double> a(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i) a[i * n + i] = i < 3 ? -1.0 : 2.0;
  std::vector<double> b(n, 1.0), x(n, 0.0);
  CgSettings settings;
  settings.prefix = "test_cg_";
  ConjugateGradient cg(dense_operator(a, n), settings);
  const CgOutcome outcome = cg.solve(b.data(), x.data());
  EXPECT_FALSE(outcome.converged);
  EXPECT_TRUE(outcome.indefinite);
}

// An exception raised by the operator inside PETSc's solve reaches the caller with its own type
// and message (not as a PETSc error), and the solver solves again afterwards.
TEST(ConjugateGradient, PassesAnOperatorsExceptionThroughAndStaysUsable) {
  const std::size_t n = 12;
  const auto a = spd_matrix(n, 3);
  LinearOperator op = dense_operator(a, n);
  int products = 0;
  const auto apply = op.apply;
  op.apply = [&products, apply](const double* v, double* out) {
    if (++products == 3) throw DivergenceError("the third product failed");
    apply(v, out);
  };
  CgSettings settings;
  settings.prefix = "test_cg_";
  settings.rtol = 1e-12;
  ConjugateGradient cg(op, settings);
  std::vector<double> b(n, 1.0), x(n, 0.0);
  try {
    cg.solve(b.data(), x.data());
    FAIL() << "the operator's exception was lost";
  } catch (const DivergenceError& error) {
    EXPECT_STREQ(error.what(), "the third product failed");
  }
  const CgOutcome outcome = cg.solve(b.data(), x.data());
  EXPECT_TRUE(outcome.converged);
  const auto reference = testing::dense_solve(a, b);
  for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(x[i], reference[i], 1e-12) << i;
}

// h(theta) = 1/2 theta^T A theta - c^T theta + (1/4) sum theta_k^4: strictly convex, its
// minimizer the root of A theta - c + theta^3 = 0.
class Quartic final : public NewtonObjective {
 public:
  Quartic(std::vector<double> a, std::vector<double> c) : a_(std::move(a)), c_(std::move(c)) {}
  std::size_t parameters() const override { return c_.size(); }
  double value_and_gradient(const std::vector<double>& theta,
                            std::vector<double>& gradient) override {
    const std::size_t n = c_.size();
    gradient.assign(n, 0.0);
    double value = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      double row = 0.0;
      for (std::size_t j = 0; j < n; ++j) row += a_[i * n + j] * theta[j];
      value += 0.5 * theta[i] * row - c_[i] * theta[i] + 0.25 * std::pow(theta[i], 4);
      gradient[i] = row - c_[i] + std::pow(theta[i], 3);
    }
    return value;
  }
  void set_point(const std::vector<double>& theta) override { point_ = theta; }
  void hessian_vector(const double* v, double* out) override {
    const std::size_t n = c_.size();
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = 3.0 * point_[i] * point_[i] * v[i];
      for (std::size_t j = 0; j < n; ++j) out[i] += a_[i * n + j] * v[j];
    }
  }
  bool has_hessian_diagonal() const override { return true; }
  bool hessian_diagonal(double* out) override {
    const std::size_t n = c_.size();
    for (std::size_t i = 0; i < n; ++i) out[i] = a_[i * n + i] + 3.0 * point_[i] * point_[i];
    return true;
  }

 private:
  std::vector<double> a_, c_, point_;
};

TEST(Newton, ReachesTheStationaryPointOfAStrictlyConvexObjective) {
  const std::size_t n = 20;
  auto a = spd_matrix(n, 2);
  for (auto& v : a) v /= static_cast<double>(n);  // eigenvalues of order 1
  std::vector<double> c(n);
  for (std::size_t i = 0; i < n; ++i) c[i] = 3.0 * std::cos(static_cast<double>(i));
  Quartic objective(a, c);
  std::vector<double> theta(n, 0.0), gradient;
  int steps_seen = 0;
  NewtonSettings settings;
  settings.tolerance = 1e-12;
  settings.prefix = "test_newton_";
  settings.after_step = [&](int step, const std::vector<double>&) { steps_seen = step; };
  const NewtonReport report = minimize_newton(objective, theta, settings);
  EXPECT_TRUE(report.converged);
  EXPECT_EQ(steps_seen, report.steps);
  // The gradient recomputed independently of the solver's bookkeeping.
  objective.value_and_gradient(theta, gradient);
  double norm = 0.0;
  for (double g : gradient) norm += g * g;
  EXPECT_LE(std::sqrt(norm), 1e-12);
  // A Newton fixed point: theta = (A + 3 diag(theta^2))^-1 (c + 2 theta^3) from a dense solve at
  // the result (the stationarity condition rearranged).
  std::vector<double> m = a, rhs(n);
  for (std::size_t i = 0; i < n; ++i) {
    m[i * n + i] += 3.0 * theta[i] * theta[i];
    rhs[i] = c[i] + 2.0 * std::pow(theta[i], 3);
  }
  const auto fixed = testing::dense_solve(m, rhs);
  for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(theta[i], fixed[i], 1e-10) << i;
}

// Rosenbrock's f(x, y) = (1 - x)^2 + 100 (y - x^2)^2 from (0, 1), where its Hessian is indefinite
// (it is wherever y > x^2 + 1/200): CG meets negative curvature, and the damped
// (Levenberg-Marquardt) steps must carry Newton to the minimizer (1, 1).
class Rosenbrock final : public NewtonObjective {
 public:
  std::size_t parameters() const override { return 2; }
  double value_and_gradient(const std::vector<double>& t, std::vector<double>& g) override {
    const double x = t[0], y = t[1];
    g = {-2.0 * (1.0 - x) - 400.0 * x * (y - x * x), 200.0 * (y - x * x)};
    return (1.0 - x) * (1.0 - x) + 100.0 * (y - x * x) * (y - x * x);
  }
  void set_point(const std::vector<double>& t) override { point_ = t; }
  void hessian_vector(const double* v, double* out) override {
    const double x = point_[0], y = point_[1];
    const double hxx = 2.0 - 400.0 * (y - x * x) + 800.0 * x * x, hxy = -400.0 * x, hyy = 200.0;
    if (hxx * hyy - hxy * hxy < 0.0) ++indefinite_points_;
    out[0] = hxx * v[0] + hxy * v[1];
    out[1] = hxy * v[0] + hyy * v[1];
  }
  int indefinite_points_ = 0;

 private:
  std::vector<double> point_;
};

TEST(Newton, DampsIndefiniteStepsAndReachesRosenbrocksMinimizer) {
  Rosenbrock objective;
  std::vector<double> theta{0.0, 1.0};
  NewtonSettings settings;
  settings.tolerance = 1e-10;
  settings.max_steps = 200;
  settings.prefix = "test_newton_";
  const NewtonReport report = minimize_newton(objective, theta, settings);
  EXPECT_TRUE(report.converged);
  EXPECT_GT(objective.indefinite_points_, 0);  // the damping was needed
  EXPECT_NEAR(theta[0], 1.0, 1e-8);
  EXPECT_NEAR(theta[1], 1.0, 1e-8);
}

}  // namespace
}  // namespace fluence

namespace fluence {
namespace {

// h = sum_i (theta_i^2 - 1)^2 / 4 + (c / 2) sum_i (theta_i - theta_{i+1})^2: near 0 its Hessian
// diag(3 theta^2 - 1) + c L (L the path's Laplacian) is negative definite, so Newton must raise
// the damping there and lower it again on the way to a minimum.
class DoubleWells final : public NewtonObjective {
 public:
  static constexpr double kCoupling = 0.1;
  std::size_t parameters() const override { return 6; }
  double value_and_gradient(const std::vector<double>& t, std::vector<double>& g) override {
    const std::size_t n = t.size();
    double value = 0.0;
    g.assign(n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      value += 0.25 * (t[i] * t[i] - 1.0) * (t[i] * t[i] - 1.0);
      g[i] += t[i] * t[i] * t[i] - t[i];
      if (i + 1 < n) {
        const double d = t[i] - t[i + 1];
        value += 0.5 * kCoupling * d * d;
        g[i] += kCoupling * d;
        g[i + 1] -= kCoupling * d;
      }
    }
    return value;
  }
  void set_point(const std::vector<double>& t) override { point_ = t; }
  void hessian_vector(const double* v, double* out) override {
    const std::size_t n = point_.size();
    for (std::size_t i = 0; i < n; ++i) out[i] = (3.0 * point_[i] * point_[i] - 1.0) * v[i];
    for (std::size_t i = 0; i + 1 < n; ++i) {
      const double d = kCoupling * (v[i] - v[i + 1]);
      out[i] += d;
      out[i + 1] -= d;
    }
  }

 private:
  std::vector<double> point_;
};

// A Newton run stopped between steps (docs/operations.md "Stops inside a unit") and continued from
// its iterate and progress ends in the same bits as the uninterrupted run, after only the steps
// left. DoubleWells from near 0 raises the Levenberg-Marquardt damping on its first steps, so a
// continuation that lost the damping would take other steps.
TEST(Newton, AnInterruptedRunContinuesToTheSameBits) {
  NewtonSettings settings;
  settings.tolerance = 1e-10;
  settings.max_steps = 200;
  settings.prefix = "test_newton_";
  const std::vector<double> start{0.5, -0.4, 0.3, 0.45, -0.5, 0.35};
  DoubleWells reference_objective;
  std::vector<double> reference = start;
  const NewtonReport full = minimize_newton(reference_objective, reference, settings);
  ASSERT_TRUE(full.converged) << full.steps << " steps, |grad| " << full.gradient_norm;
  ASSERT_GT(full.steps, 4);
  bool stopped_damped = false;  // some stop fell where the damping was raised
  for (int stop_after = 1; stop_after < full.steps; ++stop_after) {
    DoubleWells objective;
    std::vector<double> theta = start;
    NewtonSettings stopping = settings;
    int polls = 0;
    stopping.stop_poll = [&] { return ++polls == stop_after + 1; };
    const NewtonReport stopped = minimize_newton(objective, theta, stopping);
    ASSERT_TRUE(stopped.interrupted);
    EXPECT_EQ(stopped.progress.steps, stop_after);
    stopped_damped = stopped_damped || stopped.progress.damping > 0.0;
    NewtonSettings resumed = settings;
    resumed.resume = &stopped.progress;
    int steps_taken = 0;
    resumed.after_step = [&](int, const std::vector<double>&) { ++steps_taken; };
    const NewtonReport finished = minimize_newton(objective, theta, resumed);
    EXPECT_FALSE(finished.interrupted);
    EXPECT_EQ(finished.steps, full.steps);
    EXPECT_EQ(finished.cg_iterations, full.cg_iterations);
    EXPECT_EQ(steps_taken, full.steps - stop_after);
    EXPECT_EQ(theta, reference) << "stopped after " << stop_after;
    EXPECT_EQ(finished.value, full.value);
  }
  EXPECT_TRUE(stopped_damped);
}

}  // namespace
}  // namespace fluence
