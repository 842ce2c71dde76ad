#pragma once
// k-ary randomized response (seed 000 §3.2): keep the true value with probability
// p_uu = e^eps / (k - 1 + e^eps), otherwise report one of the other k - 1 values uniformly.
#include <cstdint>
#include <string>
#include <vector>

#include "fluence/core/config.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/dataset.hpp"

namespace fluence {

double rr_keep_probability(double epsilon, int domain);
/// The k x k distortion matrix P, P[u][v] = P(report v | true u), row-major.
std::vector<double> distortion_matrix(double epsilon, int domain);
/// One randomized report of `value` using the next draws of `stream`.
std::int32_t randomize_value(std::int32_t value, int domain, double epsilon, Stream& stream);

/// Which attributes each client randomizes and at what epsilon ([ldp] in the deck).
struct LdpPlan {
  std::vector<std::string> attributes;  // as named in the deck ("label" for the label)
  std::vector<int> categorical_column;  // per attribute: column in Table::categorical, -1 = label
  std::vector<int> domain;              // per attribute: number of values
  int clients = 0;
  std::vector<double> epsilon;  // clients x attributes; +inf = not randomized

  double epsilon_of(int client, int attribute) const {
    return epsilon[static_cast<std::size_t>(client) * attributes.size() + attribute];
  }
  static LdpPlan from_deck(const Deck& deck, const Table& schema, int clients);
};

/// Declares the [ldp] keys LdpPlan::from_deck reads: type, default, range and meaning of each
/// (inputs/README.md's tables).
void register_ldp_keys(DeckSchema& schema);

/// Randomized copies of a client's categorical values and labels for the given training rows. The
/// draw for (row, attribute) comes from its own stream keyed by the global row index, so it does
/// not depend on the rank layout; `draw` selects an independent re-randomization.
void randomize_client_rows(const LdpPlan& plan, int client, const Table& train,
                           const std::vector<std::int64_t>& rows, std::uint64_t seed,
                           std::uint64_t draw, std::vector<std::int32_t>& categorical,
                           std::vector<std::int32_t>& labels);

}  // namespace fluence
