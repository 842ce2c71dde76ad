#pragma once
// Every deck key Fluence understands, assembled from the modules' declarations (each module's
// register_<module>_keys, next to the config struct that reads them). inputs/README.md's key tables
// are this schema as `fluence keys --markdown` prints it (tests/app check that they agree).
#include <string>

#include "fluence/core/config.hpp"

namespace fluence {

/// The schema every command reads its deck with (built once).
const DeckSchema& deck_schema();

/// What a key allows, as the key tables state it: allowed_text without the bound every integer
/// key has, and the key's note.
std::string documented_allowed(KeySpec spec);

/// inputs/README.md's key tables: per section, a heading with the section's description and a
/// table of its keys (key, default, allowed, meaning).
std::string key_tables_markdown(const DeckSchema& schema);

}  // namespace fluence
