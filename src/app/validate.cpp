// fluence validate DECK: check a deck (and, unless --no-data, its data, partition, LDP plan, FLDP
// cases, what-if grid, private-training set-up and lia's participants), then echo the resolved
// settings on rank 0; run nothing. Every check runs before the deck is called valid. With
// --command NAME, only what that command reads is checked (its sections, from deck_commands()),
// and the sections it ignores are named in a warning; without it, what `train` and `influence`
// read and what every command whose own section the deck gives reads.
#include <algorithm>
#include <optional>
#include <set>

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
#include "fluence/privacy/point_estimation.hpp"
#include "fluence/whatif/whatif.hpp"

namespace fluence::app {

namespace {

// A command's own sections: those it reads and no other command does ([fldp] for fldp, [privacy]
// for train); a command without one (influence) reads only what others read too.
std::vector<std::string> own_sections(const std::string& command) {
  std::vector<std::string> own;
  for (const auto& section : sections_read_by(command)) {
    bool shared = false;
    for (const auto& [other, sections] : deck_commands())
      shared = shared || (other != command &&
                          std::find(sections.begin(), sections.end(), section) != sections.end());
    if (!shared) own.push_back(section);
  }
  return own;
}

// The sections a deck is checked for: those `only` reads, or, without --command, those of `train`
// and `influence` and of every command whose own section the deck gives.
std::set<std::string> sections_checked(const Deck& deck, const std::string& only) {
  std::vector<std::string> commands;
  if (!only.empty()) {
    commands = {only};
  } else {
    const auto given = deck.given_sections();
    for (const auto& [command, sections] : deck_commands()) {
      const auto own = own_sections(command);
      const bool gives_own = std::any_of(own.begin(), own.end(), [&](const std::string& s) {
        return std::find(given.begin(), given.end(), s) != given.end();
      });
      if (command == "train" || command == "influence" || gives_own) commands.push_back(command);
    }
  }
  std::set<std::string> checked;
  for (const auto& command : commands)
    for (const auto& section : sections_read_by(command)) checked.insert(section);
  return checked;
}

}  // namespace

int run_validate(const CommandLine& command_line) {
  Deck deck = Deck::from_file(command_line.deck, deck_schema(), command_line.sets);
  const std::string& only = command_line.for_command;
  if (!only.empty()) warn_ignored_sections(deck, only);
  const std::set<std::string> checked = sections_checked(deck, only);
  auto checks = [&](const char* section) { return checked.count(section) > 0; };
  // A federation is built for the commands that partition the data (not lia, not feo2-theory).
  // A deck for fluence lia whose "public" statistics come from lia's own public rows has none for
  // the federated commands (data.public_fraction = 0): without --command those are not checked.
  const bool lia_public = only.empty() && checks("lia") &&
                          deck.string("data.numeric_scaling") == "public" &&
                          !(deck.real("data.public_fraction") > 0.0);
  if (lia_public && checks("partition"))
    log::info(
        "# data.numeric_scaling = \"public\" takes fluence lia's public rows here; the federated "
        "commands (train, influence, ...) need data.public_fraction > 0 and are not checked");
  const bool federated = checks("partition") && !lia_public;
  // The sections' own cross-key checks (no data needed).
  if (checks("data")) DataConfig::from_deck(deck);
  if (federated) {
    PartitionConfig::from_deck(deck);
    FederationConfig::from_deck(deck);
  }
  if (checks("influence")) InfluenceConfig::from_deck(deck);
  if (checks("feo2_theory")) PointEstimationConfig::from_deck(deck);
  std::optional<FederatedProblem> problem;
  std::size_t fldp_cases = 0;
  std::optional<WhatifConfig> whatif;
  if (!command_line.skip_data && federated) {
    problem = build_problem(deck);
    if (checks("fldp")) fldp_cases = FldpConfig::from_deck(deck, problem->ldp).cases.size();
    if (checks("whatif")) whatif = WhatifConfig::from_deck(deck, *problem);
    if (checks("privacy")) {
      const FederationConfig federation = FederationConfig::from_deck(deck);
      const PrivacyConfig privacy = PrivacyConfig::from_deck(
          deck, static_cast<int>(problem->client_rows.size()), federation.rounds);
      if (privacy.mode == PrivacyMode::feo2)
        choose_opt_out_clients(*problem, privacy.opt_out_fraction, privacy.opt_out_label);
    }
  }
  if (!command_line.skip_data && checks("lia")) {
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
  if (checks("fldp")) log::info("# fldp: {} case(s)", fldp_cases);
  if (whatif)
    log::info("# whatif: group {} in {{{}}}, {} fractions x {} eps x {} variant(s)",
              whatif->group_attribute,
              fmt::format("{}", fmt::join(whatif->group_value_names, ", ")),
              whatif->fractions.size(), whatif->epsilons.size(), whatif->variants.size());
  return 0;
}

}  // namespace fluence::app
