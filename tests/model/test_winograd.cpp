// Winograd's convolutions against direct loops: the forward pass against the 7-loop convolution,
// the input gradient against the direct adjoint loop, the filter gradient against the direct sum
// over positions; in double (the algebra, to rounding) and in float (the bound the float passes
// live with).
#include "fluence/model/winograd.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "support/random_values.hpp"

namespace fluence {
namespace {

using testing::random_values;

std::size_t weight_index(const ConvGeometry& g, int f, int ky, int kx, int c) {
  return ((std::size_t(f) * g.kernel + ky) * g.kernel + kx) * g.channels + c;
}
std::size_t input_index(const ConvGeometry& g, int b, int y, int x, int c) {
  return ((std::size_t(b) * g.height + y) * g.width + x) * g.channels + c;
}
std::size_t output_index(const ConvGeometry& g, int b, int y, int x, int f) {
  return ((std::size_t(b) * g.out_height() + y) * g.out_width() + x) * g.filters + f;
}

// Calls visit(b, oy, ox, f, ky, kx, c, iy, ix) for every product of the convolution inside the
// image: the three passes below are sums over these.
template <class Visit>
void for_each_product(const ConvGeometry& g, int batch, Visit&& visit) {
  for (int b = 0; b < batch; ++b)
    for (int oy = 0; oy < g.out_height(); ++oy)
      for (int ox = 0; ox < g.out_width(); ++ox)
        for (int f = 0; f < g.filters; ++f)
          for (int ky = 0; ky < g.kernel; ++ky)
            for (int kx = 0; kx < g.kernel; ++kx) {
              const int iy = oy + ky - g.pad, ix = ox + kx - g.pad;
              if (iy < 0 || iy >= g.height || ix < 0 || ix >= g.width) continue;
              for (int c = 0; c < g.channels; ++c) visit(b, oy, ox, f, ky, kx, c, iy, ix);
            }
}

// The three direct sums, and for each entry the sum of the terms' magnitudes, which bounds the
// rounding of any order of summation.
struct Direct {
  std::vector<double> y, y_scale, dx, dx_scale, dw, dw_scale;
};
Direct direct(const ConvGeometry& g, int batch, const std::vector<double>& x,
              const std::vector<double>& w, const std::vector<double>& dy) {
  Direct d;
  d.y.assign(std::size_t(batch) * g.positions() * g.filters, 0.0);
  d.y_scale = d.y;
  d.dx.assign(x.size(), 0.0);
  d.dx_scale = d.dx;
  d.dw.assign(w.size(), 0.0);
  d.dw_scale = d.dw;
  for_each_product(
      g, batch, [&](int b, int oy, int ox, int f, int ky, int kx, int c, int iy, int ix) {
        const std::size_t o = output_index(g, b, oy, ox, f), i = input_index(g, b, iy, ix, c),
                          k = weight_index(g, f, ky, kx, c);
        d.y[o] += w[k] * x[i];
        d.y_scale[o] += std::abs(w[k] * x[i]);
        d.dx[i] += w[k] * dy[o];
        d.dx_scale[i] += std::abs(w[k] * dy[o]);
        d.dw[k] += dy[o] * x[i];
        d.dw_scale[k] += std::abs(dy[o] * x[i]);
      });
  return d;
}

struct Case {
  int height, width, channels, kernel, pad, filters, batch;
};

class WinogradTest : public ::testing::TestWithParam<Case> {};

// Each entry within `relative` of the sum of its terms' magnitudes (plus a tiny absolute floor for
// entries whose terms all vanish).
template <class T>
void expect_close(const std::vector<T>& got, const std::vector<double>& expected,
                  const std::vector<double>& scale, double relative, const char* what) {
  ASSERT_EQ(got.size(), expected.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::abs(double(got[i]) - expected[i]) / (scale[i] + 1e-30);
    worst = std::max(worst, error);
    ASSERT_LE(std::abs(double(got[i]) - expected[i]), relative * scale[i] + 1e-300)
        << what << " entry " << i << ": " << got[i] << " against " << expected[i];
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", worst);
  ::testing::Test::RecordProperty(what, text);
}

template <class T>
void check_passes(const Case& c, double relative) {
  const ConvGeometry g{c.height, c.width, c.channels, c.kernel, c.pad, c.filters};
  ASSERT_TRUE(winograd_applies(g));
  const auto x = random_values(std::size_t(c.batch) * g.input_size(), 1);
  const auto w = random_values(std::size_t(g.filters) * g.patch(), 2);
  const auto dy = random_values(std::size_t(c.batch) * g.positions() * g.filters, 3);
  const Direct expected = direct(g, c.batch, x, w, dy);
  const std::vector<T> xt(x.begin(), x.end()), wt(w.begin(), w.end()), dyt(dy.begin(), dy.end());
  WinogradScratch<T> scratch;

  std::vector<T> y(expected.y.size(), T(7));  // overwritten entirely
  winograd_convolution(xt.data(), c.batch, g, wt.data(), y.data(), scratch);
  expect_close(y, expected.y, expected.y_scale, relative, "forward");

  std::vector<T> dx(x.size(), T(7));
  winograd_convolution_adjoint(dyt.data(), c.batch, g, wt.data(), dx.data(), scratch);
  expect_close(dx, expected.dx, expected.dx_scale, relative, "input gradient");

  // target <- beta target + alpha gradient, from a target of ones.
  const T alpha = T(-0.5), beta = T(0.25);
  std::vector<T> dw(w.size(), T(1));
  winograd_filter_gradient(xt.data(), dyt.data(), c.batch, g, alpha, beta, dw.data(), scratch);
  std::vector<double> combined(w.size()), combined_scale(w.size());
  for (std::size_t k = 0; k < w.size(); ++k) {
    combined[k] = double(beta) + double(alpha) * expected.dw[k];
    combined_scale[k] = double(beta) + std::abs(double(alpha)) * expected.dw_scale[k];
  }
  expect_close(dw, combined, combined_scale, relative, "filter gradient");
  // beta = 0 ignores the target, even a NaN.
  std::fill(dw.begin(), dw.end(), std::nan(""));
  winograd_filter_gradient(xt.data(), dyt.data(), c.batch, g, T(1), T(0), dw.data(), scratch);
  expect_close(dw, expected.dw, expected.dw_scale, relative, "filter gradient, beta = 0");
}

// Double: the algebra. The transforms' coefficients reach 5 (B^T), 8 (A^T) and 1/24 (G), so
// rounding is amplified by at most a few hundred over the direct sum's few ulps: 1e-12 of the
// terms' magnitude leaves a margin of 10 over that and fails any wrong coefficient or index by far.
TEST_P(WinogradTest, DoubleEqualsDirectLoops) {
  check_passes<double>(GetParam(), 1e-12);
}

// Float: the bound the float passes live with, 2e-5 of the terms' magnitude (float's epsilon
// 6e-8 times the same amplification; measured worst cases are about 2e-6).
TEST_P(WinogradTest, FloatEqualsDirectLoopsToFloatRounding) {
  check_passes<float>(GetParam(), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, WinogradTest,
    ::testing::Values(
        // McMahan's CNN's second layer: 14 x 14 x 32 -> 64, 5 x 5, same (the tiles divide 14).
        Case{14, 14, 32, 5, 2, 64, 3},
        // Odd sizes: tiles cut by the last row and column; channel and filter counts that fill no
        // whole vector; valid padding (the adjoint pads r - 1).
        Case{9, 7, 11, 5, 2, 13, 2}, Case{11, 8, 9, 5, 0, 17, 2},
        // 3 x 3: F(4 x 4, 3 x 3), same and valid, and a tile count no block divides.
        Case{13, 10, 16, 3, 1, 8, 3}, Case{7, 9, 8, 3, 0, 24, 2}, Case{30, 30, 8, 3, 1, 8, 5}));

TEST(Winograd, AppliesToThreeAndFiveKernelsWithEnoughChannels) {
  EXPECT_TRUE(winograd_applies({14, 14, 32, 5, 2, 64}));
  EXPECT_TRUE(winograd_applies({14, 14, 8, 3, 0, 8}));
  EXPECT_FALSE(winograd_applies({28, 28, 1, 5, 2, 32}));  // a grey image's first layer
  EXPECT_FALSE(winograd_applies({14, 14, 32, 7, 3, 64}));
  EXPECT_FALSE(winograd_applies({14, 14, 32, 5, 2, 4}));
}

}  // namespace
}  // namespace fluence
