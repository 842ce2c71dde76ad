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
// 2^-64 of the sum's magnitude, is far below the quantum. Cases: one limb with the exact bound;
// two limbs with the exact bound and with a bound 2^30 times too large (a clip norm far above the
// updates), whose finest quantum is then still 2^-50 of the largest term.
void check_quantized_sum(int limbs, double looseness) {
  const int items = 37, width = 5;
  const double scale = 0.37;
  const int rank = world_rank(), ranks = world_size();
  const int first = items * rank / ranks, end = items * (rank + 1) / ranks;
  double largest = 0.0;
  for (int item = 0; item < items; ++item)
    for (int k = 0; k < width; ++k)
      largest = std::max(largest, std::abs(item_value(item, k) * scale));
  const double bound = largest * looseness;
  QuantizedSum distributed, reversed;
  distributed.reset(width, 1, bound, items, limbs);
  reversed.reset(width, 1, bound, items, limbs);
  EXPECT_LE(distributed.quantum(), largest * (limbs == 2 ? 0x1p-50 : 0x1p-50 * looseness));
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
    // Half a quantum per term, plus the final rounding of the integer total times q to a double.
    const double tolerance = items * distributed.quantum() / 2 + std::abs(exact) * 0x1p-52;
    EXPECT_NEAR(total[k], exact, tolerance) << "component " << k;
  }
}

TEST(QuantizedSum, IsTheSameBitsForAnyLayoutAndWithinHalfAQuantumPerTerm) {
  check_quantized_sum(1, 1.0);
  check_quantized_sum(2, 1.0);
  check_quantized_sum(2, 0x1p30);
}

// The design limit: max_terms terms of magnitude `bound` in one slot stay inside int64 and sum
// exactly (2000 x 1.5 and 2000 x -2, with 2 an exact power of two, the edge of the exponent).
TEST(QuantizedSum, TheMostTermsOfTheLargestMagnitudeDoNotOverflow) {
  const int terms = 2000;
  const int rank = world_rank(), ranks = world_size();
  const int first = terms * rank / ranks, end = terms * (rank + 1) / ranks;
  for (const int limbs : {1, 2})
    for (const double value : {1.5, -2.0}) {
      QuantizedSum sum;
      sum.reset(1, 0, std::abs(value), terms, limbs);
      for (int term = first; term < end; ++term) sum.add(0, &value, 1.0, 1);
      std::vector<double> total(1);
      sum.allreduce(total);
      EXPECT_EQ(total[0], terms * value) << limbs << " limb(s)";
    }
}

// psd_matrix_sum: PSD items A_k A_k^T (p = 6, rank 3), item 4 left out, spread over the ranks. The
// result is the bits of all items quantized on one rank in reverse order with the same bound
// (twice the largest diagonal entry), and within half a quantum per item of the exact sum.
// add_multiples(m, v, scale) is the same integers as adding |m_i| terms of +-v one by one (the
// canary audit's one pass over a rank's sampled canaries): bitwise, for one and two limbs, values
// whose quantization rounds (one far below a quantum: the low limb alone), and a value past the
// bound refused whole.
TEST(QuantizedSum, AddMultiplesEqualsAddingEachSignedTerm) {
  const std::size_t n = 37;
  for (const int limbs : {1, 2}) {
    for (const double value : {0.1234567891234, 3.0 * std::ldexp(1.0, -60), 0.7}) {
      QuantizedSum one_by_one, multiples;
      one_by_one.reset(n, 1, 1.0, 2000, limbs);
      multiples.reset(n, 1, 1.0, 2000, limbs);
      std::vector<std::int64_t> m(n);
      std::vector<double> plus(n, value), minus(n, -value);
      for (std::size_t i = 0; i < n; ++i) m[i] = static_cast<std::int64_t>(i % 7) - 3;
      for (int k = 1; k <= 3; ++k) {
        // Term k at coordinate i: +v where m_i >= k, -v where m_i <= -k.
        std::vector<double> term(n, 0.0);
        for (std::size_t i = 0; i < n; ++i)
          term[i] = m[i] >= k ? plus[i] : m[i] <= -k ? minus[i] : 0.0;
        EXPECT_EQ(one_by_one.add(0, term.data(), 0.75, n), 0u);
      }
      EXPECT_EQ(multiples.add_multiples(0, m.data(), value, 0.75, n), 0u);
      std::vector<double> a(n), b(n);
      one_by_one.local_total(a);
      multiples.local_total(b);
      for (std::size_t i = 0; i < n; ++i)
        EXPECT_EQ(a[i], b[i]) << limbs << " " << value << " " << i;
    }
    QuantizedSum refused;
    refused.reset(n, 1, 1.0, 2000, limbs);
    std::vector<std::int64_t> m(n, 1);
    EXPECT_EQ(refused.add_multiples(0, m.data(), 2.0, 1.0, n), n);
  }
}

TEST(PsdMatrixSum, IsTheSameBitsForAnyLayoutAndCloseToTheExactSum) {
  const int items = 9, p = 6;
  auto matrix_of_item = [&](int item, double* m) {
    double a[p][3];
    for (int i = 0; i < p; ++i)
      for (int c = 0; c < 3; ++c) a[i][c] = item_value(item * 5 + i, c) * 1e-3;
    for (int i = 0; i < p; ++i)
      for (int j = 0; j < p; ++j) {
        double v = 0.0;
        for (int c = 0; c < 3; ++c) v += a[i][c] * a[j][c];
        m[i * p + j] = v;
      }
    return item != 4;
  };
  const int rank = world_rank(), ranks = world_size();
  const int first = items * rank / ranks, end = items * (rank + 1) / ranks;
  std::vector<double> out;
  psd_matrix_sum(
      end - first, p, out,
      [&](int k, double* d) {
        std::vector<double> m(p * p);
        const bool used = matrix_of_item(first + k, m.data());
        for (int i = 0; i < p; ++i) d[i] = m[i * p + i];
        return used;
      },
      [&](int k, double* m) { return matrix_of_item(first + k, m); });
  ASSERT_EQ(out.size(), static_cast<std::size_t>(p * p));
  double largest = 0.0;
  std::vector<std::vector<double>> all(items, std::vector<double>(p * p));
  for (int item = 0; item < items; ++item)
    if (matrix_of_item(item, all[item].data()))
      for (int i = 0; i < p; ++i) largest = std::max(largest, all[item][i * p + i]);
  QuantizedSum reversed;
  reversed.reset(p * p, 0, 2.0 * largest, items);
  for (int item = items - 1; item >= 0; --item) {
    if (item != 4) {
      EXPECT_EQ(reversed.add(0, all[item].data(), 1.0, p * p), 0u);
    }
  }
  std::vector<double> local(p * p);
  reversed.local_total(local);
  for (int j = 0; j < p * p; ++j) {
    EXPECT_EQ(out[j], local[j]) << "entry " << j;
    long double exact = 0.0L;
    for (int item = 0; item < items; ++item)
      if (item != 4) exact += all[item][j];
    EXPECT_NEAR(out[j], static_cast<double>(exact),
                items * reversed.quantum() / 2 + std::abs(static_cast<double>(exact)) * 0x1p-52)
        << "entry " << j;
  }
}

// An item that is not PSD (an off-diagonal entry beyond every diagonal bound) sends the sum to
// the chain: then it equals ordered_sum of the items, bitwise.
TEST(PsdMatrixSum, FallsBackToTheItemOrderChainWhenAnItemIsNotPsd) {
  const int items = 5, p = 2;
  auto matrix_of_item = [](int item, double* m) {
    m[0] = m[3] = 0.1 * (item + 1);
    m[1] = m[2] = item == 2 ? 7.0 + 1e-9 : item_value(item, 1) * 1e-12;
  };
  const int rank = world_rank(), ranks = world_size();
  const int first = items * rank / ranks, end = items * (rank + 1) / ranks;
  std::vector<double> out, local;
  for (int item = first; item < end; ++item) {
    double m[p * p];
    matrix_of_item(item, m);
    local.insert(local.end(), m, m + p * p);
  }
  psd_matrix_sum(
      end - first, p, out,
      [&](int k, double* d) {
        double m[p * p];
        matrix_of_item(first + k, m);
        d[0] = m[0];
        d[1] = m[3];
        return true;
      },
      [&](int k, double* m) {
        matrix_of_item(first + k, m);
        return true;
      });
  std::vector<double> expected(p * p);
  ordered_sum(local, end - first, p * p, expected);
  for (int j = 0; j < p * p; ++j) EXPECT_EQ(out[j], expected[j]) << "entry " << j;
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
