#pragma once
// [data] in the deck: where rows come from, how the test set is formed, how features are encoded.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fluence/core/config.hpp"
#include "fluence/data/array_sources.hpp"
#include "fluence/data/dataset.hpp"
#include "fluence/data/loaders.hpp"

namespace fluence {

// Filled in by DataConfig::from_deck; the defaults are the declared keys' (register_data_keys).
struct SyntheticConfig {
  long rows{};
  int numeric{};
  std::vector<int> categorical;
  int classes{};
  double signal{};
  double label_offset{};  // added to class 0's planted logit (shifts the base rate)
  double cat0_signal{};   // multiplies cat0's planted weights (a group tied to the label)
};

// Filled in by from_deck; the defaults are the declared keys' (register_data_keys).
struct DataConfig {
  std::string source;
  std::string path, test_path, label;  // paths as the file system sees them (Deck::file_path)
  std::vector<std::string> categorical;
  std::vector<std::string> features, drop;  // the attributes kept, or those dropped
  CsvOptions csv;  // delimiter and missing values; the columns are filled in when read
  ArrayNames arrays;
  double test_fraction{};
  /// data.numeric_scaling: "standardize" (every training row), "none", "per_client" or "public".
  std::string numeric_scaling;
  bool standardize{};  // numeric_scaling == "standardize"
  /// data.public_fraction: training rows held out from every client for the "public" statistics.
  double public_fraction{};
  long max_train_rows{}, max_test_rows{};
  int ink_levels{};           // idx only: levels of the "ink" attribute (0 = none)
  std::string hdf5_driver;    // hdf5, tff: how each rank reads its rows ("mpio", "posix")
  std::vector<long> classes;  // class indices kept, in their new order (empty = every class)
  SyntheticConfig synthetic;

  static DataConfig from_deck(const Deck& deck);
};

/// Declares the [data] keys DataConfig::from_deck reads: type, default, range and meaning of each
/// (inputs/README.md's tables).
void register_data_keys(DeckSchema& schema);

/// Rows from a planted multinomial logistic model: numeric attributes N(0,1), categorical uniform,
/// labels drawn from softmax(W x + b). Row r depends only on (seed, r), so any rank can make any
/// row.
Table generate_synthetic(const SyntheticConfig& config, std::uint64_t seed);

/// Rows `rows` (ascending) of generate_synthetic's table, as a partial table (Table::held) of
/// config.rows rows: the labels of those rows, or of every row with `every_label` (each row is
/// then generated, its values not kept).
Table generate_synthetic_rows(const SyntheticConfig& config, std::uint64_t seed,
                              const std::vector<std::int64_t>& rows, bool every_label);

/// The most classes a label may have: more is taken for a column that is not a class label.
constexpr int kMaxClasses = 1000;

/// Loads (or generates) the data, moves `client_column` (the categorical attribute of
/// partition.scheme = "column"; empty: none) out of the features into Table::client, keeps the
/// attributes data.features and data.drop choose, keeps the `classes` (before the test split and
/// the row limits, so test_fraction and max_train_rows/max_test_rows count kept rows), forms the
/// test set (file, IDX t10k, or a seeded random fraction) and applies the row limits. Identical on
/// every rank.
TrainTest load_data(const DataConfig& config, std::uint64_t seed,
                    const std::string& client_column = "");

/// Distributed ownership, first pass (identical on every rank): load_data's tables, except that for
/// the sources a rank can read selectively (hdf5, tff, npy, synthetic, and csv and arff, which are
/// streamed; not with data.ink_levels, nor with partition.scheme = "column" but for csv and arff)
/// they are partial tables holding no values yet, only the schema, labels and client ids, with
/// Table::source_row (for csv and arff: each row's line). The other sources (idx, leaf) are read
/// whole here.
TrainTest load_data_index(const DataConfig& config, std::uint64_t seed,
                          const std::string& client_column = "");

/// Distributed ownership, second pass (per rank): makes `data` (from load_data_index, same
/// config and seed) hold the values of `train_rows` and `test_rows` (ascending row ids of the
/// final tables) only: hdf5 and tff read those rows (hyperslabs of runs of rows; with
/// data.hdf5_driver = "mpio" collectively, so every rank of MPI_COMM_WORLD must call it), npy reads
/// the runs of those rows, csv and arff parse only their lines, synthetic data generate them, the
/// sources read whole drop the other rows' values.
void hold_rows(TrainTest& data, const DataConfig& config, std::uint64_t seed,
               const std::vector<std::int64_t>& train_rows,
               const std::vector<std::int64_t>& test_rows);

/// Appends to train and test a categorical attribute "ink" with `levels` categories "q0", "q1",
/// ...: the equal-frequency bucket of a row's mean numeric value (for IDX, its mean pixel
/// intensity). The thresholds are the training means' quantiles t_j = m_(floor(j n / levels)), j
/// = 1..levels-1 (m sorted ascending, n training rows), and a row's level is the number of
/// thresholds <= its mean, so with distinct means the training levels differ in size by at most
/// one; tied means share a level (the upper one at a threshold). The test rows use the training
/// thresholds.
void add_ink_attribute(TrainTest& data, int levels);

/// Why `classes` is not a valid data.classes value for data with `available` classes (nullopt:
/// not known yet, so the range is not checked); empty when it is valid. Valid: at least 2
/// distinct indices in [0, available).
std::string class_selection_problem(const std::vector<long>& classes, std::optional<int> available);

/// The rows whose label is one of `classes`, in their original order, relabelled by position in
/// `classes` (classes[i] becomes i), with class_names reordered to match. Keeps the schema when
/// no row is kept. An invalid selection (class_selection_problem) is an InputError.
Table keep_classes(const Table& table, const std::vector<long>& classes);

/// partition.scheme = "column": the categorical attribute `column`'s values become the rows'
/// clients (Table::client, named by its categories) in train and test, and the attribute leaves
/// the features, so that the model never sees which client a row came from.
void move_column_to_clients(TrainTest& data, const std::string& column);

/// Splits `all` into train and test with exactly round(fraction * rows) test rows chosen by a
/// seeded permutation; both keep the original row order.
TrainTest split_train_test(const Table& all, double test_fraction, std::uint64_t seed);

}  // namespace fluence
