// RankWarnings (issue 41: warnings about clients hosted on ranks other than 0 were lost): what
// work kept on any rank warns reaches rank 0, labelled, ordered by key, then rank, then as raised,
// whatever the rank count; warnings outside kept work stay rank 0's alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/rank_warnings.hpp"

namespace fluence {
namespace {

TEST(RankWarnings, EveryRanksWarningsReachRankZeroInKeyOrder) {
  const int rank = world_rank(), ranks = world_size();
  RankWarnings warnings;
  // Each rank works on the "clients" r, r + ranks, ...: keys interleaved across the ranks, and
  // taken here in descending order, so that only the sort puts them in client order.
  const int clients = 3 * ranks + 1;
  std::vector<int> mine;
  for (int id = rank; id < clients; id += ranks) mine.insert(mine.begin(), id);
  for (int id : mine)
    warnings.keep("client " + std::to_string(id), id, [&] {
      log::warn("first of {}", id);
      if (id % 2 == 0) log::warn("second of {}", id);
    });
  EXPECT_FALSE(keeping_warnings());
  const std::vector<std::string> lines = warnings.gather();
  if (rank != 0) {
    EXPECT_TRUE(lines.empty());
    return;
  }
  std::vector<std::string> expected;
  for (int id = 0; id < clients; ++id) {
    expected.push_back("client " + std::to_string(id) + ": first of " + std::to_string(id));
    if (id % 2 == 0)
      expected.push_back("client " + std::to_string(id) + ": second of " + std::to_string(id));
  }
  EXPECT_EQ(lines, expected);
}

TEST(RankWarnings, EqualKeysInRankOrderAndGatherClears) {
  const int rank = world_rank(), ranks = world_size();
  RankWarnings warnings;
  warnings.keep("case 0", 0, [&] { log::warn("rank {}", rank); });
  const std::vector<std::string> lines = warnings.gather();
  if (rank == 0) {
    ASSERT_EQ(lines.size(), static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(lines[r], "case 0: rank " + std::to_string(r));
  }
  EXPECT_TRUE(warnings.gather().empty());  // nothing kept twice
}

TEST(RankWarnings, WarningsOutsideKeptWorkAreNotGathered) {
  RankWarnings warnings;
  log::warn("collective work: rank 0 prints this once, nothing is kept");
  const int value = warnings.keep("client 1", 1, [] { return 7; });  // returns the work's value
  EXPECT_EQ(value, 7);
  EXPECT_TRUE(warnings.gather().empty());
}

}  // namespace
}  // namespace fluence
