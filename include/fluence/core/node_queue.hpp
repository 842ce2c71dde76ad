#pragma once
// Work shared out within a node, first come first served. The items [0, n) of one job are split
// statically over the ranks (rank r: [n r / R, n (r + 1) / R)), and a node's items are the union of
// its ranks' shares, so nodes never talk to each other. Within a node, the items go out in blocks
// through a counter in shared memory that each rank advances atomically: a rank that finishes its
// own work first takes more of the shared work, absorbing the imbalance instead of waiting for it.
// Which rank computes an item must not change the item's value (the caller places each result by
// its item index), so the results stay the same bits for any rank count and any timing.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace fluence {

class NodeWorkQueue {
 public:
  /// Collective over MPI_COMM_WORLD, as is the destruction (skipped while an exception unwinds).
  NodeWorkQueue();
  ~NodeWorkQueue();
  NodeWorkQueue(const NodeWorkQueue&) = delete;
  NodeWorkQueue& operator=(const NodeWorkQueue&) = delete;

  /// Starts a job of `items` items in blocks of at most `block` (every rank, every job, the same
  /// arguments). Between two jobs every rank must pass a collective that each rank enters only
  /// after its last next() of the earlier job (the reduction that gathers the results, say; not
  /// an empty one, which need not synchronize).
  void begin(std::size_t items, std::size_t block);
  /// The next block [first, last) of this node's items, or false when they are all handed out.
  bool next(std::size_t& first, std::size_t& last);

 private:
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win window_ = MPI_WIN_NULL;
  std::int64_t* counters_ = nullptr;  // two, in the node's shared memory: jobs alternate
  std::vector<int> members_;          // the node's world ranks, ascending
  std::vector<std::pair<std::size_t, std::size_t>> blocks_;
  std::uint64_t job_ = 0;
  int node_rank_ = 0;
};

}  // namespace fluence
