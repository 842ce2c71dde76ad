#pragma once
// What the array sources (HDF5, TFF, NumPy, LEAF) read before it becomes a Table: features as a
// row-major block of numbers, integer labels and optional client ids, each with the file and the
// dataset it came from, so that a message can name both.
#include <cstdint>
#include <string>
#include <vector>

#include "fluence/data/dataset.hpp"

namespace fluence::arrays {

/// Rows of features: the first dimension of an array is the row, the others are flattened.
struct Features {
  std::string origin;                  // "file.h5, dataset /train/x": messages name it
  std::vector<std::size_t> row_shape;  // the dimensions after the first (an image: {h, w[, c]})
  std::size_t rows = 0;
  std::vector<double> values;  // rows x width(), row-major
  bool pixels = false;         // read from uint8: every value is k / 255
  /// Only some rows' values read (RowRequest): `values` holds the rows in `held` (ascending).
  bool partial = false;
  std::vector<std::int64_t> held;

  std::size_t width() const;
  /// Appends `more`'s rows (a TFF client's or a LEAF user's), which must have the same row shape.
  void append(const Features& more);
};

/// One integer or string per row: labels or client ids.
struct Ids {
  std::string origin;
  std::vector<std::int64_t> numbers;  // integer ids
  std::vector<std::string> names;     // string ids (numbers is then empty)
  /// `numbers` hold uint64 values, some at or above 2^63, as their bit patterns: they order and
  /// print as unsigned (an HDF5 uint64 dataset of hashed ids), so that none is clamped or merged.
  bool unsigned_numbers = false;
  std::size_t size() const { return names.empty() ? numbers.size() : names.size(); }
  /// Appends `more`'s ids (a TFF client's labels, the test split's), which must be of the same
  /// kind (integers or strings); integers beyond int64 and negative ones cannot be ordered
  /// together: an InputError naming both.
  void append(const Ids& more);
};

/// One split (training or test) as read.
struct Split {
  Features features;
  Ids labels;
  /// Each row's client, an index into TrainTest::train.client_names (empty: no clients).
  std::vector<std::int32_t> client;
};

/// What a split's arrays are called: the label's name and the feature columns' names (empty:
/// `prefix` and the column index), with where those names came from.
struct Naming {
  std::string label = "label";
  std::string prefix = "x";
  std::vector<std::string> columns;
  std::string columns_origin;
};

/// The tables of a training split and an optional test split (test.features.rows == 0: none).
/// Attributes are numeric, named as `naming` says; classes are the distinct
/// label values of both splits in increasing order ("0", "3", ... as decimal strings), as the CSV
/// reader orders integer labels; the client names are given. Every mismatch of shapes is an
/// InputError naming the arrays.
TrainTest make_tables(Split& train, Split& test, const Naming& naming,
                      std::vector<std::string> client_names);

/// Client indices for `ids` (one per row): the distinct ids in increasing order (numerically for
/// integers) become clients 0, 1, ...; their names go to `names`.
std::vector<std::int32_t> code_clients(const Ids& ids, std::vector<std::string>& names);

/// The part of `path` after its last '/' (a dataset's or an array's name).
std::string base_name(const std::string& path);

}  // namespace fluence::arrays
