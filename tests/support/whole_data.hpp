#pragma once
// The pooled reference of tests whose problem holds only its clients' rows on each rank
// (distributed ownership): the whole training table of a deck, as load_data reads it, with the
// same row ids as FederatedProblem::data.train.
#include <cstdint>

#include "fluence/core/config.hpp"
#include "fluence/data/source.hpp"

namespace fluence::testing {

inline Table whole_training_table(const Deck& deck) {
  return load_data(DataConfig::from_deck(deck), static_cast<std::uint64_t>(deck.integer("seed")))
      .train;
}

}  // namespace fluence::testing
