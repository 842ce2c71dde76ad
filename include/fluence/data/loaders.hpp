#pragma once
// Readers for the data files users bring: CSV (header row), ARFF (Weka) and IDX (MNIST family).
// Every problem is an InputError naming the file, the line (where there is one) and the column.
// (HDF5, TFF, NumPy and LEAF: array_sources.hpp.)
#include <string>
#include <vector>

#include "fluence/data/array_sources.hpp"
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

/// Distributed ownership's first pass over CSV files (data/source.hpp, load_data_index): read_csv's
/// schema and checks (every row's fields, numbers included), with tables holding no values
/// (partial, Table::held empty): every row's label, its line in its file (Table::source_row) and,
/// with options.client, that column's codes as Table::client (the column stays an attribute).
/// The files are streamed: the memory is a line and at most 16 bytes a row.
TrainTest index_csv(const std::string& train_path, const std::string& test_path,
                    const ColumnSelection& columns, const CsvOptions& options);

/// The second pass: the values of the rows on `train_lines` and `test_lines` (ascending lines from
/// index_csv's Table::source_row) of the attributes `schema` has (index_csv's table after
/// load_data's changes: the attributes chosen, the client column moved out), as partial tables
/// holding those rows (Table::held: the lines). Only the wanted lines are split and parsed.
TrainTest read_csv_rows(const std::string& train_path, const std::string& test_path,
                        const CsvOptions& dialect, const Table& schema,
                        const std::vector<std::int64_t>& train_lines,
                        const std::vector<std::int64_t>& test_lines);

/// Reads a Weka ARFF file (@relation/@attribute/@data; numeric/real/integer and nominal {..}
/// attributes; quoted names and values; % comments). Nominal attributes keep their declared value
/// order. A '?' in a nominal column becomes its own category "?"; in a numeric column it is an
/// error.
TrainTest read_arff(const std::string& train_path, const std::string& test_path,
                    const ColumnSelection& columns);

/// Distributed ownership's first pass over ARFF files, as index_csv: read_arff's schema and
/// checks, every row's label and line (Table::source_row), no values; with `client_column` the
/// name of a nominal attribute (partition.scheme = "column"), its codes as Table::client.
TrainTest index_arff(const std::string& train_path, const std::string& test_path,
                     const ColumnSelection& columns, const std::string& client_column = "");

/// The second pass, as read_csv_rows: the values of the data rows on `train_lines` and
/// `test_lines` of the attributes `schema` has.
TrainTest read_arff_rows(const std::string& train_path, const std::string& test_path,
                         const Table& schema, const std::vector<std::int64_t>& train_lines,
                         const std::vector<std::int64_t>& test_lines);

/// Reads the four IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-...), each
/// plain or gzip-compressed (.gz), from `directory`. Pixels become numeric attributes scaled to
/// [0, 1]; labels become classes "0".."9" (as many as occur in the label files' range). With
/// `rows`, distributed ownership's passes: an empty request reads the labels and the images'
/// headers only (partial tables holding no values), another the pixels of the rows it lists
/// (partial tables holding those, Table::held).
TrainTest read_idx(const std::string& directory, const RowRequest* rows = nullptr);

}  // namespace fluence
