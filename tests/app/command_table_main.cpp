// docs/extending.md's worked example of a new command, built and run by the suite: a command
// registered from outside src/app (with an option, a deck section and a key of its own) appears in
// `fluence --help`, is parsed, is a choice of `fluence validate --command`, reads its own section,
// adds its key to the deck schema (checked like any other), and is dispatched to its run function.
// Its own binary: the key it registers must not reach the unit tests' schema, whose tables are
// inputs/README.md's.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <sstream>

#include "fluence/app/commands.hpp"
#include "fluence/app/deck_schema.hpp"
#include "fluence/core/deck_keys.hpp"
#include "fluence/core/mpi.hpp"
#include "support/scratch_files.hpp"

namespace fluence::app {
namespace {

// --- the worked example (docs/extending.md "A command") -------------------------------------
// 1. The command's module: its keys and its run function.
void register_greeting_keys(DeckSchema& schema) {
  using namespace deck_keys;
  schema.add({section("greeting", "a worked example of a command's own section"),
              key("greeting.repeat", KeyType::integer, "1", "how many times to greet", 1, 10)});
}

int run_greeting(const CommandLine& command_line) {
  const Deck deck = read_command_deck(command_line);
  const auto repeat = deck.integer("greeting.repeat");
  // The exit code tells the test that this function ran, with the deck and the option it got.
  return static_cast<int>(repeat) * 10 + (command_line.options.at("--name") == "world" ? 1 : 0);
}

// 2. One table entry.
CommandSpec greeting_command() {
  CommandSpec spec;
  spec.name = "greeting";
  spec.help = "a worked example: greet --name, greeting.repeat times";
  spec.options = {.output = false};
  spec.sections = {"greeting"};
  spec.add_options = [](CLI::App* command, CommandLine& result) {
    command->add_option("--name", result.options["--name"], "whom to greet")->required();
  };
  spec.register_keys = register_greeting_keys;
  spec.run = run_greeting;
  spec.measures_memory = false;
  return spec;
}
// --- end of the worked example ---------------------------------------------------------------

CommandLine parse(std::vector<std::string> words, std::string* printed = nullptr) {
  words.insert(words.begin(), "fluence");
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  std::ostringstream out;
  auto* saved = std::cout.rdbuf(out.rdbuf());
  CommandLine line = parse_command_line(static_cast<int>(argv.size()), argv.data());
  std::cout.rdbuf(saved);
  if (printed) *printed = out.str();
  return line;
}

using CommandTable = testing::ScratchDirectoryTest;

TEST_F(CommandTable, ARegisteredCommandIsHelpedParsedValidatedAndRun) {
  std::string help;
  parse({"--help"}, &help);
  EXPECT_NE(help.find("greeting"), std::string::npos) << help;
  EXPECT_NE(help.find("a worked example: greet"), std::string::npos);

  const std::string deck = write("greeting.toml", "[greeting]\nrepeat = 3\n");
  const CommandLine line = parse({"greeting", deck, "--name", "world"});
  ASSERT_FALSE(line.exit_code.has_value());
  EXPECT_EQ(line.command, "greeting");
  // The key is in the schema, the section is the command's, and the dispatch runs it: 3 * 10 + 1.
  EXPECT_TRUE(deck_schema().find("greeting.repeat") != nullptr);
  EXPECT_EQ(sections_read_by("greeting"), std::vector<std::string>{"greeting"});
  EXPECT_EQ(run_command(line), 31);
  // A missing required option of its own is a usage error; validate checks a deck for it.
  EXPECT_EQ(parse({"greeting", deck}).exit_code, kExitUsage);
  const CommandLine validate = parse({"validate", deck, "--no-data", "--command", "greeting"});
  ASSERT_FALSE(validate.exit_code.has_value());
  EXPECT_EQ(run_command(validate), 0);
  // Its key is checked like every other: out of range is bad input (exit 2).
  const CommandLine bad = parse({"greeting", deck, "--name", "x", "--set", "greeting.repeat=11"});
  EXPECT_EQ(run_command(bad), kExitInput);
}

}  // namespace
}  // namespace fluence::app

int main(int argc, char** argv) {
  // Before anything parses a command line or builds the deck schema.
  fluence::app::register_command(fluence::app::greeting_command());
  ::testing::InitGoogleTest(&argc, argv);
  fluence::Environment environment(&argc, &argv);
  return RUN_ALL_TESTS();
}
