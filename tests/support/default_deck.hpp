#pragma once
// The deck with every key at its declared default: what a test starts a config from (the config
// structs hold no defaults of their own; the modules' key declarations do).
#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/data/source.hpp"

namespace fluence {

inline const Deck& default_deck() {
  static const Deck deck = Deck::from_string("", "the defaults", deck_schema());
  return deck;
}

/// [data] at its declared defaults (synthetic data; the csv dialect and array names a reader
/// takes), for a test to change.
inline DataConfig default_data() {
  return DataConfig::from_deck(default_deck());
}

}  // namespace fluence
