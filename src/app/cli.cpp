#include "fluence/app/cli.hpp"
#include "fluence/app/commands.hpp"
#include "fluence/app/deck_schema.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <new>
#include <stdexcept>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
#include "fluence/core/memory.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/solver_options.hpp"
#include "fluence/core/version.hpp"
#include "fluence/io/results.hpp"

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

}  // namespace

CommandLine parse_command_line(int argc, char** argv) {
  CommandLine result;
  std::vector<std::string> own_args;
  result.petsc_args.push_back(argv[0]);

  CLI::App app{
      "Fluence: an MPI simulator for privacy research in federated learning.\n"
      "Run under mpirun: rank 0 plays the server, clients are spread over all ranks."};
  app.footer(kFooter);
  app.set_version_flag("--version",
                       std::string("fluence ") + version() + " (" + git_revision() + ")");
  app.require_subcommand(1);

  // Every command from the table (commands.hpp): its common options, then its own.
  for (const CommandSpec& spec : registered_commands()) {
    CLI::App* command = app.add_subcommand(spec.name, spec.help);
    if (spec.reads_deck) add_common_options(command, result, spec.options);
    if (spec.add_options) spec.add_options(command, result);
  }

  // PETSc's options come last, but a Fluence option (--out DIR, --force) given among them is
  // still Fluence's: PETSc's start with one dash, Fluence's long ones with two (`-newton_ksp_rtol
  // 1e-3 --out DIR` wrote to the deck's output.dir, the --out taken for a PETSc value).
  const CLI::App* chosen = nullptr;
  bool petsc_part = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    result.invocation += (i > 1 ? " " : "") + arg;
    if (!chosen && !own_args.empty() && own_args.front().rfind('-', 0) != 0)
      for (const auto* command : app.get_subcommands({}))
        if (command->get_name() == own_args.front()) chosen = command;
    petsc_part = petsc_part || is_petsc_option(arg);
    if (!petsc_part) {
      own_args.push_back(arg);
    } else if (arg.size() > 2 && arg.rfind("--", 0) == 0) {
      own_args.push_back(arg);
      const std::string name = arg.substr(0, arg.find('='));
      const CLI::Option* option = chosen ? chosen->get_option_no_throw(name) : nullptr;
      if (option && option->get_type_size_min() > 0 && name.size() == arg.size() && i + 1 < argc) {
        own_args.push_back(argv[++i]);
        result.invocation += " " + own_args.back();
      }
    } else {
      result.petsc_args.push_back(arg);
    }
  }
  result.invocation = "fluence " + result.invocation;

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
  // Derived from the command table once (commands are registered before the first parse).
  static const std::map<std::string, std::vector<std::string>> read = [] {
    std::map<std::string, std::vector<std::string>> sections;
    for (const CommandSpec& spec : registered_commands())
      if (!spec.sections.empty()) sections[spec.name] = spec.sections;
    return sections;
  }();
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

namespace {

std::string out_of_memory_message() {
  const char* stage = unwound_stage();
  return stage ? fmt::format("{} (in the {} stage)", kOutOfMemory, stage) : kOutOfMemory;
}

// A failure that may be this rank's alone: reported here, and every rank taken down. A run of
// one rank has no other rank to stop: it exits without MPI_Abort's banner.
int end_every_rank(const std::string& message) {
  log::write_error(fmt::format("error on rank {}: {}", world_rank(), message));
  remove_unused_output_directory();
  if (world_size() > 1) MPI_Abort(MPI_COMM_WORLD, kExitRuntime);
  return kExitRuntime;
}

}  // namespace

int run_command(const CommandLine& command_line) {
  try {
    // Before any deck is read: what each rank may allocate (check_memory), and the solvers'
    // PETSc options, refused now rather than when a solver is first made.
    const CommandSpec spec = command_spec(command_line.command);
    if (spec.measures_memory) measure_memory_budget();
    check_solver_options({command_line.petsc_args.begin() + 1, command_line.petsc_args.end()});
    return spec.run(command_line);
  } catch (const InputError& error) {
    // Input errors are raised identically (or agreed) on every rank: all ranks exit cleanly.
    if (log::is_root()) log::write_error("error: " + std::string(error.what()));
    remove_unused_output_directory();
    return kExitInput;
  } catch (const WriteError& error) {
    // Agreed on every rank (ResultsFile): a full disk under the results or a checkpoint.
    if (log::is_root()) log::write_error("error: " + std::string(error.what()));
    remove_unused_output_directory();
    return kExitRuntime;
  } catch (const DivergenceError& error) {
    // Agreed on every rank (the diverged round's reduction): a clean exit, one message.
    if (log::is_root()) log::write_error("error: " + std::string(error.what()));
    remove_unused_output_directory();
    return kExitRuntime;
  } catch (const std::bad_alloc&) {
    // A deck that asks for more memory than the rank has (data.synthetic.rows, a wide model):
    // one line naming the phase instead of the raw "std::bad_alloc".
    return end_every_rank(out_of_memory_message());
  } catch (const std::length_error&) {
    // An array longer than std::vector can hold ("cannot create std::vector larger than
    // max_size()"): a count beyond any memory.
    return end_every_rank(out_of_memory_message());
  } catch (const std::exception& error) {
    // Anything else may be local to this rank: report it here and take every rank down.
    return end_every_rank(error.what());
  }
}

}  // namespace fluence::app
