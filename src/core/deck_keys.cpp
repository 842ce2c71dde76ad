// The helpers each module declares its deck keys with, and the top-level keys.
#include "fluence/core/deck_keys.hpp"

namespace fluence {

namespace deck_keys {

namespace {
// The largest value an integer key takes unless its spec says otherwise: counts, sizes and ids are
// held in `int` (and passed to MPI and BLAS as int), so a deck value above INT_MAX is refused here,
// once, rather than wrapped by a cast later (a batch size of 2^40 was a segfault).
constexpr double kIntegerMaximum = static_cast<double>(std::numeric_limits<int>::max());

}  // namespace

KeySpec key(std::string path, KeyType type, std::string default_value, std::string description,
            double minimum, double maximum, bool minimum_exclusive) {
  const bool integral = type == KeyType::integer || type == KeyType::integer_array;
  if (integral && maximum == kInf) maximum = kIntegerMaximum;
  KeySpec spec;
  spec.path = std::move(path);
  spec.type = type;
  spec.default_value = std::move(default_value);
  spec.description = std::move(description);
  spec.minimum = minimum;
  spec.maximum = maximum;
  spec.minimum_exclusive = minimum_exclusive;
  return spec;
}

// A range whose upper end is excluded: PETSc refuses a relative tolerance of 1 (KSPSetTolerances),
// and a tolerance of 1 asks for nothing.
KeySpec below_maximum(KeySpec spec) {
  spec.maximum_exclusive = true;
  return spec;
}

KeySpec with_infinity(KeySpec spec) {
  spec.infinity_allowed = true;
  return spec;
}

KeySpec choice(std::string path, std::string default_value, std::vector<std::string> choices,
               std::string description) {
  KeySpec spec =
      key(std::move(path), KeyType::string, std::move(default_value), std::move(description));
  spec.choices = std::move(choices);
  return spec;
}

KeySpec with_choices(KeySpec spec, std::vector<std::string> choices) {
  spec.choices = std::move(choices);
  return spec;
}

KeySpec with_note(KeySpec spec, std::string note) {
  spec.allowed_note = std::move(note);
  return spec;
}

KeySpec section(std::string path, std::string description) {
  return key(std::move(path), KeyType::section, "", std::move(description));
}

}  // namespace deck_keys

void register_core_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      // Any non-negative 64-bit integer (2^63 as a double bounds every TOML integer).
      key("seed", T::integer, "1", "run seed keying every random stream", 0, 0x1p63),
  });
}

}  // namespace fluence
