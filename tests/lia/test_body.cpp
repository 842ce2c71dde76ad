// The frozen body's centering (lia.body_center): features of the rows it was centered on average to
// 0 in every network output, the bias column stays 1, and every other row is shifted by the same
// vector, the mean computed here independently from the uncentered features.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../../src/lia/experiment.hpp"
#include "fluence/data/source.hpp"
#include "fluence/model/network.hpp"
#include "support/default_deck.hpp"

namespace fluence::lia {
namespace {

TEST(LiaBody, CenteringZeroesTheMeanOverItsRowsAndShiftsEveryRowAlike) {
  SyntheticConfig data = default_data().synthetic;
  data.rows = 300;
  data.numeric = 5;
  data.categorical = {};
  data.classes = 3;
  const Table table = generate_synthetic(data, 4);
  Body body;
  body.encoding = Encoding(table, true, false);
  body.network = std::make_unique<Network>(
      NetworkSpec::mlp(body.encoding.width(), {8}, Activation::relu, 3, true), 3, 1e-3);
  body.bias_column = true;
  body.theta.resize(body.network->parameters());
  body.network->initialize(9, body.theta.data());
  std::vector<std::int64_t> public_rows, other_rows;
  for (std::int64_t r = 0; r < 300; ++r) (r % 3 == 0 ? public_rows : other_rows).push_back(r);
  const auto raw_public = body.features(table, public_rows);
  const auto raw_other = body.features(table, other_rows);
  const int W = body.width(), head = W - 1;
  ASSERT_EQ(head, 8);
  std::vector<double> mean(head, 0.0);
  for (std::size_t r = 0; r < public_rows.size(); ++r)
    for (int j = 0; j < head; ++j) mean[j] += raw_public[r * W + j] / public_rows.size();
  double largest = 0.0;
  for (double m : mean) largest = std::max(largest, std::abs(m));
  ASSERT_GT(largest, 0.1) << "ReLU outputs with a nonzero mean: the test would pass trivially";

  body.center_on(table, public_rows);
  const auto centered_public = body.features(table, public_rows);
  const auto centered_other = body.features(table, other_rows);
  // Sums of 100 values of order 1 in a different order than the reference: 1e-12 is thousands of
  // roundings above their error and far below the means (> 0.1) that centering removes.
  for (int j = 0; j < head; ++j) {
    double sum = 0.0;
    for (std::size_t r = 0; r < public_rows.size(); ++r) sum += centered_public[r * W + j];
    EXPECT_NEAR(sum / public_rows.size(), 0.0, 1e-12) << "output " << j;
  }
  for (std::size_t r = 0; r < other_rows.size(); ++r) {
    EXPECT_EQ(centered_other[r * W + head], 1.0) << "bias column of row " << r;
    for (int j = 0; j < head; ++j)
      EXPECT_NEAR(centered_other[r * W + j], raw_other[r * W + j] - mean[j], 1e-12);
  }
}

}  // namespace
}  // namespace fluence::lia
