#pragma once
// Up-front memory estimates (docs/operations.md "Memory"): a deck whose data or model cannot fit in
// a rank's share of the node is refused before the allocations start, naming the keys that size
// it, instead of growing until the kernel's OOM killer ends the run without a word. The estimates
// count what is surely allocated (a lower bound), so a refusal is never a false alarm; a deck just
// below the limit can still run out, which the std::bad_alloc message then reports.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fluence {

/// One part of a rank's memory: its bytes and what it is, naming the deck keys that size it.
struct MemoryTerm {
  double bytes = 0.0;
  std::string what;
};

/// The memory each rank may use, agreed by all ranks (the smallest share) and where it came from.
struct MemoryBudget {
  std::optional<double> bytes;  // none: no check (FLUENCE_MEMORY_LIMIT=none, or not measured)
  std::string source;           // "MemAvailable 15.2 GiB / 2 ranks on this node"
};

/// The environment variable that replaces the measured budget (bytes per rank, "none": no check).
inline constexpr const char* kMemoryLimitVariable = "FLUENCE_MEMORY_LIMIT";

/// Measures the budget once per command, before the deck's data are built: FLUENCE_MEMORY_LIMIT
/// when set, else the node's available memory (MemAvailable, or the cgroup's limit less its usage
/// when smaller) divided by the ranks on the node, the smallest over all ranks. Collective;
/// InputError (on every rank) for a malformed FLUENCE_MEMORY_LIMIT.
void measure_memory_budget();

/// The budget measured (no bytes before measure_memory_budget, as in the unit tests).
const MemoryBudget& memory_budget();

/// An InputError, the same on every rank, when the terms add up to more than the budget: the
/// estimate, the budget, the largest terms with their keys, and how to override the check.
void check_memory(const std::vector<MemoryTerm>& terms);

/// The refusal check_memory raises for `budget` (empty when the terms fit), for unit tests.
std::string memory_problem(const std::vector<MemoryTerm>& terms, const MemoryBudget& budget);

/// FLUENCE_MEMORY_LIMIT's value: bytes with an optional binary suffix (K, M, G, T, with or without
/// "iB" or "B": "512M", "4GiB", "1e9"), or "none" (a budget without bytes). nullopt: malformed.
std::optional<MemoryBudget> parse_memory_limit(const std::string& text);

/// Asks the kernel to back the 2 MiB-aligned part of [data, data + bytes) with 2 MiB pages
/// (madvise MADV_HUGEPAGE; nothing where the kernel does not offer them). For arrays of gigabytes
/// written once into fresh memory, such as the rows a rank loads: where transparent huge pages are
/// "madvise" only, as on the development VM, each 4 KiB page of fresh memory is otherwise a page
/// fault of its own, and there a fault costs about 10 us of CPU (docs/performance.md,
/// "Distributed ownership").
void advise_huge_pages(void* data, std::size_t bytes);

/// `count` value-initialized elements whose memory was advised huge pages before its first touch.
template <class T>
std::vector<T> fresh_array(std::size_t count) {
  std::vector<T> values;
  values.reserve(count);
  advise_huge_pages(values.data(), count * sizeof(T));
  values.resize(count);
  return values;
}

/// Maps the 4 KiB pages inside [data, data + bytes) now, zero-filled by the kernel in one call
/// (madvise MADV_POPULATE_WRITE), instead of one page fault each at the first write; the contents
/// stay as they are. On this VM a fault costs about 1.7 us, and the call saves some 20% of it
/// (docs/performance.md, "Set-up on Fashion-MNIST"). Spans of 4 MiB or more are advised huge
/// pages first (advise_huge_pages) when the kernel's free lists hold 2 MiB blocks for twice them,
/// so that the advice never makes the kernel compact memory. Advice only: a kernel before Linux
/// 5.14 refuses it, and the pages then fault in as before.
void populate_pages(void* data, std::size_t bytes);

/// Reserves room for `count` elements in `values` (empty), its pages mapped at once
/// (populate_pages): for an array that is then grown to `count` by writes into fresh memory.
template <class T>
void reserve_populated(std::vector<T>& values, std::size_t count) {
  values.reserve(count);
  populate_pages(values.data(), count * sizeof(T));
}

/// This process's peak resident memory so far (VmHWM of /proc/self/status), in bytes; nullopt
/// where the kernel does not report it.
std::optional<std::int64_t> peak_resident_bytes();

/// "1.5 GiB", "812 MiB", "64 B".
std::string format_bytes(double bytes);

}  // namespace fluence
