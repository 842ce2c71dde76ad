// Stops inside a CG solve (core/krylov.hpp, docs/operations.md "Stops inside a unit"): a solve
// interrupted by its stop poll and continued by a fresh solver from the saved state (as a
// restarted run does) ends in the same bits as the uninterrupted PETSc KSPCG solve, with the same
// iteration count, and the continuation applies the operator only for the iterations left (so a
// solve redone from the start, which would give the same bits too, fails the test).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/core/krylov.hpp"

namespace fluence {
namespace {

// A = Q diag(1 .. 1e4, geometric) Q^T with a random orthogonal Q (Householder): CG needs tens of
// iterations to 1e-12, so there is an inside to stop in.
std::vector<double> ill_conditioned(std::size_t n, unsigned seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<double> normal;
  std::vector<double> v(n), a(n * n, 0.0);
  for (auto& value : v) value = normal(engine);
  double vv = 0.0;
  for (double value : v) vv += value * value;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (std::size_t k = 0; k < n; ++k) {
        const double qik = (i == k ? 1.0 : 0.0) - 2.0 * v[i] * v[k] / vv;
        const double qjk = (j == k ? 1.0 : 0.0) - 2.0 * v[j] * v[k] / vv;
        sum += qik * std::pow(1e4, static_cast<double>(k) / static_cast<double>(n - 1)) * qjk;
      }
      a[i * n + j] = sum;
    }
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) a[j * n + i] = a[i * n + j];
  return a;
}

struct Counted {
  std::vector<double> a;
  std::size_t n;
  long products = 0;
  LinearOperator op() {
    LinearOperator result;
    result.size = n;
    result.apply = [this](const double* v, double* out) {
      ++products;
      for (std::size_t i = 0; i < n; ++i) {
        out[i] = 0.0;
        for (std::size_t j = 0; j < n; ++j) out[i] += a[i * n + j] * v[j];
      }
    };
    result.diagonal = [this](double* out) {
      for (std::size_t i = 0; i < n; ++i) out[i] = a[i * n + i];
    };
    return result;
  }
};

bool same_bits(const std::vector<double>& x, const std::vector<double>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
}

TEST(ConjugateGradientStops, AnInterruptedSolveContinuesToTheSameBits) {
  const std::size_t n = 40;
  Counted system{ill_conditioned(n, 5), n};
  std::vector<double> b(n), guess(n);
  for (std::size_t i = 0; i < n; ++i) {
    b[i] = std::cos(0.3 + static_cast<double>(i));
    guess[i] = 0.01 * std::sin(static_cast<double>(i));
  }
  for (auto kind : {CgPreconditioner::none, CgPreconditioner::jacobi}) {
    for (bool initial_guess : {false, true}) {
      CgSettings settings;
      settings.prefix = "test_cg_";
      settings.rtol = 1e-12;
      settings.preconditioner = kind;
      settings.initial_guess = initial_guess;
      const auto start = [&] { return initial_guess ? guess : std::vector<double>(n, 0.0); };
      ConjugateGradient reference_cg(system.op(), settings);
      std::vector<double> reference = start();
      const CgOutcome full = reference_cg.solve(b.data(), reference.data());
      ASSERT_TRUE(full.converged);
      ASSERT_GT(full.iterations, 20);

      // Stopped twice: the poll says stop at its 7th call (the convergence test of iteration 7),
      // the solve ends after iteration 8; the continuation is stopped again 5 iterations later.
      ConjugateGradient first(system.op(), settings);
      int polls = 0;
      ASSERT_TRUE(first.set_stop_poll([&] { return ++polls == 7; }));
      std::vector<double> x = start();
      const CgOutcome stopped = first.solve(b.data(), x.data());
      ASSERT_TRUE(stopped.interrupted);
      EXPECT_FALSE(stopped.converged);
      const std::vector<double> state = first.interrupted_state();
      EXPECT_EQ(ConjugateGradient::interrupted_iterations(state), 8);

      ConjugateGradient second(system.op(), settings);
      polls = 0;
      ASSERT_TRUE(second.set_stop_poll([&] { return ++polls == 5; }));
      second.resume_next(state);
      std::vector<double> y(n, 0.0);
      const CgOutcome stopped_again = second.solve(b.data(), y.data());
      ASSERT_TRUE(stopped_again.interrupted);
      const std::vector<double> state2 = second.interrupted_state();
      EXPECT_EQ(ConjugateGradient::interrupted_iterations(state2), 8 + 6);

      ConjugateGradient third(system.op(), settings);
      ASSERT_TRUE(third.set_stop_poll([] { return false; }));
      third.resume_next(state2);
      std::vector<double> z(n, 0.0);
      system.products = 0;
      const CgOutcome finished = third.solve(b.data(), z.data());
      EXPECT_TRUE(finished.converged);
      EXPECT_FALSE(finished.interrupted);
      EXPECT_EQ(finished.iterations, full.iterations);
      // Only the iterations left: one product each (a solve from the start needs them all).
      EXPECT_EQ(system.products, full.iterations - 14);
      EXPECT_TRUE(same_bits(z, reference))
          << "preconditioner " << static_cast<int>(kind) << ", initial guess " << initial_guess;
    }
  }
}

// A poll that never says stop changes nothing; a solver without a resumable configuration
// (-<prefix>ksp_type other than cg) refuses the poll.
TEST(ConjugateGradientStops, APollThatNeverStopsLeavesTheSolveAsItWas) {
  const std::size_t n = 30;
  Counted system{ill_conditioned(n, 9), n};
  std::vector<double> b(n, 1.0);
  CgSettings settings;
  settings.prefix = "test_cg_";
  settings.rtol = 1e-12;
  ConjugateGradient plain(system.op(), settings);
  std::vector<double> x(n, 0.0), y(n, 0.0);
  const CgOutcome a = plain.solve(b.data(), x.data());
  ConjugateGradient polled(system.op(), settings);
  int polls = 0;
  ASSERT_TRUE(polled.set_stop_poll([&] { return ++polls < 0; }));
  const CgOutcome c = polled.solve(b.data(), y.data());
  EXPECT_EQ(a.iterations, c.iterations);
  EXPECT_EQ(polls, a.iterations - 1);  // every iteration but the converged last
  EXPECT_TRUE(same_bits(x, y));
  EXPECT_THROW(polled.resume_next(std::vector<double>(3, 0.0)), InputError);
}

}  // namespace
}  // namespace fluence
