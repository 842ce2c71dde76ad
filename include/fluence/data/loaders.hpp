#pragma once
// Readers for the data files users bring: CSV (header row), ARFF (Weka) and IDX (MNIST family).
// Every problem is an InputError naming the file, the line (where there is one) and the column.
// (HDF5, TFF, NumPy and LEAF: array_sources.hpp.)
#include <string>
#include <vector>

#include "fluence/data/dataset.hpp"

namespace fluence {

struct ColumnSelection {
  std::string label;                     // column name or 0-based index; empty: the last column
  std::vector<std::string> categorical;  // CSV only: columns read as categorical values
};

/// How a CSV file is written (its delimiter, what stands for a missing value) and which columns
/// are read. The dialect is filled in by DataConfig::from_deck (the defaults are the declared
/// keys', register_data_keys); the columns when the data are read.
struct CsvOptions {
  char delimiter{};
  /// A row with a missing value in a column that is read: refused (naming the file, line and
  /// column) or dropped.
  bool drop_missing{};
  std::vector<std::string> missing_values;
  std::vector<std::string> features;  // read only these feature columns (empty: all)
  std::vector<std::string> drop;      // do not read these columns
  /// A column read as categorical whatever `features` says: the partition column, which
  /// load_data moves out of the features.
  std::string client;
};

/// Reads a CSV file (plain or gzip-compressed) with a header row; with `test_path` non-empty also
/// the test file, which must have the same header. Fields are separated by the dialect's
/// delimiter; double quotes protect delimiters and blanks ("" is one quote). Categorical columns
/// and the label get categories from the union of both files (sorted: numerically when every value
/// is a number, else lexicographically); a label whose values are all numbers must hold integers.
/// Every other column read must be numeric. Returns an empty test table when there is no test
/// file.
TrainTest read_csv(const std::string& train_path, const std::string& test_path,
                   const ColumnSelection& columns, const CsvOptions& options);

/// Reads a Weka ARFF file (@relation/@attribute/@data; numeric/real/integer and nominal {..}
/// attributes; quoted names and values; % comments). Nominal attributes keep their declared value
/// order. A '?' in a nominal column becomes its own category "?"; in a numeric column it is an
/// error.
TrainTest read_arff(const std::string& train_path, const std::string& test_path,
                    const ColumnSelection& columns);

/// Reads the four IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-...), each
/// plain or gzip-compressed (.gz), from `directory`. Pixels become numeric attributes scaled to
/// [0, 1]; labels become classes "0".."9" (as many as occur in the label files' range).
TrainTest read_idx(const std::string& directory);

}  // namespace fluence
