// Softmax regression kernels against independent computations: central finite differences of the
// loss (gradient) and of the gradient (Hessian-vector product, explicit Hessian), and a naive
// per-row reference for the SGD update on both the loop and the BLAS path.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <tuple>
#include <vector>

#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/fl/client.hpp"
#include "fluence/fl/problem.hpp"
#include "fluence/fl/purposes.hpp"
#include "fluence/model/row_kernels.hpp"
#include "fluence/model/softmax_regression.hpp"
#include "support/default_deck.hpp"

namespace fluence {
namespace {

struct Problem {
  int rows, features, classes;
  std::vector<double> x, theta;
  std::vector<std::int32_t> y;
};

Problem random_problem(int rows, int features, int classes, std::uint64_t seed) {
  Problem p{rows, features, classes, {}, {}, {}};
  Stream stream(seed, purpose::synthetic_rows);
  p.x.resize(static_cast<std::size_t>(rows) * features);
  for (auto& v : p.x) v = stream.normal();
  p.theta.resize(static_cast<std::size_t>(classes) * features);
  for (auto& v : p.theta) v = 0.5 * stream.normal();
  for (int r = 0; r < rows; ++r) p.y.push_back(static_cast<std::int32_t>(stream.below(classes)));
  return p;
}

double loss_at(const SoftmaxRegression& model, const Problem& p, const std::vector<double>& theta) {
  Workspace work;
  return model.loss_sum(p.x.data(), p.y.data(), p.rows, theta.data(), work).loss_sum;
}

// Reference logits of one row, written independently of the kernels.
std::vector<double> naive_logits(const Problem& p, const std::vector<double>& theta, int r) {
  std::vector<double> z(p.classes);
  for (int c = 0; c < p.classes; ++c)
    for (int j = 0; j < p.features; ++j)
      z[c] += theta[c * p.features + j] * p.x[r * p.features + j];
  return z;
}

double naive_row_loss(const Problem& p, const std::vector<double>& theta, int r) {
  const auto z = naive_logits(p, theta, r);
  double total = 0.0;
  for (double v : z) total += std::exp(v);
  return std::log(total) - z[p.y[r]];
}

TEST(SoftmaxRegression, LossMatchesNaiveFormula) {
  const auto p = random_problem(300, 7, 4, 1);
  SoftmaxRegression model(p.features, p.classes, 0.0);
  double expected = 0.0;
  for (int r = 0; r < p.rows; ++r) expected += naive_row_loss(p, p.theta, r);
  // Same quantity summed in a different order: agreement to rounding, 1e-12 relative.
  EXPECT_NEAR(loss_at(model, p, p.theta), expected, 1e-12 * std::abs(expected));
}

TEST(SoftmaxRegression, GradientMatchesCentralDifferences) {
  for (int classes : {2, 3, 10}) {
    const auto p = random_problem(3000, 9, classes, 2 + classes);  // 3000 rows: BLAS path
    SoftmaxRegression model(p.features, p.classes, 0.0);
    Workspace work;
    std::vector<double> gradient(model.parameters());
    model.gradient_sum(p.x.data(), p.y.data(), p.rows, p.theta.data(), gradient.data(), work);
    // Central differences have O(h^2) truncation error; with h = 1e-5 and third derivatives of
    // order rows, the error is ~ rows * 1e-10 plus rounding rows * 1e-16 / h ~ rows * 1e-11.
    const double h = 1e-5;
    for (std::size_t k = 0; k < model.parameters(); k += 5) {
      auto plus = p.theta, minus = p.theta;
      plus[k] += h;
      minus[k] -= h;
      const double fd = (loss_at(model, p, plus) - loss_at(model, p, minus)) / (2 * h);
      EXPECT_NEAR(gradient[k], fd, 1e-9 * p.rows) << "classes " << classes << " parameter " << k;
    }
  }
}

TEST(SoftmaxRegression, HessianVectorProductMatchesGradientDifferences) {
  const auto p = random_problem(2500, 8, 3, 11);
  SoftmaxRegression model(p.features, p.classes, 0.0);
  Workspace work;
  Stream stream(5, purpose::synthetic_model);
  std::vector<double> v(model.parameters());
  for (auto& value : v) value = stream.normal();
  std::vector<double> hv(model.parameters()), g_plus(model.parameters()),
      g_minus(model.parameters());
  model.hessian_vector_sum(p.x.data(), p.rows, p.theta.data(), v.data(), hv.data(), work);
  const double h = 1e-5;
  auto plus = p.theta, minus = p.theta;
  for (std::size_t k = 0; k < v.size(); ++k) {
    plus[k] += h * v[k];
    minus[k] -= h * v[k];
  }
  model.gradient_sum(p.x.data(), p.y.data(), p.rows, plus.data(), g_plus.data(), work);
  model.gradient_sum(p.x.data(), p.y.data(), p.rows, minus.data(), g_minus.data(), work);
  for (std::size_t k = 0; k < v.size(); ++k)
    EXPECT_NEAR(hv[k], (g_plus[k] - g_minus[k]) / (2 * h), 1e-8 * p.rows) << k;
}

TEST(SoftmaxRegression, ExplicitHessianAppliedToVectorsEqualsHessianVectorProduct) {
  const auto p = random_problem(400, 6, 3, 21);
  SoftmaxRegression model(p.features, p.classes, 0.0);
  const std::size_t n = model.parameters();
  std::vector<double> hessian(n * n);
  model.hessian_sum(p.x.data(), p.rows, p.theta.data(), hessian.data());
  Workspace work;
  std::vector<double> e(n), column(n);
  for (std::size_t k = 0; k < n; ++k) {
    std::fill(e.begin(), e.end(), 0.0);
    e[k] = 1.0;
    model.hessian_vector_sum(p.x.data(), p.rows, p.theta.data(), e.data(), column.data(), work);
    for (std::size_t i = 0; i < n; ++i)
      EXPECT_NEAR(hessian[i * n + k], column[i], 1e-11 * p.rows) << i << "," << k;
  }
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < i; ++k) EXPECT_EQ(hessian[i * n + k], hessian[k * n + i]);
}

// SGD update of one batch computed naively: theta - lr (mean_b grad l_b + l2 theta).
std::vector<double> naive_sgd_step(const Problem& p, std::vector<double> theta,
                                   const std::vector<int>& batch, double lr, double l2) {
  std::vector<double> g(theta.size(), 0.0);
  for (int r : batch) {
    const auto z = naive_logits(p, theta, r);
    double total = 0.0;
    for (double v : z) total += std::exp(v);
    for (int c = 0; c < p.classes; ++c) {
      const double residual = std::exp(z[c]) / total - (c == p.y[r] ? 1.0 : 0.0);
      for (int j = 0; j < p.features; ++j)
        g[c * p.features + j] += residual * p.x[r * p.features + j];
    }
  }
  for (std::size_t k = 0; k < theta.size(); ++k)
    theta[k] -= lr * (g[k] / static_cast<double>(batch.size()) + l2 * theta[k]);
  return theta;
}

TEST(SoftmaxRegression, SgdEpochMatchesNaiveUpdatesOnLoopAndBlasPaths) {
  // (features, classes, batch): small shapes take the loop path, large ones the GEMM path.
  for (auto [features, classes, batch] : {std::tuple{5, 2, 1}, std::tuple{7, 3, 4},
                                          std::tuple{100, 10, 32}, std::tuple{65, 2, 200}}) {
    const auto p = random_problem(403, features, classes, 40 + batch);
    const double lr = 0.05, l2 = 0.01;
    SoftmaxRegression model(features, classes, l2);
    std::vector<std::int64_t> order(p.rows);
    std::iota(order.begin(), order.end(), 0);
    Stream stream(3, purpose::local_shuffle);
    stream.shuffle(std::span<std::int64_t>(order));
    auto theta = p.theta;
    Workspace work;
    model.sgd_epoch(p.x.data(), p.y.data(), order.data(), p.rows, batch, lr, theta.data(), work);
    auto expected = p.theta;
    for (int start = 0; start < p.rows; start += batch) {
      std::vector<int> rows;
      for (int b = start; b < std::min(p.rows, start + batch); ++b)
        rows.push_back(static_cast<int>(order[b]));
      expected = naive_sgd_step(p, expected, rows, lr, l2);
    }
    // Hundreds of sequential updates with differently ordered sums: 1e-10 absolute.
    for (std::size_t k = 0; k < theta.size(); ++k)
      EXPECT_NEAR(theta[k], expected[k], 1e-10)
          << "shape " << features << "x" << classes << " b" << batch;
  }
}

// Ditto's personal step (seed 004 Eq. 2): SGD on the batch loss + l2/2 ||theta||^2 +
// lambda/2 ||theta - center||^2 is the plain step plus lr lambda (center - theta_old), on both
// kernel paths.
TEST(SoftmaxRegression, ProximalSgdEpochAddsThePullTowardTheCenter) {
  for (auto [features, classes, batch] : {std::tuple{7, 3, 4}, std::tuple{100, 10, 32}}) {
    const auto p = random_problem(203, features, classes, 70 + batch);
    const double lr = 0.05, l2 = 0.01, lambda = 0.3;
    SoftmaxRegression model(features, classes, l2);
    std::vector<std::int64_t> order(p.rows);
    std::iota(order.begin(), order.end(), 0);
    std::vector<double> center(p.theta.size());
    for (std::size_t k = 0; k < center.size(); ++k) center[k] = std::cos(0.3 * k);
    auto theta = p.theta;
    Workspace work;
    model.sgd_epoch(p.x.data(), p.y.data(), order.data(), p.rows, batch, lr, theta.data(), work,
                    {center.data(), lambda});
    auto expected = p.theta;
    for (int start = 0; start < p.rows; start += batch) {
      std::vector<int> rows;
      for (int b = start; b < std::min(p.rows, start + batch); ++b) rows.push_back(b);
      auto next = naive_sgd_step(p, expected, rows, lr, l2);
      for (std::size_t k = 0; k < next.size(); ++k)
        next[k] -= lr * lambda * (expected[k] - center[k]);
      expected = next;
    }
    for (std::size_t k = 0; k < theta.size(); ++k) EXPECT_NEAR(theta[k], expected[k], 1e-10);
  }
}

// Rows of byte codes with their coding, and the same rows decoded as a Problem for the naive
// references: image-like, half the codes zero, a last constant column (the bias).
struct CodedProblem {
  Problem decoded;
  std::vector<std::uint8_t> codes;
  ByteCoding coding;
};

CodedProblem coded_problem(int rows, int features, int classes, std::uint64_t seed) {
  CodedProblem p{random_problem(rows, features, classes, seed), {}, {}};
  Stream stream(seed + 1, purpose::synthetic_rows);
  for (int j = 0; j < features; ++j) {
    const bool bias = j + 1 == features;
    p.coding.step.push_back(bias ? 1.0 : 3.0 / 255.0);
    p.coding.offset.push_back(bias ? 0.0 : -0.4 - stream.uniform());
  }
  p.codes.resize(static_cast<std::size_t>(rows) * features);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < features; ++j) {
      auto& k = p.codes[r * features + j];
      k = j + 1 == features        ? 1
          : stream.uniform() < 0.5 ? 0
                                   : static_cast<std::uint8_t>(stream.below(256));
      p.decoded.x[r * features + j] = p.coding.offset[j] + p.coding.step[j] * k;
    }
  return p;
}

TEST(SoftmaxRegression, ByteSgdEpochMatchesNaiveUpdatesOfTheDecodedRows) {
  for (auto [features, classes, batch] : {std::tuple{785, 10, 16}, std::tuple{12, 3, 5},
                                          std::tuple{9, 2, 40}, std::tuple{30, 12, 7}}) {
    const auto p = coded_problem(203, features, classes, 60 + batch);
    const double lr = 0.05, l2 = 0.01, lambda = 0.2;
    SoftmaxRegression model(features, classes, l2);
    std::vector<std::int64_t> order(p.decoded.rows);
    std::iota(order.begin(), order.end(), 0);
    Stream stream(5, purpose::local_shuffle);
    stream.shuffle(std::span<std::int64_t>(order));
    std::vector<double> center(p.decoded.theta.size());
    for (std::size_t k = 0; k < center.size(); ++k) center[k] = 0.1 * std::sin(0.7 * k);
    for (bool proximal : {false, true}) {
      auto theta = p.decoded.theta;
      Workspace work;
      model.sgd_epoch(p.codes.data(), p.coding, p.decoded.y.data(), order.data(), p.decoded.rows,
                      batch, lr, theta.data(), work, {proximal ? center.data() : nullptr, lambda});
      auto expected = p.decoded.theta;
      for (int start = 0; start < p.decoded.rows; start += batch) {
        std::vector<int> rows;
        for (int b = start; b < std::min(p.decoded.rows, start + batch); ++b)
          rows.push_back(static_cast<int>(order[b]));
        auto next = naive_sgd_step(p.decoded, expected, rows, lr, l2);
        if (proximal)
          for (std::size_t k = 0; k < next.size(); ++k)
            next[k] -= lr * lambda * (expected[k] - center[k]);
        expected = next;
      }
      // Dozens of sequential updates with differently ordered sums: 1e-10 absolute.
      for (std::size_t k = 0; k < theta.size(); ++k)
        EXPECT_NEAR(theta[k], expected[k], 1e-10)
            << "shape " << features << "x" << classes << " b" << batch << " prox " << proximal;
    }
  }
}

// sgd_epoch from `start` writes theta without reading it: bitwise the epoch after copying start
// into theta (theta holds NaNs, which any read would carry into the result), also for a client
// with no rows and with Ditto's proximal pull.
TEST(SoftmaxRegression, ByteSgdEpochFromAStartEqualsCopyingItFirst) {
  const auto p = coded_problem(45, 785, 10, 91);
  SoftmaxRegression model(785, 10, 0.01);
  std::vector<std::int64_t> order(p.decoded.rows);
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> center(p.decoded.theta.size(), 0.05);
  for (std::size_t rows : {static_cast<std::size_t>(p.decoded.rows), std::size_t{0}})
    for (bool proximal : {false, true}) {
      Workspace work;
      auto copied = p.decoded.theta;
      model.sgd_epoch(p.codes.data(), p.coding, p.decoded.y.data(), order.data(), rows, 16, 0.05,
                      copied.data(), work, {proximal ? center.data() : nullptr, 0.2});
      std::vector<double> written(copied.size(), std::nan(""));
      model.sgd_epoch(p.codes.data(), p.coding, p.decoded.y.data(), order.data(), rows, 16, 0.05,
                      written.data(), work, {proximal ? center.data() : nullptr, 0.2},
                      p.decoded.theta.data());
      for (std::size_t k = 0; k < copied.size(); ++k)
        ASSERT_EQ(written[k], copied[k]) << "rows " << rows << " prox " << proximal << " k " << k;
    }
}

// The float epoch (federation.local_precision = "single") follows the double byte-coded epoch from
// the same (float-representable) start. A float logit is within about 3e-6 of its terms' scale
// (row_kernels tests), which moves each step's probabilities, hence its update, by a few 1e-6
// relative; over the 13-41 steps of these epochs, at step 0.05, the largest difference measured is
// 2e-6 to 1e-5 of the epoch's largest change (the bound 1e-4 leaves a factor 10), while a wrong
// step, offset or weight decay would be of the order of the change itself. The float result must
// also not be the double one.
TEST(SoftmaxRegression, SingleSgdEpochTracksTheDoubleEpoch) {
  for (auto [features, classes, batch] :
       {std::tuple{785, 10, 16}, std::tuple{12, 3, 5}, std::tuple{30, 12, 7}}) {
    auto p = coded_problem(203, features, classes, 70 + batch);
    p.coding.with_single();
    SoftmaxRegression model(features, classes, 0.01);
    std::vector<std::int64_t> order(p.decoded.rows);
    std::iota(order.begin(), order.end(), 0);
    std::vector<float> single(p.decoded.theta.begin(), p.decoded.theta.end());
    const std::vector<double> start(single.begin(), single.end());
    auto twice = start;
    Workspace work;
    model.sgd_epoch(p.codes.data(), p.coding, p.decoded.y.data(), order.data(), p.decoded.rows,
                    batch, 0.05, twice.data(), work);
    model.sgd_epoch(p.codes.data(), p.coding, p.decoded.y.data(), order.data(), p.decoded.rows,
                    batch, 0.05, single.data(), work);
    double change = 0.0, difference = 0.0;
    for (std::size_t k = 0; k < start.size(); ++k) {
      change = std::max(change, std::abs(twice[k] - start[k]));
      difference = std::max(difference, std::abs(static_cast<double>(single[k]) - twice[k]));
    }
    EXPECT_GT(change, 0.0);
    EXPECT_GT(difference, 0.0) << "the float epoch gave the double epoch's bits";
    EXPECT_LE(difference, 1e-4 * change) << "shape " << features << "x" << classes;
  }
}

// A client in float local SGD returns start + (trained - rounded start), the difference exact in
// double: with a step of zero the model comes back as sent, bit for bit (not rounded to float),
// whether it trains in place or from a separate start. And train_update's update.
TEST(SoftmaxRegression, SingleClientReturnsTheModelAsSentPlusTheExactUpdate) {
  auto p = coded_problem(40, 785, 10, 93);
  auto coding = std::make_shared<ByteCoding>(p.coding);
  coding->with_single();
  std::vector<std::int64_t> rows(40);
  std::iota(rows.begin(), rows.end(), 0);
  Client client(3, rows, {}, p.decoded.y, {}, p.decoded.y, p.decoded.x);
  client.set_codes(p.codes, coding);
  SoftmaxRegression model(785, 10, 0.0);
  LocalTrainingConfig config = FederationConfig::from_deck(default_deck()).local;
  config.batch_size = 16;
  config.learning_rate = 0.0;
  config.single_precision = true;
  Workspace work;
  std::vector<double> sent(p.decoded.theta.size());
  for (std::size_t k = 0; k < sent.size(); ++k) sent[k] = std::sin(0.1 * k) / 3.0;  // not floats
  auto in_place = sent;
  client.train_round(model, config, 1, 1, in_place.data(), work);
  std::vector<double> written(sent.size(), std::nan(""));
  client.train_round(model, config, 1, 1, written.data(), work, sent.data());
  for (std::size_t k = 0; k < sent.size(); ++k) {
    ASSERT_EQ(in_place[k], sent[k]) << k;
    ASSERT_EQ(written[k], sent[k]) << k;
  }
  config.learning_rate = 0.05;  // and a real step moves it
  client.train_round(model, config, 1, 1, written.data(), work, sent.data());
  double moved = 0.0;
  for (std::size_t k = 0; k < sent.size(); ++k)
    moved = std::max(moved, std::abs(written[k] - sent[k]));
  EXPECT_GT(moved, 1e-6);

  // train_update (private training) writes the update itself: the same training, so it is the
  // model train_round returns minus the model sent, up to that subtraction's rounding (an ulp of
  // the model), and its size is the update's squared norm and largest entry.
  const std::vector<float> sent_single(sent.begin(), sent.end());
  std::vector<double> update(sent.size());
  const UpdateSize size = client.train_update(model, config, 1, 1, update.data(), work, sent.data(),
                                              sent_single.data());
  double squares = 0.0, largest = 0.0;
  for (std::size_t k = 0; k < sent.size(); ++k) {
    ASSERT_NEAR(update[k], written[k] - sent[k],
                0x1p-52 * std::max(std::abs(sent[k]), std::abs(written[k])))
        << k;
    squares += update[k] * update[k];
    largest = std::max(largest, std::abs(update[k]));
  }
  EXPECT_NEAR(size.squared_norm, squares, 1e-12 * squares);
  EXPECT_EQ(size.max_abs, largest);
  // In double, the update is exactly train_round's model minus the model sent.
  config.single_precision = false;
  client.train_round(model, config, 1, 1, written.data(), work, sent.data());
  client.train_update(model, config, 1, 1, update.data(), work, sent.data(), sent_single.data());
  for (std::size_t k = 0; k < sent.size(); ++k) ASSERT_EQ(update[k], written[k] - sent[k]) << k;
}

TEST(SoftmaxRegression, BlockedByteLossMatchesTheLossOfTheDecodedRows) {
  for (auto [rows, features, classes] :
       {std::tuple{1000, 785, 10}, std::tuple{37, 12, 3}, std::tuple{300, 9, 2}}) {
    const auto p = coded_problem(rows, features, classes, 80 + rows);
    SoftmaxRegression model(features, classes, 0.0);
    std::vector<std::uint8_t> blocked((rows + kCodeBlockRows - 1) / kCodeBlockRows *
                                      kCodeBlockRows * features);
    block_codes(p.codes.data(), rows, features, blocked.data());
    Workspace work;
    const auto reference =
        model.loss_sum(p.decoded.x.data(), p.decoded.y.data(), rows, p.decoded.theta.data(), work);
    const auto exact = model.loss_sum_blocked(blocked.data(), p.coding, rows, p.decoded.y.data(),
                                              p.decoded.theta.data(), work);
    const auto fast = model.loss_sum_blocked(blocked.data(), p.coding, rows, p.decoded.y.data(),
                                             p.decoded.theta.data(), work, true);
    // The same losses summed from differently rounded logits: 1e-12 relative; float weights give
    // logits within ~1e-6 of their scale and the mean loss within 1e-6 relative. Random data have
    // no near-ties, so the accuracies agree.
    EXPECT_NEAR(exact.loss_sum, reference.loss_sum, 1e-12 * reference.loss_sum);
    EXPECT_EQ(exact.correct, reference.correct);
    EXPECT_NEAR(fast.loss_sum, reference.loss_sum, 1e-6 * reference.loss_sum);
    EXPECT_EQ(fast.correct, reference.correct);
  }
}

}  // namespace
}  // namespace fluence
