// fluence validate DECK: check a deck (and, unless --no-data, its data, partition, LDP plan, FLDP
// cases, what-if grid and private-training set-up), then echo the resolved settings on rank 0; run
// nothing. Every check runs before the deck is called valid. With --command NAME, only what that
// command reads is checked, and the sections it ignores are named in a warning.
#include <algorithm>
#include <optional>

#include <fmt/ranges.h>

#include "fluence/app/cli.hpp"
#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/data/partition.hpp"
#include "fluence/data/source.hpp"
#include "fluence/fl/private_training.hpp"
#include "fluence/fl/problem.hpp"
#include "fluence/fldp/fldp.hpp"
#include "fluence/influence/client_influence.hpp"
#include "fluence/lia/lia.hpp"
#include "fluence/whatif/whatif.hpp"

namespace fluence::app {

int run_validate(const CommandLine& command_line) {
  Deck deck = Deck::from_file(command_line.deck, deck_schema(), command_line.sets);
  // --command NAME: that command's sections and checks only (and the warning about the sections
  // it does not read); without it, every check any command would make.
  const std::string& only = command_line.for_command;
  auto checks = [&](const char* command) { return only.empty() || only == command; };
  if (!only.empty()) warn_ignored_sections(deck, only);
  const bool federated = only != "lia" && only != "feo2-theory";
  // The sections' own cross-key checks (no data needed).
  if (only != "feo2-theory") DataConfig::from_deck(deck);
  if (federated) {
    PartitionConfig::from_deck(deck);
    FederationConfig::from_deck(deck);
  }
  if (checks("influence") || checks("fldp") || checks("whatif")) InfluenceConfig::from_deck(deck);
  const bool has_fldp = checks("fldp") && (deck.array_size("fldp.change") > 0 ||
                                           !deck.reals("fldp.sweep.epsilon").empty() ||
                                           deck.boolean("fldp.sweep.remove"));
  // `fluence whatif` needs its group: WhatifConfig's own check says so when it is missing.
  const bool has_whatif = only == "whatif" || (only.empty() && deck.has("whatif.group.attribute"));
  std::optional<FederatedProblem> problem;
  std::size_t fldp_cases = 0;
  std::optional<WhatifConfig> whatif;
  if (!command_line.skip_data && federated) {
    problem = build_problem(deck);
    if (has_fldp) fldp_cases = FldpConfig::from_deck(deck, problem->ldp).cases.size();
    if (has_whatif) whatif = WhatifConfig::from_deck(deck, *problem);
    if (checks("train")) {
      const FederationConfig federation = FederationConfig::from_deck(deck);
      const PrivacyConfig privacy = PrivacyConfig::from_deck(
          deck, static_cast<int>(problem->client_rows.size()), federation.rounds);
      if (privacy.mode == PrivacyMode::feo2)
        choose_opt_out_clients(*problem, privacy.opt_out_fraction, privacy.opt_out_label);
    }
  }
  if (!command_line.skip_data && only == "lia") {
    const TrainTest data =
        load_data(DataConfig::from_deck(deck), static_cast<std::uint64_t>(deck.integer("seed")));
    const auto config = lia::LiaConfig::from_deck(deck, data.train.classes());
    log::info("# lia: {} participants, {} training rows, {} classes", config.participants,
              data.train.rows, data.train.classes());
  }
  log::info("# {}: deck is valid. Resolved settings (defaults filled in):\n", command_line.deck);
  log::info("{}", deck.resolved_toml());
  if (!problem) return 0;
  const auto sizes = problem->client_sizes();
  const auto [smallest, largest] = std::minmax_element(sizes.begin(), sizes.end());
  log::info("\n# data: {} training rows, {} test rows, {} encoded features, {} classes",
            problem->data.train.rows, problem->data.test.rows, problem->encoding.width(),
            problem->data.train.classes());
  log::info("# partition: {} clients of {} to {} rows over {} rank(s)", sizes.size(), *smallest,
            *largest, world_size());
  log::info("# model: {} ({} parameters)", problem->model->describe(),
            problem->model->parameters());
  if (has_fldp) log::info("# fldp: {} case(s)", fldp_cases);
  if (whatif)
    log::info("# whatif: group {} in {{{}}}, {} fractions x {} eps x {} variant(s)",
              whatif->group_attribute,
              fmt::format("{}", fmt::join(whatif->group_value_names, ", ")),
              whatif->fractions.size(), whatif->epsilons.size(), whatif->variants.size());
  return 0;
}

}  // namespace fluence::app
