#include "fluence/core/node_queue.hpp"

#include <algorithm>
#include <atomic>
#include <exception>

#include "fluence/core/mpi.hpp"

namespace fluence {

NodeWorkQueue::NodeWorkQueue() {
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank(), MPI_INFO_NULL, &node_);
  MPI_Comm_rank(node_, &node_rank_);
  int size = 0;
  MPI_Comm_size(node_, &size);
  // Node rank 0 holds both counters; the others map the same memory.
  void* base = nullptr;
  const MPI_Aint bytes = node_rank_ == 0 ? 2 * sizeof(std::int64_t) : 0;
  MPI_Win_allocate_shared(bytes, sizeof(std::int64_t), MPI_INFO_NULL, node_, &base, &window_);
  MPI_Aint owner_bytes = 0;
  int unit = 0;
  MPI_Win_shared_query(window_, 0, &owner_bytes, &unit, &base);
  counters_ = static_cast<std::int64_t*>(base);
  if (node_rank_ == 0) counters_[0] = counters_[1] = 0;
  // The node's world ranks, in node-rank order (ascending world rank: the split's key).
  MPI_Group world_group, node_group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Comm_group(node_, &node_group);
  std::vector<int> node_ranks(static_cast<std::size_t>(size));
  for (int k = 0; k < size; ++k) node_ranks[static_cast<std::size_t>(k)] = k;
  members_.resize(static_cast<std::size_t>(size));
  MPI_Group_translate_ranks(node_group, size, node_ranks.data(), world_group, members_.data());
  MPI_Group_free(&node_group);
  MPI_Group_free(&world_group);
  std::sort(members_.begin(), members_.end());
  // The counters' zeros are visible before any rank takes from them.
  MPI_Barrier(node_);
}

NodeWorkQueue::~NodeWorkQueue() {
  // Unwinding an exception that may be this rank's alone (then MPI_Abort follows): the collective
  // frees would wait for ranks that never come. The window is left to MPI's end.
  if (std::uncaught_exceptions() > 0) return;
  if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

void NodeWorkQueue::begin(std::size_t items, std::size_t block) {
  ++job_;
  // The other counter was last used by the job before this one, which every rank of the node
  // finished before the collective that ended it; the next job starts only after the collective
  // that ends this one, which node rank 0 enters after this store.
  if (node_rank_ == 0) std::atomic_ref<std::int64_t>(counters_[(job_ + 1) % 2]).store(0);
  blocks_.clear();
  const auto ranks = static_cast<std::size_t>(world_size());
  block = std::max<std::size_t>(block, 1);
  for (int member : members_) {
    const auto r = static_cast<std::size_t>(member);
    const std::size_t first = items * r / ranks, last = items * (r + 1) / ranks;
    for (std::size_t b = first; b < last; b += block)
      blocks_.emplace_back(b, std::min(last, b + block));
  }
}

bool NodeWorkQueue::next(std::size_t& first, std::size_t& last) {
  const std::int64_t taken = std::atomic_ref<std::int64_t>(counters_[job_ % 2]).fetch_add(1);
  if (taken < 0 || static_cast<std::size_t>(taken) >= blocks_.size()) return false;
  std::tie(first, last) = blocks_[static_cast<std::size_t>(taken)];
  return true;
}

}  // namespace fluence
