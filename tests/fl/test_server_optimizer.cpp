// Server optimizers against Reddi et al. 2021's Algorithm 2 (and FedAvgM) re-derived here
// coordinate by coordinate, the identity of sgd at eta = 1, checkpoint state, and the registry.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/fl/server_optimizer.hpp"

namespace fluence {
namespace {

// Three rounds of aggregate steps for p = 5 coordinates, with signs and magnitudes that make
// yogi's sign(v - Delta^2) take both values.
const std::vector<std::vector<double>> kDeltas = {
    {0.5, -0.2, 1e-4, 3.0, -0.05}, {0.4, 0.1, -2e-4, -1.0, 0.3}, {-0.1, 0.2, 5e-4, 2.5, 0.01}};

// The optimizer's thetas after each round, starting from theta_0.
std::vector<std::vector<double>> run(const ServerOptimizerConfig& config,
                                     std::vector<double> theta) {
  auto optimizer = make_server_optimizer(config, theta.size());
  std::vector<std::vector<double>> out;
  for (const auto& delta : kDeltas) {
    const std::vector<double> before = theta;
    for (std::size_t i = 0; i < theta.size(); ++i) theta[i] += delta[i];
    optimizer->step(before, theta);
    out.push_back(theta);
  }
  return out;
}

// Reddi et al. 2021, Algorithm 2 (and momentum), one coordinate at a time, written from the paper.
std::vector<std::vector<double>> reference(const ServerOptimizerConfig& c,
                                           std::vector<double> theta) {
  std::vector<double> m(theta.size(), 0.0), v(theta.size(), c.tau * c.tau);
  std::vector<std::vector<double>> out;
  for (const auto& delta : kDeltas) {
    for (std::size_t i = 0; i < theta.size(); ++i) {
      const double d = delta[i];
      if (c.name == "momentum") {
        m[i] = c.beta1 * m[i] + d;
        theta[i] += c.learning_rate * m[i];
        continue;
      }
      m[i] = c.beta1 * m[i] + (1 - c.beta1) * d;
      if (c.name == "adagrad") v[i] = v[i] + d * d;
      if (c.name == "adam") v[i] = c.beta2 * v[i] + (1 - c.beta2) * d * d;
      if (c.name == "yogi") {
        const double sign = v[i] > d * d ? 1.0 : (v[i] < d * d ? -1.0 : 0.0);
        v[i] = v[i] - (1 - c.beta2) * d * d * sign;
      }
      theta[i] += c.learning_rate * m[i] / (std::sqrt(v[i]) + c.tau);
    }
    out.push_back(theta);
  }
  return out;
}

// The optimizers apply the same formulas to theta_before + Delta, so they agree with the
// reference to rounding: each step adds a few ulps of |theta| (the Delta recovered as
// theta - theta_before loses up to one ulp of theta); 1e-12 absolute on values of order 1.
TEST(ServerOptimizer, MatchesReddiEtAlAlgorithm2) {
  const std::vector<double> theta0 = {0.3, -1.2, 0.0, 2.0, 0.7};
  for (const char* name : {"momentum", "adagrad", "adam", "yogi"}) {
    ServerOptimizerConfig config;
    config.name = name;
    config.learning_rate = 0.3;
    config.beta1 = 0.8;
    config.beta2 = 0.95;
    config.tau = 0.01;
    const auto got = run(config, theta0), want = reference(config, theta0);
    for (std::size_t t = 0; t < want.size(); ++t)
      for (std::size_t i = 0; i < theta0.size(); ++i)
        EXPECT_NEAR(got[t][i], want[t][i], 1e-12) << name << " round " << t << " coordinate " << i;
  }
  // Yogi differs from Adam exactly where v < Delta^2 (v grows by (1 - beta2) Delta^2 instead of
  // moving toward it), as for the fourth coordinate in the second round: the steps must differ.
  ServerOptimizerConfig adam;
  adam.name = "adam";
  ServerOptimizerConfig yogi = adam;
  yogi.name = "yogi";
  EXPECT_NE(run(adam, theta0)[1][3], run(yogi, theta0)[1][3]);
}

TEST(ServerOptimizer, SgdAtUnitRateIsThePlainRoundBitForBit) {
  ServerOptimizerConfig config;  // "sgd", eta = 1
  const auto optimizer = make_server_optimizer(config, 3);
  EXPECT_TRUE(optimizer->identity());
  std::vector<double> theta = {0.1 + 0.2, 1e-300, -7.0};
  const std::vector<double> before = {1.0, 2.0, 3.0}, copy = theta;
  optimizer->step(before, theta);
  EXPECT_EQ(theta, copy);
  config.learning_rate = 0.5;
  const auto half = make_server_optimizer(config, 3);
  EXPECT_FALSE(half->identity());
  std::vector<double> moved = {3.0, 2.0, 1.0};
  half->step(before, moved);
  EXPECT_EQ(moved, (std::vector<double>{2.0, 2.0, 2.0}));
}

// A checkpoint restores the moments: two rounds, state(), a fresh optimizer restored from it
// takes the third step bitwise as the original does.
TEST(ServerOptimizer, RestoredStateContinuesBitwise) {
  for (const char* name : {"momentum", "adagrad", "adam", "yogi"}) {
    ServerOptimizerConfig config;
    config.name = name;
    auto first = make_server_optimizer(config, 5);
    std::vector<double> theta(5, 0.25);
    for (std::size_t t = 0; t < 2; ++t) {
      const auto before = theta;
      for (std::size_t i = 0; i < 5; ++i) theta[i] += kDeltas[t][i];
      first->step(before, theta);
    }
    auto second = make_server_optimizer(config, 5);
    second->restore(first->state());
    auto a = theta, b = theta;
    for (std::size_t i = 0; i < 5; ++i) a[i] = b[i] = theta[i] + kDeltas[2][i];
    first->step(theta, a);
    second->step(theta, b);
    EXPECT_EQ(a, b) << name;
    EXPECT_THROW(second->restore(std::vector<double>(3, 0.0)), InputError) << name;
  }
}

// A new optimizer is one class and one registration; an unknown name lists the registered ones.
class HalfStep final : public ServerOptimizer {
 public:
  std::string_view name() const override { return "half_step_test"; }
  void step(const std::vector<double>& before, std::vector<double>& theta) override {
    for (std::size_t i = 0; i < theta.size(); ++i) theta[i] = 0.5 * (before[i] + theta[i]);
  }
  std::vector<double> state() const override { return {}; }
  void restore(const std::vector<double>&) override {}
};

TEST(ServerOptimizer, RegistryTakesANewOptimizerAndNamesTheAllowedOnes) {
  register_server_optimizer(
      {"half_step_test", "a test optimizer", [](const ServerOptimizerConfig&, std::size_t) {
         return std::unique_ptr<ServerOptimizer>(new HalfStep());
       }});
  ServerOptimizerConfig config;
  config.name = "half_step_test";
  auto optimizer = make_server_optimizer(config, 2);
  std::vector<double> theta = {4.0, 0.0};
  optimizer->step({2.0, 2.0}, theta);
  EXPECT_EQ(theta, (std::vector<double>{3.0, 1.0}));
  config.name = "adamw";
  try {
    make_server_optimizer(config, 2);
    FAIL() << "an unknown optimizer was accepted";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("federation.server_optimizer = \"adamw\""), std::string::npos);
    EXPECT_NE(message.find("\"yogi\""), std::string::npos);
    EXPECT_NE(message.find("\"half_step_test\""), std::string::npos);
  }
}

}  // namespace
}  // namespace fluence
