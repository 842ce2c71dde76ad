#pragma once
// Raw tabular data as loaded: numeric and categorical attributes kept apart so that randomized
// response sees categorical values (and the label) while the model sees an encoded dense matrix.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fluence {

enum class AttributeKind { numeric, categorical };

struct Attribute {
  std::string name;
  AttributeKind kind = AttributeKind::numeric;
  std::vector<std::string> categories;  // categorical only: value index -> name
  int column = 0;                       // index into Table::numeric or Table::categorical
};

struct Table {
  std::vector<Attribute> attributes;  // features in source order (label excluded)
  std::string label_name = "label";
  std::vector<std::string> class_names;
  std::size_t rows = 0;
  std::vector<double> numeric;            // rows x numeric_count(), row-major
  std::vector<std::int32_t> categorical;  // rows x categorical_count(), row-major
  std::vector<std::int32_t> label;        // rows
  /// > 0 when every numeric value is k / byte_denominator for an integer k in [0, 255] (the IDX
  /// loader's pixels): encoded rows can then be stored as 8-bit codes (Encoding::encode_bytes).
  double byte_denominator = 0.0;
  /// Height, width and channels when every row is an image whose numeric attributes are its
  /// pixels in channels-last order (the IDX loader's {28, 28, 1}); zeros otherwise.
  std::array<int, 3> image_shape{0, 0, 0};
  /// The natural client of every row, an index into client_names, when the data come divided into
  /// clients (TFF groups, LEAF users, an HDF5 or NumPy client-id array, or the CSV/ARFF column of
  /// partition.scheme = "column"); empty otherwise. Kept apart from the attributes so that the id
  /// is never a feature of the model.
  std::vector<std::int32_t> client;
  std::vector<std::string> client_names;
  /// Distributed ownership (docs/architecture.md): a partial table holds the values (numeric,
  /// categorical) of the rows listed in `held` only (ascending global row ids, in that order),
  /// while `rows`, label and client still describe every row, so that row ids stay global.
  bool partial = false;
  std::vector<std::int64_t> held;
  /// The row of the source (file or generator) that each row came from, while load_data's
  /// index pass tracks it (empty otherwise).
  std::vector<std::int64_t> source_row;

  int numeric_count() const;
  int categorical_count() const;
  int classes() const { return static_cast<int>(class_names.size()); }
  bool has_clients() const { return !client_names.empty(); }
  /// Index into `attributes` of the attribute called `name`, or -1.
  int find_attribute(const std::string& name) const;
  /// How many rows' values the table holds.
  std::size_t held_rows() const { return partial ? held.size() : rows; }
  bool holds(std::int64_t row) const;
  /// Where row `row`'s values are in numeric/categorical (in rows): a std::logic_error when the
  /// table does not hold them (a rank reaching for another rank's rows is a bug).
  std::size_t position(std::int64_t row) const;
  const double* numeric_row(std::int64_t row) const {
    return numeric.data() + position(row) * static_cast<std::size_t>(numeric_count());
  }
  const std::int32_t* categorical_row(std::int64_t row) const {
    return categorical.data() + position(row) * static_cast<std::size_t>(categorical_count());
  }
  /// Keeps the values of `keep` (ascending row ids) only: the table becomes partial.
  void retain(const std::vector<std::int64_t>& keep);
  /// Keeps the listed rows, in the listed order (of a partial table, the values of those held).
  Table select_rows(const std::vector<std::int64_t>& rows) const;
  /// Appends a row's values (sizes must match the schema; `client_value` only when the table
  /// has clients).
  void append_row(const double* numeric_values, const std::int32_t* categorical_values,
                  std::int32_t label_value, std::int32_t client_value = -1);
  /// An empty table with the same schema.
  Table empty_like() const;
};

/// Training and test tables with one schema.
struct TrainTest {
  Table train;
  Table test;
};

/// Encoded columns as affine functions of 8-bit codes k: x_j = offset[j] + step[j] * k_j. A row
/// then takes an eighth of the memory traffic of its doubles, which is what repeated passes over
/// image data (local SGD epochs, the server's test evaluation every round) are bound by.
struct ByteCoding {
  double denominator = 0.0;          // numeric values are k / denominator
  std::vector<double> offset, step;  // per encoded column
  /// offset and step rounded to float, for local SGD in single precision (empty until
  /// with_single() fills them).
  std::vector<float> single_offset, single_step;
  ByteCoding& with_single() {
    single_offset.assign(offset.begin(), offset.end());
    single_step.assign(step.begin(), step.end());
    return *this;
  }
  /// The encoded doubles of `rows` rows of codes (row-major, offset.size() columns each):
  /// x = offset + step k.
  void decode(const std::uint8_t* codes, std::size_t rows, double* out) const {
    const std::size_t D = offset.size();
    for (std::size_t i = 0; i < rows * D; ++i)
      out[i] = offset[i % D] + step[i % D] * static_cast<double>(codes[i]);
  }
};

/// Per numeric column, the centre subtracted and the factor applied by an Encoding: the mean and
/// 1/std of some rows (standardizing_scaling), or 0 and 1 (the identity).
struct NumericScaling {
  std::vector<double> mean, scale;
  static NumericScaling identity(const Table& schema);
};

/// Whose rows a standardizing_scaling sums over: rows this rank holds, every one of them
/// (`local`; no communication), or rows spread over the ranks, each held by exactly one
/// (`across_ranks`; collective, every rank passes the rows it holds).
enum class RowsHeld { local, across_ranks };

/// The mean and 1/std (population) per numeric column of `rows` of `table`, `total_rows` rows in
/// all (over every rank with RowsHeld::across_ranks). A constant column (std <= 1e-12, a single
/// row among them) gets the factor 1: it is only centred. The sums are exact
/// (core/quantized_sum.hpp), so the same rows give the same bits for any rank count.
NumericScaling standardizing_scaling(const Table& table, const std::vector<std::int64_t>& rows,
                                     std::size_t total_rows, RowsHeld held);

/// Dense model inputs from a Table: scaled numeric columns, one-hot categorical columns, and a
/// constant 1 column for the bias. The scaling is given (data.numeric_scaling decides whose rows
/// fit it, docs/architecture.md "Input standardization"), or, with `standardize`, fitted on every
/// training row: on a whole table from its rows, on a partial one (collective) from the rows every
/// rank holds, each row held by one rank.
class Encoding {
 public:
  Encoding() = default;
  Encoding(const Table& train, bool standardize, bool bias);
  Encoding(const Table& schema, NumericScaling scaling, bool bias);
  /// This encoding's columns with another numeric scaling (a client's own, under "per_client").
  Encoding with_scaling(NumericScaling scaling) const;

  int width() const { return width_; }
  /// Names of the encoded columns ("age", "sex=female", "(bias)").
  std::vector<std::string> column_names(const Table& schema) const;
  /// Encodes the listed rows of `table`, with `categorical` replacing the table's categorical
  /// values when given (rows x categorical_count, aligned with `rows`), into `out` (rows x width).
  void encode(const Table& table, const std::vector<std::int64_t>& rows,
              const std::int32_t* categorical, double* out) const;
  void encode_all(const Table& table, double* out) const;
  /// The byte coding of this encoding's columns for tables like `schema`, when its numeric values
  /// are bytes (Table::byte_denominator): a numeric column is (k / d - mean) * scale, a one-hot or
  /// bias column is the code itself (0 or 1).
  std::optional<ByteCoding> byte_coding(const Table& schema) const;
  /// Like encode(), as codes of `coding` (from byte_coding(); rows x width); false, with `out`
  /// unspecified, when a numeric value is not k / coding.denominator after all.
  bool encode_bytes(const Table& table, const std::vector<std::int64_t>& rows,
                    const std::int32_t* categorical, const ByteCoding& coding,
                    std::uint8_t* out) const;

  /// First encoded column of the one-hot block of categorical column `column`.
  int categorical_offset(int column) const { return categorical_offset_[column]; }
  const std::vector<double>& means() const { return mean_; }
  const std::vector<double>& scales() const { return scale_; }

 private:
  std::vector<double> mean_, scale_;  // per numeric column
  std::vector<int> numeric_offset_, categorical_offset_;
  int bias_column_ = -1;
  int width_ = 0;
};

}  // namespace fluence
