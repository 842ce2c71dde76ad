#pragma once
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fluence/core/config.hpp"

namespace fluence::app {

struct CommandLine {
  std::string command;  // "train", "validate", "influence", "fldp", "whatif", "lia", "privacy",
                        // "feo2-theory", "keys"
  std::string deck;
  std::string out;                // --out overrides output.dir
  bool out_given = false;         // --out was on the command line (an empty one is refused)
  std::string model;              // influence --model results.h5
  std::string restart;            // --restart chk.h5 | latest (train, influence, fldp, whatif)
  int test_stop_at = -1;          // hidden --test-stop-at N: SIGUSR1 at checkpoint N (tests)
  long test_stop_inside = 0;      // hidden --test-stop-inside K: SIGUSR1 at fine boundary K (tests)
  std::vector<std::string> sets;  // --set section.key=value
  bool quiet = false;
  bool force = false;       // --force: overwrite a finished results.h5 in the output directory
  bool skip_data = false;   // validate --no-data
  bool markdown = false;    // keys --markdown
  std::string for_command;  // validate --command NAME: check the deck for that command only
  std::string collect;      // audit --collect DIR: the multi-run audit of the runs below DIR
  std::string membership;   // audit --membership MODEL.h5: the loss-threshold attack on its model
  std::string invocation;   // the whole command line, stored in results files
  // PETSc/SLEPc options (everything from the first single-dash option on), with argv[0] first.
  std::vector<std::string> petsc_args;
  std::optional<int> exit_code;  // set when parsing already finished the job (help, version, error)
  // fluence privacy: the accountant's inputs (unset = NaN / -1).
  struct Accounting {
    double noise = std::nan(""), epsilon = std::nan(""), sampling_rate = std::nan("");
    double delta = std::nan("");
    long steps = -1;
    bool json = false;
    std::string accountant = "rdp";
  } privacy;
  // The own options of a command registered outside src/app (commands.hpp), by name.
  std::map<std::string, std::string> options;
};

/// Parses argv; prints help/version/usage errors itself (once, even under mpirun).
CommandLine parse_command_line(int argc, char** argv);

/// The command's deck: --set overrides applied, then --out as output.dir.
Deck read_command_deck(const CommandLine& command_line);

/// The commands that read a deck, each with the deck sections it reads (beyond the top-level
/// `seed`). A deck is often shared by several commands, so a section another command needs is
/// worth a warning, not a refusal: the user learns that, e.g., [privacy] does not make `fluence
/// influence` train privately. `validate` checks a deck for a command by these sections.
const std::map<std::string, std::vector<std::string>>& deck_commands();
/// The sections `command` reads (none for a command that reads no deck).
const std::vector<std::string>& sections_read_by(const std::string& command);

/// Warns (rank 0, one line) about the deck's sections that `command` does not read.
void warn_ignored_sections(const Deck& deck, const std::string& command);

/// Runs the parsed command inside an initialized Environment; returns the process exit code.
int run_command(const CommandLine& command_line);

// One function per command (src/app/<command>.cpp).
int run_validate(const CommandLine& command_line);
int run_train(const CommandLine& command_line);
int run_influence(const CommandLine& command_line);
int run_fldp(const CommandLine& command_line);
int run_whatif(const CommandLine& command_line);
int run_lia(const CommandLine& command_line);
int run_privacy(const CommandLine& command_line);
int run_feo2_theory(const CommandLine& command_line);
int run_keys(const CommandLine& command_line);
int run_audit(const CommandLine& command_line);

/// Exit codes (documented in README.md).
inline constexpr int kExitUsage = 1;
inline constexpr int kExitInput = 2;
inline constexpr int kExitRuntime = 3;
inline constexpr int kExitStopped = 4;  // a stop signal: checkpoint written, resume with --restart

}  // namespace fluence::app
