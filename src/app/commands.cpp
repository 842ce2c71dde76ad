// The built-in commands (commands.hpp): their help, options, the sections they read and the
// function that runs each. --help lists them in this order.
#include "fluence/app/commands.hpp"

#include <CLI/CLI.hpp>

#include "fluence/audit/ldp_audit.hpp"
#include "fluence/core/registry.hpp"
#include "fluence/privacy/accountant.hpp"

namespace fluence::app {

// The deck, --set, and the options `options` names: --out and --force to replace a finished run's
// results (docs/operations.md "The output directory"), --quiet, --model, --restart and the hidden
// testing aids --test-stop-at and --test-stop-inside (docs/operations.md).
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
    command
        ->add_option("--test-stop-inside", result.test_stop_inside,
                     "testing aid: raise SIGUSR1 on the last rank at its K-th boundary inside a "
                     "unit (a CG iteration, a Newton step, a LiSSA step)")
        ->group("");
  }
}

namespace {

// validate's own options, beyond the deck and --set.
void add_validate_options(CLI::App* validate, CommandLine& result) {
  validate->add_flag("--no-data", result.skip_data, "check the deck only, do not load the data");
  std::vector<std::string> commands;
  for (const CommandSpec& spec : registered_commands())
    if (spec.reads_deck && spec.name != "validate") commands.push_back(spec.name);
  validate
      ->add_option("--command", result.for_command,
                   "check the deck for this command only: its sections and checks, and a warning "
                   "for the sections it does not read")
      ->check(CLI::IsMember(commands));
}

// fluence privacy: the accountant's inputs, no deck.
void add_privacy_options(CLI::App* privacy, CommandLine& result) {
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

// audit's own options, beyond the deck, --out, --force, --set and --quiet.
void add_audit_options(CLI::App* audit, CommandLine& result) {
  audit
      ->add_option("--collect", result.collect,
                   "the multi-run audit instead: every results.h5 below DIR, each a `fluence "
                   "train` run of DECK (up to seed, audit.canary_inclusion and [output]) with "
                   "one target canary (docs/math.md §11.4)")
      ->type_name("DIR");
  audit
      ->add_option("--membership", result.membership,
                   "membership inference instead: the loss-threshold attack on the model of this "
                   "`fluence train` results file of DECK (private or not), the training rows "
                   "against the test rows")
      ->type_name("MODEL.h5")
      ->excludes("--collect");
}

void add_keys_options(CLI::App* keys, CommandLine& result) {
  keys->add_flag("--markdown", result.markdown,
                 "print inputs/README.md's key tables (Markdown, meanings included), one per "
                 "deck section");
}

// The sections every federated command reads, before its own.
std::vector<std::string> federated(std::vector<std::string> own) {
  std::vector<std::string> sections = {"data", "partition", "model", "ldp", "federation"};
  sections.insert(sections.end(), own.begin(), own.end());
  return sections;
}

std::vector<CommandSpec> built_in_commands() {
  // A deck-less command: only its own options, nothing to measure.
  auto deckless = [](std::string name, std::string help,
                     std::function<void(CLI::App*, CommandLine&)> add_options,
                     std::function<int(const CommandLine&)> run) {
    return CommandSpec{.name = std::move(name),
                       .help = std::move(help),
                       .reads_deck = false,
                       .add_options = std::move(add_options),
                       .run = std::move(run),
                       .measures_memory = false};
  };
  return {
      {.name = "validate",
       .help = "check a deck (and its data) without running it; echo the resolved settings",
       .options = CommonOptions{.output = false},
       .add_options = add_validate_options,
       .run = run_validate},
      {.name = "train",
       .help =
           "train a federation (FedAvg with randomized-response LDP) and write <out>/results.h5",
       .options =
           CommonOptions{
               .quiet = "no per-round progress lines",
               .restart =
                   "continue from a checkpoint: a chk_*.h5 file, or \"latest\" (the newest valid "
                   "one in the output directory); the finished rounds are not redone"},
       .sections = federated({"privacy", "personalization", "audit", "output"}),
       .run = run_train},
      {.name = "influence",
       .help =
           "train (or load --model) and score every client by the estimated change of the global "
           "test loss if it were removed (influence functions: PETSc IHVP, SLEPc spectrum), "
           "optionally against exact retraining, verified unlearning and FL-LDS; write "
           "<out>/results.h5",
       .options =
           CommonOptions{
               .quiet = "no per-round or per-client progress lines",
               .model = true,
               .restart =
                   "continue from a checkpoint (a chk_*.h5 file, or \"latest\" in the output "
                   "directory): the model and the finished per-client solves and retrains are "
                   "not redone"},
       .sections = federated({"influence", "output"}),
       .run = run_influence},
      {.name = "fldp",
       .help =
           "train (or load --model), then estimate the global model after clients change their "
           "privacy level eps -> eps' or leave (FLDP-FL, influence functions), against the exact "
           "expected retrain and re-randomized retrains; write <out>/results.h5",
       .options =
           CommonOptions{
               .deck = "input deck (TOML) with [fldp] cases",
               .quiet = "no per-round or per-case progress lines",
               .model = true,
               .restart =
                   "continue from a checkpoint (a chk_*.h5 file, or \"latest\" in the output "
                   "directory): the model and the finished cases are not redone"},
       .sections = federated({"influence", "fldp", "output"}),
       .run = run_fldp},
      {.name = "whatif",
       .help =
           "train (or load --model), then estimate how the test loss would change if a fraction of "
           "a group's records were randomized with eps-LDP (Carey et al. 2023), for a grid of "
           "fractions and eps from one IHVP; optionally against randomized retrains; write "
           "<out>/results.h5",
       .options =
           CommonOptions{
               .deck = "input deck (TOML) with a [whatif] section",
               .quiet = "no per-round or retrain progress lines",
               .model = true,
               .restart =
                   "continue from a checkpoint (a chk_*.h5 file, or \"latest\" in the output "
                   "directory): the model, the finished second-order rows and retrain chains "
                   "are not redone"},
       .sections = federated({"influence", "whatif", "output"}),
       .run = run_whatif},
      {.name = "lia",
       .help =
           "lazy-influence data filtering (LIA): contributors' DP-SGD last layers, every "
           "validator's randomized votes, the center's k-means threshold, filtration metrics, and "
           "FL after filtering against robust aggregators; write <out>/results.h5",
       .options =
           CommonOptions{
               .deck = "input deck (TOML) with [data] and [lia]",
               .quiet = "no per-stage progress lines",
               .restart =
                   "continue from a checkpoint (a chk_*.h5 of this deck, or \"latest\" in the "
                   "output directory): the filtering outcome and finished FL methods are kept"},
       .sections = {"data", "model", "lia", "audit", "output"},
       .run = run_lia},
      {.name = "feo2-theory",
       .help =
           "simulate FeO2's federated point estimation: the server's variance for each FeO2 ratio "
           "r against Lemma 1's sigma_s^2(r) and r*; write <out>/results.h5",
       .options = CommonOptions{.deck = "input deck (TOML) with [feo2_theory]"},
       .sections = {"feo2_theory", "output"},
       .run = run_feo2_theory},
      // fluence audit: the empirical privacy of the deck's mechanisms (its keys are [audit]).
      {.name = "audit",
       .help = "measure the privacy of the deck's local randomizers as they run (LDP audit of "
               "randomized response: empirical eps, its lower bound, attribute inference against "
               "the Bayes bound), or with --collect the multi-run audit of its private training "
               "runs, or with --membership membership inference on a trained model; write "
               "<out>/results.h5",
       .options = CommonOptions{.deck = "input deck (TOML) with [ldp] and [audit]",
                                .quiet = "no table of the audited cases"},
       // --collect compares every section of the runs' decks with this one.
       .sections = federated({"privacy", "personalization", "audit", "output"}),
       .add_options = add_audit_options,
       .register_keys = register_audit_keys,
       .run = run_audit},
      deckless("privacy",
               "the (eps, delta) of DP-SGD / DP-FedAvg from an accountant of the "
               "Poisson-subsampled Gaussian mechanism (--noise), or the noise multiplier for a "
               "target eps (--epsilon)",
               add_privacy_options, run_privacy),
      deckless("keys", "list every deck key with its type, default and allowed values",
               add_keys_options, run_keys),
  };
}

Registry<CommandSpec>& registry() {
  static Registry<CommandSpec> instance("a command", built_in_commands());
  return instance;
}

}  // namespace

void register_command(CommandSpec spec) {
  if (!spec.run) throw InputError("register_command: a command needs a run function");
  registry().add(std::move(spec));
}

std::vector<CommandSpec> registered_commands() {
  return registry().specs();
}

CommandSpec command_spec(const std::string& name) {
  return registry().find(name, "command");
}

}  // namespace fluence::app
