#include "fluence/core/memory.hpp"

#include <fmt/format.h>
#include <mpi.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fluence/core/error.hpp"
#include "fluence/core/mpi.hpp"

namespace fluence {

namespace {

MemoryBudget measured;  // by measure_memory_budget()

// MemAvailable of /proc/meminfo: what the kernel can hand out without swapping.
std::optional<double> available_memory() {
  std::ifstream file("/proc/meminfo");
  std::string name, unit;
  double kibibytes = 0.0;
  while (file >> name >> kibibytes) {
    std::getline(file, unit);
    if (name == "MemAvailable:") return kibibytes * 1024.0;
  }
  return std::nullopt;
}

// A cgroup file's one number ("max", absent or unreadable: none).
std::optional<double> read_number(const std::string& path) {
  std::ifstream file(path);
  std::string text;
  if (!(file >> text)) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0') return std::nullopt;
  return value;
}

// What the process's cgroup may still take (its limit less its usage) when it has a limit: v2's
// memory.max of the group /proc/self/cgroup names (or of the root, which is what a container
// sees), else v1's limit_in_bytes, which reports "no limit" as about 2^63.
std::optional<double> cgroup_room() {
  std::string group;
  std::ifstream groups("/proc/self/cgroup");
  for (std::string line; std::getline(groups, line);)
    if (line.rfind("0::", 0) == 0) group = line.substr(3);
  for (const std::string& directory : {"/sys/fs/cgroup" + group, std::string("/sys/fs/cgroup")}) {
    const auto limit = read_number(directory + "/memory.max");
    const auto usage = read_number(directory + "/memory.current");
    if (limit && usage) return std::max(0.0, *limit - *usage);
  }
  const auto limit = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  const auto usage = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
  if (limit && usage && *limit < 0x1p60) return std::max(0.0, *limit - *usage);
  return std::nullopt;
}

int ranks_on_this_node() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int ranks = 1;
  MPI_Comm_size(node, &ranks);
  MPI_Comm_free(&node);
  return ranks;
}

// The node's free memory, shared equally by its `ranks`.
MemoryBudget node_share(int ranks) {
  const auto available = available_memory();
  const auto room = cgroup_room();
  MemoryBudget share;
  if (!available && !room) return share;
  const bool cgroup = room && (!available || *room < *available);
  const double free = cgroup ? *room : *available;
  share.bytes = free / ranks;
  share.source = fmt::format("{} {} / {} rank{} on this node",
                             cgroup ? "the cgroup's free memory" : "MemAvailable",
                             format_bytes(free), ranks, ranks == 1 ? "" : "s");
  return share;
}

// The smallest budget of any rank, so that every rank decides alike; its source is the words of
// the rank it came from.
MemoryBudget agree(const MemoryBudget& local) {
  struct {
    double bytes;
    int rank;
  } mine{local.bytes.value_or(HUGE_VAL), world_rank()}, least{};
  MPI_Allreduce(&mine, &least, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD);
  MemoryBudget agreed;
  agreed.source = broadcast_string(local.source, least.rank);
  if (std::isfinite(least.bytes)) agreed.bytes = least.bytes;
  return agreed;
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The multiplier of a size suffix: "" or "b" is 1, then k, m, g, t (optionally + "b" or "ib") are
// powers of 1024. Zero when it is none of these.
double suffix_multiplier(const std::string& suffix) {
  if (suffix.empty() || suffix == "b") return 1.0;
  const std::string prefixes = "kmgt";
  const auto power = prefixes.find(suffix.front());
  const std::string rest = suffix.substr(1);
  if (power == std::string::npos || !(rest.empty() || rest == "b" || rest == "ib")) return 0.0;
  return std::pow(1024.0, static_cast<double>(power + 1));
}

}  // namespace

std::optional<MemoryBudget> parse_memory_limit(const std::string& text) {
  MemoryBudget budget;
  budget.source = fmt::format("{}={}", kMemoryLimitVariable, message_excerpt(text));
  const std::string lower = lowercase(text);
  if (lower == "none") return budget;
  char* end = nullptr;
  const double number = std::strtod(lower.c_str(), &end);
  if (end == lower.c_str()) return std::nullopt;
  std::string suffix(end);
  suffix.erase(0, suffix.find_first_not_of(' '));
  const double bytes = number * suffix_multiplier(suffix);
  if (!std::isfinite(bytes) || bytes <= 0.0) return std::nullopt;
  budget.bytes = bytes;
  return budget;
}

void measure_memory_budget() {
  // Collectives first, on every rank whatever its environment; a malformed FLUENCE_MEMORY_LIMIT
  // on any rank is then refused on all (collective_check), so that no rank waits in agree().
  const int ranks = ranks_on_this_node();
  MemoryBudget local;
  collective_check([&] {
    const char* value = std::getenv(kMemoryLimitVariable);
    if (value == nullptr) {
      local = node_share(ranks);
      return;
    }
    const auto given = parse_memory_limit(value);
    if (!given)
      throw InputError(fmt::format(
          "{} = \"{}\" is not allowed: expected the memory of one rank, such as 4G, 512M or 1e9 "
          "(bytes), or none to turn the check off",
          kMemoryLimitVariable, message_excerpt(value)));
    local = *given;
  });
  measured = agree(local);
}

const MemoryBudget& memory_budget() {
  return measured;
}

std::string memory_problem(const std::vector<MemoryTerm>& terms, const MemoryBudget& budget) {
  double total = 0.0;
  for (const auto& term : terms) total += term.bytes;
  if (!budget.bytes || total <= *budget.bytes) return "";
  std::vector<MemoryTerm> largest = terms;
  std::stable_sort(largest.begin(), largest.end(),
                   [](const MemoryTerm& a, const MemoryTerm& b) { return a.bytes > b.bytes; });
  // The terms that make the estimate (at most three, each a tenth of it or more): their keys are
  // the ones to change.
  std::string parts;
  for (std::size_t i = 0; i < largest.size() && i < 3 && largest[i].bytes >= 0.1 * total; ++i)
    parts += fmt::format("{}{} for {}", i == 0 ? "" : "; ", format_bytes(largest[i].bytes),
                         largest[i].what);
  return fmt::format(
      "this deck needs at least {} of memory per rank, more than the {} a rank has ({}): {}; make "
      "those smaller or run on more nodes, or set {} if the estimate is wrong "
      "(docs/operations.md)",
      format_bytes(total), format_bytes(*budget.bytes), budget.source, parts, kMemoryLimitVariable);
}

void check_memory(const std::vector<MemoryTerm>& terms) {
  const std::string problem = memory_problem(terms, measured);
  if (!problem.empty()) throw InputError(problem);
}

void advise_huge_pages(void* data, std::size_t bytes) {
  constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t last = (begin + bytes) & ~(kHugePage - 1);
  // Advice only: a kernel without transparent huge pages refuses it, and the memory works as is.
  if (data != nullptr && last > first)
    madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

namespace {
// Whether the kernel's free lists (/proc/buddyinfo) hold free blocks of 2 MiB or more for twice
// `bytes`: huge pages for that much then come straight off them, while advice for more than is
// free makes every fault of the array compact memory first (system time doubled on a loaded VM,
// docs/performance.md). No when the file cannot be read.
bool free_huge_blocks_cover(std::size_t bytes) {
  constexpr int kHugeOrder = 9;  // 2^9 pages of 4 KiB
  std::ifstream file("/proc/buddyinfo");
  std::string line;
  double free_bytes = 0.0;
  while (std::getline(file, line)) {
    const auto zone = line.find("zone");
    if (zone == std::string::npos) continue;
    std::istringstream counts(line.substr(zone + 4));
    std::string name;
    counts >> name;
    double blocks = 0.0;
    for (int order = 0; counts >> blocks; ++order)
      if (order >= kHugeOrder) free_bytes += blocks * std::ldexp(4096.0, order);
  }
  return free_bytes >= 2.0 * static_cast<double>(bytes);
}
}  // namespace

void populate_pages(void* data, std::size_t bytes) {
  // 2 MiB pages where the array spans one (and the kernel has them free): a tenth of the kernel's
  // work per byte, and far fewer TLB misses when the rows are read; twice as fast on the
  // Fashion-MNIST images (docs/performance.md, "Set-up on Fashion-MNIST").
  if (bytes >= (std::size_t{4} << 20) && free_huge_blocks_cover(bytes))
    advise_huge_pages(data, bytes);
  constexpr std::uintptr_t kPage = 4096;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = (begin + kPage - 1) & ~(kPage - 1);
  const std::uintptr_t last = (begin + bytes) & ~(kPage - 1);
  // Advice only: EINVAL before Linux 5.14, and the pages fault in at first touch as before.
  if (data != nullptr && last > first)
    madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
}

std::optional<std::int64_t> peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    long long kib = 0;
    if (std::sscanf(line.c_str() + 6, "%lld", &kib) != 1) return std::nullopt;
    return static_cast<std::int64_t>(kib) * 1024;
  }
  return std::nullopt;
}

std::string format_bytes(double bytes) {
  static constexpr std::array<const char*, 7> kUnits = {"B",   "KiB", "MiB", "GiB",
                                                        "TiB", "PiB", "EiB"};
  std::size_t unit = 0;
  while (unit + 1 < kUnits.size() && bytes >= 1024.0) {
    bytes /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, kUnits[unit]);
}

}  // namespace fluence
