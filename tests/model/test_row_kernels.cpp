// The byte-code kernels against naive double computations on the decoded inputs
// x = offset + step * k, and the promise the rank-count independence rests on: a row's results do
// not depend on the rows it is computed with (bitwise).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/model/row_kernels.hpp"

namespace fluence {
namespace {

struct ByteRows {
  int rows, D, C;
  std::vector<std::uint8_t> k;  // rows x D, about half zeros as in images
  std::vector<double> step, offset, theta;
  std::vector<const std::uint8_t*> pointers;
  double x(int r, int j) const { return offset[j] + step[j] * k[r * D + j]; }
};

ByteRows random_rows(int rows, int D, int C, std::uint64_t seed) {
  ByteRows p{rows, D, C, {}, {}, {}, {}, {}};
  Stream stream(seed, purpose::synthetic_rows);
  p.k.resize(static_cast<std::size_t>(rows) * D);
  for (auto& v : p.k) v = stream.uniform() < 0.5 ? 0 : static_cast<std::uint8_t>(stream.below(256));
  for (int j = 0; j < D; ++j) {
    p.step.push_back((1.0 + stream.uniform()) / 255.0);
    p.offset.push_back(-stream.uniform());
  }
  p.theta.resize(static_cast<std::size_t>(C) * D);
  for (auto& v : p.theta) v = 0.3 * stream.normal();
  for (int r = 0; r < rows; ++r) p.pointers.push_back(p.k.data() + r * D);
  return p;
}

double naive_logit(const ByteRows& p, const std::vector<double>& theta, int r, int c) {
  double z = 0.0;
  for (int j = 0; j < p.D; ++j) z += theta[c * p.D + j] * p.x(r, j);
  return z;
}

// Sum of |theta x| terms: the scale a logit's rounding error is relative to.
double logit_scale(const ByteRows& p, const std::vector<double>& theta, int r, int c) {
  double s = 0.0;
  for (int j = 0; j < p.D; ++j) s += std::abs(theta[c * p.D + j] * p.x(r, j));
  return s;
}

// Shapes with and without a tail of columns (D % 8), fewer columns than a lane vector, one class,
// and more classes than one register group holds (10).
const int kShapes[][2] = {{785, 10}, {64, 3}, {13, 1}, {5, 12}, {300, 2}};

TEST(ByteKernels, LogitsMatchTheDecodedDotProducts) {
  for (auto [D, C] : kShapes) {
    const auto p = random_rows(21, D, C, 100 + D);
    std::vector<double> z(p.rows * C), bias(C), expected_bias(C);
    byte_logits(p.pointers.data(), p.rows, D, p.theta.data(), p.step.data(), p.offset.data(), C,
                bias.data(), z.data());
    byte_bias(p.theta.data(), C, D, p.offset.data(), expected_bias.data());
    for (int c = 0; c < C; ++c) EXPECT_EQ(bias[c], expected_bias[c]);
    // Differently associated double sums of D terms: 1e-14 of the sum of |terms|.
    for (int r = 0; r < p.rows; ++r)
      for (int c = 0; c < C; ++c)
        EXPECT_NEAR(z[r * C + c], naive_logit(p, p.theta, r, c),
                    1e-14 * logit_scale(p, p.theta, r, c))
            << "D " << D << " C " << C << " row " << r << " class " << c;
  }
}

TEST(ByteKernels, LogitsOfARowDoNotDependOnItsBatch) {
  for (auto [D, C] : kShapes) {
    const auto p = random_rows(37, D, C, 200 + D);
    std::vector<double> together(p.rows * C), bias(C);
    byte_logits(p.pointers.data(), p.rows, D, p.theta.data(), p.step.data(), p.offset.data(), C,
                bias.data(), together.data());
    for (int r = 0; r < p.rows; r += 5) {
      std::vector<double> alone(C);
      byte_logits(p.pointers.data() + r, 1, D, p.theta.data(), p.step.data(), p.offset.data(), C,
                  bias.data(), alone.data());
      for (int c = 0; c < C; ++c) EXPECT_EQ(alone[c], together[r * C + c]) << "row " << r;
    }
  }
}

TEST(ByteKernels, RankUpdateMatchesTheDecodedOuterProducts) {
  for (auto [D, C] : kShapes) {
    for (double shrink : {1.0, 0.99}) {
      const auto p = random_rows(19, D, C, 300 + D);
      Stream stream(7, purpose::synthetic_rows);
      std::vector<double> a(p.rows * C);
      for (auto& v : a) v = 0.01 * stream.normal();
      auto theta = p.theta;
      byte_rank_update(p.pointers.data(), p.rows, D, a.data(), C, shrink, p.step.data(),
                       p.offset.data(), theta.data());
      for (int c = 0; c < C; ++c)
        for (int j = 0; j < D; ++j) {
          double expected = shrink * p.theta[c * D + j], scale = std::abs(expected);
          for (int b = 0; b < p.rows; ++b) {
            expected += a[b * C + c] * p.x(b, j);
            scale += std::abs(a[b * C + c] * p.x(b, j));
          }
          EXPECT_NEAR(theta[c * D + j], expected, 1e-14 * scale) << "D " << D << " C " << C;
        }
    }
  }
}

// The float kernels (federation.local_precision = "single") against the naive double computation
// on the same float-rounded inputs, so only the float arithmetic differs. A lane adds about D/16
// products in float and the lanes meet in a 4-level tree; with the bias's sum and the rounding of
// theta * step to float, (D/16 + 8) rounding errors of 2^-24 of the sum of |terms| bound a logit's
// error (each term enters at most that many roundings). The update's running sum over the rows
// adds `rows` products, then three more operations: (rows + 8) 2^-24 of its |terms|.
struct SingleRows {
  std::vector<float> step, offset, theta;
  explicit SingleRows(const ByteRows& p)
      : step(p.step.begin(), p.step.end()),
        offset(p.offset.begin(), p.offset.end()),
        theta(p.theta.begin(), p.theta.end()) {}
  double x(const ByteRows& p, int r, int j) const {
    return static_cast<double>(offset[j]) + static_cast<double>(step[j]) * p.k[r * p.D + j];
  }
};

// The float SGD's logits: rows gathered by pointer into a block (block_rows), weights folded in
// float in theta's layout (fold_classes), the block's sums as the fast evaluation takes them. A
// weight theta * step is rounded once, a row's products are summed in float over runs of 64
// columns (at most 64 roundings) and the runs in double, and the bias adds D/16 + 4 float
// roundings: (64 + D/16 + 8) 2^-24 of the sum of |terms| bounds a logit's error.
TEST(ByteKernels, SingleBlockLogitsMatchTheDecodedDotProducts) {
  for (auto [D, C] : kShapes) {
    const auto p = random_rows(21, D, C, 500 + D);
    const SingleRows f(p);
    std::vector<float> folded(C * D);
    std::vector<double> bias(C), z(C * kCodeBlockRows);
    std::vector<std::uint8_t> block(kCodeBlockRows * D);
    fold_classes(f.theta.data(), C, D, f.step.data(), f.offset.data(), folded.data(), bias.data());
    for (int r0 = 0; r0 < p.rows; r0 += kCodeBlockRows) {
      const int n = std::min(kCodeBlockRows, p.rows - r0);
      block_rows(p.pointers.data() + r0, n, D, block.data());
      block_logits_by_class(block.data(), D, folded.data(), bias.data(), C, z.data());
      for (int l = 0; l < n; ++l)
        for (int c = 0; c < C; ++c) {
          const int r = r0 + l;
          double expected = 0.0, scale = 0.0;
          for (int j = 0; j < D; ++j) {
            const double term = static_cast<double>(f.theta[c * D + j]) * f.x(p, r, j);
            expected += term;
            scale += std::abs(static_cast<double>(f.theta[c * D + j]) * f.offset[j]) +
                     std::abs(static_cast<double>(f.theta[c * D + j]) * f.step[j] * p.k[r * D + j]);
          }
          EXPECT_NEAR(z[c * kCodeBlockRows + l], expected, (64 + D / 16 + 8) * 0x1p-24 * scale)
              << "D " << D << " C " << C << " row " << r << " class " << c;
        }
    }
  }
}

// block_rows against block_codes of the same rows: any 1-16 rows, in any order, any width (tails
// of 1-15 columns past the 16-column steps, fewer columns than one step).
TEST(ByteKernels, BlockRowsIsTheBlockedLayoutOfTheRowsItPointsTo) {
  for (int D : {785, 16, 17, 13, 3, 64}) {
    const auto p = random_rows(16, D, 1, 700 + D);
    Stream stream(9, purpose::synthetic_rows);
    for (int n = 1; n <= kCodeBlockRows; ++n) {
      auto pointers = p.pointers;
      stream.shuffle(std::span<const std::uint8_t*>(pointers));
      std::vector<std::uint8_t> rows(static_cast<std::size_t>(n) * D);
      for (int r = 0; r < n; ++r) std::copy_n(pointers[r], D, rows.begin() + r * D);
      std::vector<std::uint8_t> expected(kCodeBlockRows * D), block(kCodeBlockRows * D, 0xAB);
      block_codes(rows.data(), n, D, expected.data());
      block_rows(pointers.data(), n, D, block.data());
      EXPECT_EQ(block, expected) << "D " << D << " rows " << n;
    }
  }
}

TEST(ByteKernels, SingleRankUpdateMatchesTheDecodedOuterProducts) {
  for (auto [D, C] : kShapes) {
    const auto p = random_rows(19, D, C, 600 + D);
    const SingleRows f(p);
    Stream stream(8, purpose::synthetic_rows);
    std::vector<float> a(p.rows * C);
    for (auto& v : a) v = static_cast<float>(0.01 * stream.normal());
    const float shrink = 0.99f;
    auto theta = f.theta;
    byte_rank_update(p.pointers.data(), p.rows, D, a.data(), C, shrink, f.step.data(),
                     f.offset.data(), theta.data());
    for (int c = 0; c < C; ++c)
      for (int j = 0; j < D; ++j) {
        double expected = static_cast<double>(shrink) * f.theta[c * D + j];
        double scale = std::abs(expected);
        for (int b = 0; b < p.rows; ++b) {
          expected += static_cast<double>(a[b * C + c]) * f.x(p, b, j);
          scale += std::abs(static_cast<double>(a[b * C + c])) *
                   (std::abs(f.offset[j]) + f.step[j] * p.k[b * D + j]);
        }
        EXPECT_NEAR(theta[c * D + j], expected, (p.rows + 8) * 0x1p-24 * scale)
            << "D " << D << " C " << C;
      }
    // Folding on the way (the next batch's weights) changes no bit of theta and gives the bits of
    // fold_classes on the result.
    auto fused = f.theta;
    std::vector<float> folded(C * D), expected_folded(C * D);
    std::vector<double> bias(C), expected_bias(C);
    byte_rank_update(p.pointers.data(), p.rows, D, a.data(), C, shrink, f.step.data(),
                     f.offset.data(), fused.data(), nullptr, folded.data(), bias.data());
    fold_classes(theta.data(), C, D, f.step.data(), f.offset.data(), expected_folded.data(),
                 expected_bias.data());
    EXPECT_EQ(fused, theta) << "D " << D << " C " << C;
    EXPECT_EQ(folded, expected_folded) << "D " << D << " C " << C;
    EXPECT_EQ(bias, expected_bias) << "D " << D << " C " << C;
  }
}

// The evaluation layout: 16-row blocks, column-major within a block.
std::vector<std::uint8_t> blocked(const ByteRows& p) {
  std::vector<std::uint8_t> out((p.rows + kCodeBlockRows - 1) / kCodeBlockRows * kCodeBlockRows *
                                p.D);
  block_codes(p.k.data(), p.rows, p.D, out.data());
  return out;
}

TEST(ByteKernels, BlockCodesAreTheRowsColumnMajorPerBlock) {
  const auto p = random_rows(37, 13, 1, 1);
  const auto b = blocked(p);
  ASSERT_EQ(b.size(), 3u * 16 * 13);
  for (int r = 0; r < 48; ++r)
    for (int j = 0; j < 13; ++j)
      EXPECT_EQ(b[(r / 16) * 16 * 13 + j * 16 + r % 16], r < 37 ? p.k[r * 13 + j] : 0);
}

TEST(ByteKernels, BlockLogitsMatchTheDecodedDotProductsInDoubleAndFloat) {
  for (auto [D, C] : kShapes) {
    const auto p = random_rows(40, D, C, 400 + D);
    const auto codes = blocked(p);
    std::vector<double> wt(D * C), bias(C), z(C * kCodeBlockRows), zf(C * kCodeBlockRows);
    std::vector<float> wtf(D * C);
    fold_transposed(p.theta.data(), C, D, p.step.data(), wt.data());
    fold_transposed(p.theta.data(), C, D, p.step.data(), wtf.data());
    byte_bias(p.theta.data(), C, D, p.offset.data(), bias.data());
    for (int b = 0; b * kCodeBlockRows < p.rows; ++b) {
      block_logits(codes.data() + b * kCodeBlockRows * D, D, wt.data(), bias.data(), C, z.data());
      block_logits(codes.data() + b * kCodeBlockRows * D, D, wtf.data(), bias.data(), C, zf.data());
      for (int l = 0; l < kCodeBlockRows && b * kCodeBlockRows + l < p.rows; ++l)
        for (int c = 0; c < C; ++c) {
          const int r = b * kCodeBlockRows + l;
          const double expected = naive_logit(p, p.theta, r, c);
          const double scale = logit_scale(p, p.theta, r, c);
          EXPECT_NEAR(z[c * kCodeBlockRows + l], expected, 1e-14 * scale);
          // Weights rounded to float (2^-24 relative) and float sums over 64 columns: within
          // 64 x 2^-24 of the scale even if every rounding went one way; typically far closer.
          EXPECT_NEAR(zf[c * kCodeBlockRows + l], expected, 4e-6 * scale);
        }
    }
  }
}

TEST(ByteKernels, BlockLogitsOfARowDoNotDependOnItsBlockOrLane) {
  const int D = 785, C = 10;
  const auto p = random_rows(16, D, C, 5);
  // The same 16 rows in reverse order: every row moves to another lane.
  ByteRows q = p;
  for (int r = 0; r < 16; ++r) std::copy_n(p.k.begin() + (15 - r) * D, D, q.k.begin() + r * D);
  const auto a = blocked(p), b = blocked(q);
  std::vector<double> wt(D * C), bias(C), za(C * 16), zb(C * 16);
  std::vector<float> wtf(D * C);
  fold_transposed(p.theta.data(), C, D, p.step.data(), wt.data());
  fold_transposed(p.theta.data(), C, D, p.step.data(), wtf.data());
  byte_bias(p.theta.data(), C, D, p.offset.data(), bias.data());
  for (bool fast : {false, true}) {
    if (fast) {
      block_logits(a.data(), D, wtf.data(), bias.data(), C, za.data());
      block_logits(b.data(), D, wtf.data(), bias.data(), C, zb.data());
    } else {
      block_logits(a.data(), D, wt.data(), bias.data(), C, za.data());
      block_logits(b.data(), D, wt.data(), bias.data(), C, zb.data());
    }
    for (int l = 0; l < 16; ++l)
      for (int c = 0; c < C; ++c) EXPECT_EQ(za[c * 16 + l], zb[c * 16 + 15 - l]) << fast;
  }
}

// The loss of a block against std::exp and std::log, with logits spread far enough that the
// exponential's argument is clamped below -708 for some classes, and ties for the argmax.
TEST(ByteKernels, BlockLossMatchesTheNaiveCrossEntropy) {
  const int C = 7;
  Stream stream(11, purpose::synthetic_rows);
  std::vector<double> z(C * kCodeBlockRows);
  for (int trial = 0; trial < 50; ++trial) {
    const double spread = trial < 25 ? 5.0 : 500.0;
    for (auto& v : z) v = spread * stream.normal();
    z[2 * kCodeBlockRows + 3] = z[5 * kCodeBlockRows + 3] = 1e4;  // a tie at the top: class 2
    std::int32_t labels[kCodeBlockRows];
    for (auto& y : labels) y = static_cast<std::int32_t>(stream.below(C));
    labels[3] = 2;
    const int rows = 11 + trial % 6;
    double loss = 0.0;
    long correct = 0;
    block_loss(z.data(), C, labels, rows, loss, correct);
    double expected = 0.0;
    long expected_correct = 0;
    for (int r = 0; r < rows; ++r) {
      int best = 0;
      for (int c = 1; c < C; ++c)
        if (z[c * 16 + r] > z[best * 16 + r]) best = c;
      const double top = z[best * 16 + r];
      double total = 0.0;
      for (int c = 0; c < C; ++c) total += std::exp(z[c * 16 + r] - top);
      expected += top + std::log(total) - z[labels[r] * 16 + r];
      expected_correct += best == labels[r];
    }
    // Each exponential within a few ulps: the losses agree to 1e-14 of their magnitude.
    EXPECT_NEAR(loss, expected, 1e-14 * (std::abs(expected) + rows * spread)) << trial;
    EXPECT_EQ(correct, expected_correct) << trial;
  }
}

}  // namespace
}  // namespace fluence
