// The deck schema assembled from the modules' declarations, and inputs/README.md's key tables
// generated from it.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/deck_keys.hpp"

namespace fluence {
namespace {

// The lines of a key-table text that the tables are made of: the section headings and the table
// rows (the prose around them in inputs/README.md is free).
std::vector<std::string> table_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("### ", 0) == 0 || line.rfind("|", 0) == 0) lines.push_back(line);
  return lines;
}

// inputs/README.md from its "## Keys" heading to the next "## " heading.
std::string readme_keys_part() {
  std::ifstream file(std::string(FLUENCE_SOURCE_DIR) + "/inputs/README.md");
  std::stringstream text;
  text << file.rdbuf();
  const std::string all = text.str();
  const auto begin = all.find("\n## Keys\n");
  if (begin == std::string::npos) return "";
  const auto end = all.find("\n## ", begin + 1);
  return all.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

TEST(DeckSchema, RefusesAKeyDeclaredTwice) {
  using namespace deck_keys;
  DeckSchema schema;
  schema.add({key("a.b", KeyType::integer, "1", "first")});
  EXPECT_THROW(schema.add({key("a.b", KeyType::real, "2.0", "again")}), std::logic_error);
  EXPECT_EQ(schema.keys().size(), 1u);
  ASSERT_NE(schema.find("a.b"), nullptr);
  EXPECT_EQ(schema.find("a.b")->description, "first");
}

TEST(DeckSchema, FindsAKeyInsideAnArrayOfTablesByItsIndexedPath) {
  using namespace deck_keys;
  DeckSchema schema;
  schema.add({key("s.list", KeyType::section_array, "", "tables"),
              key("s.list[].id", KeyType::integer, "", "an id", 0)});
  ASSERT_NE(schema.find("s.list[3].id"), nullptr);
  EXPECT_EQ(schema.find("s.list[3].id")->path, "s.list[].id");
  EXPECT_EQ(schema.find("s.list[3].name"), nullptr);
}

// The generator's exact output for a small schema: a top-level table, then one table per section
// in declaration order, each with the section's own keys only (a subsection's keys go to its own
// table, an array of tables is headed [[...]]), "—" for a key without a default, a note after the
// allowed values, and no row stating the INT_MAX bound every integer key has.
TEST(DeckSchema, KeyTablesHaveOneTablePerSection) {
  using namespace deck_keys;
  DeckSchema schema;
  schema.add({key("seed", KeyType::integer, "1", "the seed", 0, 10), section("a", "section A"),
              choice("a.mode", "\"x\"", {"x", "y"}, "how"), section("a.sub", "below A"),
              key("a.sub.rate", KeyType::real, "0.5", "a rate", 0.0, 1.0, true),
              with_note(key("a.name", KeyType::string, "", "a `name`"), "not `x`"),
              key("a.count", KeyType::integer, "3", "a count", 1),
              key("a.list", KeyType::section_array, "", "per item"),
              key("a.list[].id", KeyType::integer, "", "its id", 0, 5)});
  const std::string header = "| key | default | allowed | meaning |\n| --- | --- | --- | --- |\n";
  EXPECT_EQ(key_tables_markdown(schema),
            "### Top level\n\n" + header +
                "| `seed` | `1` | an integer >= 0 and <= 10 | the seed |\n"
                "\n### `[a]` — section A\n\n" +
                header +
                "| `a.mode` | `\"x\"` | one of: x, y | how |\n"
                "| `a.name` | — | a string; not `x` | a `name` |\n"
                "| `a.count` | `3` | an integer >= 1 | a count |\n"
                "\n### `[a.sub]` — below A\n\n" +
                header +
                "| `a.sub.rate` | `0.5` | a number > 0 and <= 1 | a rate |\n"
                "\n### `[[a.list]]` — per item\n\n" +
                header + "| `a.list[].id` | — | an integer >= 0 and <= 5 | its id |\n");
}

// inputs/README.md's key tables are the schema's (scripts/update_key_tables.py writes them): a key
// declared without its row, or a row whose default, range or meaning differs from the declaration,
// fails here.
TEST(DeckSchema, InputsReadmeKeyTablesAreTheSchemas) {
  const auto readme = table_lines(readme_keys_part());
  const auto schema = table_lines(key_tables_markdown(deck_schema()));
  ASSERT_FALSE(readme.empty()) << "inputs/README.md has no \"## Keys\" tables";
  for (std::size_t i = 0; i < std::min(readme.size(), schema.size()); ++i)
    ASSERT_EQ(readme[i], schema[i]) << "inputs/README.md's key tables differ from the schema's at "
                                       "line "
                                    << i + 1
                                    << " of their tables (update them with "
                                       "scripts/update_key_tables.py build/fluence)";
  EXPECT_EQ(readme.size(), schema.size())
      << "inputs/README.md's key tables have a different number of lines than the schema's";
}

}  // namespace
}  // namespace fluence
