#include "fluence/app/deck_schema.hpp"

#include <fmt/format.h>

#include <limits>

#include "checkpoints.hpp"
#include "fluence/app/commands.hpp"
#include "fluence/data/partition.hpp"
#include "fluence/data/source.hpp"
#include "fluence/fl/private_training.hpp"
#include "fluence/fl/problem.hpp"
#include "fluence/fldp/fldp.hpp"
#include "fluence/influence/client_influence.hpp"
#include "fluence/lia/lia.hpp"
#include "fluence/model/build.hpp"
#include "fluence/privacy/point_estimation.hpp"
#include "fluence/privacy/randomized_response.hpp"
#include "fluence/whatif/whatif.hpp"

namespace fluence {

namespace {

// The modules' keys, bottom layer first: the order of inputs/README.md's tables.
DeckSchema assemble_schema() {
  DeckSchema schema;
  register_core_keys(schema);
  register_data_keys(schema);
  register_partition_keys(schema);
  register_model_keys(schema);
  register_ldp_keys(schema);
  register_federation_keys(schema);
  register_private_training_keys(schema);
  register_point_estimation_keys(schema);
  register_influence_keys(schema);
  register_fldp_keys(schema);
  register_whatif_keys(schema);
  lia::register_lia_keys(schema);
  app::register_output_keys(schema);
  // Commands registered with keys of their own (commands.hpp), after every module's.
  for (const app::CommandSpec& command : app::registered_commands())
    if (command.register_keys) command.register_keys(schema);
  return schema;
}

// The section a key belongs to: its path up to the last dot ("" for top-level keys), with the
// "[]" of an array of tables kept ("ldp.client[].id" -> "ldp.client").
std::string parent_section(const std::string& path) {
  const auto dot = path.rfind('.');
  if (dot == std::string::npos) return "";
  std::string parent = path.substr(0, dot);
  if (parent.size() > 2 && parent.compare(parent.size() - 2, 2, "[]") == 0)
    parent.resize(parent.size() - 2);
  return parent;
}

std::string table_rows(const DeckSchema& schema, const std::string& section) {
  std::string rows;
  for (const auto& spec : schema) {
    if (spec.type == KeyType::section || spec.type == KeyType::section_array) continue;
    if (parent_section(spec.path) != section) continue;
    const std::string default_text =
        spec.default_value.empty() ? "—" : "`" + spec.default_value + "`";
    rows += fmt::format("| `{}` | {} | {} | {} |\n", spec.path, default_text,
                        documented_allowed(spec), spec.description);
  }
  return rows;
}

std::string table(const std::string& heading, const std::string& rows) {
  return fmt::format(
      "### {}\n\n| key | default | allowed | meaning |\n| --- | --- | --- | --- |\n{}", heading,
      rows);
}

}  // namespace

// The bound every integer key has (a 32-bit int, or 64 bits for the seed) is stated once in
// inputs/README.md's prose, not in every row; the note on what from_deck checks besides follows.
std::string documented_allowed(KeySpec spec) {
  const bool integral = spec.type == KeyType::integer || spec.type == KeyType::integer_array;
  if (integral && spec.maximum >= static_cast<double>(std::numeric_limits<int>::max()))
    spec.maximum = std::numeric_limits<double>::infinity();
  const std::string allowed = allowed_text(spec);
  return spec.allowed_note.empty() ? allowed : allowed + "; " + spec.allowed_note;
}

const DeckSchema& deck_schema() {
  static const DeckSchema schema = assemble_schema();
  return schema;
}

std::string key_tables_markdown(const DeckSchema& schema) {
  std::string text = table("Top level", table_rows(schema, ""));
  for (const auto& spec : schema) {
    if (spec.type != KeyType::section && spec.type != KeyType::section_array) continue;
    const std::string name = spec.type == KeyType::section ? fmt::format("[{}]", spec.path)
                                                           : fmt::format("[[{}]]", spec.path);
    text += '\n';
    text += table(fmt::format("`{}` — {}", name, spec.description), table_rows(schema, spec.path));
  }
  return text;
}

}  // namespace fluence
