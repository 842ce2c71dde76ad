#pragma once
#include <cstdint>
#include <vector>

namespace fluence {

/// Which rank hosts which clients: contiguous client-id ranges, balanced by client size. Computed
/// deterministically from the sizes alone, identically on every rank. Contiguity keeps gathers in
/// client-id order, which the order-independent reductions rely on.
class ClientLayout {
 public:
  ClientLayout(const std::vector<std::int64_t>& client_sizes, int ranks);

  int first_client(int rank) const { return first_[rank]; }
  int end_client(int rank) const { return first_[rank + 1]; }
  int owner(int client) const;
  int clients() const { return first_.back(); }
  int ranks() const { return static_cast<int>(first_.size()) - 1; }

 private:
  std::vector<int> first_;  // ranks + 1 boundaries
};

}  // namespace fluence
