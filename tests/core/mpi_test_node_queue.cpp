// NodeWorkQueue must hand out every item of a job exactly once over all ranks, job after job (the
// two counters alternate and are reset in between), whatever the rank count and whoever asks first;
// and QuantizedSum's extra slots carry one rank's bit patterns unchanged through the reduction.
// The hosts and node count recorded in results agree with each other and with every rank's own.
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fluence/core/mpi.hpp"
#include "fluence/core/node_queue.hpp"
#include "fluence/core/quantized_sum.hpp"

namespace fluence {
namespace {

TEST(NodeWorkQueue, HandsOutEveryItemOnceInEveryJob) {
  NodeWorkQueue queue;
  const int rank = world_rank(), ranks = world_size();
  // Sizes below the rank count, a single block, uneven blocks, empty jobs; a job repeated.
  const std::size_t sizes[][2] = {{1000, 64}, {3, 1}, {0, 8}, {1000, 64}, {17, 5}, {256, 256}};
  for (int repeat = 0; repeat < 3; ++repeat)
    for (const auto& size : sizes) {
      const std::size_t items = size[0];
      queue.begin(items, size[1]);
      std::vector<std::int64_t> taken(items + 1, 0);  // never empty: an empty reduction need not
                                                      // synchronize the ranks
      std::size_t first = 0, last = 0;
      while (queue.next(first, last)) {
        ASSERT_LE(last - first, size[1]);
        ASSERT_LE(last, items);
        for (std::size_t i = first; i < last; ++i) ++taken[i];
        // The highest rank is slowed down: the others take its share of the node's items.
        if (rank == ranks - 1) std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      // The collective that ends the job (the precondition of the next begin()).
      MPI_Allreduce(MPI_IN_PLACE, taken.data(), static_cast<int>(taken.size()), MPI_INT64_T,
                    MPI_SUM, MPI_COMM_WORLD);
      for (std::size_t i = 0; i < items; ++i)
        ASSERT_EQ(taken[i], 1) << "item " << i << " of " << items << ", repeat " << repeat;
    }
}

TEST(QuantizedSum, ExtraSlotsCarryOneRanksBitPatternsUnchanged) {
  const int rank = world_rank(), ranks = world_size();
  const std::size_t width = 3, extra = 11;
  QuantizedSum sum;
  sum.reset(width, 1, 1.0, 8, 2, extra);
  const double values[width] = {0.25, -0.5, 1.0};
  sum.add(0, values, 1.0, width);
  // Slot i is written by rank i % ranks: negative values, -0, a NaN and subnormals included.
  const double patterns[extra] = {-1.5, 0.1,  -0.0,   std::nan(""), 5e-324, -1e300,
                                  3.0,  -2.0, 1e-310, 7.0,          -7.0};
  for (std::size_t i = 0; i < extra; ++i)
    if (static_cast<int>(i) % ranks == rank)
      sum.extra()[i] = std::bit_cast<std::int64_t>(patterns[i]);
  std::vector<double> out(width);
  sum.allreduce(out);
  for (std::size_t i = 0; i < extra; ++i)
    EXPECT_EQ(sum.extra()[i], std::bit_cast<std::int64_t>(patterns[i])) << "slot " << i;
  for (std::size_t k = 0; k < width; ++k) EXPECT_EQ(out[k], values[k] * ranks);
}

TEST(RankHosts, EveryRankHoldsEveryRanksHostInRankOrderAndOneNodePerHost) {
  const std::vector<std::string> hosts = rank_hosts();
  ASSERT_EQ(hosts.size(), static_cast<std::size_t>(world_size()));
  char own[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(own, &length);
  EXPECT_EQ(hosts[static_cast<std::size_t>(world_rank())], std::string(own, length));
  std::string joined;
  for (const auto& host : hosts) joined += host + '\n';
  EXPECT_EQ(broadcast_string(joined), joined);
  // Two ways to count nodes: MPI's shared-memory split and the distinct host names.
  EXPECT_EQ(shared_memory_nodes(),
            static_cast<int>(std::set<std::string>(hosts.begin(), hosts.end()).size()));
}

}  // namespace
}  // namespace fluence
