// A validator's total eps over its votes (docs/math.md §9, "Vote privacy per validator").
#include "fluence/lia/accounting.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace fluence::lia {

double validator_epsilon(std::span<const double> votes_per_subset, bool coupled,
                         double epsilon_vote, double epsilon_histogram) {
  const double votes = coupled
                           ? std::accumulate(votes_per_subset.begin(), votes_per_subset.end(), 0.0)
                       : votes_per_subset.empty()
                           ? 0.0
                           : *std::max_element(votes_per_subset.begin(), votes_per_subset.end());
  // inf * 0 would be NaN: a validator that cast no vote released nothing through the votes.
  const double from_votes = votes > 0.0 ? votes * epsilon_vote : 0.0;
  return from_votes + epsilon_histogram;
}

}  // namespace fluence::lia
