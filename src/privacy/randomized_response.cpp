#include "fluence/privacy/randomized_response.hpp"
#include "fluence/core/deck_keys.hpp"
#include "fluence/privacy/purposes.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "fluence/core/error.hpp"

namespace fluence {

double rr_keep_probability(double epsilon, int domain) {
  if (std::isinf(epsilon)) return 1.0;
  // e^eps / (k - 1 + e^eps) written as 1 / (1 + (k - 1) e^-eps) so large eps cannot overflow.
  return 1.0 / (1.0 + (domain - 1) * std::exp(-epsilon));
}

std::vector<double> distortion_matrix(double epsilon, int domain) {
  const double keep = rr_keep_probability(epsilon, domain);
  const double other = domain > 1 ? (1.0 - keep) / (domain - 1) : 0.0;
  std::vector<double> matrix(static_cast<std::size_t>(domain) * domain, other);
  for (int u = 0; u < domain; ++u) matrix[static_cast<std::size_t>(u) * domain + u] = keep;
  return matrix;
}

std::int32_t randomize_value(std::int32_t value, int domain, double epsilon, Stream& stream) {
  const double u = stream.uniform();
  if (std::isinf(epsilon) || domain < 2 || u < rr_keep_probability(epsilon, domain)) return value;
  // One of the other k - 1 values, uniformly.
  const auto shift = static_cast<std::int32_t>(1 + stream.below(domain - 1));
  return (value + shift) % domain;
}

void register_ldp_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      section("ldp",
              "k-ary randomized response per client and attribute "
              "([FLDP-FL](../docs/references.md#fldp-fl) §3.2)"),
      key("ldp.attributes", T::string_array, "[]",
          "categorical attributes (and/or \"label\") randomized by each client"),
      key("ldp.epsilon", T::epsilon, "\"inf\"", "privacy level for every client"),
      key("ldp.client", T::section_array, "", "per-client overrides of epsilon"),
      key("ldp.client[].id", T::integer, "", "the client this override applies to", 0),
      key("ldp.client[].ids", T::integer_array, "", "several clients this override applies to", 0),
      key("ldp.client[].epsilon", T::epsilon, "", "their privacy level"),
  });
}

LdpPlan LdpPlan::from_deck(const Deck& deck, const Table& schema, int clients) {
  LdpPlan plan;
  plan.clients = clients;
  plan.attributes = deck.strings("ldp.attributes");
  for (const auto& name : plan.attributes) {
    if (name == "label") {
      plan.categorical_column.push_back(-1);
      plan.domain.push_back(schema.classes());
      continue;
    }
    const int index = schema.find_attribute(name);
    if (index < 0) {
      std::string known = "\"label\"";
      for (const auto& a : schema.attributes)
        if (a.kind == AttributeKind::categorical) known += ", \"" + a.name + "\"";
      throw InputError(
          fmt::format("{}: ldp.attributes names \"{}\", which is not an attribute of "
                      "the data; categorical attributes are: {}",
                      deck.where("ldp.attributes"), name, known));
    }
    if (schema.attributes[index].kind != AttributeKind::categorical)
      throw InputError(
          fmt::format("{}: ldp.attributes names \"{}\", which is numeric; randomized "
                      "response applies to categorical attributes and \"label\"",
                      deck.where("ldp.attributes"), name));
    plan.categorical_column.push_back(schema.attributes[index].column);
    plan.domain.push_back(static_cast<int>(schema.attributes[index].categories.size()));
  }
  auto check_names = [&](const EpsilonSpec& spec, const std::string& path) {
    for (const auto& [name, value] : spec.by_attribute)
      if (std::find(plan.attributes.begin(), plan.attributes.end(), name) == plan.attributes.end())
        throw InputError(
            fmt::format("{}: {} sets epsilon for \"{}\", which is not listed in "
                        "ldp.attributes",
                        deck.where(path), path, name));
  };
  const EpsilonSpec base = deck.epsilon("ldp.epsilon");
  check_names(base, "ldp.epsilon");
  const std::size_t na = plan.attributes.size();
  plan.epsilon.assign(static_cast<std::size_t>(clients) * na, 0.0);
  for (int i = 0; i < clients; ++i)
    for (std::size_t a = 0; a < na; ++a)
      plan.epsilon[i * na + a] = base.for_attribute(plan.attributes[a]);
  for (std::size_t k = 0; k < deck.array_size("ldp.client"); ++k) {
    const std::string element = Deck::element("ldp.client", k);
    std::vector<long> ids;
    if (deck.has(element + ".id")) ids.push_back(deck.integer(element + ".id"));
    if (deck.has(element + ".ids"))
      for (long id : deck.integers(element + ".ids")) ids.push_back(id);
    if (ids.empty() || !deck.has(element + ".epsilon"))
      throw InputError(fmt::format("{}: each [[ldp.client]] needs id (or ids) and epsilon",
                                   deck.where(element)));
    const EpsilonSpec spec = deck.epsilon(element + ".epsilon");
    check_names(spec, element + ".epsilon");
    for (long id : ids) {
      if (id >= clients)
        throw InputError(fmt::format("{}: client {} does not exist (partition.clients = {})",
                                     deck.where(element), id, clients));
      for (std::size_t a = 0; a < na; ++a)
        plan.epsilon[id * na + a] =
            spec.by_attribute.count(plan.attributes[a])
                ? spec.by_attribute.at(plan.attributes[a])
                : (spec.by_attribute.empty() ? spec.all : plan.epsilon[id * na + a]);
    }
  }
  return plan;
}

void randomize_client_rows(const LdpPlan& plan, int client, const Table& train,
                           const std::vector<std::int64_t>& rows, std::uint64_t seed,
                           std::uint64_t draw, std::vector<std::int32_t>& categorical,
                           std::vector<std::int32_t>& labels) {
  const int nc = train.categorical_count();
  categorical.resize(rows.size() * nc);
  labels.resize(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(train.categorical.data() + train.position(rows[i]) * static_cast<std::size_t>(nc),
                nc, categorical.begin() + i * nc);
    labels[i] = train.label[static_cast<std::size_t>(rows[i])];
  }
  for (std::size_t a = 0; a < plan.attributes.size(); ++a) {
    const double epsilon = plan.epsilon_of(client, static_cast<int>(a));
    if (std::isinf(epsilon)) continue;
    const int column = plan.categorical_column[a];
    // Stream id1 = column + 1 (0 for the label) keeps attribute streams distinct.
    for (std::size_t i = 0; i < rows.size(); ++i) {
      Stream stream(seed, purpose::randomized_response, static_cast<std::uint64_t>(rows[i]),
                    static_cast<std::uint64_t>(column + 1), draw);
      std::int32_t& value = column < 0 ? labels[i] : categorical[i * nc + column];
      value = randomize_value(value, plan.domain[a], epsilon, stream);
    }
  }
}

}  // namespace fluence
