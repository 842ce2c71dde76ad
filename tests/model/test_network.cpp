// Networks against independent computations: the forward pass against plain loops
// (tests/support/network_reference.hpp), gradients against central differences of the loss, the
// R-operator's Hessian-vector product against differences of gradients and against a dense Hessian
// from second differences of the loss, per-example clipping against an explicit per-row loop, the
// network without hidden layers against the logistic model, SGD against steps built from
// gradient_sum, and the initialization against its distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "fluence/model/network.hpp"
#include "fluence/model/softmax_regression.hpp"
#include "support/network_reference.hpp"

namespace fluence {
namespace {

struct Data {
  std::vector<double> x;
  std::vector<std::int32_t> y;
  std::size_t rows = 0;
};

Data random_data(const Network& network, std::size_t rows, unsigned seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<double> normal;
  Data data;
  data.rows = rows;
  data.x.resize(rows * network.features());
  for (auto& v : data.x) v = normal(engine);
  for (std::size_t r = 0; r < rows; ++r)
    data.y.push_back(static_cast<std::int32_t>(engine() % network.classes()));
  return data;
}

std::vector<double> random_theta(const Network& network, unsigned seed, double scale = 0.5) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> theta(network.parameters());
  for (auto& v : theta) v = normal(engine);
  return theta;
}

double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

struct Named {
  const char* name;
  NetworkSpec spec;
  int classes;
  bool smooth;  // tanh, no pooling: no kinks, so second differences of the loss apply
};

void PrintTo(const Named& named, std::ostream* out) {
  *out << named.name;
}

std::vector<Named> small_networks() {
  return {
      {"mlp_tanh", NetworkSpec::mlp(6, {5, 4}, Activation::tanh, 3, true), 3, true},
      {"mlp_relu_nobias", NetworkSpec::mlp(6, {5}, Activation::relu, 3, false), 3, false},
      {"cnn_tanh_same_pool",
       NetworkSpec::cnn({5, 5, 2}, {3}, 3, Padding::same, true, {4}, Activation::tanh, 3, true), 3,
       false},
      {"cnn_tanh_valid",
       NetworkSpec::cnn({5, 4, 2}, {2}, 3, Padding::valid, false, {3}, Activation::tanh, 3, true),
       3, true},
      {"cnn_relu_valid_two_convs",
       NetworkSpec::cnn({6, 7, 1}, {2, 3}, 3, Padding::valid, false, {}, Activation::relu, 2, true),
       2, false},
      {"cnn_relu_same_pool_k5",
       NetworkSpec::cnn({6, 6, 2}, {2}, 5, Padding::same, true, {3}, Activation::relu, 4, true), 4,
       false},
  };
}

class NetworkTest : public ::testing::TestWithParam<Named> {
 protected:
  NetworkTest() : network(GetParam().spec, GetParam().classes, 0.01) {}
  Network network;
  Workspace work;
};

TEST_P(NetworkTest, LogitsAndLossMatchPlainLoops) {
  const Data data = random_data(network, 9, 11);
  const auto theta = random_theta(network, 12);
  std::vector<double> logits(data.rows * network.classes());
  network.logits(data.x.data(), data.rows, theta.data(), logits.data(), work);
  for (std::size_t r = 0; r < data.rows; ++r) {
    const auto expected = testing::reference_logits_row(
        network, data.x.data() + r * network.features(), theta.data());
    for (int c = 0; c < network.classes(); ++c)
      EXPECT_NEAR(logits[r * network.classes() + c], expected[c], 1e-12) << r << "," << c;
  }
  const auto loss = network.loss_sum(data.x.data(), data.y.data(), data.rows, theta.data(), work);
  const double expected =
      testing::reference_loss_sum(network, data.x.data(), data.y.data(), data.rows, theta.data());
  EXPECT_NEAR(loss.loss_sum, expected, 1e-11);
  // Float arithmetic: about 1e-7 relative per logit; 1e-5 of the loss is ample.
  const auto fast =
      network.fast_loss_sum(data.x.data(), data.y.data(), data.rows, theta.data(), work);
  EXPECT_NEAR(fast.loss_sum, expected, 1e-5 * expected);
}

// The frozen body's output (LIA): every layer but the last, against the plain loops.
TEST_P(NetworkTest, HeadInputsAreTheLayersBelowTheLastAsPlainLoops) {
  const Data data = random_data(network, 9, 13);
  const auto theta = random_theta(network, 14);
  const std::size_t W = static_cast<std::size_t>(network.head_width());
  ASSERT_EQ(W, network.layers().back().in.size());
  std::vector<double> inputs(data.rows * W);
  network.head_inputs(data.x.data(), data.rows, theta.data(), inputs.data(), work);
  for (std::size_t r = 0; r < data.rows; ++r) {
    const auto expected = testing::reference_activations_row(
        network, data.x.data() + r * network.features(), theta.data(), network.layers().size() - 1);
    ASSERT_EQ(expected.size(), W);
    for (std::size_t j = 0; j < W; ++j)
      EXPECT_NEAR(inputs[r * W + j], expected[j], 1e-12) << r << "," << j;
  }
}

TEST_P(NetworkTest, GradientMatchesCentralDifferences) {
  const Data data = random_data(network, 7, 21);
  auto theta = random_theta(network, 22);
  std::vector<double> gradient(network.parameters());
  const double loss = network.gradient_sum(data.x.data(), data.y.data(), data.rows, theta.data(),
                                           gradient.data(), work);
  EXPECT_NEAR(
      loss, network.loss_sum(data.x.data(), data.y.data(), data.rows, theta.data(), work).loss_sum,
      1e-12);
  // h = 1e-6: truncation h^2 |f'''| ~ 1e-12, rounding eps |f| / h ~ 1e-9 for |f| ~ 10.
  const double h = 1e-6;
  for (std::size_t k = 0; k < theta.size(); ++k) {
    const double saved = theta[k];
    theta[k] = saved + h;
    const double up =
        network.loss_sum(data.x.data(), data.y.data(), data.rows, theta.data(), work).loss_sum;
    theta[k] = saved - h;
    const double down =
        network.loss_sum(data.x.data(), data.y.data(), data.rows, theta.data(), work).loss_sum;
    theta[k] = saved;
    EXPECT_NEAR(gradient[k], (up - down) / (2 * h), 1e-7 * (1.0 + std::abs(gradient[k]))) << k;
  }
}

TEST_P(NetworkTest, HessianVectorProductMatchesDifferencesOfGradients) {
  const Data data = random_data(network, 7, 31);
  const auto theta = random_theta(network, 32);
  const auto v = random_theta(network, 33, 1.0);
  std::vector<double> hv(network.parameters());
  network.hessian_vector_sum(data.x.data(), data.y.data(), data.rows, theta.data(), v.data(),
                             hv.data(), work);
  // (g(theta + h v) - g(theta - h v)) / 2h, h = 1e-5: truncation h^2 ~ 1e-10 relative, rounding
  // eps |g| / h ~ 1e-10.
  const double h = 1e-5;
  std::vector<double> up_theta(theta), down_theta(theta), up(hv.size()), down(hv.size());
  for (std::size_t k = 0; k < theta.size(); ++k) {
    up_theta[k] += h * v[k];
    down_theta[k] -= h * v[k];
  }
  network.gradient_sum(data.x.data(), data.y.data(), data.rows, up_theta.data(), up.data(), work);
  network.gradient_sum(data.x.data(), data.y.data(), data.rows, down_theta.data(), down.data(),
                       work);
  const double scale = max_abs(hv);
  ASSERT_GT(scale, 0.0);
  for (std::size_t k = 0; k < hv.size(); ++k)
    EXPECT_NEAR(hv[k], (up[k] - down[k]) / (2 * h), 1e-6 * scale) << k;
}

TEST_P(NetworkTest, HessianMatchesSecondDifferencesOfTheLoss) {
  if (!GetParam().smooth)
    GTEST_SKIP() << "ReLU or max-pooling: second differences of the loss cross kinks";
  const Data data = random_data(network, 5, 41);
  auto theta = random_theta(network, 42);
  const std::size_t p = network.parameters();
  // H e_j column by column from the R-operator.
  std::vector<double> hessian(p * p), column(p), unit(p, 0.0);
  for (std::size_t j = 0; j < p; ++j) {
    unit[j] = 1.0;
    network.hessian_vector_sum(data.x.data(), data.y.data(), data.rows, theta.data(), unit.data(),
                               column.data(), work);
    unit[j] = 0.0;
    for (std::size_t i = 0; i < p; ++i) hessian[i * p + j] = column[i];
  }
  auto loss = [&] {
    return network.loss_sum(data.x.data(), data.y.data(), data.rows, theta.data(), work).loss_sum;
  };
  // H_ij ~ [f(+i+j) - f(+i-j) - f(-i+j) + f(-i-j)] / 4h^2 with h = 2e-4: truncation h^2/6 times
  // fourth derivatives of order 10-100 (~1e-6; 5e-5 was measured at h = 1e-3), rounding
  // eps |f| / h^2 ~ 5e-8.
  const double h = 2e-4;
  double worst = 0.0;
  for (std::size_t i = 0; i < p; ++i)
    for (std::size_t j = i; j < p; ++j) {
      auto at = [&](double si, double sj) {
        const double ti = theta[i], tj = theta[j];
        theta[i] += si * h;
        theta[j] += sj * h;
        const double f = loss();
        theta[i] = ti;
        theta[j] = tj;
        return f;
      };
      const double second = (at(1, 1) - at(1, -1) - at(-1, 1) + at(-1, -1)) / (4 * h * h);
      worst = std::max(worst, std::abs(second - hessian[i * p + j]));
      EXPECT_NEAR(hessian[i * p + j], hessian[j * p + i], 1e-12) << i << "," << j;
    }
  EXPECT_LE(worst, 1e-5);
}

TEST_P(NetworkTest, ClippedGradientSumMatchesAnExplicitPerRowLoop) {
  const Data data = random_data(network, 9, 51);
  const auto theta = random_theta(network, 52);
  const std::size_t p = network.parameters(), D = network.features();
  std::vector<double> row_gradient(p), norms(data.rows), row_norms(data.rows);
  for (std::size_t r = 0; r < data.rows; ++r) {
    network.gradient_sum(data.x.data() + r * D, data.y.data() + r, 1, theta.data(),
                         row_gradient.data(), work);
    double square = 0.0;
    for (double g : row_gradient) square += g * g;
    row_norms[r] = std::sqrt(square);
  }
  std::vector<double> sorted(row_norms);
  std::sort(sorted.begin(), sorted.end());
  const double clip = sorted[data.rows / 2];  // clips about half of the rows
  std::vector<double> expected(p, 0.0);
  for (std::size_t r = 0; r < data.rows; ++r) {
    network.gradient_sum(data.x.data() + r * D, data.y.data() + r, 1, theta.data(),
                         row_gradient.data(), work);
    const double scale = std::min(1.0, clip / row_norms[r]);
    for (std::size_t k = 0; k < p; ++k) expected[k] += scale * row_gradient[k];
  }
  std::vector<double> clipped(p);
  network.clipped_gradient_sum(data.x.data(), data.y.data(), data.rows, theta.data(), clip,
                               clipped.data(), work, norms.data());
  for (std::size_t r = 0; r < data.rows; ++r)
    EXPECT_NEAR(norms[r], row_norms[r], 1e-12 * row_norms[r]) << r;
  const double scale = max_abs(expected);
  for (std::size_t k = 0; k < p; ++k) EXPECT_NEAR(clipped[k], expected[k], 1e-12 * scale) << k;
}

TEST_P(NetworkTest, SgdStepsEqualStepsBuiltFromTheGradient) {
  const Data data = random_data(network, 8, 61);
  const auto start = random_theta(network, 62);
  const auto center = random_theta(network, 63);
  const std::size_t p = network.parameters(), D = network.features();
  std::vector<std::int64_t> order{5, 2, 7, 0, 3, 6, 1, 4};
  const int batch = 3;  // batches of 3, 3 and 2
  const double lr = 0.05, proximal = 0.3;
  std::vector<double> expected(start), gradient(p), xb(batch * D);
  std::vector<std::int32_t> yb(batch);
  for (std::size_t s = 0; s < order.size(); s += batch) {
    const int n = static_cast<int>(std::min<std::size_t>(batch, order.size() - s));
    for (int b = 0; b < n; ++b) {
      std::copy_n(data.x.data() + order[s + b] * D, D, xb.data() + b * D);
      yb[b] = data.y[order[s + b]];
    }
    network.gradient_sum(xb.data(), yb.data(), n, expected.data(), gradient.data(), work);
    for (std::size_t k = 0; k < p; ++k)
      expected[k] -= lr * (gradient[k] / n + network.l2() * expected[k] +
                           proximal * (expected[k] - center[k]));
  }
  const TrainingRows rows{data.x.data(), data.y.data(), data.rows};
  std::vector<double> theta(p, 0.0);
  network.sgd_epoch(rows, order.data(), batch, lr, theta.data(), work, {center.data(), proximal},
                    start.data());
  const double scale = max_abs(expected);
  for (std::size_t k = 0; k < p; ++k) EXPECT_NEAR(theta[k], expected[k], 1e-12 * scale) << k;

  // In float, without the proximal term: the double steps to float rounding (1e-5 of the largest
  // parameter over three steps).
  std::vector<double> plain(start);
  network.sgd_epoch(rows, order.data(), batch, lr, plain.data(), work);
  std::vector<float> single(start.begin(), start.end());
  network.sgd_epoch(rows, order.data(), batch, lr, single.data(), work);
  for (std::size_t k = 0; k < p; ++k) EXPECT_NEAR(single[k], plain[k], 1e-5 * scale) << k;
}

INSTANTIATE_TEST_SUITE_P(Shapes, NetworkTest, ::testing::ValuesIn(small_networks()),
                         [](const ::testing::TestParamInfo<Named>& info) {
                           return std::string(info.param.name);
                         });

// The float passes run Winograd for convolutions with 3 x 3 or 5 x 5 kernels and >= 8 channels in
// and out (winograd.hpp). On networks with such layers, the float passes must give the double
// passes' results (im2col + GEMM, checked against plain loops above) to float rounding: the
// evaluation's loss and a float SGD epoch, with Winograd and with im2col alike.
TEST(Network, WinogradFloatPassesAgreeWithTheDoublePasses) {
  const NetworkSpec specs[] = {
      // 3 x 3 same: F(4 x 4, 3 x 3), tiles cut by the edges, 9 filters (no whole vector).
      NetworkSpec::cnn({9, 9, 2}, {8, 9}, 3, Padding::same, false, {5}, Activation::tanh, 3, true),
      // 5 x 5 same with pooling: McMahan's CNN in small, F(2 x 2, 5 x 5).
      NetworkSpec::cnn({10, 10, 1}, {8, 12}, 5, Padding::same, true, {6}, Activation::relu, 4,
                       true),
  };
  for (NetworkSpec spec : specs) {
    SCOPED_TRACE(spec.layers.size());
    const int C = spec.layers.back().units;
    const Network network(spec, C, 0.01);
    int winograd_layers = 0;
    for (const Layer& layer : network.layers()) winograd_layers += layer.winograd ? 1 : 0;
    ASSERT_EQ(winograd_layers, 1);  // the second convolution; the first has too few channels
    spec.convolution = ConvolutionMethod::im2col;
    const Network direct(spec, C, 0.01);
    for (const Layer& layer : direct.layers()) ASSERT_FALSE(layer.winograd);

    Workspace work;
    const Data data = random_data(network, 23, 31);
    const auto theta = random_theta(network, 32, 0.3);
    const double loss =
        network.loss_sum(data.x.data(), data.y.data(), data.rows, theta.data(), work).loss_sum;
    // Float arithmetic: about 1e-6 relative per logit with the transforms; 1e-5 of the loss.
    for (const Network* model : {&network, &direct}) {
      const auto fast =
          model->fast_loss_sum(data.x.data(), data.y.data(), data.rows, theta.data(), work);
      EXPECT_NEAR(fast.loss_sum, loss, 1e-5 * loss);
    }

    // One epoch of batches of 4 (the last of 3): float against double, 1e-5 of the largest
    // parameter after six steps, as for the networks above.
    std::vector<std::int64_t> order(data.rows);
    std::iota(order.begin(), order.end(), 0);
    const TrainingRows rows{data.x.data(), data.y.data(), data.rows};
    std::vector<double> twice(theta);
    network.sgd_epoch(rows, order.data(), 4, 0.05, twice.data(), work);
    const double scale = max_abs(twice);
    for (const Network* model : {&network, &direct}) {
      std::vector<float> single(theta.begin(), theta.end());
      model->sgd_epoch(rows, order.data(), 4, 0.05, single.data(), work);
      for (std::size_t k = 0; k < theta.size(); ++k)
        ASSERT_NEAR(single[k], twice[k], 1e-5 * scale) << k;
    }
  }
}

// A network without hidden layers is multinomial logistic regression: with the logistic model's
// bias as the network's bias vector, every quantity agrees to rounding.
TEST(Network, WithoutHiddenLayersEqualsTheLogisticModel) {
  const int D = 7, C = 4;
  const double l2 = 0.02;
  const Network network(NetworkSpec::mlp(D, {}, Activation::relu, C, true), C, l2);
  const SoftmaxRegression logistic(D + 1, C, l2);
  ASSERT_EQ(network.parameters(), logistic.parameters());
  EXPECT_TRUE(network.convex());
  const Data data = random_data(network, 23, 71);
  std::vector<double> augmented;  // the logistic model's constant-1 bias column last
  for (std::size_t r = 0; r < data.rows; ++r) {
    augmented.insert(augmented.end(), data.x.begin() + r * D, data.x.begin() + (r + 1) * D);
    augmented.push_back(1.0);
  }
  const auto net_theta = random_theta(network, 72);
  std::vector<double> theta(logistic.parameters());  // [C x (D + 1)]: weights then the bias
  for (int c = 0; c < C; ++c) {
    for (int j = 0; j < D; ++j) theta[c * (D + 1) + j] = net_theta[c * D + j];
    theta[c * (D + 1) + D] = net_theta[C * D + c];
  }
  auto to_network = [&](const std::vector<double>& g) {
    std::vector<double> out(g.size());
    for (int c = 0; c < C; ++c) {
      for (int j = 0; j < D; ++j) out[c * D + j] = g[c * (D + 1) + j];
      out[C * D + c] = g[c * (D + 1) + D];
    }
    return out;
  };
  Workspace work;
  const auto a = network.loss_sum(data.x.data(), data.y.data(), data.rows, net_theta.data(), work);
  const auto b = logistic.loss_sum(augmented.data(), data.y.data(), data.rows, theta.data(), work);
  EXPECT_NEAR(a.loss_sum, b.loss_sum, 1e-12 * b.loss_sum);
  EXPECT_EQ(a.correct, b.correct);
  const std::size_t p = network.parameters();
  std::vector<double> g_net(p), g_log(p), v(p), hv_net(p), hv_log(p);
  network.gradient_sum(data.x.data(), data.y.data(), data.rows, net_theta.data(), g_net.data(),
                       work);
  logistic.gradient_sum(augmented.data(), data.y.data(), data.rows, theta.data(), g_log.data(),
                        work);
  const auto v_net = random_theta(network, 73, 1.0);
  for (int c = 0; c < C; ++c) {
    for (int j = 0; j < D; ++j) v[c * (D + 1) + j] = v_net[c * D + j];
    v[c * (D + 1) + D] = v_net[C * D + c];
  }
  network.hessian_vector_sum(data.x.data(), data.y.data(), data.rows, net_theta.data(),
                             v_net.data(), hv_net.data(), work);
  logistic.hessian_vector_sum(augmented.data(), data.y.data(), data.rows, theta.data(), v.data(),
                              hv_log.data(), work);
  std::vector<double> clip_net(p), clip_log(p);
  network.clipped_gradient_sum(data.x.data(), data.y.data(), data.rows, net_theta.data(), 0.5,
                               clip_net.data(), work);
  logistic.clipped_gradient_sum(augmented.data(), data.y.data(), data.rows, theta.data(), 0.5,
                                clip_log.data(), work);
  const auto g_mapped = to_network(g_log), hv_mapped = to_network(hv_log),
             clip_mapped = to_network(clip_log);
  for (std::size_t k = 0; k < p; ++k) {
    EXPECT_NEAR(g_net[k], g_mapped[k], 1e-12 * max_abs(g_mapped)) << k;
    EXPECT_NEAR(hv_net[k], hv_mapped[k], 1e-12 * max_abs(hv_mapped)) << k;
    EXPECT_NEAR(clip_net[k], clip_mapped[k], 1e-12 * max_abs(clip_mapped)) << k;
  }
}

TEST(Network, McMahansArchitecturesHaveTheirParameterCounts) {
  const Network two_nn(NetworkSpec::mlp(784, {200, 200}, Activation::relu, 10, true), 10, 0.0);
  EXPECT_EQ(two_nn.parameters(), 199210u);
  const Network cnn(NetworkSpec::cnn({28, 28, 1}, {32, 64}, 5, Padding::same, true, {512},
                                     Activation::relu, 10, true),
                    10, 0.0);
  EXPECT_EQ(cnn.parameters(), 1663370u);
  EXPECT_EQ(cnn.layers()[2].out.height, 14);  // conv -> relu -> pool: 28 -> 14
  EXPECT_FALSE(cnn.convex());
}

// He: N(0, 2 / fan_in) weights, zero biases; Glorot: U(-a, a), a = sqrt(6 / (fan_in + fan_out)).
// With n = 156,800 draws the sample variance's relative standard deviation is sqrt(2 / n) = 0.36%
// (normal) and sqrt(0.8 / n) = 0.23% (uniform); the bounds below are 6 of them.
TEST(Network, InitializationDrawsHeAndGlorotWeightsFromPerLayerStreams) {
  NetworkSpec spec = NetworkSpec::mlp(784, {200}, Activation::relu, 10, true);
  const Network he(spec, 10, 0.0);
  std::vector<double> theta(he.parameters()), again(he.parameters());
  he.initialize(5, theta.data());
  he.initialize(5, again.data());
  EXPECT_EQ(theta, again);
  const Layer& first = he.layers()[0];
  auto moments = [&](const std::vector<double>& t, const Layer& layer) {
    double sum = 0.0, square = 0.0;
    for (std::size_t k = 0; k < layer.weight_count; ++k) {
      sum += t[layer.weights + k];
      square += t[layer.weights + k] * t[layer.weights + k];
    }
    const double n = static_cast<double>(layer.weight_count);
    return std::pair{sum / n, square / n - (sum / n) * (sum / n)};
  };
  const auto [mean, variance] = moments(theta, first);
  const double n = static_cast<double>(first.weight_count);
  EXPECT_NEAR(variance, 2.0 / 784, 6 * std::sqrt(2.0 / n) * 2.0 / 784);
  EXPECT_NEAR(mean, 0.0, 6 * std::sqrt(2.0 / 784 / n));
  for (std::size_t k = 0; k < first.bias_count; ++k) EXPECT_EQ(theta[first.biases + k], 0.0);
  he.initialize(6, again.data());
  EXPECT_NE(theta, again);

  spec.initialization = Initialization::glorot;
  const Network glorot(spec, 10, 0.0);
  glorot.initialize(5, theta.data());
  const double limit = std::sqrt(6.0 / (784 + 200));
  for (std::size_t k = 0; k < first.weight_count; ++k)
    ASSERT_LE(std::abs(theta[first.weights + k]), limit);
  const auto [g_mean, g_variance] = moments(theta, first);
  EXPECT_NEAR(g_variance, limit * limit / 3, 6 * std::sqrt(0.8 / n) * limit * limit / 3);
  EXPECT_NEAR(g_mean, 0.0, 6 * limit / std::sqrt(3 * n));
}

// A block of hundreds of 28 x 28 images goes through the convolution in groups of
// Layer::conv_rows images, each group's im2col columns made again in the backward pass: its sums
// must equal those of small calls of 10 rows (one group each).
TEST(Network, LargeBlocksThatRemakeTheirColumnsGiveTheSumsOfSmallOnes) {
  const Network network(
      NetworkSpec::cnn({28, 28, 1}, {2}, 5, Padding::same, true, {}, Activation::tanh, 3, true), 3,
      0.0);
  ASSERT_GT(network.block_rows(), 2 * static_cast<std::size_t>(network.layers()[0].conv_rows));
  const Data data = random_data(network, 300, 91);
  const auto theta = random_theta(network, 92);
  const auto v = random_theta(network, 93, 1.0);
  const std::size_t p = network.parameters(), D = network.features();
  Workspace work;
  std::vector<double> g(p), hv(p), clipped(p), part(p);
  std::vector<double> g_sum(p, 0.0), hv_sum(p, 0.0), clipped_sum(p, 0.0);
  network.gradient_sum(data.x.data(), data.y.data(), data.rows, theta.data(), g.data(), work);
  network.hessian_vector_sum(data.x.data(), data.y.data(), data.rows, theta.data(), v.data(),
                             hv.data(), work);
  network.clipped_gradient_sum(data.x.data(), data.y.data(), data.rows, theta.data(), 0.3,
                               clipped.data(), work);
  const double loss =
      network.loss_sum(data.x.data(), data.y.data(), data.rows, theta.data(), work).loss_sum;
  double loss_sum = 0.0;
  for (std::size_t r = 0; r < data.rows; r += 10) {
    const double* x = data.x.data() + r * D;
    const std::int32_t* y = data.y.data() + r;
    network.gradient_sum(x, y, 10, theta.data(), part.data(), work);
    for (std::size_t k = 0; k < p; ++k) g_sum[k] += part[k];
    network.hessian_vector_sum(x, y, 10, theta.data(), v.data(), part.data(), work);
    for (std::size_t k = 0; k < p; ++k) hv_sum[k] += part[k];
    network.clipped_gradient_sum(x, y, 10, theta.data(), 0.3, part.data(), work);
    for (std::size_t k = 0; k < p; ++k) clipped_sum[k] += part[k];
    loss_sum += network.loss_sum(x, y, 10, theta.data(), work).loss_sum;
  }
  EXPECT_NEAR(loss, loss_sum, 1e-12 * loss);
  for (std::size_t k = 0; k < p; ++k) {
    EXPECT_NEAR(g[k], g_sum[k], 1e-11 * max_abs(g_sum)) << k;
    EXPECT_NEAR(hv[k], hv_sum[k], 1e-11 * max_abs(hv_sum)) << k;
    EXPECT_NEAR(clipped[k], clipped_sum[k], 1e-11 * max_abs(clipped_sum)) << k;
  }
}

// Rows given as 8-bit codes train exactly as the doubles offset + step k they stand for.
TEST(Network, SgdOnByteCodesEqualsSgdOnTheirValues) {
  const Network network(
      NetworkSpec::cnn({4, 4, 1}, {2}, 3, Padding::same, true, {3}, Activation::relu, 3, true), 3,
      0.01);
  const std::size_t rows = 10, D = 16;
  ByteCoding coding;
  std::mt19937_64 engine(81);
  for (std::size_t j = 0; j < D; ++j) {
    coding.offset.push_back(-0.1 * double(j % 3));
    coding.step.push_back(1.0 / 255.0 + 0.001 * double(j));
  }
  std::vector<std::uint8_t> codes(rows * D);
  for (auto& k : codes) k = static_cast<std::uint8_t>(engine() % 256);
  std::vector<double> x(rows * D);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = coding.offset[i % D] + coding.step[i % D] * double(codes[i]);
  std::vector<std::int32_t> y(rows);
  for (auto& label : y) label = static_cast<std::int32_t>(engine() % 3);
  std::vector<std::int64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> a(network.parameters()), b;
  network.initialize(3, a.data());
  b = a;
  Workspace work;
  network.sgd_epoch(TrainingRows{x.data(), y.data(), rows, codes.data(), &coding}, order.data(), 4,
                    0.1, a.data(), work);
  network.sgd_epoch(TrainingRows{x.data(), y.data(), rows}, order.data(), 4, 0.1, b.data(), work);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace fluence
