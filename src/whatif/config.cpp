// [whatif] deck keys (inputs/README.md) resolved against the problem's schema.
#include <fmt/format.h>

#include <cmath>
#include "fluence/core/deck_keys.hpp"

#include "fluence/core/deck_keys.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/memory.hpp"
#include "fluence/whatif/whatif.hpp"

namespace fluence {

std::string to_string(WhatifVariant variant) {
  switch (variant) {
    case WhatifVariant::rr:
      return "rr";
    case WhatifVariant::rr_l:
      return "rr_l";
    case WhatifVariant::rr_flc:
      return "rr_flc";
  }
  return "?";
}

WhatifVariant parse_whatif_variant(const std::string& name) {
  if (name == "rr") return WhatifVariant::rr;
  if (name == "rr_l") return WhatifVariant::rr_l;
  if (name == "rr_flc") return WhatifVariant::rr_flc;
  throw InputError(
      fmt::format("whatif.variants: unknown variant \"{}\" (allowed: rr, rr_l, rr_flc)", name));
}

std::vector<double> evenly_spaced(double first, double last, int count) {
  std::vector<double> values(static_cast<std::size_t>(count));
  for (int j = 0; j < count; ++j)
    values[j] = count == 1 ? first : first + (last - first) * j / (count - 1);
  return values;
}

namespace {

// The attribute's value index for a deck value: a category name, else a 0-based index.
std::int32_t value_index(const std::string& text, const std::vector<std::string>& names,
                         const std::string& key, const std::string& attribute) {
  for (std::size_t v = 0; v < names.size(); ++v)
    if (names[v] == text) return static_cast<std::int32_t>(v);
  std::size_t used = 0;
  long index = -1;
  try {
    index = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || index < 0 || index >= static_cast<long>(names.size())) {
    std::string allowed;
    for (const auto& name : names) allowed += (allowed.empty() ? "" : ", ") + name;
    throw InputError(fmt::format(
        "{} = \"{}\": attribute \"{}\" has no such value (allowed: 0..{} or one of: {})", key, text,
        attribute, names.size() - 1, allowed));
  }
  return static_cast<std::int32_t>(index);
}

void resolve_group(const Deck& deck, const Table& schema, WhatifConfig& config) {
  if (!deck.has("whatif.group.attribute"))
    throw InputError(
        "whatif.group.attribute is required: the attribute whose value selects the "
        "group, e.g. group = { attribute = \"sex\", value = 1 }");
  config.group_attribute = deck.string("whatif.group.attribute");
  std::vector<std::string> names = schema.class_names;
  if (config.group_attribute != "label") {
    const int a = schema.find_attribute(config.group_attribute);
    if (a < 0 || schema.attributes[a].kind != AttributeKind::categorical)
      throw InputError(fmt::format(
          "whatif.group.attribute = \"{}\": not a categorical attribute of the data (or \"label\")",
          config.group_attribute));
    config.group_column = schema.attributes[a].column;
    names = schema.attributes[a].categories;
  }
  std::vector<std::string> values;
  if (deck.has("whatif.group.value")) values.push_back(deck.string("whatif.group.value"));
  if (deck.has("whatif.group.values"))
    for (const auto& value : deck.strings("whatif.group.values")) values.push_back(value);
  if (values.empty())
    throw InputError("whatif.group: give `value` (a name or 0-based index) or `values` (names)");
  for (const auto& value : values) {
    config.group_values.push_back(
        value_index(value, names, "whatif.group.value", config.group_attribute));
    config.group_value_names.push_back(names[config.group_values.back()]);
  }
}

void resolve_attributes(const Deck& deck, const FederatedProblem& problem, WhatifConfig& config) {
  const Table& schema = problem.data.train;
  std::uint64_t combinations = 1;
  for (const auto& name : deck.strings("whatif.attributes")) {
    WhatifAttribute attribute;
    attribute.name = name;
    if (name == "label") {
      attribute.domain = schema.classes();
    } else {
      const int a = schema.find_attribute(name);
      if (a < 0 || schema.attributes[a].kind != AttributeKind::categorical)
        throw InputError(fmt::format(
            "whatif.attributes: \"{}\" is not a categorical attribute of the data (or \"label\")",
            name));
      attribute.column = schema.attributes[a].column;
      attribute.domain = static_cast<int>(schema.attributes[a].categories.size());
      attribute.offset = problem.encoding.categorical_offset(attribute.column);
      combinations *= static_cast<std::uint64_t>(attribute.domain);
    }
    for (const auto& other : config.attributes)
      if (other.name == name)
        throw InputError(fmt::format("whatif.attributes: \"{}\" is listed twice", name));
    config.attributes.push_back(attribute);
  }
  if (combinations > config.enumeration_limit)
    throw InputError(
        fmt::format("whatif.attributes: the randomized features have {} value combinations, above "
                    "whatif.enumeration_limit = {} (the rr expectation is enumerated exactly)",
                    combinations, config.enumeration_limit));
}

std::vector<double> checked_grid(const Deck& deck, const std::string& key,
                                 std::vector<double> fallback, double upper) {
  std::vector<double> values = deck.reals(key);
  if (values.empty()) return fallback;
  for (double value : values)
    if (!(value > 0.0) || !(value <= upper) || !std::isfinite(value))
      throw InputError(fmt::format("{}: value {} is outside (0, {}]", key, value, upper));
  return values;
}

}  // namespace

void register_whatif_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      section("whatif",
              "the utility cost of eps-LDP on a group of records ([Carey et al. "
              "2023](../docs/references.md#carey-2023), `fluence whatif`)"),
      section("whatif.group", "the group S: training records whose attribute has the value(s)"),
      with_note(key("whatif.group.attribute", T::string, "",
                    "*required* by `fluence whatif`: the attribute whose value selects the group "
                    "S: `group = { attribute = \"sex\", "
                    "value = 1 }`"),
                "a categorical attribute or `\"label\"`"),
      with_note(key("whatif.group.value", T::string_or_integer, "",
                    "the value selecting S (give `value` or `values`)"),
                "here a category of `group.attribute`, by name or 0-based index"),
      with_note(key("whatif.group.values", T::string_array, "",
                    "several values that together select S (credit-g's female `personal_status` "
                    "categories)"),
                "categories of `group.attribute`, by name or 0-based index"),
      key("whatif.fractions", T::real_array, "[]",
          "fractions k of S perturbed; `[]` = the paper's 10 evenly spaced values 1%..30%", 0.0,
          1.0, true),
      key("whatif.epsilons", T::real_array, "[]",
          "the eps grid; `[]` = the paper's 30 evenly spaced values 0.001..10", 0.0, kInf, true),
      with_note(
          key("whatif.attributes", T::string_array, "[\"label\"]",
              "what the `rr` variant randomizes (`rr_l` and `rr_flc` randomize the label only)"),
          "categorical attributes and/or `\"label\"`"),
      with_note(key("whatif.variants", T::string_array, "[\"rr_l\", \"rr_flc\"]",
                    "estimators: `rr` k-RR over `attributes` (the paper's Eq. 13), `rr_l` labels "
                    "(the paper's Eq. 14), `rr_flc` labels with forward loss correction (the "
                    "paper's Eq. 18, 22; [Carey et al. 2023](../docs/references.md#carey-2023))"),
                "each one of: rr, rr_l, rr_flc"),
      key("whatif.repeats", T::integer, "10",
          "ground truth: randomized retrains per cell (the paper used 10)", 1),
      key("whatif.retrain", T::boolean, "false",
          "compute the ground truth: randomize, retrain to the optimum, measure the test "
          "loss"),
      key("whatif.expected_retrain", T::boolean, "true",
          "with `retrain`: also retrain on the exact expected objective per cell (the "
          "quantity the estimators target)"),
      key("whatif.test_sample", T::integer, "0",
          "S_te: this many test rows drawn at random (0 = the whole test set, the paper's "
          "S_te = Z_te)",
          0),
      choice("whatif.rr_form", "\"expected\"", {"expected", "paper"},
             "the `rr` estimate: the exact expected loss change, or the paper's Eq. 13 literal "
             "scaling"),
      choice("whatif.flc_form", "\"expected\"", {"expected", "paper"},
             "the `rr_flc` estimate: the exact expected change, or the paper's Eq. 22 literal "
             "terms"),
      choice("whatif.draws", "\"common\"", {"common", "independent"},
             "ground-truth k-RR draws: one per (record, attribute, repeat) shared by every "
             "eps (the records flipped at eps are a subset of those flipped at any smaller "
             "eps), or independent per eps"),
      key("whatif.second_order", T::boolean, "true",
          "also the second-order estimate: per cell d theta = -(1/n) H^-1 b and g . d "
          "theta + d theta^T H_te d theta / 2 (one IHVP per cell)"),
      key("whatif.retrain_tolerance", T::real, "1e-8",
          "retrains stop when the gradient norm of the perturbed objective is below this", 0.0,
          kInf, true),
      key("whatif.retrain_max_iterations", T::integer, "200", "retrains: most Newton steps", 1),
      key("whatif.enumeration_limit", T::integer, "4096",
          "`rr`: largest product of the randomized features' domains (enumerated exactly)", 1),
  });
}

WhatifConfig WhatifConfig::from_deck(const Deck& deck, const FederatedProblem& problem) {
  WhatifConfig config;
  config.enumeration_limit = static_cast<std::uint64_t>(deck.integer("whatif.enumeration_limit"));
  resolve_group(deck, problem.data.train, config);
  config.fractions = checked_grid(deck, "whatif.fractions", evenly_spaced(0.01, 0.30, 10), 1.0);
  config.epsilons = checked_grid(deck, "whatif.epsilons", evenly_spaced(0.001, 10.0, 30), 1e6);
  for (const auto& name : deck.strings("whatif.variants"))
    config.variants.push_back(parse_whatif_variant(name));
  if (config.variants.empty()) throw InputError("whatif.variants: list at least one variant");
  resolve_attributes(deck, problem, config);
  for (auto variant : config.variants)
    if (variant == WhatifVariant::rr && config.attributes.empty())
      throw InputError("whatif.variants contains \"rr\" but whatif.attributes is empty");
  config.repeats = static_cast<int>(deck.integer("whatif.repeats"));
  config.retrain = deck.boolean("whatif.retrain");
  if (config.retrain) {
    // The ground truth keeps one test loss per (variant, fraction, eps, repeat): whatif.repeats =
    // 2147483647 asked for terabytes and ended in "cannot create std::vector larger than
    // max_size()".
    const double losses =
        static_cast<double>(config.variants.size()) * static_cast<double>(config.fractions.size()) *
        static_cast<double>(config.epsilons.size()) * static_cast<double>(config.repeats);
    check_memory({{8.0 * losses,
                   fmt::format("the ground truth's retrain losses: {} variant(s) x {} fractions x "
                               "{} eps x whatif.repeats = {}",
                               config.variants.size(), config.fractions.size(),
                               config.epsilons.size(), config.repeats)}});
  }
  config.expected_retrain = deck.boolean("whatif.expected_retrain");
  config.test_sample = deck.integer("whatif.test_sample");
  if (config.test_sample > static_cast<std::int64_t>(problem.data.test.rows))
    throw InputError(fmt::format("whatif.test_sample = {}: the test set has only {} rows",
                                 config.test_sample, problem.data.test.rows));
  config.rr_form =
      deck.string("whatif.rr_form") == "paper" ? EstimateForm::paper : EstimateForm::expected;
  config.flc_form =
      deck.string("whatif.flc_form") == "paper" ? EstimateForm::paper : EstimateForm::expected;
  config.common_draws = deck.string("whatif.draws") == "common";
  config.second_order = deck.boolean("whatif.second_order");
  config.retrain_tolerance = deck.real("whatif.retrain_tolerance");
  config.model_tolerance = deck.real("federation.tolerance");
  config.retrain_max_iterations = static_cast<int>(deck.integer("whatif.retrain_max_iterations"));
  // Influence functions linearize at a stationary point; a network's FedAvg model is none
  // (docs/math.md §10).
  const std::string model = deck.string("model.type");
  if (model != "logistic" && deck.string("federation.polish") != "newton")
    throw InputError(fmt::format(
        "{}: fluence whatif on model.type = \"{}\" needs the trained model at a stationary "
        "point: set federation.polish = \"newton\" (the damped Newton method, docs/math.md §10)",
        deck.where("federation.polish"), model));
  for (std::size_t a = 0; a < problem.ldp.attributes.size(); ++a)
    for (int c = 0; c < problem.ldp.clients; ++c)
      if (std::isfinite(problem.ldp.epsilon_of(c, static_cast<int>(a))))
        throw InputError(fmt::format(
            "whatif models a curator holding the clean data, but [ldp] randomizes \"{}\"; remove "
            "[ldp] (whatif.attributes names what the question randomizes)",
            problem.ldp.attributes[a]));
  return config;
}

}  // namespace fluence
