// fluence keys [--markdown]: every deck key the schema holds, as the modules declared it. With
// --markdown, inputs/README.md's key tables exactly (tests/app/test_deck_schema.cpp and
// cli_tests.sh compare them). Rank 0 prints; nothing is read or written.
#include "fluence/app/cli.hpp"
#include "fluence/app/deck_schema.hpp"
#include "fluence/core/log.hpp"

namespace fluence::app {

int run_keys(const CommandLine& command_line) {
  const DeckSchema& schema = deck_schema();
  if (command_line.markdown) {
    std::string tables = key_tables_markdown(schema);
    tables.pop_back();  // log::info ends the line
    log::info("{}", tables);
    return 0;
  }
  for (const auto& spec : schema) {
    if (spec.type == KeyType::section || spec.type == KeyType::section_array) continue;
    log::info("{} = {}  ({}; {})", spec.path,
              spec.default_value.empty() ? "(no default)" : spec.default_value,
              key_type_name(spec.type), documented_allowed(spec));
  }
  return 0;
}

}  // namespace fluence::app
