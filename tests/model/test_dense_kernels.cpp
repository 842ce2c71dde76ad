// The tiled few-class kernels against naive long-double sums (within the classical rounding bound
// gamma_n sum |terms|, n the number of terms), and the promise the rank-count independence rests
// on: a row's logits do not depend on the rows it is computed with, and an accumulated sum does
// not depend on how its rows are split into calls (bitwise).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/model/dense_kernels.hpp"

namespace fluence {
namespace {

struct Shape {
  int rows, D, C;
};

// gamma_n = n u / (1 - n u) with u = 2^-53, the bound on a sum of n products' rounding error
// relative to the sum of their magnitudes (Higham, Accuracy and Stability, Eq. 3.5).
double gamma(int n) {
  const double u = std::ldexp(1.0, -53);
  return n * u / (1.0 - n * u);
}

std::vector<double> normal_values(std::size_t n, std::uint64_t seed) {
  Stream stream(seed, purpose::synthetic_rows);
  std::vector<double> values(n);
  for (auto& v : values) v = stream.normal();
  return values;
}

// Shapes that cover the whole 8-column groups, the tail columns, the 16/C-group strips of the
// outer update, and row counts that are and are not multiples of the tile.
const Shape kShapes[] = {{1, 1, 2},   {9, 7, 2},    {17, 8, 3}, {13, 33, 4},   {40, 789, 4},
                         {23, 88, 2}, {11, 130, 3}, {7, 41, 5}, {19, 785, 10}, {5, 50, 16}};

TEST(DenseKernels, LogitsMatchLongDoubleSums) {
  for (const Shape& s : kShapes) {
    const auto x = normal_values(static_cast<std::size_t>(s.rows) * s.D, 1);
    const auto theta = normal_values(static_cast<std::size_t>(s.C) * s.D, 2);
    std::vector<double> z(static_cast<std::size_t>(s.rows) * s.C);
    dense_logits(x.data(), s.rows, s.D, s.C, theta.data(), z.data());
    for (int r = 0; r < s.rows; ++r)
      for (int c = 0; c < s.C; ++c) {
        long double exact = 0.0L, magnitude = 0.0L;
        for (int j = 0; j < s.D; ++j) {
          const long double term = static_cast<long double>(x[r * s.D + j]) * theta[c * s.D + j];
          exact += term;
          magnitude += std::fabs(term);
        }
        EXPECT_NEAR(z[r * s.C + c], static_cast<double>(exact),
                    gamma(s.D) * static_cast<double>(magnitude) + 1e-300)
            << "rows " << s.rows << " D " << s.D << " C " << s.C << " row " << r;
      }
  }
}

TEST(DenseKernels, RowLogitsDoNotDependOnTheirNeighbours) {
  for (const Shape& s : kShapes) {
    const auto x = normal_values(static_cast<std::size_t>(s.rows) * s.D, 3);
    const auto theta = normal_values(static_cast<std::size_t>(s.C) * s.D, 4);
    std::vector<double> together(static_cast<std::size_t>(s.rows) * s.C), alone(s.C);
    dense_logits(x.data(), s.rows, s.D, s.C, theta.data(), together.data());
    for (int r = 0; r < s.rows; ++r) {
      dense_logits(x.data() + r * s.D, 1, s.D, s.C, theta.data(), alone.data());
      for (int c = 0; c < s.C; ++c) EXPECT_EQ(alone[c], together[r * s.C + c]) << r << " " << c;
    }
  }
}

TEST(DenseKernels, OuterUpdateMatchesLongDoubleSumsAndIgnoresSplits) {
  for (const Shape& s : kShapes) {
    const auto x = normal_values(static_cast<std::size_t>(s.rows) * s.D, 5);
    const auto w = normal_values(static_cast<std::size_t>(s.rows) * s.C, 6);
    const auto start = normal_values(static_cast<std::size_t>(s.C) * s.D, 7);
    std::vector<double> whole = start, split = start;
    dense_outer_update(w.data(), x.data(), s.rows, s.D, s.C, whole.data());
    // The same rows in three calls: the accumulation continues in row order, so the bits agree.
    const int first = s.rows / 3, second = s.rows / 2;
    dense_outer_update(w.data(), x.data(), first, s.D, s.C, split.data());
    dense_outer_update(w.data() + first * s.C, x.data() + first * s.D, second - first, s.D, s.C,
                       split.data());
    dense_outer_update(w.data() + second * s.C, x.data() + second * s.D, s.rows - second, s.D, s.C,
                       split.data());
    for (int c = 0; c < s.C; ++c)
      for (int j = 0; j < s.D; ++j) {
        long double exact = start[c * s.D + j], magnitude = std::fabs(exact);
        for (int r = 0; r < s.rows; ++r) {
          const long double term = static_cast<long double>(w[r * s.C + c]) * x[r * s.D + j];
          exact += term;
          magnitude += std::fabs(term);
        }
        const double got = whole[c * s.D + j];
        EXPECT_NEAR(got, static_cast<double>(exact),
                    gamma(s.rows + 1) * static_cast<double>(magnitude) + 1e-300)
            << "rows " << s.rows << " D " << s.D << " C " << s.C;
        EXPECT_EQ(split[c * s.D + j], got);
      }
  }
}

TEST(DenseKernels, RejectClassCountsOutsideTheirRange) {
  std::vector<double> x(8, 1.0), theta(8 * 17, 1.0), z(17);
  for (int C : {1, kDenseMaxClasses + 1}) {
    EXPECT_THROW(dense_logits(x.data(), 1, 8, C, theta.data(), z.data()), std::exception);
    EXPECT_THROW(dense_outer_update(z.data(), x.data(), 1, 8, C, theta.data()), std::exception);
  }
}

}  // namespace
}  // namespace fluence
