// ordered_sum must equal the sequential sum in item order, bitwise, for any rank count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "fluence/core/mpi.hpp"
#include "fluence/core/quantized_sum.hpp"

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

// QuantizedSum (docs/math.md §8.3): terms spread over the ranks in uneven ranges give the same bits
// as all terms added on one rank in reverse order, and stay within half a quantum per term of the
// exact sum. The reference is a compensated (Neumaier) sum in long double: its own error, about
// 2^-64 of the sum's magnitude, is far below the quantum.
TEST(QuantizedSum, IsTheSameBitsForAnyLayoutAndWithinHalfAQuantumPerTerm) {
  const int items = 37, width = 5;
  const double scale = 0.37;
  const int rank = world_rank(), ranks = world_size();
  const int first = items * rank / ranks, end = items * (rank + 1) / ranks;
  double bound = 0.0;
  for (int item = 0; item < items; ++item)
    for (int k = 0; k < width; ++k) bound = std::max(bound, std::abs(item_value(item, k) * scale));
  QuantizedSum distributed, reversed;
  distributed.reset(width, 1, bound, items);
  reversed.reset(width, 1, bound, items);
  std::vector<double> row(width);
  for (int item = first; item < end; ++item) {
    for (int k = 0; k < width; ++k) row[k] = item_value(item, k);
    distributed.add(0, row.data(), scale, width);
    distributed.counts()[0] += item;
  }
  for (int item = items - 1; item >= 0; --item) {
    for (int k = 0; k < width; ++k) row[k] = item_value(item, k);
    reversed.add(0, row.data(), scale, width);
  }
  std::vector<double> total(width), local(width);
  distributed.allreduce(total);
  reversed.local_total(local);
  EXPECT_EQ(distributed.counts()[0], items * (items - 1) / 2);
  for (int k = 0; k < width; ++k) {
    EXPECT_EQ(total[k], local[k]) << "component " << k;
    long double sum = 0.0L, compensation = 0.0L;
    for (int item = 0; item < items; ++item) {
      const long double term = item_value(item, k) * scale;  // the double product, as add() rounds
      const long double next = sum + term;
      compensation += std::abs(sum) >= std::abs(term) ? (sum - next) + term : (term - next) + sum;
      sum = next;
    }
    const double exact = static_cast<double>(sum + compensation);
    const double tolerance = items * distributed.quantum() / 2 + std::abs(exact) * 0x1p-52;
    EXPECT_NEAR(total[k], exact, tolerance) << "component " << k;
  }
}

// The design limit: max_terms terms of magnitude `bound` in one slot stay inside int64 and sum
// exactly (2000 x 1.5 and 2000 x -2, with 2 an exact power of two, the edge of the exponent).
TEST(QuantizedSum, TheMostTermsOfTheLargestMagnitudeDoNotOverflow) {
  const int terms = 2000;
  const int rank = world_rank(), ranks = world_size();
  const int first = terms * rank / ranks, end = terms * (rank + 1) / ranks;
  for (const double value : {1.5, -2.0}) {
    QuantizedSum sum;
    sum.reset(1, 0, std::abs(value), terms);
    for (int term = first; term < end; ++term) sum.add(0, &value, 1.0, 1);
    std::vector<double> total(1);
    sum.allreduce(total);
    EXPECT_EQ(total[0], terms * value);
  }
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
