#include "fluence/core/rank_warnings.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"

namespace fluence {

namespace {
RankWarnings* active = nullptr;

// A kept warning on the wire: its order key, its length, its bytes.
void pack(const RankWarnings::Kept& kept, std::vector<char>& bytes) {
  const std::int64_t header[2] = {static_cast<std::int64_t>(kept.order),
                                  static_cast<std::int64_t>(kept.line.size())};
  const auto* raw = reinterpret_cast<const char*>(header);
  bytes.insert(bytes.end(), raw, raw + sizeof(header));
  bytes.insert(bytes.end(), kept.line.begin(), kept.line.end());
}

std::vector<RankWarnings::Kept> unpack(const std::vector<char>& bytes) {
  std::vector<RankWarnings::Kept> out;
  std::size_t at = 0;
  while (at + 2 * sizeof(std::int64_t) <= bytes.size()) {
    std::int64_t header[2];
    std::memcpy(header, bytes.data() + at, sizeof(header));
    at += sizeof(header);
    const auto length = static_cast<std::size_t>(header[1]);
    out.push_back({static_cast<long>(header[0]), std::string(bytes.data() + at, length)});
    at += length;
  }
  return out;
}
}  // namespace

RankWarnings::Keeping::Keeping(RankWarnings& warnings, std::string name, long order) {
  if (active) throw RuntimeError("RankWarnings: work kept inside kept work");
  warnings.name_ = std::move(name);
  warnings.order_ = order;
  active = &warnings;
}

RankWarnings::Keeping::~Keeping() {
  active = nullptr;
}

std::vector<std::string> RankWarnings::gather() {
  std::vector<char> bytes;
  for (const Kept& kept : kept_) pack(kept, bytes);
  kept_.clear();
  int count = static_cast<int>(bytes.size());
  const int ranks = world_size();
  std::vector<int> counts(world_rank() == 0 ? ranks : 0), offsets(counts.size() + 1, 0);
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (std::size_t r = 0; r < counts.size(); ++r) offsets[r + 1] = offsets[r] + counts[r];
  std::vector<char> all(world_rank() == 0 ? static_cast<std::size_t>(offsets.back()) : 0);
  MPI_Gatherv(bytes.data(), count, MPI_CHAR, all.data(), counts.data(), offsets.data(), MPI_CHAR, 0,
              MPI_COMM_WORLD);
  if (world_rank() != 0) return {};
  // Rank order, then as raised: a stable sort by the key keeps it within equal keys.
  std::vector<Kept> warnings = unpack(all);
  std::stable_sort(warnings.begin(), warnings.end(),
                   [](const Kept& a, const Kept& b) { return a.order < b.order; });
  std::vector<std::string> lines;
  for (const Kept& kept : warnings) {
    log::write_error("warning: " + kept.line);
    lines.push_back(kept.line);
  }
  return lines;
}

bool keeping_warnings() {
  return active != nullptr;
}

void keep_warning(const std::string& message) {
  if (!active) return;
  active->kept_.push_back(
      {active->order_, active->name_.empty() ? message : active->name_ + ": " + message});
}

}  // namespace fluence
