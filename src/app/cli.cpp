#include "fluence/app/cli.hpp"
#include "fluence/app/deck_schema.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <new>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/memory.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/solver_options.hpp"
#include "fluence/core/version.hpp"
#include "fluence/io/results.hpp"
#include "fluence/privacy/accountant.hpp"

namespace fluence::app {

namespace {

// Before MPI starts, the launcher's environment tells which process this is; only the first prints
// help, version and usage errors.
bool first_process() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(name)) return std::string(value) == "0";
  }
  return true;
}

bool is_petsc_option(const std::string& arg) {
  return arg.size() > 2 && arg[0] == '-' && arg[1] != '-' && std::isalpha(arg[1]);
}

const char* kFooter = R"(
PETSc and SLEPc options come last and pass through to the solvers, e.g.
  mpirun -n 4 fluence train deck.toml --out run1 -log_view -newton_ksp_monitor
  mpirun -n 4 fluence influence deck.toml -ihvp_ksp_monitor -hessian_eps_view
  mpirun -n 4 fluence fldp deck.toml --model run1/results.h5 -newton_ksp_monitor
  mpirun -n 2 fluence whatif deck.toml --set whatif.retrain=true
  mpirun -n 4 fluence lia inputs/lia_fashion_mnist.toml --set lia.participants=1000

Long commands (train, influence, fldp, whatif) write <out>/chk_*.h5 every output.checkpoint_every
rounds or units of work and on SIGTERM/SIGUSR1/SIGINT/SIGHUP; --restart latest continues one
(docs/operations.md).
Exit codes: 0 success, 1 usage error, 2 bad input (deck, data, output directory, refused checkpoint),
3 runtime failure, 4 stopped by SIGTERM/SIGUSR1/SIGINT/SIGHUP after writing a checkpoint
(resume with --restart latest).
Deck keys: inputs/README.md. Output datasets: docs/outputs.md. The papers (FLDP-FL, LIA, FeO2, ...):
docs/references.md.)";

// The options a command shares with others: which it takes, and the help texts that differ.
struct CommonOptions {
  std::string deck = "input deck (TOML)";  // the positional deck argument's help
  bool output = true;                      // --out and --force
  std::string quiet;                       // --quiet's help (what it silences); empty: no --quiet
  bool model = false;                      // --model results.h5
  std::string restart;  // --restart's help (what is not redone); empty: no --restart
};

// The deck, --set, and the options `options` names: --out and --force to replace a finished run's
// results (docs/operations.md "The output directory"), --quiet, --model, --restart and the hidden
// testing aid --test-stop-at (docs/operations.md).
void add_common_options(CLI::App* command, CommandLine& result, const CommonOptions& options) {
  command->add_option("deck", result.deck, options.deck)->required();
  if (options.output) {
    command->add_option("--out", result.out, "output directory (overrides output.dir)");
    command->add_flag("--force", result.force,
                      "overwrite a finished results.h5 in the output directory (refused without)");
  }
  command->add_option("--set", result.sets, "override a deck key: section.key=value (repeatable)");
  if (options.model)
    command->add_option("--model", result.model,
                        "results.h5 of an earlier `fluence train` with the same deck: use its "
                        "/model/theta instead of training");
  if (!options.quiet.empty()) command->add_flag("--quiet", result.quiet, options.quiet);
  if (!options.restart.empty()) {
    command->add_option("--restart", result.restart, options.restart);
    command
        ->add_option("--test-stop-at", result.test_stop_at,
                     "testing aid: raise SIGUSR1 on the last rank at checkpoint number N")
        ->group("");
  }
}

// A command that reads a deck: its name, what it does (--help), and the common options it takes.
struct DeckCommand {
  std::string name, description;
  CommonOptions options;
};

// In --help's order (`privacy`, which reads no deck, follows them).
const std::vector<DeckCommand>& deck_command_table() {
  static const std::vector<DeckCommand> commands = {
      {"validate",
       "check a deck (and its data) without running it; echo the resolved settings",
       {.output = false}},
      {"train",
       "train a federation (FedAvg with randomized-response LDP) and write <out>/results.h5",
       {.quiet = "no per-round progress lines",
        .restart = "continue from a checkpoint: a chk_*.h5 file, or \"latest\" (the newest valid "
                   "one in the output directory); the finished rounds are not redone"}},
      {"influence",
       "train (or load --model) and score every client by the estimated change of the global "
       "test loss if it were removed (influence functions: PETSc IHVP, SLEPc spectrum), "
       "optionally against exact retraining; write <out>/results.h5",
       {.quiet = "no per-round or per-client progress lines",
        .model = true,
        .restart = "continue from a checkpoint (a chk_*.h5 file, or \"latest\" in the output "
                   "directory): the model and the finished per-client solves and retrains are "
                   "not redone"}},
      {"fldp",
       "train (or load --model), then estimate the global model after clients change their "
       "privacy level eps -> eps' or leave (FLDP-FL, influence functions), against the exact "
       "expected retrain and re-randomized retrains; write <out>/results.h5",
       {.deck = "input deck (TOML) with [fldp] cases",
        .quiet = "no per-round or per-case progress lines",
        .model = true,
        .restart = "continue from a checkpoint (a chk_*.h5 file, or \"latest\" in the output "
                   "directory): the model and the finished cases are not redone"}},
      {"whatif",
       "train (or load --model), then estimate how the test loss would change if a fraction of "
       "a group's records were randomized with eps-LDP (Carey et al. 2023), for a grid of "
       "fractions and eps from one IHVP; optionally against randomized retrains; write "
       "<out>/results.h5",
       {.deck = "input deck (TOML) with a [whatif] section",
        .quiet = "no per-round or retrain progress lines",
        .model = true,
        .restart = "continue from a checkpoint (a chk_*.h5 file, or \"latest\" in the output "
                   "directory): the model, the finished second-order rows and retrain chains "
                   "are not redone"}},
      {"lia",
       "lazy-influence data filtering (LIA): contributors' DP-SGD last layers, every "
       "validator's randomized votes, the center's k-means threshold, filtration metrics, and "
       "FL after filtering against robust aggregators; write <out>/results.h5",
       {.deck = "input deck (TOML) with [data] and [lia]",
        .quiet = "no per-stage progress lines",
        .restart = "continue from a checkpoint (a chk_*.h5 of this deck, or \"latest\" in the "
                   "output directory): the filtering outcome and finished FL methods are kept"}},
      {"feo2-theory",
       "simulate FeO2's federated point estimation: the server's variance for each FeO2 ratio "
       "r against Lemma 1's sigma_s^2(r) and r*; write <out>/results.h5",
       {.deck = "input deck (TOML) with [feo2_theory]"}},
  };
  return commands;
}

void add_deck_command(CLI::App& app, CommandLine& result, const DeckCommand& command) {
  add_common_options(app.add_subcommand(command.name, command.description), result,
                     command.options);
}

// validate's own options, beyond the deck and --set.
void add_validate_options(CLI::App* validate, CommandLine& result) {
  validate->add_flag("--no-data", result.skip_data, "check the deck only, do not load the data");
  std::vector<std::string> commands;
  for (const DeckCommand& command : deck_command_table())
    if (command.name != "validate") commands.push_back(command.name);
  validate
      ->add_option("--command", result.for_command,
                   "check the deck for this command only: its sections and checks, and a warning "
                   "for the sections it does not read")
      ->check(CLI::IsMember(commands));
}

// fluence privacy: the accountant's inputs, no deck.
void add_privacy_command(CLI::App& app, CommandLine& result) {
  auto* privacy = app.add_subcommand(
      "privacy",
      "the (eps, delta) of DP-SGD / DP-FedAvg from an accountant of the Poisson-subsampled "
      "Gaussian mechanism (--noise), or the noise multiplier for a target eps (--epsilon)");
  auto& accounting = result.privacy;
  auto* noise = privacy->add_option("--noise", accounting.noise,
                                    "noise multiplier z (noise std / clipping norm)");
  auto* target = privacy->add_option("--epsilon", accounting.epsilon,
                                     "target eps: print the smallest noise multiplier reaching it");
  noise->excludes(target);
  privacy
      ->add_option("--sampling-rate", accounting.sampling_rate,
                   "Poisson sampling rate q per step (batch / N, or clients sampled / N)")
      ->required()
      ->check(CLI::Range(0.0, 1.0));
  privacy->add_option("--steps", accounting.steps, "number of steps (rounds) composed")
      ->required()
      ->check(CLI::NonNegativeNumber);
  privacy->add_option("--delta", accounting.delta, "delta of the (eps, delta) guarantee")
      ->required()
      ->check(CLI::Range(0.0, 1.0));
  std::string accountant_help = "the accountant (default rdp):";
  for (const AccountantSpec& spec : registered_accountants())
    accountant_help += " " + spec.name + " = " + spec.help + ";";
  accountant_help.back() = '.';
  privacy->add_option("--accountant", accounting.accountant, accountant_help)
      ->check(CLI::IsMember(accountant_names()));
  privacy->add_flag("--json", accounting.json,
                    "print exactly {\"epsilon\": ..., \"delta\": ..., \"order\": ...} (with "
                    "--epsilon also \"noise_multiplier\"); other accountants print "
                    "\"accountant\" and their bracket \"epsilon_lower\", \"epsilon_estimate\", "
                    "\"epsilon_upper\" in place of \"order\"");
}

}  // namespace

CommandLine parse_command_line(int argc, char** argv) {
  CommandLine result;
  std::vector<std::string> own_args;
  result.petsc_args.push_back(argv[0]);
  bool petsc_part = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    result.invocation += (i > 1 ? " " : "") + arg;
    petsc_part = petsc_part || is_petsc_option(arg);
    (petsc_part ? result.petsc_args : own_args).push_back(arg);
  }
  result.invocation = "fluence " + result.invocation;

  CLI::App app{
      "Fluence: an MPI simulator for privacy research in federated learning.\n"
      "Run under mpirun: rank 0 plays the server, clients are spread over all ranks."};
  app.footer(kFooter);
  app.set_version_flag("--version",
                       std::string("fluence ") + version() + " (" + git_revision() + ")");
  app.require_subcommand(1);

  for (const DeckCommand& command : deck_command_table()) add_deck_command(app, result, command);
  add_validate_options(app.get_subcommand("validate"), result);
  add_privacy_command(app, result);

  auto* keys =
      app.add_subcommand("keys", "list every deck key with its type, default and allowed values");
  keys->add_flag("--markdown", result.markdown,
                 "print inputs/README.md's key tables (Markdown, meanings included), one per "
                 "deck section");

  std::vector<const char*> args;
  args.push_back(argv[0]);
  for (const auto& arg : own_args) args.push_back(arg.c_str());
  // A first word that is no command (a typo: `fluence trian deck.toml`) would otherwise get
  // CLI11's bare "A subcommand is required": name it, the nearest command and the list.
  if (!own_args.empty() && own_args.front().rfind('-', 0) != 0) {
    const std::string& word = own_args.front();
    std::string nearest, names;
    std::size_t best = std::string::npos;
    for (const auto* command : app.get_subcommands({})) {
      const std::string& name = command->get_name();
      names += (names.empty() ? "" : ", ") + name;
      const std::size_t distance = edit_distance(word, name);
      if (distance < best) best = distance, nearest = name;
    }
    if (app.get_subcommands([&](const CLI::App* c) { return c->get_name() == word; }).empty()) {
      if (first_process())
        std::cerr << "fluence: unknown command '" << message_excerpt(word) << "'"
                  << (best <= 2 ? " (did you mean '" + nearest + "'?)" : std::string())
                  << "; the commands are " << names << " (fluence --help)\n";
      result.exit_code = kExitUsage;
      return result;
    }
  }
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& error) {
    const bool print = first_process();
    if (error.get_exit_code() == 0) {
      if (print) app.exit(error);
      result.exit_code = 0;
    } else {
      if (print) app.exit(error);
      result.exit_code = kExitUsage;
    }
    return result;
  }
  for (const auto* command : app.get_subcommands({}))
    if (command->parsed()) {
      result.command = command->get_name();
      const auto* out = command->get_option_no_throw("--out");
      result.out_given = out != nullptr && out->count() > 0;
    }
  return result;
}

namespace {

// `text` as a TOML basic string: a path with a quote or a backslash (`--out 'o"ut'`) must not
// end the string early or escape what follows.
std::string toml_string(const std::string& text) {
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      quoted += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

}  // namespace

const std::map<std::string, std::vector<std::string>>& deck_commands() {
  static const std::map<std::string, std::vector<std::string>> read = {
      {"train",
       {"data", "partition", "model", "ldp", "federation", "privacy", "personalization", "output"}},
      {"influence", {"data", "partition", "model", "ldp", "federation", "influence", "output"}},
      {"fldp", {"data", "partition", "model", "ldp", "federation", "influence", "fldp", "output"}},
      {"whatif",
       {"data", "partition", "model", "ldp", "federation", "influence", "whatif", "output"}},
      {"lia", {"data", "model", "lia", "output"}},
      {"feo2-theory", {"feo2_theory", "output"}},
  };
  return read;
}

const std::vector<std::string>& sections_read_by(const std::string& command) {
  static const std::vector<std::string> none;
  const auto found = deck_commands().find(command);
  return found == deck_commands().end() ? none : found->second;
}

void warn_ignored_sections(const Deck& deck, const std::string& command) {
  const auto& read = sections_read_by(command);
  if (read.empty()) return;
  std::string ignored;
  for (const auto& section : deck.given_sections())
    if (std::find(read.begin(), read.end(), section) == read.end())
      ignored += (ignored.empty() ? "[" : ", [") + section + "]";
  if (!ignored.empty())
    log::warn("fluence {} does not read {} ({}): those keys have no effect on this command",
              command, ignored, deck.origin());
}

Deck read_command_deck(const CommandLine& command_line) {
  // `--out ""` (an unset shell variable: --out "$DIR") was ignored, and the run wrote to
  // output.dir.
  if (command_line.out_given && command_line.out.empty())
    throw InputError(
        "--out \"\": expected an output directory name (an empty --out would leave the run in "
        "output.dir)");
  std::vector<std::string> sets = command_line.sets;
  if (!command_line.out.empty()) sets.push_back("output.dir=" + toml_string(command_line.out));
  Deck deck = Deck::from_file(command_line.deck, deck_schema(), sets);
  warn_ignored_sections(deck, command_line.command);
  return deck;
}

int run_command(const CommandLine& command_line) {
  try {
    // Before any deck is read: what each rank may allocate (check_memory), and the solvers'
    // PETSc options, refused now rather than when a solver is first made.
    if (command_line.command != "privacy" && command_line.command != "keys")
      measure_memory_budget();
    check_solver_options({command_line.petsc_args.begin() + 1, command_line.petsc_args.end()});
    if (command_line.command == "validate") return run_validate(command_line);
    if (command_line.command == "influence") return run_influence(command_line);
    if (command_line.command == "fldp") return run_fldp(command_line);
    if (command_line.command == "whatif") return run_whatif(command_line);
    if (command_line.command == "lia") return run_lia(command_line);
    if (command_line.command == "privacy") return run_privacy(command_line);
    if (command_line.command == "feo2-theory") return run_feo2_theory(command_line);
    if (command_line.command == "keys") return run_keys(command_line);
    return run_train(command_line);
  } catch (const InputError& error) {
    // Input errors are raised identically (or agreed) on every rank: all ranks exit cleanly.
    if (log::is_root()) log::write_error("error: " + std::string(error.what()));
    remove_unused_output_directory();
    return kExitInput;
  } catch (const DivergenceError& error) {
    // Agreed on every rank (the diverged round's reduction): a clean exit, one message.
    if (log::is_root()) log::write_error("error: " + std::string(error.what()));
    remove_unused_output_directory();
    return kExitRuntime;
  } catch (const std::bad_alloc&) {
    // A deck that asks for more memory than the rank has (data.synthetic.rows, a wide model):
    // one line instead of the raw "std::bad_alloc".
    log::write_error(fmt::format("error on rank {}: {}", world_rank(), kOutOfMemory));
    remove_unused_output_directory();
    MPI_Abort(MPI_COMM_WORLD, kExitRuntime);
    return kExitRuntime;
  } catch (const std::exception& error) {
    // Anything else may be local to this rank: report it here and take every rank down.
    log::write_error(fmt::format("error on rank {}: {}", world_rank(), error.what()));
    remove_unused_output_directory();
    MPI_Abort(MPI_COMM_WORLD, kExitRuntime);
    return kExitRuntime;
  }
}

}  // namespace fluence::app
