// The up-front memory check (core/memory.hpp): FLUENCE_MEMORY_LIMIT's values, the refusal's words
// (estimate, budget, the largest terms and their keys) and the byte formatting.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fluence/core/memory.hpp"

namespace fluence {
namespace {

TEST(MemoryLimit, SizesWithBinarySuffixes) {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  EXPECT_EQ(parse_memory_limit("4G")->bytes, 4 * gib);
  EXPECT_EQ(parse_memory_limit("4GiB")->bytes, 4 * gib);
  EXPECT_EQ(parse_memory_limit("4gb")->bytes, 4 * gib);
  EXPECT_EQ(parse_memory_limit("512M")->bytes, 512.0 * 1024 * 1024);
  EXPECT_EQ(parse_memory_limit("1.5T")->bytes, 1.5 * 1024 * gib);
  EXPECT_EQ(parse_memory_limit("1e9")->bytes, 1e9);
  EXPECT_EQ(parse_memory_limit("123 K")->bytes, 123.0 * 1024);
  EXPECT_EQ(parse_memory_limit("64B")->bytes, 64.0);
  EXPECT_EQ(parse_memory_limit("4G")->source, "FLUENCE_MEMORY_LIMIT=4G");
}

TEST(MemoryLimit, NoneTurnsTheCheckOff) {
  const auto none = parse_memory_limit("none");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->bytes);
  EXPECT_TRUE(parse_memory_limit("NONE"));
}

TEST(MemoryLimit, MalformedValuesAreRefused) {
  for (const char* text : {"", "abc", "4X", "4Gx", "0", "-1G", "inf", "nan", "G"})
    EXPECT_FALSE(parse_memory_limit(text)) << text;
}

TEST(MemoryCheck, TermsWithinTheBudgetPass) {
  MemoryBudget budget{1000.0, "test"};
  EXPECT_EQ(memory_problem({{400.0, "a"}, {600.0, "b"}}, budget), "");
  EXPECT_EQ(memory_problem({{1e30, "huge"}}, MemoryBudget{}), "");  // no budget: no check
}

TEST(MemoryCheck, RefusalNamesEstimateBudgetAndTheLargestTerms) {
  MemoryBudget budget{1024.0 * 1024.0, "MemAvailable 2.0 MiB / 2 ranks on this node"};
  const std::string message = memory_problem({{3.0 * 1024 * 1024, "the data: data.synthetic.rows"},
                                              {1024.0 * 1024, "the model: model.hidden"},
                                              {10.0, "names"}},
                                             budget);
  EXPECT_NE(message.find("needs at least 4.0 MiB of memory per rank, more than the 1.0 MiB a rank "
                         "has (MemAvailable 2.0 MiB / 2 ranks on this node)"),
            std::string::npos)
      << message;
  // Largest first; a term below a tenth of the estimate is not named.
  EXPECT_NE(message.find("3.0 MiB for the data: data.synthetic.rows; 1.0 MiB for the model: "
                         "model.hidden;"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("names"), std::string::npos) << message;
  EXPECT_NE(message.find("FLUENCE_MEMORY_LIMIT"), std::string::npos) << message;
}

TEST(MemoryCheck, BytesAreShownInBinaryUnits) {
  EXPECT_EQ(format_bytes(64), "64 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3.0 * 1024 * 1024 * 1024), "3.0 GiB");
  EXPECT_EQ(format_bytes(8e13), "72.8 TiB");
}

// The peak resident memory against the kernel's other accounts: getrusage's ru_maxrss (KiB, the
// same high-water mark) and the current resident size (VmRSS), which includes 96 MiB that the
// test touches itself, so the peak can be neither below it nor in the wrong unit.
TEST(PeakMemory, AgreesWithRusageAndIsAtLeastTheResidentSize) {
  constexpr std::size_t kTouched = 96u << 20;
  std::vector<char> block(kTouched);
  for (std::size_t i = 0; i < block.size(); i += 4096) block[i] = static_cast<char>(i >> 12);
  std::int64_t resident_kib = -1;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) resident_kib = std::stoll(line.substr(6));
  const auto peak = peak_resident_bytes();
  rusage usage{};
  ASSERT_EQ(getrusage(RUSAGE_SELF, &usage), 0);
  ASSERT_TRUE(peak.has_value());
  ASSERT_GT(resident_kib, 0);
  EXPECT_GE(resident_kib * 1024, static_cast<std::int64_t>(kTouched));
  EXPECT_GE(*peak, resident_kib * 1024);
  // Read a moment apart from the same counter: equal but for pages touched in between (none here;
  // 1 MiB of allowance for the reads' own buffers).
  EXPECT_NEAR(static_cast<double>(*peak), 1024.0 * static_cast<double>(usage.ru_maxrss),
              1.0 * (1 << 20));
  EXPECT_EQ(block[4096], 1);  // keeps the block alive past the reads
}

// The VmFlags of the mapping holding `address` in /proc/self/smaps ("" when not found).
std::string mapping_flags(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto where = reinterpret_cast<std::uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &begin, &end) == 2) {  // a mapping's first line
      inside = begin <= where && where < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// fresh_array's memory is advised huge pages (madvise MADV_HUGEPAGE: flag "hg" of its mapping)
// before its first touch, so where the kernel gives transparent huge pages only on request
// ("[madvise]" in /sys/kernel/mm/transparent_hugepage/enabled, as on the development VM) the
// first touch of 64 MiB faults once per 2 MiB page, not per 4 KiB page. Whether the kernel then
// finds free huge pages depends on the machine's fragmentation, so the test checks the advice,
// which is deterministic, not the fault count. Without transparent huge pages it is skipped.
TEST(FreshArray, IsZeroAndAdvisedHugePages) {
  std::ifstream setting("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(setting, modes);
  if (modes.find('[') == std::string::npos || modes.find("[never]") != std::string::npos)
    GTEST_SKIP() << "no transparent huge pages here: " << modes;
  constexpr std::size_t kCount = (std::size_t{64} << 20) / sizeof(double);
  const std::vector<double> values = fresh_array<double>(kCount);
  ASSERT_EQ(values.size(), kCount);
  EXPECT_TRUE(std::all_of(values.begin(), values.end(), [](double v) { return v == 0.0; }));
  const std::string flags = mapping_flags(values.data() + kCount / 2);
  ASSERT_FALSE(flags.empty()) << "no mapping holds the array in /proc/self/smaps";
  EXPECT_NE((flags + " ").find(" hg "), std::string::npos) << flags;
}

// Free memory in blocks of 2 MiB or more, read from /proc/buddyinfo here on its own.
double free_huge_block_bytes() {
  std::ifstream buddyinfo("/proc/buddyinfo");
  std::string line;
  double bytes = 0.0;
  while (std::getline(buddyinfo, line)) {
    std::istringstream fields(line.substr(line.find("zone") + 4));
    std::string zone;
    fields >> zone;
    double blocks = 0.0;
    for (int order = 0; fields >> blocks; ++order)
      if (order >= 9) bytes += blocks * 4096.0 * std::pow(2.0, order);
  }
  return bytes;
}

// reserve_populated maps an array's pages at once and advises huge pages only where the kernel has
// free 2 MiB blocks for twice the array (so that the advice never makes it compact memory), and
// the values already written stay as they are. The free lists move while the test runs, so it
// checks the advice only where they leave no doubt (four times the array free, or less than it).
TEST(ReservePopulated, AdvisesHugePagesOnlyWhereFreeAndKeepsValues) {
  std::ifstream setting("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(setting, modes);
  constexpr std::size_t kCount = (std::size_t{64} << 20) / sizeof(double);
  const double free_before = free_huge_block_bytes();
  std::vector<double> values;
  reserve_populated(values, kCount);
  ASSERT_GE(values.capacity(), kCount);
  for (std::size_t i = 0; i < kCount; ++i) values.push_back(static_cast<double>(i));
  populate_pages(values.data(), kCount * sizeof(double));  // a second call keeps the values
  for (std::size_t i = 0; i < kCount; i += 4099) ASSERT_EQ(values[i], static_cast<double>(i));
  if (modes.find('[') == std::string::npos || modes.find("[never]") != std::string::npos)
    GTEST_SKIP() << "no transparent huge pages here: " << modes;
  const std::string flags = mapping_flags(values.data() + kCount / 2) + " ";
  ASSERT_NE(flags, " ") << "no mapping holds the array in /proc/self/smaps";
  if (free_before >= 4.0 * kCount * sizeof(double))
    EXPECT_NE(flags.find(" hg "), std::string::npos) << flags;
  if (free_before < 1.0 * kCount * sizeof(double))
    EXPECT_EQ(flags.find(" hg "), std::string::npos) << flags;
}

}  // namespace
}  // namespace fluence
