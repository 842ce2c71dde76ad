// The layer kernels against direct loops: a convolution through im2col + GEMM against the 7-loop
// convolution, col2im and the max-pool adjoint against the adjoint identity <A x, y> = <x, A^T y>,
// max-pooling against a direct scan.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "fluence/model/layers.hpp"
#include "support/random_values.hpp"

namespace fluence {
namespace {

using testing::random_values;

// y[b, oy, ox, f] = bias[f] + sum_{ky, kx, c} w[f, ky, kx, c] x[b, oy + ky - pad, ox + kx - pad, c]
std::vector<double> direct_convolution(const std::vector<double>& x, int batch,
                                       const ConvGeometry& g, const std::vector<double>& w,
                                       const std::vector<double>& bias) {
  const int oh = g.out_height(), ow = g.out_width();
  std::vector<double> y(std::size_t(batch) * oh * ow * g.filters);
  for (int b = 0; b < batch; ++b)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox)
        for (int f = 0; f < g.filters; ++f) {
          double sum = bias[f];
          for (int ky = 0; ky < g.kernel; ++ky)
            for (int kx = 0; kx < g.kernel; ++kx)
              for (int c = 0; c < g.channels; ++c) {
                const int iy = oy + ky - g.pad, ix = ox + kx - g.pad;
                if (iy < 0 || iy >= g.height || ix < 0 || ix >= g.width) continue;
                sum += w[((std::size_t(f) * g.kernel + ky) * g.kernel + kx) * g.channels + c] *
                       x[((std::size_t(b) * g.height + iy) * g.width + ix) * g.channels + c];
              }
          y[((std::size_t(b) * oh + oy) * ow + ox) * g.filters + f] = sum;
        }
  return y;
}

struct ConvCase {
  int height, width, channels, kernel, pad, filters;
};

class ConvolutionTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvolutionTest, Im2colGemmEqualsDirectConvolution) {
  const ConvCase c = GetParam();
  const ConvGeometry g{c.height, c.width, c.channels, c.kernel, c.pad, c.filters};
  const int batch = 3;
  const auto x = random_values(batch * g.input_size(), 1);
  const auto w = random_values(std::size_t(g.filters) * g.patch(), 2);
  const auto bias = random_values(g.filters, 3);
  std::vector<double> col(std::size_t(batch) * g.positions() * g.patch());
  im2col(x.data(), batch, g, col.data());
  std::vector<double> y(std::size_t(batch) * g.positions() * g.filters);
  gemm<double>(false, true, batch * g.positions(), g.filters, g.patch(), 1.0, col.data(), g.patch(),
               w.data(), g.patch(), 0.0, y.data(), g.filters);
  add_bias(y.data(), std::size_t(batch) * g.positions(), g.filters, bias.data());
  const auto expected = direct_convolution(x, batch, g, w, bias);
  ASSERT_EQ(y.size(), expected.size());
  // The same products summed in another order: a few ulps of sum |w x| (at most ~75 terms of
  // magnitude ~1 here).
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-12) << i;

  // The float kernels give the double result to float rounding.
  std::vector<float> xf(x.begin(), x.end()), colf(col.size());
  im2col(xf.data(), batch, g, colf.data());
  for (std::size_t i = 0; i < col.size(); ++i) EXPECT_EQ(colf[i], static_cast<float>(col[i]));
}

TEST_P(ConvolutionTest, Col2imIsTheAdjointOfIm2col) {
  const ConvCase c = GetParam();
  const ConvGeometry g{c.height, c.width, c.channels, c.kernel, c.pad, c.filters};
  const int batch = 2;
  const auto x = random_values(batch * g.input_size(), 4);
  const auto y = random_values(std::size_t(batch) * g.positions() * g.patch(), 5);
  std::vector<double> col(y.size()), back(x.size());
  im2col(x.data(), batch, g, col.data());
  col2im(y.data(), batch, g, back.data());
  double left = 0.0, right = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) left += col[i] * y[i];
  for (std::size_t i = 0; i < x.size(); ++i) right += x[i] * back[i];
  EXPECT_NEAR(left, right, 1e-10 * (1.0 + std::abs(left)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvolutionTest,
                         ::testing::Values(ConvCase{5, 5, 1, 3, 1, 2},    // same, 1 channel
                                           ConvCase{7, 6, 3, 5, 2, 4},    // same, k = 5
                                           ConvCase{6, 7, 2, 3, 0, 3},    // valid
                                           ConvCase{4, 4, 2, 1, 0, 5},    // 1 x 1
                                           ConvCase{3, 5, 2, 5, 2, 2}));  // kernel past the image

TEST(MaxPool, TakesTheFirstMaximumOfEachWindowAndItsAdjointScattersBack) {
  const int batch = 2, height = 5, width = 4, channels = 3;  // odd height: the last row dropped
  auto x = random_values(std::size_t(batch) * height * width * channels, 6);
  x[0] = x[channels] = 10.0;  // a tie for the first window's maximum: the first corner wins
  const int oh = height / 2, ow = width / 2;
  const std::size_t in_size = std::size_t(height) * width * channels,
                    out_size = std::size_t(oh) * ow * channels;
  std::vector<double> y(batch * out_size);
  std::vector<std::int32_t> argmax(y.size());
  max_pool(x.data(), batch, height, width, channels, y.data(), argmax.data());
  for (int b = 0; b < batch; ++b)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox)
        for (int c = 0; c < channels; ++c) {
          double best = -INFINITY;
          std::size_t where = 0;
          for (int dy = 0; dy < 2; ++dy)
            for (int dx = 0; dx < 2; ++dx) {
              const std::size_t i = ((2 * oy + dy) * width + (2 * ox + dx)) * channels + c;
              if (x[b * in_size + i] > best) best = x[b * in_size + i], where = i;
            }
          const std::size_t o = b * out_size + (oy * ow + ox) * channels + c;
          EXPECT_EQ(y[o], best);
          EXPECT_EQ(argmax[o], static_cast<std::int32_t>(where));
        }
  EXPECT_EQ(argmax[0], 0);
  const auto dy = random_values(y.size(), 7);
  std::vector<double> dx(x.size());
  max_pool_adjoint(dy.data(), argmax.data(), batch, out_size, in_size, dx.data());
  // <P x, dy> = <x, P^T dy> for the linear selection P the argmax fixes.
  double left = 0.0, right = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) left += y[i] * dy[i];
  for (std::size_t i = 0; i < x.size(); ++i) right += x[i] * dx[i];
  EXPECT_NEAR(left, right, 1e-12);
}

// The small-row kernel against a double loop: float products summed in another order, within
// n * 2^-23 of sum_o |d w| (here n = 40 terms of magnitude ~1: 1e-4 of the sum of magnitudes).
TEST(SmallRows, TimesEqualsADoubleLoopForEveryRowCountAndATail) {
  const int n = 40, k = 37;  // two whole 16-column groups and a tail of 5
  const auto d = random_values(std::size_t(kSmallRows) * n, 9);
  const auto w = random_values(std::size_t(n) * k, 10);
  const std::vector<float> df(d.begin(), d.end()), wf(w.begin(), w.end());
  for (int rows = 1; rows <= kSmallRows; ++rows) {
    std::vector<float> c(std::size_t(rows) * k);
    small_rows_times(df.data(), n, rows, wf.data(), k, n, k, c.data(), k);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < k; ++j) {
        double sum = 0.0, magnitude = 0.0;
        for (int o = 0; o < n; ++o) {
          sum += double(df[r * n + o]) * double(wf[o * k + j]);
          magnitude += std::abs(double(df[r * n + o]) * double(wf[o * k + j]));
        }
        EXPECT_NEAR(c[r * k + j], sum, 1e-5 * magnitude) << rows << ": " << r << "," << j;
      }
  }
}

TEST(ColumnSums, AddScaledSumsInRowOrderAndIgnoreOutWhenBetaIsZero) {
  const int rows = 5, n = 70;  // two blocks of columns
  const auto d = random_values(std::size_t(rows) * n, 8);
  std::vector<double> out(n, std::nan(""));
  add_column_sums(d.data(), rows, n, 2.0, 0.0, out.data());
  for (int j = 0; j < n; ++j) {
    double sum = 0.0;
    for (int r = 0; r < rows; ++r) sum += d[r * n + j];
    EXPECT_EQ(out[j], 2.0 * sum);
  }
  std::vector<double> again = out;
  add_column_sums(d.data(), rows, n, 1.0, 0.5, again.data());
  for (int j = 0; j < n; ++j) EXPECT_DOUBLE_EQ(again[j], 0.5 * out[j] + out[j] / 2.0);
}

}  // namespace
}  // namespace fluence
