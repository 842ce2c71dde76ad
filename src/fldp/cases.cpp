// [fldp] in the deck: the cases to estimate, from [[fldp.change]] and [fldp.sweep].
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "fluence/core/deck_keys.hpp"
#include "fluence/core/error.hpp"
#include "fluence/fldp/fldp.hpp"

namespace fluence {

namespace {

constexpr double kUnchanged = std::numeric_limits<double>::quiet_NaN();

std::string format_epsilon(double epsilon) {
  return std::isinf(epsilon) ? "inf" : fmt::format("{:g}", epsilon);
}

// Fills description, eps_from, eps_to and remove; drops attributes whose eps' equals eps.
void describe(const LdpPlan& plan, FldpCase& c) {
  std::vector<std::string> parts;
  std::vector<double> from, to;
  for (auto& change : c.changes) {
    if (change.remove) {
      c.remove = true;
      parts.push_back(fmt::format("client {} leaves", change.client));
      continue;
    }
    std::vector<std::string> attributes;
    for (std::size_t a = 0; a < change.epsilon.size(); ++a) {
      const double before = plan.epsilon_of(change.client, static_cast<int>(a));
      if (std::isnan(change.epsilon[a]) || change.epsilon[a] == before) {
        change.epsilon[a] = kUnchanged;
        continue;
      }
      from.push_back(before);
      to.push_back(change.epsilon[a]);
      attributes.push_back(fmt::format("{} {} -> {}", plan.attributes[a], format_epsilon(before),
                                       format_epsilon(change.epsilon[a])));
    }
    std::string joined;
    for (const auto& text : attributes) joined += (joined.empty() ? "" : ", ") + text;
    parts.push_back(fmt::format("client {}: {}", change.client,
                                joined.empty() ? std::string("no change") : joined));
  }
  for (const auto& text : parts) c.description += (c.description.empty() ? "" : "; ") + text;
  auto common = [](const std::vector<double>& values) {
    if (values.empty()) return kUnchanged;
    for (double v : values)
      if (v != values.front()) return kUnchanged;
    return values.front();
  };
  c.eps_from = common(from);
  c.eps_to = c.remove ? kUnchanged : common(to);
}

void check_client(const Deck& deck, const std::string& key, long client, int clients) {
  if (client >= clients)
    throw InputError(fmt::format("{}: client {} does not exist (partition.clients = {})",
                                 deck.where(key), client, clients));
}

FldpCase changes_case(const Deck& deck, const LdpPlan& plan) {
  FldpCase c;
  std::set<long> seen;
  for (std::size_t k = 0; k < deck.array_size("fldp.change"); ++k) {
    const std::string element = Deck::element("fldp.change", k);
    if (!deck.has(element + ".client"))
      throw InputError(fmt::format("{}: each [[fldp.change]] needs `client`", deck.where(element)));
    const long client = deck.integer(element + ".client");
    check_client(deck, element + ".client", client, plan.clients);
    if (!seen.insert(client).second)
      throw InputError(fmt::format("{}: client {} appears in two [[fldp.change]] tables",
                                   deck.where(element), client));
    FldpChange change;
    change.client = static_cast<int>(client);
    change.remove = deck.has(element + ".remove") && deck.boolean(element + ".remove");
    const bool has_epsilon = deck.has(element + ".epsilon");
    if (change.remove == has_epsilon)
      throw InputError(fmt::format(
          "{}: each [[fldp.change]] needs exactly one of `epsilon` (a new privacy level) and "
          "`remove = true` (the client leaves)",
          deck.where(element)));
    change.epsilon.assign(plan.attributes.size(), kUnchanged);
    if (has_epsilon) {
      const EpsilonSpec spec = deck.epsilon(element + ".epsilon");
      for (const auto& [name, value] : spec.by_attribute)
        if (std::find(plan.attributes.begin(), plan.attributes.end(), name) ==
            plan.attributes.end())
          throw InputError(fmt::format(
              "{}: epsilon names \"{}\", which is not listed in ldp.attributes (only randomized "
              "attributes can change their privacy level)",
              deck.where(element + ".epsilon"), name));
      for (std::size_t a = 0; a < plan.attributes.size(); ++a)
        change.epsilon[a] = spec.by_attribute.count(plan.attributes[a])
                                ? spec.by_attribute.at(plan.attributes[a])
                                : (spec.by_attribute.empty() ? spec.all : kUnchanged);
    }
    c.changes.push_back(change);
  }
  std::sort(c.changes.begin(), c.changes.end(),
            [](const FldpChange& a, const FldpChange& b) { return a.client < b.client; });
  return c;
}

void sweep_cases(const Deck& deck, const LdpPlan& plan, std::vector<FldpCase>& cases) {
  std::vector<long> order = deck.integers("fldp.sweep.clients");
  if (order.empty())
    for (int id = 0; id < plan.clients; ++id) order.push_back(id);
  for (long id : order) check_client(deck, "fldp.sweep.clients", id, plan.clients);
  if (std::set<long>(order.begin(), order.end()).size() != order.size())
    throw InputError(
        fmt::format("{}: fldp.sweep.clients lists a client twice", deck.where("fldp.sweep")));
  std::vector<char> applies(plan.attributes.size(), 0);
  const auto names = deck.strings("fldp.sweep.attributes");
  for (const auto& name : names) {
    const auto it = std::find(plan.attributes.begin(), plan.attributes.end(), name);
    if (it == plan.attributes.end())
      throw InputError(
          fmt::format("{}: fldp.sweep.attributes names \"{}\", which is not listed "
                      "in ldp.attributes",
                      deck.where("fldp.sweep.attributes"), name));
    applies[static_cast<std::size_t>(it - plan.attributes.begin())] = 1;
  }
  if (names.empty()) std::fill(applies.begin(), applies.end(), 1);
  const bool only_stricter = deck.boolean("fldp.sweep.only_stricter");
  for (long count : deck.integers("fldp.sweep.counts")) {
    if (count > static_cast<long>(order.size()))
      throw InputError(fmt::format("{}: fldp.sweep.counts has {}, but only {} clients are listed",
                                   deck.where("fldp.sweep.counts"), count, order.size()));
    std::vector<int> clients(order.begin(), order.begin() + count);
    std::sort(clients.begin(), clients.end());
    for (double epsilon : deck.reals("fldp.sweep.epsilon")) {
      FldpCase c;
      bool stricter = true;
      for (int client : clients) {
        FldpChange change{client, false, std::vector<double>(plan.attributes.size(), kUnchanged)};
        for (std::size_t a = 0; a < applies.size(); ++a) {
          if (!applies[a]) continue;
          change.epsilon[a] = epsilon;
          stricter = stricter && epsilon < plan.epsilon_of(client, static_cast<int>(a));
        }
        c.changes.push_back(change);
      }
      if (only_stricter && !stricter) continue;
      cases.push_back(std::move(c));
    }
    if (deck.boolean("fldp.sweep.remove")) {
      FldpCase c;
      for (int client : clients) c.changes.push_back({client, true, {}});
      cases.push_back(std::move(c));
    }
  }
}

}  // namespace

void register_fldp_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      section("fldp",
              "clients change their privacy level (or leave) after training "
              "([FLDP-FL](../docs/references.md#fldp-fl), FLDP-FL)"),
      key("fldp.change", T::section_array, "",
          "one case: every table's change applied together "
          "(Eq. 20 of the [FLDP-FL](../docs/references.md#fldp-fl) paper)"),
      key("fldp.change[].client", T::integer, "", "the client that changes", 0),
      key("fldp.change[].epsilon", T::epsilon, "",
          "its new eps′: a number for every `ldp.attributes` entry, or a table for some "
          "(`{ cat0 = 1.0, label = 0.5 }`)"),
      key("fldp.change[].remove", T::boolean, "false",
          "the client leaves the federation instead "
          "(Eq. 27 of the [FLDP-FL](../docs/references.md#fldp-fl) paper)"),
      section("fldp.sweep", "a grid of cases: client counts × new epsilons (Q1–Q3)"),
      key("fldp.sweep.clients", T::integer_array, "[]",
          "the clients in the order they join the change (default 0, 1, …)", 0),
      key("fldp.sweep.counts", T::integer_array, "[1]",
          "numbers of changing clients: a case per count takes the first ones of `clients`", 1),
      with_infinity(key("fldp.sweep.epsilon", T::real_array, "[]",
                        "new eps′ values, one case each (per count); `inf`: the clients stop "
                        "randomizing (as `\"inf\"` in `[[fldp.change]]`)",
                        0.0, kInf, true)),
      with_note(key("fldp.sweep.attributes", T::string_array, "[]",
                    "attributes the new eps′ applies to (default: every `ldp.attributes` entry)"),
                "attributes of `ldp.attributes`"),
      key("fldp.sweep.only_stricter", T::boolean, "true",
          "skip cells whose eps′ is not below the clients' current eps "
          "([FLDP-FL](../docs/references.md#fldp-fl) §4.1)"),
      key("fldp.sweep.remove", T::boolean, "false",
          "also a removal case per count (the clients leave)"),
      key("fldp.retrain", T::boolean, "true",
          "compute the ground truths: the exact expected retrain and re-randomized retrains"),
      key("fldp.retrain_seeds", T::integer, "3",
          "independent re-randomizations retrained per case "
          "([FLDP-FL](../docs/references.md#fldp-fl) used 3)",
          0),
      choice("fldp.retrain_mode", "\"newton\"", {"newton", "full"},
             "re-randomized retrains: Newton to `federation.tolerance` from the expected "
             "retrain's optimum (a warm start; each draw's optimum is unique), or the full "
             "federation schedule from zero (the paper's set-up; times Q4)"),
      key("fldp.newton_steps", T::integer, "0",
          "further Newton steps on the changed expected objective after the estimate", 0),
      choice("fldp.hessian_block", "\"full\"", {"full", "first"},
             "the full Hessian, or [FLDP-FL](../docs/references.md#fldp-fl) code's variant: "
             "the first class's diagonal block applied to every class row. With two classes "
             "`\"first\"` drops the cross-class blocks H_01 = −H_00, which doubles the estimated "
             "step as `model.l2` → 0 (docs/math.md §5.4 (b))"),
      key("fldp.enumeration_limit", T::integer, "4096",
          "largest product of the changed features' domains enumerated exactly (above: "
          "Monte Carlo)",
          1),
      key("fldp.monte_carlo_samples", T::integer, "64",
          "Monte Carlo: k-RR draws per row (a multiple of `monte_carlo_batches`)", 2),
      key("fldp.monte_carlo_batches", T::integer, "8",
          "Monte Carlo: independent batches of draws; their spread gives the standard error", 2),
  });
}

FldpConfig FldpConfig::from_deck(const Deck& deck, const LdpPlan& plan) {
  FldpConfig config;
  if (deck.array_size("fldp.change") > 0) config.cases.push_back(changes_case(deck, plan));
  sweep_cases(deck, plan, config.cases);
  for (auto& c : config.cases) describe(plan, c);
  if (config.cases.empty())
    throw InputError(fmt::format(
        "{}: no FLDP case: add [[fldp.change]] tables or a [fldp.sweep] with epsilon values (or "
        "remove = true){}",
        deck.origin(),
        deck.reals("fldp.sweep.epsilon").empty()
            ? ""
            : " (every sweep cell was skipped: its eps' is not below the clients' eps; set "
              "fldp.sweep.only_stricter = false to keep them)"));
  config.retrain = deck.boolean("fldp.retrain");
  config.retrain_seeds = static_cast<int>(deck.integer("fldp.retrain_seeds"));
  config.retrain_full = deck.string("fldp.retrain_mode") == "full";
  config.newton_steps = static_cast<int>(deck.integer("fldp.newton_steps"));
  config.hessian_block =
      deck.string("fldp.hessian_block") == "first" ? HessianBlock::first : HessianBlock::full;
  const std::string model = deck.string("model.type");
  if (model != "logistic" && config.hessian_block == HessianBlock::first)
    throw InputError(fmt::format(
        "{}: fldp.hessian_block = \"first\" is the logistic model's class block (seed 000's "
        "code); model.type = \"{}\" has no class blocks: use \"full\"",
        deck.where("fldp.hessian_block"), model));
  // Influence functions linearize at a stationary point; a network's FedAvg model is none, so
  // its estimate and the retrains it is measured against would differ by the training's own
  // residual (docs/math.md §10).
  if (model != "logistic" && deck.string("federation.polish") != "newton")
    throw InputError(fmt::format(
        "{}: fluence fldp on model.type = \"{}\" needs the trained model at a stationary point: "
        "set federation.polish = \"newton\" (the damped Newton method, docs/math.md §10)",
        deck.where("federation.polish"), model));
  config.expectation = ExpectationConfig::from_deck(deck);
  return config;
}

ExpectationConfig ExpectationConfig::from_deck(const Deck& deck) {
  ExpectationConfig config;
  config.enumeration_limit = static_cast<std::uint64_t>(deck.integer("fldp.enumeration_limit"));
  config.samples = static_cast<int>(deck.integer("fldp.monte_carlo_samples"));
  config.batches = static_cast<int>(deck.integer("fldp.monte_carlo_batches"));
  if (config.samples % config.batches != 0)
    throw InputError(fmt::format(
        "{}: fldp.monte_carlo_samples = {} must be a multiple of fldp.monte_carlo_batches = {}",
        deck.where("fldp.monte_carlo_samples"), config.samples, config.batches));
  return config;
}

}  // namespace fluence
