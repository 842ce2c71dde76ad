#include "fluence/core/config.hpp"

#include <fmt/core.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "fluence/core/error.hpp"

namespace fluence {

struct Deck::Impl {
  toml::table root;
  std::vector<std::string> given_keys;  // dotted paths of the values the deck and --set gave
  std::filesystem::path directory;      // the deck file's directory (from_file only)
};

namespace {

std::string strip_indices(const std::string& path) {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '[') {
      out += "[]";
      i = path.find(']', i);
    } else {
      out += path[i];
    }
  }
  return out;
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream stream(path);
  std::string part;
  while (std::getline(stream, part, '.')) parts.push_back(part);
  return parts;
}

// Navigates "a.b[2].c" through tables and arrays of tables.
const toml::node* lookup(const toml::table& root, const std::string& path) {
  const toml::node* node = &root;
  for (const auto& part : split_path(path)) {
    const auto bracket = part.find('[');
    const std::string name = part.substr(0, bracket);
    const auto* table = node->as_table();
    if (!table) return nullptr;
    node = table->get(name);
    if (!node) return nullptr;
    if (bracket != std::string::npos) {
      const auto index = std::stoul(part.substr(bracket + 1));
      const auto* array = node->as_array();
      if (!array || index >= array->size()) return nullptr;
      node = array->get(index);
    }
  }
  return node;
}

std::string source_of(const toml::node& node, const std::string& origin) {
  const auto& source = node.source();
  if (!source.path) return "--set";  // parsed from a --set override (defaults are never reported)
  if (source.begin.line == 0) return origin;
  return fmt::format("{}:{}", origin, source.begin.line);
}

std::string value_text(const toml::node& node) {
  std::ostringstream out;
  if (auto* s = node.as_string()) {
    out << '"' << s->get() << '"';
  } else if (auto* a = node.as_array()) {
    out << *a;
  } else if (node.is_table()) {
    out << "{...}";
  } else if (auto* f = node.as_floating_point()) {
    // The shortest round-trip form (-0.1, not -0.10000000000000001), with ".0" kept on a whole
    // number: `clients = 5.0` refused for an integer key must not read as "5 is not allowed".
    const double value = f->get();
    std::string text = fmt::format("{}", value);
    if (std::isfinite(value) && text.find_first_of(".eE") == std::string::npos) text += ".0";
    out << text;
  } else {
    node.visit([&](auto&& value) { out << value; });
  }
  return out.str();
}

std::string nearest_key(const DeckSchema& schema, const std::string& path) {
  std::string best;
  std::size_t best_distance = std::string::npos;
  const std::string normalized = strip_indices(path);
  // No key is this long: a quoted megabyte of a key gets no suggestion (nor a quadratic search).
  constexpr std::size_t kLongestSuggested = 200;
  if (normalized.size() > kLongestSuggested) return "";
  for (const auto& spec : schema) {
    const std::size_t d = edit_distance(normalized, spec.path);
    if (d < best_distance) {
      best_distance = d;
      best = spec.path;
    }
  }
  return best_distance <= std::max<std::size_t>(3, normalized.size() / 3) ? best : "";
}

// A number key takes finite values only, unless it allows +inf (KeySpec::infinity_allowed): a nan
// or an inf given where it means nothing ran on (influence.damping = inf ended in a CG "relative
// residual -nan") or became a silently meaningless result.
bool in_range(const KeySpec& spec, double value) {
  if (std::isnan(value)) return false;
  if (std::isinf(value) && !(spec.infinity_allowed && value > 0)) return false;
  if (spec.minimum_exclusive ? !(value > spec.minimum) : !(value >= spec.minimum)) return false;
  return spec.maximum_exclusive ? value < spec.maximum : value <= spec.maximum;
}

// Deck strings are names, values and paths: a control byte (a NUL written "\u0000") or a string
// longer than any path would reach file names and messages, so both are refused here, once. A
// key that is a field delimiter (KeySpec::tab_allowed) may hold a tab: TSV files need it.
constexpr std::size_t kLongestDeckString = 4096;

bool acceptable_text(const std::string& text, bool tab_allowed = false) {
  return text.size() <= kLongestDeckString &&
         std::none_of(text.begin(), text.end(), [tab_allowed](char c) {
           const auto byte = static_cast<unsigned char>(c);
           return (byte < 0x20 && !(tab_allowed && c == '\t')) || byte == 0x7f;
         });
}

bool acceptable_text(const toml::node& node, bool tab_allowed = false) {
  const auto* text = node.as_string();
  return !text || acceptable_text(text->get(), tab_allowed);
}

bool is_number(const toml::node& node) {
  return node.is_integer() || node.is_floating_point();
}

// Does the value hold a nan, an inf or a -inf (itself, or an element of an array)?
bool holds_non_finite(const toml::node& node) {
  if (const auto* f = node.as_floating_point()) return !std::isfinite(f->get());
  if (const auto* array = node.as_array())
    return std::any_of(array->begin(), array->end(),
                       [](const toml::node& element) { return holds_non_finite(element); });
  return false;
}

double number_of(const toml::node& node) {
  if (auto* i = node.as_integer()) return static_cast<double>(i->get());
  return node.as_floating_point()->get();
}

// A privacy level: a number > 0 (inf allowed) or the string "inf".
std::optional<double> epsilon_value(const toml::node& node) {
  if (auto* s = node.as_string()) {
    if (s->get() == "inf") return std::numeric_limits<double>::infinity();
    return std::nullopt;
  }
  if (!is_number(node)) return std::nullopt;
  const double value = number_of(node);
  if (std::isnan(value) || value <= 0) return std::nullopt;
  return value;
}

class Validator {
 public:
  Validator(const DeckSchema& schema, std::string origin)
      : schema_(schema), origin_(std::move(origin)) {}

  void table(const toml::table& table, const std::string& prefix) {
    for (const auto& [key, node] : table) {
      const std::string path =
          prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
      const KeySpec* spec = schema_.find(path);
      if (!spec) unknown(path, node);
      check(*spec, path, node);
    }
  }

 private:
  [[noreturn]] void unknown(const std::string& path, const toml::node& node) {
    const std::string suggestion = nearest_key(schema_, path);
    throw InputError(fmt::format("{}: unknown key '{}'{}", source_of(node, origin_),
                                 message_excerpt(path),
                                 suggestion.empty() ? "" : "; did you mean '" + suggestion + "'?"));
  }

  // The value as a message shows it: an array on one line, element by element ("[0.5, inf]"; toml++
  // would spread an array holding a nan over several lines).
  static std::string shown_value(const toml::node& node) {
    const auto* array = node.as_array();
    if (!array) return value_text(node);
    std::string text;
    for (const auto& element : *array) text += (text.empty() ? "" : ", ") + shown_value(element);
    return "[" + text + "]";
  }

  [[noreturn]] void bad(const KeySpec& spec, const std::string& path, const toml::node& node) {
    // A nan or an inf refused by a number key: the message says the number must be finite.
    const bool say_finite =
        (spec.type == KeyType::real || spec.type == KeyType::real_array) && holds_non_finite(node);
    throw InputError(fmt::format("{}: {} = {} is not allowed: expected {}",
                                 source_of(node, origin_), message_excerpt(path),
                                 message_excerpt(shown_value(node)),
                                 acceptable_text(node, spec.tab_allowed)
                                     ? allowed_text(spec, say_finite)
                                     : fmt::format("a string of at most {} bytes without control "
                                                   "characters",
                                                   kLongestDeckString)));
  }

  void check(const KeySpec& spec, const std::string& path, const toml::node& node) {
    switch (spec.type) {
      case KeyType::section:
        if (!node.is_table()) bad(spec, path, node);
        table(*node.as_table(), path);
        return;
      case KeyType::section_array: {
        const auto* array = node.as_array();
        if (!array || !array->is_array_of_tables()) bad(spec, path, node);
        for (std::size_t i = 0; i < array->size(); ++i)
          table(*array->get(i)->as_table(), path + "[" + std::to_string(i) + "]");
        return;
      }
      case KeyType::integer:
        if (!node.is_integer() || !in_range(spec, number_of(node))) bad(spec, path, node);
        return;
      case KeyType::real:
        if (!is_number(node) || !in_range(spec, number_of(node))) bad(spec, path, node);
        return;
      case KeyType::boolean:
        if (!node.is_boolean()) bad(spec, path, node);
        return;
      case KeyType::string:
        if (!node.is_string() || !acceptable_text(node, spec.tab_allowed)) bad(spec, path, node);
        if (!spec.choices.empty() && std::find(spec.choices.begin(), spec.choices.end(),
                                               node.as_string()->get()) == spec.choices.end())
          bad(spec, path, node);
        return;
      case KeyType::string_or_integer:
        if (!acceptable_text(node) ||
            (!node.is_string() && !(node.is_integer() && node.as_integer()->get() >= 0)))
          bad(spec, path, node);
        return;
      case KeyType::epsilon:
        if (const auto* t = node.as_table()) {
          for (const auto& [name, value] : *t)
            if (!epsilon_value(value)) bad(spec, path + "." + std::string(name.str()), value);
        } else if (!epsilon_value(node)) {
          bad(spec, path, node);
        }
        return;
      case KeyType::string_array:
      case KeyType::real_array:
      case KeyType::integer_array: {
        const auto* array = node.as_array();
        if (!array) bad(spec, path, node);
        for (const auto& element : *array) {
          const bool ok = spec.type == KeyType::string_array
                              ? element.is_string() && acceptable_text(element) &&
                                    (spec.choices.empty() ||
                                     std::find(spec.choices.begin(), spec.choices.end(),
                                               element.as_string()->get()) != spec.choices.end())
                          : spec.type == KeyType::integer_array
                              ? element.is_integer() && in_range(spec, number_of(element))
                              : is_number(element) && in_range(spec, number_of(element));
          if (!ok) bad(spec, path, acceptable_text(element) ? node : element);
        }
        return;
      }
    }
  }

  const DeckSchema& schema_;
  std::string origin_;
};

// Parses the right-hand side of --set as a TOML value; a bare word that is not TOML is a string.
toml::table parse_override_value(const std::string& value) {
  try {
    return toml::parse("value = " + value);
  } catch (const toml::parse_error&) {
    toml::table table;
    table.insert("value", value);
    return table;
  }
}

void apply_override(toml::table& root, const std::string& assignment, const DeckSchema& schema) {
  // One --set is one value on one line: parsed as TOML, a line break ended the value and what
  // followed it was dropped in silence.
  if (assignment.find_first_of("\n\r") != std::string::npos)
    throw InputError(
        fmt::format("--set {}: a --set holds one section.key=value on one line, not a line break",
                    message_excerpt(assignment)));
  const auto equals = assignment.find('=');
  if (equals == std::string::npos || equals == 0)
    throw InputError(
        fmt::format("--set {}: expected section.key=value", message_excerpt(assignment)));
  const std::string path = assignment.substr(0, equals);
  // A whole section (`--set 'federation={rounds=2}'`) would replace the deck's section, its other
  // keys falling back to their defaults.
  if (const KeySpec* spec = schema.find(path); spec && spec->type == KeyType::section)
    throw InputError(
        fmt::format("--set {}: [{}] is a section: set its keys one by one (--set {}.KEY=VALUE); "
                    "a whole table would reset the keys it does not name to their defaults",
                    message_excerpt(assignment), message_excerpt(path), message_excerpt(path)));
  const auto parts = split_path(path);
  toml::table* table = &root;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    auto* next = table->get(parts[i]);
    if (!next) {
      table->insert(parts[i], toml::table{});
      next = table->get(parts[i]);
    }
    if (!next->is_table())
      throw InputError(fmt::format("--set {}: '{}' is not a section", message_excerpt(assignment),
                                   message_excerpt(parts[i])));
    table = next->as_table();
  }
  auto parsed = parse_override_value(assignment.substr(equals + 1));
  table->insert_or_assign(parts.back(), std::move(*parsed.get("value")));
}

void fill_defaults(const DeckSchema& schema, toml::table& root) {
  for (const auto& spec : schema) {
    if (spec.default_value.empty() || spec.path.find("[]") != std::string::npos) continue;
    if (spec.type == KeyType::section || spec.type == KeyType::section_array) continue;
    const auto parts = split_path(spec.path);
    toml::table* table = &root;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      if (!table->get(parts[i])) table->insert(parts[i], toml::table{});
      table = table->get(parts[i])->as_table();
    }
    if (!table->get(parts.back())) {
      auto parsed = toml::parse("value = " + spec.default_value);
      table->insert(parts.back(), std::move(*parsed.get("value")));
    }
  }
}

}  // namespace

void DeckSchema::add(std::vector<KeySpec> specs) {
  for (auto& spec : specs) {
    if (find(spec.path)) throw std::logic_error("deck key declared twice: " + spec.path);
    keys_.push_back(std::move(spec));
  }
}

const KeySpec* DeckSchema::find(const std::string& path) const {
  const std::string normalized = strip_indices(path);
  for (const auto& spec : keys_)
    if (spec.path == normalized) return &spec;
  return nullptr;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

double EpsilonSpec::for_attribute(const std::string& name) const {
  auto it = by_attribute.find(name);
  return it == by_attribute.end() ? all : it->second;
}

Deck::Deck() : impl_(new Impl) {}
Deck::Deck(Deck&& other) noexcept
    : impl_(other.impl_), origin_(std::move(other.origin_)), schema_(other.schema_) {
  other.impl_ = nullptr;
}
Deck& Deck::operator=(Deck&& other) noexcept {
  std::swap(impl_, other.impl_);
  std::swap(origin_, other.origin_);
  std::swap(schema_, other.schema_);
  return *this;
}
Deck::~Deck() {
  delete impl_;
}

Deck Deck::from_file(const std::string& path, const DeckSchema& schema,
                     const std::vector<std::string>& overrides) {
  std::error_code error;
  std::ifstream file;
  if (std::filesystem::is_regular_file(path, error)) file.open(path);
  if (!file.is_open())
    throw InputError(fmt::format("cannot read deck '{}': no such file or not readable",
                                 message_excerpt(path, kPathExcerptBytes)));
  std::stringstream text;
  text << file.rdbuf();
  Deck deck = from_string(text.str(), path, schema, overrides);
  deck.impl_->directory = std::filesystem::path(path).parent_path();
  return deck;
}

Deck Deck::from_string(const std::string& text, const std::string& origin, const DeckSchema& schema,
                       const std::vector<std::string>& overrides) {
  Deck deck;
  deck.schema_ = &schema;
  deck.origin_ = message_excerpt(origin, kPathExcerptBytes);  // what messages call the deck
  try {
    deck.impl_->root = toml::parse(text, origin);
  } catch (const toml::parse_error& error) {
    throw InputError(fmt::format("{}:{}:{}: TOML syntax error: {}", deck.origin_,
                                 error.source().begin.line, error.source().begin.column,
                                 message_excerpt(error.description(), 2 * kPathExcerptBytes)));
  }
  for (const auto& assignment : overrides) apply_override(deck.impl_->root, assignment, schema);
  Validator(schema, deck.origin_).table(deck.impl_->root, "");
  // The values given, before the defaults join them (what a "has no effect" warning may name).
  std::function<void(const toml::table&, const std::string&)> collect =
      [&](const toml::table& table, const std::string& prefix) {
        for (const auto& [name, node] : table) {
          const std::string path = prefix + std::string(name.str());
          if (const auto* inner = node.as_table())
            collect(*inner, path + ".");
          else
            deck.impl_->given_keys.push_back(path);
        }
      };
  collect(deck.impl_->root, "");
  fill_defaults(schema, deck.impl_->root);
  return deck;
}

const toml::table& Deck::table() const {
  return impl_->root;
}

bool Deck::has(const std::string& path) const {
  return lookup(impl_->root, path) != nullptr;
}

std::vector<std::string> Deck::given_sections() const {
  // The first component of every given dotted key (the schema has no top-level array of tables;
  // `seed` is the one top-level value).
  std::vector<std::string> sections;
  for (const auto& key : impl_->given_keys) {
    const std::size_t dot = key.find('.');
    if (dot == std::string::npos) continue;
    std::string section = key.substr(0, dot);
    if (std::find(sections.begin(), sections.end(), section) == sections.end())
      sections.push_back(std::move(section));
  }
  return sections;
}

bool Deck::given(const std::string& path) const {
  const auto& keys = impl_->given_keys;
  return std::find(keys.begin(), keys.end(), path) != keys.end();
}

std::string Deck::where(const std::string& path) const {
  const auto* node = lookup(impl_->root, path);
  return node ? source_of(*node, origin_) : origin_;
}

std::string Deck::file_path(const std::string& path) const {
  const std::string value = string(path);
  const auto* node = lookup(impl_->root, path);
  const bool from_deck_file = node && node->source().path && !impl_->directory.empty();
  if (value.empty() || !from_deck_file || std::filesystem::path(value).is_absolute()) return value;
  return (impl_->directory / value).string();
}

std::string Deck::value_text(const std::string& path) const {
  const auto* node = lookup(impl_->root, path);
  return node ? fluence::value_text(*node) : std::string();
}

namespace {
const toml::node& require(const toml::table& root, const std::string& path,
                          const std::string& origin) {
  const auto* node = lookup(root, path);
  if (!node) throw InputError(fmt::format("{}: missing required key '{}'", origin, path));
  return *node;
}
}  // namespace

long Deck::integer(const std::string& path) const {
  return static_cast<long>(require(impl_->root, path, origin_).as_integer()->get());
}

double Deck::real(const std::string& path) const {
  return number_of(require(impl_->root, path, origin_));
}

bool Deck::boolean(const std::string& path) const {
  return require(impl_->root, path, origin_).as_boolean()->get();
}

std::string Deck::string(const std::string& path) const {
  const auto& node = require(impl_->root, path, origin_);
  if (auto* i = node.as_integer()) return std::to_string(i->get());
  return node.as_string()->get();
}

std::vector<std::string> Deck::strings(const std::string& path) const {
  std::vector<std::string> out;
  for (const auto& element : *require(impl_->root, path, origin_).as_array())
    out.push_back(element.as_string()->get());
  return out;
}

std::vector<double> Deck::reals(const std::string& path) const {
  std::vector<double> out;
  for (const auto& element : *require(impl_->root, path, origin_).as_array())
    out.push_back(number_of(element));
  return out;
}

std::vector<long> Deck::integers(const std::string& path) const {
  std::vector<long> out;
  for (const auto& element : *require(impl_->root, path, origin_).as_array())
    out.push_back(static_cast<long>(element.as_integer()->get()));
  return out;
}

EpsilonSpec Deck::epsilon(const std::string& path) const {
  EpsilonSpec spec;
  const auto& node = require(impl_->root, path, origin_);
  if (const auto* t = node.as_table()) {
    for (const auto& [name, value] : *t)
      spec.by_attribute[std::string(name.str())] = *epsilon_value(value);
  } else {
    spec.all = *epsilon_value(node);
  }
  return spec;
}

std::size_t Deck::array_size(const std::string& path) const {
  const auto* node = lookup(impl_->root, path);
  if (!node) return 0;
  return node->as_array()->size();
}

std::string Deck::element(const std::string& path, std::size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

std::string Deck::resolved_toml() const {
  std::ostringstream out;
  out << toml::toml_formatter(impl_->root);
  return out.str();
}

std::string key_type_name(KeyType type) {
  switch (type) {
    case KeyType::integer:
      return "integer";
    case KeyType::real:
      return "number";
    case KeyType::boolean:
      return "boolean";
    case KeyType::string:
      return "string";
    case KeyType::string_array:
      return "array of strings";
    case KeyType::real_array:
      return "array of numbers";
    case KeyType::integer_array:
      return "array of integers";
    case KeyType::epsilon:
      return "number, \"inf\" or table";
    case KeyType::string_or_integer:
      return "string or integer";
    case KeyType::section:
      return "section";
    case KeyType::section_array:
      return "array of tables";
  }
  return "?";
}

std::string allowed_text(const KeySpec& spec, bool say_finite) {
  auto range = [&]() -> std::string {
    std::string lower, upper;
    if (std::isfinite(spec.minimum))
      lower = fmt::format("{} {}", spec.minimum_exclusive ? ">" : ">=", spec.minimum);
    if (std::isfinite(spec.maximum))
      upper = fmt::format("{} {}", spec.maximum_exclusive ? "<" : "<=", spec.maximum);
    if (lower.empty() && upper.empty()) return "";
    if (!lower.empty() && !upper.empty()) return " " + lower + " and " + upper;
    return " " + lower + upper;
  };
  auto choices = [&]() {
    std::string text;
    for (const auto& choice : spec.choices) text += (text.empty() ? "" : ", ") + choice;
    return text;
  };
  switch (spec.type) {
    case KeyType::integer:
      return "an integer" + range();
    case KeyType::real:
      return (say_finite ? "a finite number" : "a number") + range() +
             (spec.infinity_allowed ? ", or inf" : "");
    case KeyType::boolean:
      return "true or false";
    case KeyType::string:
      return spec.choices.empty() ? "a string" : "one of: " + choices();
    case KeyType::string_array:
      return spec.choices.empty() ? "an array of strings"
                                  : "an array of strings, each one of: " + choices();
    case KeyType::real_array:
      return (say_finite ? "an array of finite numbers, each" : "an array of numbers, each") +
             range() + (spec.infinity_allowed ? " or inf" : "");
    case KeyType::integer_array:
      return "an array of integers, each" + range();
    case KeyType::epsilon:
      return "a number > 0, \"inf\", or a table of attribute = (number > 0 or \"inf\")";
    case KeyType::string_or_integer:
      return "a column name or a 0-based column index";
    case KeyType::section:
      return "a section (table)";
    case KeyType::section_array:
      return "an array of tables ([[...]])";
  }
  return "?";
}

}  // namespace fluence
