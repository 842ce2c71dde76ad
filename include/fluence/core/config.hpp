#pragma once
// The input deck: TOML, validated against a DeckSchema. Unknown keys, wrong types and out-of-range
// values are InputErrors naming the key path, the value and what is allowed. Each module declares
// the keys it reads (register_<module>_keys, next to its config struct; the helpers are in
// core/deck_keys.hpp), and app assembles the schema (app/deck_schema.hpp): a key is written once.
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace toml {
inline namespace v3 {
class table;
}
}  // namespace toml

namespace fluence {

enum class KeyType {
  integer,
  real,
  boolean,
  string,
  string_array,
  real_array,
  integer_array,
  epsilon,            // a number > 0, "inf", or a table attribute -> (number | "inf")
  string_or_integer,  // a column name or a 0-based column index
  section,            // a table of further keys
  section_array,      // an array of tables ([[...]])
};

struct KeySpec {
  std::string
      path;  // e.g. "federation.learning_rate"; "ldp.client[].ids" inside an array of tables
  KeyType type;
  std::string default_value;  // TOML text of the default, empty when there is none
  std::string description;
  double minimum = -std::numeric_limits<double>::infinity();
  double maximum = std::numeric_limits<double>::infinity();
  bool minimum_exclusive = false;
  bool maximum_exclusive = false;
  std::vector<std::string> choices;  // allowed values for strings and string arrays
  bool tab_allowed = false;          // a string key whose value may hold a tab (a delimiter)
  // A number key (real or real array) that takes +inf: only where inf has a documented meaning
  // (deck_keys::with_infinity). Every other number key refuses nan, inf and -inf.
  bool infinity_allowed = false;
  // What the table in inputs/README.md adds to the allowed values that the schema cannot check
  // itself (a bound set by another key, a format); the config struct's from_deck checks it.
  std::string allowed_note;
};

/// A set of deck keys, in the order they were added (the order of inputs/README.md's tables).
class DeckSchema {
 public:
  /// Adds keys; a path already present is a programming error (std::logic_error).
  void add(std::vector<KeySpec> specs);
  /// The key at `path` ("ldp.client[2].id" finds "ldp.client[].id"), or nullptr.
  const KeySpec* find(const std::string& path) const;
  const std::vector<KeySpec>& keys() const { return keys_; }
  std::vector<KeySpec>::const_iterator begin() const { return keys_.begin(); }
  std::vector<KeySpec>::const_iterator end() const { return keys_.end(); }

 private:
  std::vector<KeySpec> keys_;
};

/// The top-level keys (`seed`).
void register_core_keys(DeckSchema& schema);

std::string key_type_name(KeyType type);
/// Human-readable statement of what a key allows ("a number > 0", "one of: iid, dirichlet"). A
/// number is finite unless the key allows inf ("a number > 0, or inf"); with `say_finite` the text
/// says so ("a finite number > 0"), for the message that refuses a non-finite value.
std::string allowed_text(const KeySpec& spec, bool say_finite = false);

/// Per-attribute privacy levels parsed from an `epsilon` key; +inf means "not randomized".
struct EpsilonSpec {
  double all =
      std::numeric_limits<double>::infinity();  // applies to attributes not in by_attribute
  std::map<std::string, double> by_attribute;
  double for_attribute(const std::string& name) const;
};

class Deck {
 public:
  /// Reads and validates a deck file against `schema` (which must outlive the deck), and fills in
  /// its defaults; `overrides` are "section.key=value" strings from --set.
  static Deck from_file(const std::string& path, const DeckSchema& schema,
                        const std::vector<std::string>& overrides = {});
  static Deck from_string(const std::string& text, const std::string& origin,
                          const DeckSchema& schema, const std::vector<std::string>& overrides = {});
  Deck(Deck&&) noexcept;
  Deck& operator=(Deck&&) noexcept;
  ~Deck();

  bool has(const std::string& path) const;
  long integer(const std::string& path) const;
  double real(const std::string& path) const;
  bool boolean(const std::string& path) const;
  std::string string(const std::string& path) const;
  std::vector<std::string> strings(const std::string& path) const;
  std::vector<double> reals(const std::string& path) const;
  std::vector<long> integers(const std::string& path) const;
  EpsilonSpec epsilon(const std::string& path) const;
  /// Number of elements of an array of tables (0 when absent).
  std::size_t array_size(const std::string& path) const;
  /// Path of element `index` of an array of tables, for use with the getters: "ldp.client[2]".
  static std::string element(const std::string& path, std::size_t index);

  /// The deck with every default filled in, as TOML text (stored in results files).
  std::string resolved_toml() const;
  /// Where the deck came from (file name), for messages.
  const std::string& origin() const { return origin_; }
  /// The top-level sections the deck file and --set gave (before defaults), for the warning about
  /// sections a command does not read.
  std::vector<std::string> given_sections() const;
  /// Did the deck file or --set give this key (not its default)? Keys inside arrays of tables
  /// are not tracked.
  bool given(const std::string& path) const;
  /// Error text naming the key path and where it was set.
  std::string where(const std::string& path) const;
  /// A string key naming a file or directory, as the file system should see it: a relative path
  /// the deck file gave is taken from the deck file's directory (so a deck and its data move
  /// together); one given by --set, or by a deck that is not a file, stays relative to the
  /// working directory.
  std::string file_path(const std::string& path) const;
  /// The value at `path` as TOML text (strings quoted, arrays and tables whole; "" when absent),
  /// to compare two decks' values and show them.
  std::string value_text(const std::string& path) const;

  const toml::table& table() const;
  /// The schema the deck was checked against (to read another deck the same way).
  const DeckSchema& schema() const { return *schema_; }

 private:
  Deck();
  struct Impl;
  Impl* impl_ = nullptr;
  std::string origin_;
  const DeckSchema* schema_ = nullptr;
};

/// Levenshtein edit distance (for "did you mean" suggestions).
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace fluence
