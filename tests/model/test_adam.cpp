// Adam on a model's gradients (model/adam.hpp) against Kingma & Ba 2015's update written out: the
// first step moves every parameter by the step size against the sign of its gradient (m^ = g,
// v^ = g^2), two full-batch steps equal the bias-corrected recursion computed here from the
// model's gradients, a mini-batch run is deterministic in its stream and lowers the loss.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/lia/purposes.hpp"
#include "fluence/model/adam.hpp"
#include "fluence/model/network.hpp"

namespace fluence {
namespace {

struct Problem {
  Network network{NetworkSpec::mlp(4, {5}, Activation::tanh, 3, true), 3, 0.0};
  std::vector<double> x;
  std::vector<std::int32_t> y;
  std::vector<double> theta;
  std::size_t rows = 40;

  Problem() {
    std::mt19937_64 engine(3);
    std::normal_distribution<double> normal;
    for (std::size_t r = 0; r < rows; ++r) {
      for (int j = 0; j < 4; ++j) x.push_back(normal(engine));
      y.push_back(static_cast<std::int32_t>((x[r * 4] > 0) + (x[r * 4 + 1] > 0.5)));
    }
    theta.resize(network.parameters());
    for (auto& value : theta) value = 0.5 * normal(engine);
  }
  double loss(const std::vector<double>& at) const {
    Workspace work;
    return network.loss_sum(x.data(), y.data(), rows, at.data(), work).loss_sum / rows;
  }
};

TEST(Adam, FirstStepMovesEveryParameterByTheStepSize) {
  Problem problem;
  AdamSettings settings;
  settings.epochs = 1;
  settings.batch_size = static_cast<int>(problem.rows);  // one full-batch step
  settings.learning_rate = 0.01;
  settings.l2 = 0.1;
  std::vector<double> gradient(problem.theta.size()), theta = problem.theta;
  Workspace work;
  problem.network.gradient_sum(problem.x.data(), problem.y.data(), problem.rows,
                               problem.theta.data(), gradient.data(), work);
  Stream stream(1, purpose::lia_body);
  adam_fit(problem.network, problem.x.data(), problem.y.data(), problem.rows, settings, stream,
           theta.data(), work);
  for (std::size_t q = 0; q < theta.size(); ++q) {
    const double g = gradient[q] / problem.rows + settings.l2 * problem.theta[q];
    // lr g / (|g| + 1e-8): within 1e-8 / |g| relative of lr sign(g).
    EXPECT_NEAR(theta[q] - problem.theta[q], -settings.learning_rate * g / (std::abs(g) + 1e-8),
                1e-15)
        << q;
  }
}

TEST(Adam, FullBatchStepsFollowTheBiasCorrectedRecursion) {
  Problem problem;
  AdamSettings settings;
  settings.epochs = 2;
  settings.batch_size = 1000;  // clamped to the rows: full batches, order irrelevant
  settings.learning_rate = 0.05;
  settings.l2 = 0.01;
  std::vector<double> theta = problem.theta, reference = problem.theta;
  Workspace work;
  Stream stream(2, purpose::lia_body);
  adam_fit(problem.network, problem.x.data(), problem.y.data(), problem.rows, settings, stream,
           theta.data(), work);
  const std::size_t p = theta.size();
  std::vector<double> m(p, 0.0), v(p, 0.0), g(p);
  for (int t = 1; t <= 2; ++t) {
    problem.network.gradient_sum(problem.x.data(), problem.y.data(), problem.rows, reference.data(),
                                 g.data(), work);
    for (std::size_t q = 0; q < p; ++q) {
      const double gradient = g[q] / problem.rows + settings.l2 * reference[q];
      m[q] = 0.9 * m[q] + 0.1 * gradient;
      v[q] = 0.999 * v[q] + 0.001 * gradient * gradient;
      const double m_hat = m[q] / (1 - std::pow(0.9, t)), v_hat = v[q] / (1 - std::pow(0.999, t));
      reference[q] -= settings.learning_rate * m_hat / (std::sqrt(v_hat) + 1e-8);
    }
  }
  // The implementation folds the corrections into the rate: rounding only.
  for (std::size_t q = 0; q < p; ++q) EXPECT_NEAR(theta[q], reference[q], 1e-14) << q;
}

TEST(Adam, MiniBatchesAreDeterministicAndLowerTheLoss) {
  Problem problem;
  AdamSettings settings;
  settings.epochs = 20;
  settings.batch_size = 8;
  settings.learning_rate = 0.02;
  auto run = [&](std::uint64_t seed) {
    std::vector<double> theta = problem.theta;
    Workspace work;
    Stream stream(seed, purpose::lia_body);
    adam_fit(problem.network, problem.x.data(), problem.y.data(), problem.rows, settings, stream,
             theta.data(), work);
    return theta;
  };
  const auto a = run(7), b = run(7), c = run(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);  // another shuffle, other batches
  // 100 steps on 40 rows whose labels are a function of the inputs: measured 1.45 -> 0.40 (mean
  // cross-entropy); a step in the wrong direction would raise it, half is a wide margin.
  EXPECT_LT(problem.loss(a), 0.5 * problem.loss(problem.theta));
}

TEST(Adam, RefusesSettingsOutOfRange) {
  Problem problem;
  Workspace work;
  Stream stream(1, purpose::lia_body);
  AdamSettings settings;
  settings.learning_rate = 0.0;
  EXPECT_THROW(adam_fit(problem.network, problem.x.data(), problem.y.data(), problem.rows, settings,
                        stream, problem.theta.data(), work),
               InputError);
  EXPECT_THROW(adam_fit(problem.network, problem.x.data(), problem.y.data(), 0, AdamSettings{},
                        stream, problem.theta.data(), work),
               InputError);
}

}  // namespace
}  // namespace fluence
