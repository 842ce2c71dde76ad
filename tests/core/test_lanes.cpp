// The vectorized logarithm against std::log (a different algorithm, correctly rounded in almost
// every case): the error bound it states, over the softmax denominators it serves and the whole
// range of positive normal numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "fluence/core/lanes.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"

namespace fluence {
namespace {

// Error in units of the last place of the exact value (std::log's, within half an ulp).
double ulps(double value, double expected) {
  return std::abs(value - expected) /
         (std::nextafter(std::abs(expected), INFINITY) - std::abs(expected));
}

TEST(Lanes, LogPositiveIsWithinTwoUlpsOfStdLog) {
  std::vector<double> x;
  for (int i = 0; i <= 40000; ++i) x.push_back(1.0 + 9.0 * i / 40000.0);  // softmax totals, C <= 10
  Stream stream(3, purpose::synthetic_rows);
  for (int i = 0; i < 40000; ++i) x.push_back(std::exp(1400.0 * (stream.uniform() - 0.5)));
  // Around 1 (ln x near 0, the relative error's hardest case), both sides of sqrt(2) and of the
  // powers of two, and the ends of the normal range.
  for (int k = -30; k <= 30; ++k) x.push_back(1.0 + std::ldexp(1.0, -20) * k);
  for (double m : {std::sqrt(2.0), 1.0, 2.0})
    for (int e = -1020; e <= 1020; e += 17)
      for (double v : {std::nextafter(m, 0.0), m, std::nextafter(m, 4.0)})
        x.push_back(std::ldexp(v, e));
  x.push_back(std::numeric_limits<double>::min());
  x.push_back(std::numeric_limits<double>::max());
  for (std::size_t i = 0; i < x.size(); i += lanes::kLanes) {
    lanes::Lanes v{};
    for (int l = 0; l < lanes::kLanes; ++l) v[l] = x[std::min(i + l, x.size() - 1)];
    const lanes::Lanes y = lanes::log_positive(v);
    for (int l = 0; l < lanes::kLanes; ++l) {
      const double expected = std::log(v[l]);
      if (expected == 0.0) {
        EXPECT_EQ(y[l], 0.0);
        continue;
      }
      EXPECT_LE(ulps(y[l], expected), 2.0) << "x = " << v[l];
    }
  }
}

TEST(Lanes, LogPositiveOfNanOrInfinityIsNan) {
  lanes::Lanes v{};
  for (int l = 0; l < lanes::kLanes; ++l) v[l] = 2.0;
  v[1] = std::nan("");
  v[5] = INFINITY;
  const lanes::Lanes y = lanes::log_positive(v);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_TRUE(std::isnan(y[5]));
  // x = 2: m = 1, s = 0, so the result is ln 2's two parts added once, ln 2 correctly rounded.
  EXPECT_EQ(y[0], std::log(2.0));
}

}  // namespace
}  // namespace fluence
