// ordered_sum must equal the sequential sum in item order, bitwise, for any rank count.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fluence/core/mpi.hpp"

namespace fluence {
namespace {

// Items whose sum depends on the order of addition in floating point.
double item_value(int item, int k) {
  return std::pow(10.0, (item * 7 + k) % 17 - 8) * (item % 3 - 1.1);
}

TEST(OrderedSum, EqualsSequentialSumBitwiseForAnyLayout) {
  const int items = 37, width = 5;
  const int rank = world_rank(), ranks = world_size();
  // Uneven contiguous ranges, including empty ones when ranks > items.
  const int first = items * rank / ranks, end = items * (rank + 1) / ranks;
  std::vector<double> local;
  for (int item = first; item < end; ++item)
    for (int k = 0; k < width; ++k) local.push_back(item_value(item, k));
  std::vector<double> result(width);
  ordered_sum(local, end - first, width, result);
  for (int k = 0; k < width; ++k) {
    // Values are materialized first so the compiler cannot fuse the multiply into the sum (FMA).
    std::vector<double> values;
    for (int item = 0; item < items; ++item) values.push_back(item_value(item, k));
    double expected = 0.0;
    for (double value : values) expected += value;
    EXPECT_EQ(result[k], expected) << "component " << k;
  }
}

TEST(ChainSum, EqualsOrderedSumBitwise) {
  const int items = 37, width = 5;
  const int rank = world_rank(), ranks = world_size();
  const int first = items * rank / ranks, end = items * (rank + 1) / ranks;
  std::vector<double> local;
  for (int item = first; item < end; ++item)
    for (int k = 0; k < width; ++k) local.push_back(item_value(item, k));
  std::vector<double> ordered(width), chained(width);
  ordered_sum(local, end - first, width, ordered);
  chain_sum(end - first, chained, [&](int item, std::span<double> sum) {
    for (int k = 0; k < width; ++k) sum[k] += local[static_cast<std::size_t>(item) * width + k];
  });
  for (int k = 0; k < width; ++k) EXPECT_EQ(chained[k], ordered[k]) << "component " << k;
}

TEST(OrderedSum, AllgatherKeepsItemOrder) {
  const int items = 11;
  const int rank = world_rank(), ranks = world_size();
  const int first = items * rank / ranks, end = items * (rank + 1) / ranks;
  std::vector<double> local;
  for (int item = first; item < end; ++item) local.push_back(item);
  const auto all = ordered_allgather(local, end - first, 1);
  ASSERT_EQ(all.size(), static_cast<std::size_t>(items));
  for (int item = 0; item < items; ++item) EXPECT_EQ(all[item], item);
}

TEST(CollectiveCheck, EveryRankThrowsTheLowestFailingRanksMessage) {
  const int failing = world_size() - 1;
  try {
    collective_check([&] {
      if (world_rank() == failing) throw std::runtime_error("disk on fire");
    });
    FAIL() << "no exception";
  } catch (const std::exception& error) {
    EXPECT_NE(std::string(error.what()).find("disk on fire"), std::string::npos);
  }
}

}  // namespace
}  // namespace fluence
