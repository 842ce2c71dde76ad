#include "fluence/data/source.hpp"
#include "built_in_sources.hpp"
#include "fluence/core/deck_keys.hpp"
#include "fluence/core/registry.hpp"
#include "fluence/data/data_source.hpp"
#include "fluence/data/purposes.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "fluence/core/error.hpp"
#include "fluence/core/memory.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/loaders.hpp"

namespace fluence {

namespace {
// Fails `fluence validate` already, with the key's location; the range is known before loading only
// for synthetic data.
void check_classes_early(const Deck& deck, const DataConfig& config, const DataSourceSpec& source) {
  if (config.classes.empty()) return;
  const std::optional<int> available =
      source.classes_before_reading ? source.classes_before_reading(config) : std::nullopt;
  const std::string problem = class_selection_problem(config.classes, available);
  if (!problem.empty())
    throw InputError(fmt::format("{}: {}", deck.where("data.classes"), problem));
}
}  // namespace

namespace {
bool reads_key(const DataSourceSpec& source, const std::string& key) {
  return std::find(source.keys.begin(), source.keys.end(), key) != source.keys.end();
}

// The registered sources that read `key`: those with the most source-specific keys first (a key's
// main reader, as hdf5 for data.arrays.*, csv for data.label), then in data.source's order.
std::vector<std::string> sources_reading(const std::string& key) {
  std::vector<DataSourceSpec> readers;
  for (DataSourceSpec& source : registered_data_sources())
    if (reads_key(source, key)) readers.push_back(std::move(source));
  std::stable_sort(readers.begin(), readers.end(),
                   [](const DataSourceSpec& a, const DataSourceSpec& b) {
                     return a.keys.size() > b.keys.size();
                   });
  std::vector<std::string> names;
  for (const DataSourceSpec& source : readers) names.push_back(source.name);
  return names;
}

// Where a key that some other source reads has a counterpart for the labels.
std::string refusal_hint(const std::string& key) {
  if (key != "data.label") return "";
  const std::vector<std::string> arrays = sources_reading("data.arrays.labels");
  if (arrays.empty()) return "";
  std::string listed = arrays.front();
  for (std::size_t i = 1; i < arrays.size(); ++i)
    listed += (i + 1 == arrays.size() ? " and " : ", ") + arrays[i];
  return fmt::format("; the labels of {} data are data.arrays.labels", listed);
}

// A source-specific key given for a source that does not read it is an error, not silence: the
// user meant something by it. Every source's keys are checked, in data.source's order.
void refuse_keys_of_other_sources(const Deck& deck, const DataSourceSpec& source) {
  std::vector<std::string> checked;
  for (const DataSourceSpec& other : registered_data_sources())
    for (const std::string& key : other.keys) {
      if (std::find(checked.begin(), checked.end(), key) != checked.end()) continue;
      checked.push_back(key);
      if (!deck.given(key) || reads_key(source, key)) continue;
      throw InputError(
          fmt::format("{}: {} applies only to data.source = \"{}\" (here data.source = \"{}\"){}",
                      deck.where(key), key, fmt::join(sources_reading(key), "\", \""), source.name,
                      refusal_hint(key)));
    }
}

CsvOptions read_csv_options(const Deck& deck) {
  CsvOptions dialect;
  const std::string delimiter = deck.string("data.delimiter");
  if (delimiter.size() != 1 || delimiter == "\"" || delimiter == "\n" || delimiter == "\r")
    throw InputError(
        fmt::format("{}: data.delimiter = \"{}\" is not allowed: expected one "
                    "character other than a double quote or a line break (\",\", "
                    "\";\", \"\\t\", \"|\")",
                    deck.where("data.delimiter"), message_excerpt(delimiter)));
  dialect.delimiter = delimiter[0];
  dialect.drop_missing = deck.string("data.missing") == "drop";
  dialect.missing_values = deck.strings("data.missing_values");
  return dialect;
}

ArrayNames read_array_names(const Deck& deck) {
  ArrayNames names;
  names.features = deck.string("data.arrays.features");
  names.labels = deck.string("data.arrays.labels");
  const auto optional = [&](const char* key) { return deck.has(key) ? deck.string(key) : ""; };
  names.clients = optional("data.arrays.clients");
  names.names = optional("data.arrays.names");
  names.names_attribute = optional("data.arrays.names_attribute");
  names.test_features = optional("data.arrays.test_features");
  names.test_labels = optional("data.arrays.test_labels");
  if (names.test_features.empty() != names.test_labels.empty())
    throw InputError(
        fmt::format("{}: data.arrays.test_features and data.arrays.test_labels go "
                    "together: give both or neither",
                    deck.origin()));
  if (!names.names.empty() && !names.names_attribute.empty())
    throw InputError(
        fmt::format("{}: give data.arrays.names or data.arrays.names_attribute, not "
                    "both",
                    deck.where("data.arrays.names_attribute")));
  return names;
}

// data.delimiter may be a tab ("\t"), the one control character a deck string may hold.
KeySpec delimiter_key() {
  KeySpec spec =
      deck_keys::with_note(deck_keys::key("data.delimiter", KeyType::string, "\",\"",
                                          "csv: the one character between fields (\"\\t\": a tab)"),
                           "one character, not `\"` or a line break");
  spec.tab_allowed = true;
  return spec;
}
}  // namespace

void register_data_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      section("data", "where the data come from and how they are encoded"),
      choice("data.source", "\"synthetic\"", data_source_names(), "data source"),
      key("data.path", T::string, "",
          "training file (csv, arff, hdf5, tff), directory with the four IDX files (idx), "
          "LEAF train directory or .json file (leaf), .npz file or directory of .npy files "
          "(npy); a relative path is taken from the deck file's directory"),
      key("data.test_path", T::string, "",
          "separate test file or directory, laid out as data.path (every source but "
          "synthetic and idx); else test_fraction"),
      key("data.test_fraction", T::real, "0.2",
          "fraction of rows held out as the server's test set when there is no test file", 0.0, 1.0,
          true),
      key("data.label", T::string_or_integer, "",
          "label column (name or 0-based index) for csv/arff; default: the last column"),
      key("data.categorical", T::string_array, "[]",
          "csv: columns treated as categorical (the others must be numeric)"),
      key("data.features", T::string_array, "[]",
          "the attributes (columns) the model sees, by name ([] = every one but the "
          "label); csv reads no other column"),
      key("data.drop", T::string_array, "[]",
          "attributes (columns) left out, by name (instead of data.features); csv does not "
          "read them"),
      delimiter_key(),
      choice("data.missing", "\"refuse\"", {"refuse", "drop"},
             "csv: a row with a missing value in a column that is read is refused (naming the "
             "line and column) or dropped"),
      key("data.missing_values", T::string_array,
          "[\"\", \"NA\", \"N/A\", \"NaN\", \"nan\", \"null\", \"?\"]",
          "csv: the field texts that count as a missing value"),
      choice("data.numeric_scaling", "\"standardize\"",
             {"standardize", "none", "per_client", "public"},
             "numeric features: `\"standardize\"` with the mean/std of every training row, "
             "pooled over all participants outside any privacy accounting (as the seeds' code "
             "does); `\"none\"` as they are; `\"per_client\"` each client (participant) with "
             "its own rows' mean/std and the server's test set with its own, no statistic "
             "crossing a party; `\"public\"` with the mean/std of rows no participant holds "
             "(`data.public_fraction`; in `fluence lia` the public split, else the warm-up). "
             "Under a privacy claim use \"per_client\", \"public\" or \"none\" "
             "([architecture.md](../docs/architecture.md#input-standardization))"),
      below_maximum(
          key("data.public_fraction", T::real, "0",
              "share of the training rows held out from every client and used only for the "
              "statistics of `numeric_scaling = \"public\"` (not in `fluence lia`, which has "
              "`lia.public_fraction`); every rank reads them, like the test set",
              0.0, 1.0)),
      key("data.max_train_rows", T::integer, "0", "use only the first N training rows (0 = all)",
          0),
      key("data.max_test_rows", T::integer, "0", "use only the first N test rows (0 = all)", 0),
      key("data.ink_levels", T::integer, "0",
          "idx: add a categorical attribute \"ink\" with this many equal-frequency levels "
          "(q0, q1, ...) of an image's mean pixel intensity (0 = none)",
          0),
      key("data.classes", T::integer_array, "[]",
          "keep only training and test rows whose label is one of these 0-based class "
          "indices, relabelled 0, 1, ... in the listed order (at least 2 distinct; [] = "
          "every class)",
          0),
      choice("data.hdf5_driver", "\"mpio\"", {"mpio", "posix"},
             "hdf5, tff: how each rank reads its clients' rows: independent POSIX reads, or "
             "MPI-IO with collective reads (docs/performance.md compares them)"),
      section("data.arrays", "hdf5, npy, tff: which arrays hold the features, labels and clients"),
      key("data.arrays.features", T::string, "\"x\"",
          "the features: a dataset path (hdf5), an array name (npy) or a field name (tff)"),
      key("data.arrays.labels", T::string, "\"y\"",
          "the integer (or string) labels, one per row: named as data.arrays.features"),
      key("data.arrays.clients", T::string, "",
          "hdf5, npy: one client id (integer or string) per row, for partition.scheme = "
          "\"natural\""),
      key("data.arrays.names", T::string, "",
          "hdf5, npy: a 1-D array of strings naming the feature columns (default: the "
          "features' name and the column index, x0, x1, ...)"),
      key("data.arrays.names_attribute", T::string, "",
          "hdf5: a string-array attribute of the features dataset naming its columns"),
      key("data.arrays.test_features", T::string, "",
          "hdf5, npy: the test split's features (in data.test_path when given, else in "
          "data.path; with data.arrays.test_labels)"),
      key("data.arrays.test_labels", T::string, "", "hdf5, npy: the test split's labels"),
      section("data.synthetic", "synthetic generator with a planted multinomial logistic model"),
      key("data.synthetic.rows", T::integer, "10000", "rows generated (train + test)", 2),
      key("data.synthetic.numeric", T::integer, "4", "numeric attributes (standard normal)", 0),
      key("data.synthetic.categorical", T::integer_array, "[3, 4]",
          "domain size of each categorical attribute", 2),
      key("data.synthetic.classes", T::integer, "2", "label classes", 2),
      key("data.synthetic.signal", T::real, "2.0",
          "scale of the planted model's weights (larger = more separable)", 0.0),
      key("data.synthetic.label_offset", T::real, "0.0",
          "added to class 0's planted logit: shifts the classes' base rates (Adult: 76% "
          "class 0)"),
      key("data.synthetic.cat0_signal", T::real, "1.0",
          "multiplies cat0's planted weights: a group attribute strongly tied to the label "
          "(Adult's sex)",
          0.0),
  });
}

DataConfig DataConfig::from_deck(const Deck& deck) {
  DataConfig config;
  config.source = deck.string("data.source");
  if (deck.has("data.path")) config.path = deck.file_path("data.path");
  if (deck.has("data.test_path")) config.test_path = deck.file_path("data.test_path");
  if (deck.has("data.label")) config.label = deck.string("data.label");
  config.categorical = deck.strings("data.categorical");
  config.features = deck.strings("data.features");
  config.drop = deck.strings("data.drop");
  config.test_fraction = deck.real("data.test_fraction");
  config.numeric_scaling = deck.string("data.numeric_scaling");
  config.standardize = config.numeric_scaling == "standardize";
  config.public_fraction = deck.real("data.public_fraction");
  config.max_train_rows = deck.integer("data.max_train_rows");
  config.max_test_rows = deck.integer("data.max_test_rows");
  config.ink_levels = static_cast<int>(deck.integer("data.ink_levels"));
  config.classes = deck.integers("data.classes");
  config.synthetic.rows = deck.integer("data.synthetic.rows");
  config.synthetic.numeric = static_cast<int>(deck.integer("data.synthetic.numeric"));
  config.synthetic.categorical.clear();
  for (long d : deck.integers("data.synthetic.categorical"))
    config.synthetic.categorical.push_back(static_cast<int>(d));
  config.synthetic.classes = static_cast<int>(deck.integer("data.synthetic.classes"));
  config.synthetic.signal = deck.real("data.synthetic.signal");
  config.synthetic.label_offset = deck.real("data.synthetic.label_offset");
  config.synthetic.cat0_signal = deck.real("data.synthetic.cat0_signal");
  const DataSourceSpec source = data_source(config.source);
  if (source.reads_path && config.path.empty())
    throw InputError(fmt::format("{}: data.path is required when data.source = \"{}\"",
                                 deck.origin(), config.source));
  if (config.ink_levels > 0 && !source.ink_levels) {
    std::vector<std::string> images;
    for (const DataSourceSpec& other : registered_data_sources())
      if (other.ink_levels) images.push_back(other.name);
    throw InputError(
        fmt::format("{}: data.ink_levels = {} applies only to data.source = \"{}\" "
                    "(here data.source = \"{}\")",
                    deck.where("data.ink_levels"), config.ink_levels, fmt::join(images, "\", \""),
                    config.source));
  }
  refuse_keys_of_other_sources(deck, source);
  config.hdf5_driver = deck.string("data.hdf5_driver");
  config.csv = read_csv_options(deck);
  config.arrays = read_array_names(deck);
  if (!config.features.empty() && !config.drop.empty())
    throw InputError(
        fmt::format("{}: give data.features (the columns kept) or data.drop (the "
                    "columns dropped), not both",
                    deck.where("data.drop")));
  check_classes_early(deck, config, source);
  if (source.check) source.check(deck, config);
  return config;
}

namespace {
// The planted model and the schema; row(r) makes row r from (seed, r) alone.
class SyntheticGenerator {
 public:
  SyntheticGenerator(const SyntheticConfig& config, std::uint64_t seed)
      : config_(config), seed_(seed) {
    for (int j = 0; j < config.numeric; ++j)
      schema_.attributes.push_back({fmt::format("num{}", j), AttributeKind::numeric, {}, j});
    for (std::size_t j = 0; j < config.categorical.size(); ++j) {
      Attribute attribute{
          fmt::format("cat{}", j), AttributeKind::categorical, {}, static_cast<int>(j)};
      for (int v = 0; v < config.categorical[j]; ++v)
        attribute.categories.push_back(fmt::format("v{}", v));
      schema_.attributes.push_back(attribute);
    }
    for (int c = 0; c < config.classes; ++c) schema_.class_names.push_back(std::to_string(c));
    schema_.rows = static_cast<std::size_t>(config.rows);
    // Planted model: one weight per (class, numeric attribute), per (class, category), and a
    // bias, scaled so the logits' spread is about `signal` whatever the attribute count.
    const int nc = static_cast<int>(config.categorical.size());
    inputs_ = config.numeric +
              std::accumulate(config.categorical.begin(), config.categorical.end(), 0) + 1;
    const double scale = config.signal / std::sqrt(static_cast<double>(config.numeric + nc + 1));
    weights_.resize(static_cast<std::size_t>(config.classes) * inputs_);
    Stream model_stream(seed, purpose::synthetic_model);
    for (auto& w : weights_) w = scale * model_stream.normal();
    if (nc > 0)  // cat0's weights follow the numeric ones in each class's row
      for (int c = 0; c < config.classes; ++c)
        for (int v = 0; v < config.categorical[0]; ++v)
          weights_[static_cast<std::size_t>(c) * inputs_ + config.numeric + v] *=
              config.cat0_signal;
  }

  // An empty table with every row's count (no values, no labels yet).
  const Table& schema() const { return schema_; }

  // Row r's values into `numeric` and `categorical`; returns its label.
  std::int32_t row(std::size_t r, double* numeric, std::int32_t* categorical) const {
    const int nc = static_cast<int>(config_.categorical.size());
    Stream row_stream(seed_, purpose::synthetic_rows, r);
    for (int j = 0; j < config_.numeric; ++j) numeric[j] = row_stream.normal();
    for (int j = 0; j < nc; ++j)
      categorical[j] = static_cast<std::int32_t>(row_stream.below(config_.categorical[j]));
    std::vector<double>& logits = logits_;
    logits.assign(static_cast<std::size_t>(config_.classes), 0.0);
    for (int c = 0; c < config_.classes; ++c) {
      const double* w = weights_.data() + static_cast<std::size_t>(c) * inputs_;
      double z = w[inputs_ - 1] + (c == 0 ? config_.label_offset : 0.0);
      for (int j = 0; j < config_.numeric; ++j) z += w[j] * numeric[j];
      int offset = config_.numeric;
      for (int j = 0; j < nc; ++j) {
        z += w[offset + categorical[j]];
        offset += config_.categorical[j];
      }
      logits[c] = z;
    }
    const double top = *std::max_element(logits.begin(), logits.end());
    double total = 0.0;
    for (auto& z : logits) total += (z = std::exp(z - top));
    double u = row_stream.uniform() * total;
    for (int c = 0; c < config_.classes; ++c) {
      if (u < logits[c]) return c;
      u -= logits[c];
    }
    return config_.classes - 1;
  }

 private:
  SyntheticConfig config_;
  std::uint64_t seed_;
  Table schema_;
  int inputs_ = 0;
  std::vector<double> weights_;
  mutable std::vector<double> logits_;  // scratch of row()
};
}  // namespace

Table generate_synthetic(const SyntheticConfig& config, std::uint64_t seed) {
  const SyntheticGenerator generator(config, seed);
  Table table = generator.schema();
  const auto nn = static_cast<std::size_t>(config.numeric), nc = config.categorical.size();
  table.numeric.resize(table.rows * nn);
  table.categorical.resize(table.rows * nc);
  table.label.resize(table.rows);
  for (std::size_t r = 0; r < table.rows; ++r)
    table.label[r] =
        generator.row(r, table.numeric.data() + r * nn, table.categorical.data() + r * nc);
  return table;
}

Table generate_synthetic_rows(const SyntheticConfig& config, std::uint64_t seed,
                              const std::vector<std::int64_t>& rows, bool every_label) {
  const SyntheticGenerator generator(config, seed);
  Table table = generator.schema();
  const auto nn = static_cast<std::size_t>(config.numeric), nc = config.categorical.size();
  table.partial = true;
  table.held = rows;
  if (every_label) {
    // The index pass: the values this rank will hold at least (its share of the rows) are
    // reserved, untouched, so that a deck far beyond memory fails here with std::bad_alloc
    // (FLUENCE_MEMORY_LIMIT=none) instead of after generating every row's label.
    const std::size_t share = table.rows / static_cast<std::size_t>(world_size());
    table.numeric.reserve(share * nn);
    table.categorical.reserve(share * nc);
  }
  table.numeric.resize(rows.size() * nn);
  table.categorical.resize(rows.size() * nc);
  table.label.assign(table.rows, 0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto r = static_cast<std::size_t>(rows[i]);
    table.label[r] =
        generator.row(r, table.numeric.data() + i * nn, table.categorical.data() + i * nc);
  }
  if (every_label) {
    std::vector<double> numeric(nn);
    std::vector<std::int32_t> categorical(nc);
    for (std::size_t r = 0; r < table.rows; ++r)
      if (!std::binary_search(rows.begin(), rows.end(), static_cast<std::int64_t>(r)))
        table.label[r] = generator.row(r, numeric.data(), categorical.data());
  }
  return table;
}

std::string class_selection_problem(const std::vector<long>& classes,
                                    std::optional<int> available) {
  const std::string range = available ? fmt::format("in [0, {})", *available) : "(0-based)";
  const std::string head = fmt::format(
      "data.classes = [{}] is not allowed: expected at least 2 distinct class indices {}",
      fmt::join(classes, ", "), range);
  if (classes.size() < 2) return head + "; [] keeps every class";
  for (const long c : classes) {
    if (c < 0 || (available && c >= *available))
      return fmt::format("{}; {} is out of range", head, c);
    if (std::count(classes.begin(), classes.end(), c) > 1)
      return fmt::format("{}; {} is listed more than once", head, c);
  }
  return {};
}

Table keep_classes(const Table& table, const std::vector<long>& classes) {
  const std::string problem = class_selection_problem(classes, table.classes());
  if (!problem.empty()) throw InputError(problem);
  // Old label -> new label, -1 for a class that is dropped.
  std::vector<std::int32_t> new_label(static_cast<std::size_t>(table.classes()), -1);
  for (std::size_t i = 0; i < classes.size(); ++i)
    new_label[static_cast<std::size_t>(classes[i])] = static_cast<std::int32_t>(i);
  std::vector<std::int64_t> kept_rows;
  for (std::size_t r = 0; r < table.rows; ++r)
    if (new_label[static_cast<std::size_t>(table.label[r])] >= 0)
      kept_rows.push_back(static_cast<std::int64_t>(r));
  Table kept = table.select_rows(kept_rows);
  for (auto& label : kept.label) label = new_label[static_cast<std::size_t>(label)];
  kept.class_names.clear();
  for (long c : classes) kept.class_names.push_back(table.class_names[static_cast<std::size_t>(c)]);
  return kept;
}

TrainTest split_train_test(const Table& all, double test_fraction, std::uint64_t seed) {
  const auto n = static_cast<std::int64_t>(all.rows);
  const auto test_rows =
      static_cast<std::int64_t>(std::llround(test_fraction * static_cast<double>(n)));
  Stream stream(seed, purpose::test_split);
  auto order = random_permutation(stream, n);
  std::vector<std::int64_t> test(order.begin(), order.begin() + test_rows);
  std::vector<std::int64_t> train(order.begin() + test_rows, order.end());
  std::sort(test.begin(), test.end());
  std::sort(train.begin(), train.end());
  return {all.select_rows(train), all.select_rows(test)};
}

namespace {
// Summed in column order so that train and test means, and thus levels, are reproducible exactly.
std::vector<double> row_means(const Table& table) {
  const auto nn = static_cast<std::size_t>(table.numeric_count());
  std::vector<double> means(table.rows, 0.0);
  if (nn == 0) return means;
  for (std::size_t r = 0; r < table.rows; ++r) {
    const double* row = table.numeric.data() + r * nn;
    means[r] = std::accumulate(row, row + nn, 0.0) / static_cast<double>(nn);
  }
  return means;
}

// The categorical matrix is row-major, so a new column means rebuilding it.
void append_level_column(Table& table, const Attribute& attribute, const std::vector<double>& means,
                         const std::vector<double>& thresholds) {
  const auto nc = static_cast<std::size_t>(table.categorical_count());
  std::vector<std::int32_t> categorical;
  categorical.reserve(table.rows * (nc + 1));
  for (std::size_t r = 0; r < table.rows; ++r) {
    const auto row = table.categorical.begin() + static_cast<std::ptrdiff_t>(r * nc);
    categorical.insert(categorical.end(), row, row + static_cast<std::ptrdiff_t>(nc));
    categorical.push_back(static_cast<std::int32_t>(
        std::upper_bound(thresholds.begin(), thresholds.end(), means[r]) - thresholds.begin()));
  }
  table.categorical = std::move(categorical);
  table.attributes.push_back(attribute);
}
}  // namespace

void add_ink_attribute(TrainTest& data, int levels) {
  if (levels < 1)
    throw InputError(fmt::format("ink attribute: {} levels; need at least 1", levels));
  if (data.train.rows == 0) throw InputError("ink attribute: the training data has no rows");
  if (data.train.find_attribute("ink") >= 0)
    throw InputError("ink attribute: the data already have an attribute named \"ink\"");
  const std::vector<double> train_means = row_means(data.train);
  std::vector<double> sorted = train_means;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  std::vector<double> thresholds;
  for (int j = 1; j < levels; ++j)
    thresholds.push_back(
        sorted[static_cast<std::size_t>(j) * n / static_cast<std::size_t>(levels)]);
  Attribute attribute{"ink", AttributeKind::categorical, {}, data.train.categorical_count()};
  for (int v = 0; v < levels; ++v) attribute.categories.push_back(fmt::format("q{}", v));
  append_level_column(data.train, attribute, train_means, thresholds);
  append_level_column(data.test, attribute, row_means(data.test), thresholds);
}

namespace {
Table first_rows(const Table& table, long limit) {
  if (limit <= 0 || static_cast<std::size_t>(limit) >= table.rows) return table;
  std::vector<std::int64_t> rows(limit);
  std::iota(rows.begin(), rows.end(), 0);
  return table.select_rows(rows);
}

bool has_test_file(const DataConfig& config, const DataSourceSpec& source) {
  if (source.has_test_file) return source.has_test_file(config);
  return !config.test_path.empty() || !config.arrays.test_features.empty();
}

// What generating the synthetic data surely allocates on every rank, from the deck alone
// (core/memory.hpp): the values, the names of the attributes, categories and classes, and the
// planted model. data.synthetic.numeric = 1e9 grew memory name by name until the OOM killer came.
std::vector<MemoryTerm> synthetic_memory(const SyntheticConfig& config, bool values) {
  const double rows = static_cast<double>(config.rows), numeric = config.numeric,
               categorical = static_cast<double>(config.categorical.size()),
               classes = config.classes;
  double categories = 0.0;
  for (const int domain : config.categorical) categories += domain;
  return {
      values ? MemoryTerm{rows * (8.0 * numeric + 4.0 * categorical + 4.0),
                          fmt::format("the data, held whole: data.synthetic.rows = {} x "
                                      "(data.synthetic.numeric = {} numbers + {} categorical "
                                      "codes and the label)",
                                      config.rows, config.numeric, config.categorical.size())}
             : MemoryTerm{rows * (8.0 * numeric + 4.0 * categorical) / world_size() + 4.0 * rows,
                          fmt::format("the data, spread over the ranks: data.synthetic.rows = {} "
                                      "x (data.synthetic.numeric = {} numbers + {} categorical "
                                      "codes) / {} ranks, and every row's label on every rank",
                                      config.rows, config.numeric, config.categorical.size(),
                                      world_size())},
      {(numeric + categorical) * sizeof(Attribute) + (categories + classes) * sizeof(std::string),
       fmt::format("the names of {} attributes, {} categories (data.synthetic.categorical) and "
                   "data.synthetic.classes = {} classes",
                   numeric + categorical, categories, config.classes)},
      {8.0 * classes * (numeric + categories + 1.0),
       fmt::format("the planted model: data.synthetic.classes = {} x {} inputs", config.classes,
                   numeric + categories + 1.0)},
  };
}

// synthetic's reading: every row whole, or with `rows` the requested rows (the index pass, asking
// for none, generates every row's label). Without a test file the test table is empty (with the
// schema) until split_train_test forms it.
TrainTest generate_source(const DataConfig& config, std::uint64_t seed, const RowRequest* rows) {
  if (!rows) {
    check_memory(synthetic_memory(config.synthetic, true));
    Table all = generate_synthetic(config.synthetic, seed);
    Table test = all.empty_like();
    return {std::move(all), std::move(test)};
  }
  if (rows->train.empty()) check_memory(synthetic_memory(config.synthetic, false));
  Table some = generate_synthetic_rows(config.synthetic, seed, rows->train, rows->train.empty());
  Table test = some.empty_like();
  test.partial = true;
  return {std::move(some), std::move(test)};
}

// Keeps the attributes whose `keep` entry is true, renumbering their columns. An image stays an
// image only with every pixel kept.
void keep_attributes(Table& table, const std::vector<bool>& keep) {
  const int nn = table.numeric_count(), nc = table.categorical_count();
  std::vector<Attribute> attributes;
  std::vector<int> numeric_kept, categorical_kept;
  for (std::size_t a = 0; a < table.attributes.size(); ++a) {
    if (!keep[a]) continue;
    Attribute attribute = table.attributes[a];
    auto& kept = attribute.kind == AttributeKind::numeric ? numeric_kept : categorical_kept;
    kept.push_back(attribute.column);
    attribute.column = static_cast<int>(kept.size()) - 1;
    attributes.push_back(std::move(attribute));
  }
  std::vector<double> numeric;
  std::vector<std::int32_t> categorical;
  numeric.reserve(table.held_rows() * numeric_kept.size());
  categorical.reserve(table.held_rows() * categorical_kept.size());
  for (std::size_t r = 0; r < table.held_rows(); ++r) {
    for (const int j : numeric_kept) numeric.push_back(table.numeric[r * nn + j]);
    for (const int j : categorical_kept) categorical.push_back(table.categorical[r * nc + j]);
  }
  if (static_cast<int>(numeric_kept.size()) != nn) table.image_shape = {0, 0, 0};
  table.attributes = std::move(attributes);
  table.numeric = std::move(numeric);
  table.categorical = std::move(categorical);
}

}  // namespace

void move_column_to_clients(TrainTest& data, const std::string& column) {
  const int index = data.train.find_attribute(column);
  if (index < 0)
    throw InputError(fmt::format("partition.column = \"{}\" is not an attribute of the data",
                                 message_excerpt(column)));
  const Attribute attribute = data.train.attributes[static_cast<std::size_t>(index)];
  if (attribute.kind != AttributeKind::categorical)
    throw InputError(
        fmt::format("partition.column = \"{}\" is numeric; the natural split needs "
                    "a categorical attribute",
                    message_excerpt(column)));
  for (Table* table : {&data.train, &data.test}) {
    const auto nc = static_cast<std::size_t>(table->categorical_count());
    if (!table->partial) {
      table->client.resize(table->rows);
      for (std::size_t r = 0; r < table->rows; ++r)
        table->client[r] = table->categorical[r * nc + static_cast<std::size_t>(attribute.column)];
    } else if (table->client.size() != table->rows) {
      // The index pass of csv and arff holds no values: its reader gave the column as the clients.
      throw std::logic_error("move_column_to_clients: a partial table without its clients");
    }
    table->client_names = attribute.categories;
    std::vector<bool> keep(table->attributes.size(), true);
    keep[static_cast<std::size_t>(index)] = false;
    keep_attributes(*table, keep);
  }
}

namespace {
// data.features (kept) or data.drop (dropped) by attribute name; the CSV reader applies them
// itself, so that a dropped column is never parsed.
void select_attributes(TrainTest& data, const std::vector<std::string>& features,
                       const std::vector<std::string>& drop) {
  if (features.empty() && drop.empty()) return;
  const Table& schema = data.train;
  std::vector<bool> keep(schema.attributes.size(), features.empty());
  for (const auto* list : {&features, &drop}) {
    const char* key = list == &features ? "data.features" : "data.drop";
    for (const auto& name : *list) {
      const int index = schema.find_attribute(name);
      if (index < 0) {
        std::vector<std::string> names;
        for (const auto& attribute : schema.attributes) names.push_back(attribute.name);
        throw InputError(fmt::format(
            "{} lists '{}', which is not an attribute of the data; the attributes are: {}", key,
            message_excerpt(name),
            message_excerpt(fmt::format("{}", fmt::join(names, ", ")), 4 * kExcerptBytes)));
      }
      keep[static_cast<std::size_t>(index)] = list == &features;
    }
  }
  if (std::none_of(keep.begin(), keep.end(), [](bool k) { return k; }))
    throw InputError("data.features and data.drop leave no attribute for the model");
  keep_attributes(data.train, keep);
  keep_attributes(data.test, keep);
}

// One label value leaves nothing to learn (every classifier is the constant; the seeds' metrics
// and influence are then 0/0), and thousands of values are not a class label: both are refused
// rather than run to a meaningless result.
void check_classes(const Table& train) {
  if (train.classes() > kMaxClasses)
    throw InputError(fmt::format(
        "the label '{}' has {} distinct values; a class label has at most {} (is it the right "
        "column or array? data.label, data.arrays.labels)",
        message_excerpt(train.label_name), train.classes(), kMaxClasses));
  const auto& labels = train.label;
  if (std::all_of(labels.begin(), labels.end(), [&](std::int32_t y) { return y == labels[0]; })) {
    const auto label = static_cast<std::size_t>(labels[0]);
    throw InputError(fmt::format(
        "the training data hold a single class ({}): a classifier needs at least two (check "
        "data.label, data.classes and the row limits)",
        label < train.class_names.size() ? "'" + message_excerpt(train.class_names[label]) + "'"
                                         : std::to_string(labels[0])));
  }
}
}  // namespace

namespace {
// Everything load_data does after the rows are read; on partial tables (the index pass) only
// index-level operations happen here, which need labels and client ids alone.
TrainTest prepare(TrainTest data, const DataConfig& config, const DataSourceSpec& source,
                  std::uint64_t seed, const std::string& client_column) {
  if (!client_column.empty()) move_column_to_clients(data, client_column);
  if (!source.selects_attributes) select_attributes(data, config.features, config.drop);
  // Before the split and the row limits, so that test_fraction, max_train_rows and max_test_rows
  // count kept rows. A pure function of the labels: the same on every rank.
  if (!config.classes.empty()) {
    data.train = keep_classes(data.train, config.classes);
    data.test = keep_classes(data.test, config.classes);
  }
  if (!has_test_file(config, source))
    data = split_train_test(data.train, config.test_fraction, seed);
  // Only when a limit applies: first_rows copies the table it keeps whole.
  for (auto [table, limit] :
       {std::pair{&data.train, config.max_train_rows}, std::pair{&data.test, config.max_test_rows}})
    if (limit > 0 && static_cast<std::size_t>(limit) < table->rows)
      *table = first_rows(*table, limit);
  if (data.train.rows == 0)
    throw InputError(config.classes.empty()
                         ? "the training data has no rows"
                         : "the training data has no rows of the classes in data.classes");
  if (data.test.rows == 0)
    throw InputError("the test set is empty: raise data.test_fraction or give data.test_path");
  check_classes(data.train);
  // The test rows serve the server, whatever client they came from.
  data.test.client.clear();
  data.test.client_names.clear();
  // After the class filter and the row limits, so that the levels are equally frequent on the rows
  // actually trained on.
  if (config.ink_levels > 0) add_ink_attribute(data, config.ink_levels);
  return data;
}

// Sources whose rows a rank can read selectively: the index pass then reads no values.
bool index_only(const DataConfig& config, const DataSourceSpec& source,
                const std::string& client_column) {
  if (config.ink_levels != 0 || !source.selective.index) return false;
  return client_column.empty() || source.selective.with_client_column;
}

// The index pass's reading, with each row's source row (its index where the source gives none).
TrainTest read_index(const DataConfig& config, const DataSourceSpec& source, std::uint64_t seed,
                     const std::string& client_column) {
  TrainTest data = source.selective.index(config, seed, client_column);
  for (Table* table : {&data.train, &data.test}) {
    if (!table->source_row.empty()) continue;
    table->source_row.resize(table->rows);
    std::iota(table->source_row.begin(), table->source_row.end(), 0);
  }
  return data;
}

std::vector<std::int64_t> source_rows_of(const Table& table,
                                         const std::vector<std::int64_t>& rows) {
  std::vector<std::int64_t> sources;
  sources.reserve(rows.size());
  for (const auto row : rows) sources.push_back(table.source_row[static_cast<std::size_t>(row)]);
  if (!std::is_sorted(sources.begin(), sources.end()))
    throw std::logic_error("hold_rows: the source rows are not in order");
  return sources;
}

// Gives the partial table `table` the values of `rows` from `raw` (the source rows as read). When
// `raw` holds exactly those rows (no test rows split off the same file), its values are taken
// over rather than copied: a rank's rows then exist once, not twice, at the peak of the load.
void fill_values(Table& table, const std::vector<std::int64_t>& rows, Table& raw) {
  const auto nn = static_cast<std::size_t>(table.numeric_count()),
             nc = static_cast<std::size_t>(table.categorical_count());
  if (static_cast<std::size_t>(raw.numeric_count()) != nn ||
      static_cast<std::size_t>(raw.categorical_count()) != nc)
    throw std::logic_error("hold_rows: the rows read do not have the index pass's columns");
  bool same_rows = raw.held.size() == rows.size();
  for (std::size_t i = 0; same_rows && i < rows.size(); ++i)
    same_rows = raw.held[i] == table.source_row[static_cast<std::size_t>(rows[i])];
  if (same_rows) {
    table.numeric = std::move(raw.numeric);
    table.categorical = std::move(raw.categorical);
  } else {
    table.numeric.resize(rows.size() * nn);
    table.categorical.resize(rows.size() * nc);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::int64_t source = table.source_row[static_cast<std::size_t>(rows[i])];
      std::copy_n(raw.numeric.data() + raw.position(source) * nn, nn,
                  table.numeric.begin() + i * nn);
      std::copy_n(raw.categorical.data() + raw.position(source) * nc, nc,
                  table.categorical.begin() + i * nc);
    }
  }
  table.held = rows;
  table.partial = true;
  table.source_row = {};
}
}  // namespace

SelectiveReading rows_by_request(
    std::function<TrainTest(const DataConfig& config, std::uint64_t seed, const RowRequest& rows)>
        read) {
  SelectiveReading selective;
  selective.index = [read](const DataConfig& config, std::uint64_t seed, const std::string&) {
    return read(config, seed, RowRequest{});
  };
  selective.rows = [read](const DataConfig& config, std::uint64_t seed, const Table&,
                          const RowRequest& request) {
    TrainTest raw = read(config, seed, request);
    select_attributes(raw, config.features, config.drop);
    return raw;
  };
  return selective;
}

DataSourceSpec array_source(std::string name, std::vector<std::string> keys,
                            TrainTest (*read)(const std::string& path, const std::string& test_path,
                                              const ArrayNames& names, const RowRequest* rows)) {
  return {.name = std::move(name),
          .keys = std::move(keys),
          .read =
              [read](const DataConfig& config, std::uint64_t, const std::string&) {
                return read(config.path, config.test_path, config.arrays, nullptr);
              },
          .selective = rows_by_request(
              [read](const DataConfig& config, std::uint64_t, const RowRequest& rows) {
                return read(config.path, config.test_path, config.arrays, &rows);
              })};
}

namespace built_in_sources {

DataSourceSpec synthetic() {
  return {.name = "synthetic",
          .reads_path = false,
          .has_test_file = [](const DataConfig&) { return false; },  // a data.test_fraction split
          .classes_before_reading =
              [](const DataConfig& config) { return std::optional<int>(config.synthetic.classes); },
          .check =
              [](const Deck& deck, const DataConfig& config) {
                if (config.synthetic.numeric == 0 && config.synthetic.categorical.empty())
                  throw InputError(
                      fmt::format("{}: data.synthetic needs at least one numeric or categorical "
                                  "attribute",
                                  deck.origin()));
              },
          .read = [](const DataConfig& config, std::uint64_t seed,
                     const std::string&) { return generate_source(config, seed, nullptr); },
          .selective = rows_by_request(
              [](const DataConfig& config, std::uint64_t seed, const RowRequest& rows) {
                return generate_source(config, seed, &rows);
              })};
}

}  // namespace built_in_sources

namespace {
Registry<DataSourceSpec>& registry() {
  // The built-ins in data.source's order, registered on first use (a static library drops none).
  static Registry<DataSourceSpec> instance(
      "a data source",
      {built_in_sources::synthetic(), built_in_sources::csv(), built_in_sources::arff(),
       built_in_sources::idx(), built_in_sources::hdf5(), built_in_sources::tff(),
       built_in_sources::leaf(), built_in_sources::npy()});
  return instance;
}
}  // namespace

void register_data_source(DataSourceSpec spec) {
  if (!spec.read) throw InputError("register_data_source: a data source needs a reader");
  if (static_cast<bool>(spec.selective.index) != static_cast<bool>(spec.selective.rows))
    throw InputError("register_data_source: selective reading needs both passes");
  registry().add(std::move(spec));
}

std::vector<DataSourceSpec> registered_data_sources() {
  return registry().specs();
}

std::vector<std::string> data_source_names() {
  return registry().names();
}

DataSourceSpec data_source(const std::string& name) {
  return registry().find(name, "data.source");
}

TrainTest load_data(const DataConfig& config, std::uint64_t seed,
                    const std::string& client_column) {
  const DataSourceSpec source = data_source(config.source);
  return prepare(source.read(config, seed, client_column), config, source, seed, client_column);
}

TrainTest load_data_index(const DataConfig& config, std::uint64_t seed,
                          const std::string& client_column) {
  const DataSourceSpec source = data_source(config.source);
  if (!index_only(config, source, client_column)) return load_data(config, seed, client_column);
  return prepare(read_index(config, source, seed, client_column), config, source, seed,
                 client_column);
}

void hold_rows(TrainTest& data, const DataConfig& config, std::uint64_t seed,
               const std::vector<std::int64_t>& train_rows,
               const std::vector<std::int64_t>& test_rows) {
  if (!data.train.partial) {  // read whole: the rows not held are dropped now
    data.train.retain(train_rows);
    data.test.retain(test_rows);
    return;
  }
  const DataSourceSpec source = data_source(config.source);
  RowRequest request;
  request.collective = config.hdf5_driver == "mpio";
  request.train = source_rows_of(data.train, train_rows);
  std::vector<std::int64_t> test_sources = source_rows_of(data.test, test_rows);
  const bool test_file = has_test_file(config, source);
  if (test_file) {
    request.test = std::move(test_sources);
  } else {  // the test rows were split off the training source
    std::vector<std::int64_t> both;
    std::set_union(request.train.begin(), request.train.end(), test_sources.begin(),
                   test_sources.end(), std::back_inserter(both));
    request.train = std::move(both);
  }
  TrainTest raw = source.selective.rows(config, seed, data.train, request);
  if (test_file) {
    fill_values(data.train, train_rows, raw.train);
    fill_values(data.test, test_rows, raw.test);
  } else {  // both from raw.train: the test rows first, so the training rows can take it over
    fill_values(data.test, test_rows, raw.train);
    fill_values(data.train, train_rows, raw.train);
  }
}

}  // namespace fluence
