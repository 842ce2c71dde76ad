// The PLD and PRV accountants against closed forms (the Gaussian mechanism, one subsampled step),
// Opacus's published PRV value, and the RDP bound (docs/math.md §7.1, §7.2).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/privacy/pld_accountant.hpp"
#include "fluence/privacy/prv_accountant.hpp"
#include "fluence/privacy/rdp_accountant.hpp"

namespace fluence {
namespace {

// log Phi-bar(x), written here independently of the accountants: erfc where it is representable,
// else its asymptotic series e^{-y^2} / (y sqrt(pi)) (1 - 1/(2y^2) + 3/(4y^4)), y = x / sqrt(2).
double log_upper_tail(double x) {
  const double y = x / std::sqrt(2.0);
  if (y < 20.0) return std::log(0.5 * std::erfc(y));
  const double r = 1.0 / (y * y);
  return std::log(0.5) - y * y - std::log(y * std::sqrt(M_PI)) +
         std::log1p(-0.5 * r + 0.75 * r * r);
}

// Balle & Wang 2018 Theorem 8: the Gaussian mechanism with sensitivity 1 and noise s has
// delta(eps) = Phi(-eps s + 1/(2s)) - e^eps Phi(-eps s - 1/(2s)); returned as log delta, with the
// second term taken relative to the first so that eps in the thousands does not overflow.
double log_gaussian_delta(double eps, double s) {
  const double a = eps * s - 0.5 / s, b = eps * s + 0.5 / s;
  const double first = log_upper_tail(a);
  return first + std::log(-std::expm1(eps + log_upper_tail(b) - first));
}

// The smallest eps with delta(eps) <= delta for a decreasing log delta(eps): bisection.
template <class LogDelta>
double solve_eps(LogDelta&& log_delta, double delta) {
  double low = 0.0, high = 1.0;
  while (log_delta(high) > std::log(delta)) high *= 2.0;
  for (int i = 0; i < 200 && high - low > 1e-12 * high; ++i) {
    const double middle = 0.5 * (low + high);
    (log_delta(middle) > std::log(delta) ? low : high) = middle;
  }
  return high;
}

double gaussian_eps(double s, double delta) {
  return solve_eps([&](double eps) { return log_gaussian_delta(eps, s); }, delta);
}

double pld_eps(double q, double z, long steps, double delta) {
  PldAccountant accountant;
  accountant.add_steps(q, z, steps);
  return accountant.epsilon(delta).epsilon;
}

// (a) q = 1: T steps at noise z are one Gaussian mechanism with s = z / sqrt(T). Tolerance 1e-3
// absolute in eps (the brief's): connect-the-dots is pessimistic, so PLD's eps may exceed the
// exact one by its discretization error (~ T h^2 / 12, below 1e-3 with the automatic mesh) and
// must not fall below it by more than the floating-point noise of the FFT (1e-9).
TEST(PldAccountant, FullBatchIsTheGaussianMechanism) {
  struct Case {
    double z;
    long steps;
    double delta;
  };
  const Case cases[] = {{0.5, 1, 1e-5},    {1.0, 1, 1e-9},     {2.0, 1, 1e-4},
                        {5.0, 1, 1e-6},    {0.8, 10, 1e-5},    {3.0, 10, 1e-9},
                        {1.0, 100, 1e-6},  {5.0, 100, 1e-4},   {2.0, 1000, 1e-5},
                        {5.0, 1000, 1e-9}, {4.0, 10000, 1e-5}, {5.0, 100000, 1e-7}};
  double worst = 0.0;
  for (const Case& c : cases) {
    const double exact = gaussian_eps(c.z / std::sqrt(static_cast<double>(c.steps)), c.delta);
    const double pld = pld_eps(1.0, c.z, c.steps, c.delta);
    worst = std::max(worst, std::abs(pld - exact));
    EXPECT_LE(pld, exact + 1e-3) << c.z << " " << c.steps << " " << c.delta;
    EXPECT_GE(pld, exact - 1e-9) << c.z << " " << c.steps << " " << c.delta;
  }
  RecordProperty("max_abs_error", std::to_string(worst));
  std::printf("[ PLD (a) ] max |eps_PLD - eps_exact| = %.3g\n", worst);
}

double normal_cdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

// One step of the subsampled Gaussian mechanism from the definition delta(eps) = P(L > eps) -
// e^eps Q(L > eps), written out for both directions of the adjacency (the loss is monotone in x,
// so L > eps is a half-line x > x* (remove) or x < x* (add)); the larger of the two.
double log_subsampled_delta(double q, double z, double eps) {
  double remove = -std::expm1(eps);  // every x counts below log(1 - q)
  if (std::exp(eps) - 1.0 + q > 0.0) {
    const double x = z * z * std::log((std::exp(eps) - 1.0 + q) / q) + 0.5;
    remove = (1.0 - q) * normal_cdf(-x / z) + q * normal_cdf((1.0 - x) / z) -
             std::exp(eps) * normal_cdf(-x / z);
  }
  double add = 0.0;  // the add direction's loss is below -log(1 - q)
  if (std::exp(-eps) - 1.0 + q > 0.0) {
    const double x = z * z * std::log((std::exp(-eps) - 1.0 + q) / q) + 0.5;
    add = normal_cdf(x / z) -
          std::exp(eps) * ((1.0 - q) * normal_cdf(x / z) + q * normal_cdf((x - 1.0) / z));
  }
  return std::log(std::max({remove, add, 1e-300}));
}

// (b) One step at q < 1 against the closed form above; tolerance 1e-3 in eps as in (a) (one step's
// connect-the-dots error is below h * (the knot spacing), h <= 1/128, and in practice ~ 1e-4).
TEST(PldAccountant, OneSubsampledStepMatchesTheClosedForm) {
  struct Case {
    double q, z, delta;
  };
  const Case cases[] = {{1e-4, 0.5, 1e-5}, {1e-3, 0.5, 1e-9}, {1e-3, 1.0, 1e-6}, {0.01, 1.0, 1e-5},
                        {0.01, 2.0, 1e-9}, {0.05, 0.8, 1e-4}, {0.1, 3.0, 1e-6},  {0.2, 1.5, 1e-7},
                        {0.5, 5.0, 1e-5},  {0.5, 0.5, 1e-9}};
  double worst = 0.0;
  for (const Case& c : cases) {
    const double exact =
        solve_eps([&](double eps) { return log_subsampled_delta(c.q, c.z, eps); }, c.delta);
    const double pld = pld_eps(c.q, c.z, 1, c.delta);
    worst = std::max(worst, std::abs(pld - exact));
    EXPECT_GT(exact, 0.0);
    EXPECT_LE(pld, exact + 1e-3) << c.q << " " << c.z << " " << c.delta;
    EXPECT_GE(pld, exact - 1e-9) << c.q << " " << c.z << " " << c.delta;
  }
  std::printf("[ PLD (b) ] max |eps_PLD - eps_exact| = %.3g\n", worst);
}

// (c) Opacus's PRV accountant test: z = 1.5, q = 0.04, 2249 steps, delta = 1e-5 gives
// eps = 6.777395712150674 (its upper estimate at eps_error = 0.01, so the true eps is within 0.02
// below it). PLD is an upper bound that is tighter than that estimate and within 0.011 of it; our
// PRV bracket contains PLD's value; RDP is looser than both. Opacus's RDP test quotes 7.3291 for
// this case at 2250 steps (90 / 0.04), not the PRV test's int(90 // 0.04) = 2249: Fluence's RDP
// gives 7.329111 at 2250 steps (to 1e-4 of the published 7.3291) and 7.327278 at 2249.
TEST(PldAccountant, OpacusPublishedCase) {
  const double q = 0.04, z = 1.5, delta = 1e-5, opacus = 6.777395712150674;
  const long steps = 2249;
  const double pld = pld_eps(q, z, steps, delta);
  PrvAccountant prv;
  prv.add_steps(q, z, steps);
  const EpsilonReport bracket = prv.epsilon(delta);
  const double rdp = dp_sgd_epsilon(q, z, steps, delta).epsilon;
  std::printf("[ Opacus ] PLD %.6f, PRV [%.6f, %.6f, %.6f], RDP %.6f\n", pld, bracket.lower,
              bracket.estimate, bracket.upper, rdp);
  EXPECT_LE(pld, opacus);
  EXPECT_GE(pld, opacus - 0.011);
  EXPECT_LE(bracket.lower, pld);
  EXPECT_GE(bracket.upper, pld);
  EXPECT_EQ(bracket.epsilon, bracket.upper);
  EXPECT_NEAR(rdp, 7.327278, 1e-6);
  EXPECT_NEAR(dp_sgd_epsilon(q, z, 2250, delta).epsilon, 7.3291, 1e-4);
  EXPECT_LT(pld, rdp);
  EXPECT_LT(bracket.upper, rdp);
}

// (d) PLD never exceeds RDP (both are upper bounds, PLD the tight one; 1e-9 for rounding), and
// PRV's bracket contains PLD's value where PRV's mesh is feasible (it refuses meshes of more than
// 2^25 points with an InputError, as Opacus refuses them: those cases are skipped, and counted).
TEST(PldAccountant, NeverAboveRdpAndInsidePrvBracket) {
  struct Case {
    double q, z;
    long steps;
    double delta;
  };
  const Case cases[] = {
      {1e-4, 0.5, 1, 1e-5},      {1e-4, 1.0, 20000, 1e-9}, {1e-4, 5.0, 10000, 1e-6},
      {1e-3, 0.5, 1000, 1e-5},   {1e-3, 1.0, 10000, 1e-7}, {1e-3, 2.0, 10000, 1e-9},
      {0.01, 0.5, 100, 1e-4},    {0.01, 0.8, 1000, 1e-6},  {0.01, 1.0, 10000, 1e-5},
      {0.01, 3.0, 100000, 1e-8}, {0.02, 1.2, 5000, 1e-5},  {0.05, 0.7, 10, 1e-9},
      {0.05, 2.0, 1000, 1e-5},   {0.1, 1.0, 1, 1e-4},      {0.1, 1.0, 100, 1e-6},
      {0.1, 5.0, 10000, 1e-5},   {0.2, 0.6, 50, 1e-5},     {0.3, 3.0, 300, 1e-9},
      {0.5, 2.0, 10, 1e-7},      {0.5, 5.0, 1000, 1e-5},   {0.5, 0.5, 1, 1e-9},
  };
  int skipped = 0;
  for (const Case& c : cases) {
    const double pld = pld_eps(c.q, c.z, c.steps, c.delta);
    const double rdp = dp_sgd_epsilon(c.q, c.z, c.steps, c.delta).epsilon;
    EXPECT_LE(pld, rdp + 1e-9) << c.q << " " << c.z << " " << c.steps << " " << c.delta;
    PrvAccountant prv;
    prv.add_steps(c.q, c.z, c.steps);
    try {
      const EpsilonReport bracket = prv.epsilon(c.delta);
      EXPECT_LE(bracket.lower, pld) << c.q << " " << c.z << " " << c.steps << " " << c.delta;
      EXPECT_GE(bracket.upper, pld) << c.q << " " << c.z << " " << c.steps << " " << c.delta;
    } catch (const InputError&) {
      ++skipped;
    }
  }
  std::printf("[ PLD (d) ] %d of %zu PRV cases beyond its mesh limit\n", skipped, std::size(cases));
  EXPECT_LE(skipped, 4);
}

// (e) Two phases at q = 1 are one Gaussian mechanism with 1/s^2 = T1/z1^2 + T2/z2^2 (tolerance as
// in (a)); a restored state answers bitwise the same; eps falls with z and grows with T.
TEST(PldAccountant, HeterogeneousPhasesRestoreAndMonotonicity) {
  PldAccountant accountant;
  accountant.add_steps(1.0, 1.0, 50);
  accountant.add_steps(1.0, 3.0, 200);
  const double s = 1.0 / std::sqrt(50.0 + 200.0 / 9.0);
  const double exact = gaussian_eps(s, 1e-6), pld = accountant.epsilon(1e-6).epsilon;
  EXPECT_LE(pld, exact + 1e-3);
  EXPECT_GE(pld, exact - 1e-9);

  PldAccountant run;
  run.add_steps(0.01, 1.0, 300);
  run.add_steps(0.01, 1.0, 700);  // merges with the phase before
  run.add_steps(0.02, 1.3, 500);
  EXPECT_EQ(run.state().size(), 6u);
  PldAccountant restored;
  restored.restore(run.state());
  EXPECT_EQ(restored.epsilon(1e-5).epsilon, run.epsilon(1e-5).epsilon);
  PrvAccountant prv_run;
  prv_run.add_steps(0.01, 1.0, 1000);
  PrvAccountant prv_restored;
  prv_restored.restore(prv_run.state());
  EXPECT_EQ(prv_restored.epsilon(1e-5).upper, prv_run.epsilon(1e-5).upper);

  double previous = INFINITY;
  for (double z : {0.6, 0.9, 1.3, 2.0}) {
    const double eps = pld_eps(0.01, z, 1000, 1e-5);
    EXPECT_LE(eps, previous);
    previous = eps;
  }
  previous = 0.0;
  for (long steps : {10L, 100L, 1000L, 4000L}) {
    const double eps = pld_eps(0.01, 1.0, steps, 1e-5);
    EXPECT_GE(eps, previous);
    previous = eps;
  }
  // Steps that add nothing; no noise.
  PldAccountant empty;
  empty.add_steps(0.0, 1.0, 100);
  empty.add_steps(0.5, 1.0, 0);
  EXPECT_EQ(empty.epsilon(1e-5).epsilon, 0.0);
  empty.add_steps(0.5, 0.0, 1);
  EXPECT_EQ(empty.epsilon(1e-5).epsilon, INFINITY);
  PrvAccountant noiseless;
  noiseless.add_steps(0.5, 0.0, 1);
  EXPECT_EQ(noiseless.epsilon(1e-5).epsilon, INFINITY);
}

// (f) Bad inputs.
TEST(PldAccountant, BadInputsThrow) {
  PldAccountant pld;
  PrvAccountant prv;
  for (Accountant* a : {static_cast<Accountant*>(&pld), static_cast<Accountant*>(&prv)}) {
    EXPECT_THROW(a->add_steps(-0.1, 1.0, 1), InputError);
    EXPECT_THROW(a->add_steps(1.5, 1.0, 1), InputError);
    EXPECT_THROW(a->add_steps(0.1, -1.0, 1), InputError);
    EXPECT_THROW(a->add_steps(0.1, NAN, 1), InputError);
    EXPECT_THROW(a->add_steps(0.1, 1.0, -1), InputError);
    EXPECT_THROW(a->epsilon(0.0), InputError);
    EXPECT_THROW(a->epsilon(1.0), InputError);
    EXPECT_THROW(a->restore({0.1, 1.0}), InputError);
    EXPECT_THROW(a->restore({0.1, 1.0, 2.5}), InputError);
    EXPECT_THROW(a->restore({2.0, 1.0, 3.0}), InputError);
  }
  EXPECT_THROW(PldAccountant(-1.0), InputError);
  EXPECT_EQ(pld.name(), "pld");
  EXPECT_EQ(prv.name(), "prv");
}

}  // namespace
}  // namespace fluence
