#include "fluence/data/source.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/loaders.hpp"

namespace fluence {

DataConfig DataConfig::from_deck(const Deck& deck) {
  DataConfig config;
  config.source = deck.string("data.source");
  if (deck.has("data.path")) config.path = deck.string("data.path");
  if (deck.has("data.test_path")) config.test_path = deck.string("data.test_path");
  if (deck.has("data.label")) config.label = deck.string("data.label");
  config.categorical = deck.strings("data.categorical");
  config.test_fraction = deck.real("data.test_fraction");
  config.standardize = deck.string("data.numeric_scaling") == "standardize";
  config.max_train_rows = deck.integer("data.max_train_rows");
  config.max_test_rows = deck.integer("data.max_test_rows");
  config.synthetic.rows = deck.integer("data.synthetic.rows");
  config.synthetic.numeric = static_cast<int>(deck.integer("data.synthetic.numeric"));
  config.synthetic.categorical.clear();
  for (long d : deck.integers("data.synthetic.categorical"))
    config.synthetic.categorical.push_back(static_cast<int>(d));
  config.synthetic.classes = static_cast<int>(deck.integer("data.synthetic.classes"));
  config.synthetic.signal = deck.real("data.synthetic.signal");
  if (config.source != "synthetic" && config.path.empty())
    throw InputError(fmt::format("{}: data.path is required when data.source = \"{}\"",
                                 deck.origin(), config.source));
  if (config.source == "synthetic" && config.synthetic.numeric == 0 &&
      config.synthetic.categorical.empty())
    throw InputError(
        fmt::format("{}: data.synthetic needs at least one numeric or categorical "
                    "attribute",
                    deck.origin()));
  return config;
}

Table generate_synthetic(const SyntheticConfig& config, std::uint64_t seed) {
  Table table;
  for (int j = 0; j < config.numeric; ++j)
    table.attributes.push_back({fmt::format("num{}", j), AttributeKind::numeric, {}, j});
  for (std::size_t j = 0; j < config.categorical.size(); ++j) {
    Attribute attribute{
        fmt::format("cat{}", j), AttributeKind::categorical, {}, static_cast<int>(j)};
    for (int v = 0; v < config.categorical[j]; ++v)
      attribute.categories.push_back(fmt::format("v{}", v));
    table.attributes.push_back(attribute);
  }
  for (int c = 0; c < config.classes; ++c) table.class_names.push_back(std::to_string(c));

  // Planted model: one weight per (class, numeric attribute), per (class, category), and a bias,
  // scaled so the logits' spread is about `signal` whatever the attribute count.
  const int nc = static_cast<int>(config.categorical.size());
  const int inputs =
      config.numeric + std::accumulate(config.categorical.begin(), config.categorical.end(), 0) + 1;
  const double scale = config.signal / std::sqrt(static_cast<double>(config.numeric + nc + 1));
  std::vector<double> weights(static_cast<std::size_t>(config.classes) * inputs);
  Stream model_stream(seed, Purpose::synthetic_model);
  for (auto& w : weights) w = scale * model_stream.normal();

  table.rows = static_cast<std::size_t>(config.rows);
  table.numeric.resize(table.rows * config.numeric);
  table.categorical.resize(table.rows * nc);
  table.label.resize(table.rows);
  std::vector<double> logits(config.classes);
  for (std::size_t r = 0; r < table.rows; ++r) {
    Stream row_stream(seed, Purpose::synthetic_rows, r);
    double* numeric = table.numeric.data() + r * config.numeric;
    std::int32_t* categorical = table.categorical.data() + r * nc;
    for (int j = 0; j < config.numeric; ++j) numeric[j] = row_stream.normal();
    for (int j = 0; j < nc; ++j)
      categorical[j] = static_cast<std::int32_t>(row_stream.below(config.categorical[j]));
    for (int c = 0; c < config.classes; ++c) {
      const double* w = weights.data() + static_cast<std::size_t>(c) * inputs;
      double z = w[inputs - 1];
      for (int j = 0; j < config.numeric; ++j) z += w[j] * numeric[j];
      int offset = config.numeric;
      for (int j = 0; j < nc; ++j) {
        z += w[offset + categorical[j]];
        offset += config.categorical[j];
      }
      logits[c] = z;
    }
    const double top = *std::max_element(logits.begin(), logits.end());
    double total = 0.0;
    for (auto& z : logits) total += (z = std::exp(z - top));
    double u = row_stream.uniform() * total;
    int label = config.classes - 1;
    for (int c = 0; c < config.classes; ++c) {
      if (u < logits[c]) {
        label = c;
        break;
      }
      u -= logits[c];
    }
    table.label[r] = label;
  }
  return table;
}

TrainTest split_train_test(const Table& all, double test_fraction, std::uint64_t seed) {
  const auto n = static_cast<std::int64_t>(all.rows);
  const auto test_rows =
      static_cast<std::int64_t>(std::llround(test_fraction * static_cast<double>(n)));
  Stream stream(seed, Purpose::test_split);
  auto order = random_permutation(stream, n);
  std::vector<std::int64_t> test(order.begin(), order.begin() + test_rows);
  std::vector<std::int64_t> train(order.begin() + test_rows, order.end());
  std::sort(test.begin(), test.end());
  std::sort(train.begin(), train.end());
  return {all.select_rows(train), all.select_rows(test)};
}

namespace {
Table first_rows(const Table& table, long limit) {
  if (limit <= 0 || static_cast<std::size_t>(limit) >= table.rows) return table;
  std::vector<std::int64_t> rows(limit);
  std::iota(rows.begin(), rows.end(), 0);
  return table.select_rows(rows);
}
}  // namespace

TrainTest load_data(const DataConfig& config, std::uint64_t seed) {
  TrainTest data;
  const ColumnSelection columns{config.label, config.categorical};
  if (config.source == "synthetic") {
    data = split_train_test(generate_synthetic(config.synthetic, seed), config.test_fraction, seed);
  } else if (config.source == "idx") {
    data = read_idx(config.path);
  } else {
    data = config.source == "csv" ? read_csv(config.path, config.test_path, columns)
                                  : read_arff(config.path, config.test_path, columns);
    if (config.test_path.empty()) data = split_train_test(data.train, config.test_fraction, seed);
  }
  data.train = first_rows(data.train, config.max_train_rows);
  data.test = first_rows(data.test, config.max_test_rows);
  if (data.train.rows == 0) throw InputError("the training data has no rows");
  if (data.test.rows == 0)
    throw InputError("the test set is empty: raise data.test_fraction or give data.test_path");
  return data;
}

}  // namespace fluence
