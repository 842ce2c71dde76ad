// A validator's total eps over its votes (docs/math.md §9, "Vote privacy per validator").
#include "fluence/lia/accounting.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "fluence/privacy/rdp_accountant.hpp"

namespace fluence::lia {

namespace {

// The votes whose loss composes (see validator_epsilon).
double composed_votes(std::span<const double> votes_per_subset, bool coupled) {
  if (coupled) return std::accumulate(votes_per_subset.begin(), votes_per_subset.end(), 0.0);
  return votes_per_subset.empty()
             ? 0.0
             : *std::max_element(votes_per_subset.begin(), votes_per_subset.end());
}

// log(e^a + e^b) without overflow: the orders reach 1024, where the terms do not fit a double.
double log_add_exp(double a, double b) {
  const double top = std::max(a, b);
  return top + std::log1p(std::exp(std::min(a, b) - top));
}

}  // namespace

double validator_epsilon(std::span<const double> votes_per_subset, bool coupled,
                         double epsilon_vote, double epsilon_histogram) {
  const double votes = composed_votes(votes_per_subset, coupled);
  // inf * 0 would be NaN: a validator that cast no vote released nothing through the votes.
  const double from_votes = votes > 0.0 ? votes * epsilon_vote : 0.0;
  return from_votes + epsilon_histogram;
}

double randomized_response_rdp(double epsilon, double order) {
  // log q and log(1 - q) for q = e^eps / (1 + e^eps), computed without cancellation.
  const double log_keep = -std::log1p(std::exp(-epsilon)),
               log_flip = -std::log1p(std::exp(epsilon));
  return log_add_exp(order * log_keep + (1 - order) * log_flip,
                     order * log_flip + (1 - order) * log_keep) /
         (order - 1);
}

double laplace_rdp(double epsilon, double order) {
  return log_add_exp(std::log(order / (2 * order - 1)) + (order - 1) * epsilon,
                     std::log((order - 1) / (2 * order - 1)) - order * epsilon) /
         (order - 1);
}

double validator_epsilon_rdp(std::span<const double> votes_per_subset, bool coupled,
                             double epsilon_vote, double epsilon_histogram, double delta) {
  const double pure = validator_epsilon(votes_per_subset, coupled, epsilon_vote, epsilon_histogram);
  if (!std::isfinite(pure) || pure == 0.0) return pure;
  const double votes = composed_votes(votes_per_subset, coupled);
  const std::vector<double> orders = default_rdp_orders();
  std::vector<double> rdp(orders.size(), 0.0);
  for (std::size_t k = 0; k < orders.size(); ++k) {
    if (votes > 0.0) rdp[k] += votes * randomized_response_rdp(epsilon_vote, orders[k]);
    if (epsilon_histogram > 0.0) rdp[k] += laplace_rdp(epsilon_histogram, orders[k]);
  }
  return std::min(pure, epsilon_from_rdp(orders, rdp, delta).epsilon);
}

}  // namespace fluence::lia
