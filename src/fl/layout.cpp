#include "fluence/fl/layout.hpp"

#include <algorithm>
#include <cmath>

namespace fluence {

ClientLayout::ClientLayout(const std::vector<std::int64_t>& client_sizes, int ranks) {
  // Cut the prefix sums of client work as close as possible to the ideal equal shares.
  const int n = static_cast<int>(client_sizes.size());
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + static_cast<double>(client_sizes[i]);
  first_.assign(ranks + 1, 0);
  first_[ranks] = n;
  for (int r = 1; r < ranks; ++r) {
    const double target = prefix[n] * r / ranks;
    int cut =
        static_cast<int>(std::lower_bound(prefix.begin(), prefix.end(), target) - prefix.begin());
    if (cut > 0 && target - prefix[cut - 1] < prefix[cut] - target) --cut;
    first_[r] = std::clamp(cut, first_[r - 1], n);
  }
}

int ClientLayout::owner(int client) const {
  return static_cast<int>(std::upper_bound(first_.begin(), first_.end(), client) - first_.begin()) -
         1;
}

}  // namespace fluence
