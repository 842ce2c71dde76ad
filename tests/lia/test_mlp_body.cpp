// The MLP body against independent computations: central finite differences of the loss for the
// backpropagated gradient, a naive per-row loop for the transform, linearity over row chunks for
// the chunked passes; training on data no linear model separates; bitwise determinism per stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/lia/mlp_body.hpp"

namespace fluence::lia {
namespace {

struct Data {
  std::size_t rows;
  int features;  // including the trailing constant-1 column
  std::vector<double> x;
  std::vector<std::int32_t> y;
};

// Standard normal inputs with a bias column and uniform labels.
Data random_data(std::size_t rows, int inputs, int classes, std::uint64_t seed) {
  Stream stream(seed, Purpose::synthetic_rows);
  Data d{rows, inputs + 1, {}, {}};
  for (std::size_t r = 0; r < rows; ++r) {
    for (int j = 0; j < inputs; ++j) d.x.push_back(stream.normal());
    d.x.push_back(1.0);
    d.y.push_back(static_cast<std::int32_t>(stream.below(classes)));
  }
  return d;
}

// XOR: four Gaussian clusters at (+-1, +-1), the label is whether the signs agree. No linear
// classifier does better than about 3/4 on it; one ReLU layer separates it.
Data xor_data(std::size_t rows, std::uint64_t seed) {
  Stream stream(seed, Purpose::synthetic_rows);
  Data d{rows, 3, {}, {}};
  for (std::size_t r = 0; r < rows; ++r) {
    const double s1 = stream.below(2) ? 1.0 : -1.0, s2 = stream.below(2) ? 1.0 : -1.0;
    d.x.push_back(s1 + 0.2 * stream.normal());
    d.x.push_back(s2 + 0.2 * stream.normal());
    d.x.push_back(1.0);
    d.y.push_back(s1 == s2 ? 1 : 0);
  }
  return d;
}

// Three concentric rings (radius 0.5, 1.5, 2.5, +-0.25): class = ring; three classes, not
// linearly separable.
Data ring_data(std::size_t rows, std::uint64_t seed) {
  Stream stream(seed, Purpose::synthetic_rows);
  Data d{rows, 3, {}, {}};
  for (std::size_t r = 0; r < rows; ++r) {
    const int c = static_cast<int>(stream.below(3));
    const double radius = 0.5 + c + 0.5 * (stream.uniform() - 0.5);
    const double angle = 2.0 * std::numbers::pi * stream.uniform();
    d.x.push_back(radius * std::cos(angle));
    d.x.push_back(radius * std::sin(angle));
    d.x.push_back(1.0);
    d.y.push_back(c);
  }
  return d;
}

// A body with every weight random, biases included (initialize() leaves them 0).
MlpBody random_body(int features, int classes, int hidden, std::uint64_t seed) {
  Stream stream(seed, Purpose::synthetic_model);
  std::vector<double> w1(static_cast<std::size_t>(hidden) * features);
  std::vector<double> w2(static_cast<std::size_t>(classes) * (hidden + 1));
  for (auto& v : w1) v = stream.normal();
  for (auto& v : w2) v = stream.normal();
  return MlpBody(features, classes, hidden, std::move(w1), std::move(w2));
}

// Central differences with h = 1e-5: truncation error h^2/6 |f'''| ~ 1e-11 and rounding error
// ~ eps |f| / h ~ 1e-11 for losses of order 1, so 1e-8 absolute + 1e-6 relative leaves a margin of
// several hundred while any wrong term (a missing mask, a transposed product, the bias column)
// produces errors of order 1e-2 or more.
TEST(MlpBody, GradientMatchesCentralFiniteDifferences) {
  const int inputs = 3, classes = 3, hidden = 5;
  const Data d = random_data(7, inputs, classes, 41);
  const MlpBody body = random_body(d.features, classes, hidden, 42);
  const double h = 1e-5;

  // Finite differences are only valid away from the ReLU kinks: a perturbation of W1 moves a
  // pre-activation by at most h max|x|, so every pre-activation must be farther than that from 0.
  double min_pre = 1e300, max_x = 0.0;
  for (double v : d.x) max_x = std::max(max_x, std::abs(v));
  for (std::size_t r = 0; r < d.rows; ++r)
    for (int k = 0; k < hidden; ++k) {
      double z = 0.0;
      for (int j = 0; j < d.features; ++j)
        z += d.x[r * d.features + j] * body.w1()[k * d.features + j];
      min_pre = std::min(min_pre, std::abs(z));
    }
  ASSERT_GT(min_pre, 100 * h * max_x);

  std::vector<double> g1(body.w1().size()), g2(body.w2().size());
  const double loss = body.gradient(d.x.data(), d.y.data(), d.rows, g1.data(), g2.data());
  EXPECT_NEAR(loss, body.loss(d.x.data(), d.y.data(), d.rows), 1e-14);

  auto loss_with = [&](bool first_layer, std::size_t i, double delta) {
    std::vector<double> w1 = body.w1(), w2 = body.w2();
    (first_layer ? w1 : w2)[i] += delta;
    const MlpBody moved(d.features, classes, hidden, std::move(w1), std::move(w2));
    return moved.loss(d.x.data(), d.y.data(), d.rows);
  };
  for (bool first_layer : {true, false}) {
    const std::vector<double>& g = first_layer ? g1 : g2;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double fd = (loss_with(first_layer, i, h) - loss_with(first_layer, i, -h)) / (2 * h);
      EXPECT_NEAR(g[i], fd, 1e-8 + 1e-6 * std::abs(fd))
          << (first_layer ? "W1[" : "W2[") << i << "]";
    }
  }
}

// Loss and gradient are means over rows, so over more rows than one chunk (1024) they must be the
// row-weighted average of the two halves' values: checks the accumulation across chunks.
TEST(MlpBody, ChunkedPassesAverageOverRows) {
  const Data d = random_data(2500, 4, 3, 43);
  const MlpBody body = random_body(d.features, 3, 6, 44);
  const std::size_t split = 900, rest = d.rows - split;
  std::vector<double> a1(body.w1().size()), a2(body.w2().size());
  std::vector<double> b1(a1.size()), b2(a2.size()), c1(a1.size()), c2(a2.size());
  const double all = body.gradient(d.x.data(), d.y.data(), d.rows, a1.data(), a2.data());
  const double head = body.gradient(d.x.data(), d.y.data(), split, b1.data(), b2.data());
  const double tail = body.gradient(d.x.data() + split * d.features, d.y.data() + split, rest,
                                    c1.data(), c2.data());
  auto average = [&](double u, double v) { return (u * split + v * rest) / d.rows; };
  EXPECT_NEAR(all, average(head, tail), 1e-13);
  EXPECT_NEAR(body.loss(d.x.data(), d.y.data(), d.rows), all, 1e-13);
  for (std::size_t i = 0; i < a1.size(); ++i) EXPECT_NEAR(a1[i], average(b1[i], c1[i]), 1e-13);
  for (std::size_t i = 0; i < a2.size(); ++i) EXPECT_NEAR(a2[i], average(b2[i], c2[i]), 1e-13);
}

TEST(MlpBody, TransformIsReluOfTheHiddenLayerWithABiasColumn) {
  const Data d = random_data(1500, 5, 2, 45);  // more rows than one chunk
  const int hidden = 7;
  const MlpBody body = random_body(d.features, 2, hidden, 46);
  ASSERT_EQ(body.output_features(), hidden + 1);
  std::vector<double> out(d.rows * body.output_features(), -1.0);
  body.transform(d.x.data(), d.rows, out.data());
  int active = 0;
  for (std::size_t r = 0; r < d.rows; ++r) {
    const double* row = out.data() + r * (hidden + 1);
    for (int k = 0; k < hidden; ++k) {
      double z = 0.0;
      for (int j = 0; j < d.features; ++j)
        z += d.x[r * d.features + j] * body.w1()[k * d.features + j];
      EXPECT_NEAR(row[k], std::max(z, 0.0), 1e-12) << "row " << r << " unit " << k;
      EXPECT_GE(row[k], 0.0);
      active += row[k] > 0.0;
    }
    EXPECT_EQ(row[hidden], 1.0);
  }
  // Both sides of the ReLU were exercised.
  EXPECT_GT(active, 0);
  EXPECT_LT(active, static_cast<int>(d.rows) * hidden);
}

TEST(MlpBody, TrainingSeparatesDataNoLinearModelCan) {
  struct Case {
    Data data;
    int classes;
  };
  for (const Case& c : {Case{xor_data(400, 47), 2}, Case{ring_data(600, 48), 3}}) {
    const Data& d = c.data;
    MlpTraining options;
    options.epochs = 150;
    options.learning_rate = 0.01;
    options.batch_size = 32;
    options.l2 = 1e-4;
    Stream init_stream(49, Purpose::synthetic_model);
    const MlpBody initial = MlpBody::initialize(d.features, c.classes, 32, init_stream);
    Stream stream(49, Purpose::synthetic_model);
    const MlpBody body =
        MlpBody::train(d.x.data(), d.y.data(), d.rows, d.features, c.classes, 32, options, stream);
    // train() starts from initialize() on the same stream, so `initial` is its starting point.
    const double before = initial.loss(d.x.data(), d.y.data(), d.rows);
    const double after = body.loss(d.x.data(), d.y.data(), d.rows);
    EXPECT_LT(after, 0.5 * before) << c.classes << " classes";
    EXPECT_LT(after, 0.2) << c.classes << " classes";
    EXPECT_GT(body.accuracy(d.x.data(), d.y.data(), d.rows), 0.95) << c.classes << " classes";
    // And on fresh data from the same distribution (the body generalizes, not memorizes).
    const Data fresh = c.classes == 2 ? xor_data(400, 50) : ring_data(600, 50);
    EXPECT_GT(body.accuracy(fresh.x.data(), fresh.y.data(), fresh.rows), 0.93);
  }
}

TEST(MlpBody, SameStreamGivesBitwiseSameWeights) {
  const Data d = xor_data(200, 51);
  MlpTraining options;
  options.epochs = 5;
  options.learning_rate = 0.01;
  options.batch_size = 16;
  options.l2 = 1e-3;
  auto trained = [&](std::uint64_t seed) {
    Stream stream(seed, Purpose::synthetic_model);
    return MlpBody::train(d.x.data(), d.y.data(), d.rows, d.features, 2, 8, options, stream);
  };
  const MlpBody a = trained(7), b = trained(7), c = trained(8);
  EXPECT_EQ(a.w1(), b.w1());
  EXPECT_EQ(a.w2(), b.w2());
  EXPECT_NE(a.w1(), c.w1());
  // A round trip through the weights constructor (what a checkpoint does) keeps the function.
  const MlpBody restored(a.features(), a.classes(), a.hidden(), a.w1(), a.w2());
  EXPECT_EQ(restored.loss(d.x.data(), d.y.data(), d.rows), a.loss(d.x.data(), d.y.data(), d.rows));
}

TEST(MlpBody, InitializationScalesAndZeroBiases) {
  const int features = 201, hidden = 100, classes = 4;
  Stream stream(52, Purpose::synthetic_model);
  const MlpBody body = MlpBody::initialize(features, classes, hidden, stream);
  double sum = 0.0, squares = 0.0;
  for (int k = 0; k < hidden; ++k) {
    EXPECT_EQ(body.w1()[k * features + features - 1], 0.0);
    for (int j = 0; j + 1 < features; ++j) {
      sum += body.w1()[k * features + j];
      squares += body.w1()[k * features + j] * body.w1()[k * features + j];
    }
  }
  for (int c = 0; c < classes; ++c) EXPECT_EQ(body.w2()[c * (hidden + 1) + hidden], 0.0);
  // He variance 2 / features from 20000 draws: the sample variance's relative standard error is
  // sqrt(2 / 20000) = 1%, so 5% is a five-sigma bound.
  const double count = static_cast<double>(hidden) * (features - 1);
  EXPECT_NEAR(squares / count, 2.0 / features, 0.05 * 2.0 / features);
  EXPECT_NEAR(sum / count, 0.0, 5.0 * std::sqrt(2.0 / features / count));
}

TEST(MlpBody, RejectsInconsistentInput) {
  EXPECT_THROW(MlpBody(3, 2, 4, std::vector<double>(11), std::vector<double>(10)), InputError);
  EXPECT_THROW(MlpBody(3, 2, 4, std::vector<double>(12), std::vector<double>(8)), InputError);
  EXPECT_THROW(MlpBody(3, 1, 4, std::vector<double>(12), std::vector<double>(5)), InputError);
  const Data d = xor_data(20, 53);
  Stream stream(54, Purpose::synthetic_model);
  MlpBody body = MlpBody::initialize(d.features, 2, 4, stream);
  MlpTraining options;
  options.batch_size = 0;
  EXPECT_THROW(body.fit(d.x.data(), d.y.data(), d.rows, options, stream), InputError);
  options = MlpTraining{};
  options.learning_rate = 0.0;
  EXPECT_THROW(body.fit(d.x.data(), d.y.data(), d.rows, options, stream), InputError);
  std::vector<std::int32_t> bad = d.y;
  bad[3] = 2;
  EXPECT_THROW(body.fit(d.x.data(), bad.data(), d.rows, MlpTraining{}, stream), InputError);
  EXPECT_THROW(body.loss(d.x.data(), bad.data(), d.rows), InputError);
}

}  // namespace
}  // namespace fluence::lia
