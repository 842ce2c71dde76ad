#pragma once
// The command table (docs/extending.md "A command"): every `fluence` command is one CommandSpec,
// and --help, the parser, `fluence validate --command`, the sections a command reads (its
// warnings about the others), the deck schema and the dispatch are all derived from the table. A
// new command is its own module, one register_command() call and its test.
#include <functional>
#include <string>
#include <vector>

#include "fluence/app/cli.hpp"
#include "fluence/core/config.hpp"

namespace CLI {
class App;
}

namespace fluence::app {

// The options a deck-reading command shares with others: which it takes, and the help texts
// that differ.
struct CommonOptions {
  std::string deck = "input deck (TOML)";  // the positional deck argument's help
  bool output = true;                      // --out and --force
  std::string quiet;                       // --quiet's help (what it silences); empty: no --quiet
  bool model = false;                      // --model results.h5
  std::string restart;  // --restart's help (what is not redone); empty: no --restart
};

struct CommandSpec {
  std::string name;
  std::string help;  // one line of `fluence --help`
  /// Takes a deck (and --set and the CommonOptions it names); otherwise only its own options.
  bool reads_deck = true;
  CommonOptions options;
  /// The deck sections it reads beyond `seed` (empty for validate, which reads them all, and for
  /// commands without a deck): sections a deck has beyond these draw a warning.
  std::vector<std::string> sections;
  /// Its own options beyond the common ones, bound to fields of CommandLine (a command registered
  /// outside src/app may use CommandLine::options); may be empty.
  std::function<void(CLI::App*, CommandLine&)> add_options;
  /// Its own deck keys (a section of its own), added to the schema after the modules'; may be
  /// empty. Registered before the schema is first used.
  std::function<void(DeckSchema&)> register_keys;
  /// Runs the command inside the MPI/PETSc environment; returns the exit code.
  std::function<int(const CommandLine&)> run;
  /// Measures each rank's memory budget first (commands that load data).
  bool measures_memory = true;
};

/// Adds a command (a later spec of the same name replaces the earlier one); before
/// parse_command_line and before the deck schema is first used.
void register_command(CommandSpec spec);
/// The commands in --help's order: validate, train, influence, fldp, whatif, lia, feo2-theory,
/// privacy, keys, then those registered later.
std::vector<CommandSpec> registered_commands();
/// The spec of `name` (InputError naming the registered ones when there is none).
CommandSpec command_spec(const std::string& name);

/// The common options `options` names, on `command` (the deck, --set, --out, ...).
void add_common_options(CLI::App* command, CommandLine& result, const CommonOptions& options);

}  // namespace fluence::app
