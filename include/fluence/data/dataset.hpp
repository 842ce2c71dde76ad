#pragma once
// Raw tabular data as loaded: numeric and categorical attributes kept apart so that randomized
// response sees categorical values (and the label) while the model sees an encoded dense matrix.
#include <cstdint>
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

  int numeric_count() const;
  int categorical_count() const;
  int classes() const { return static_cast<int>(class_names.size()); }
  /// Index into `attributes` of the attribute called `name`, or -1.
  int find_attribute(const std::string& name) const;
  /// Keeps the listed rows, in the listed order.
  Table select_rows(const std::vector<std::int64_t>& rows) const;
  /// Appends a row's values (sizes must match the schema).
  void append_row(const double* numeric_values, const std::int32_t* categorical_values,
                  std::int32_t label_value);
  /// An empty table with the same schema.
  Table empty_like() const;
};

/// Training and test tables with one schema.
struct TrainTest {
  Table train;
  Table test;
};

/// Dense model inputs from a Table: standardized numeric columns, one-hot categorical columns, and
/// a constant 1 column for the bias. Fitted on training data only.
class Encoding {
 public:
  Encoding() = default;
  Encoding(const Table& train, bool standardize, bool bias);

  int width() const { return width_; }
  /// Names of the encoded columns ("age", "sex=female", "(bias)").
  std::vector<std::string> column_names(const Table& schema) const;
  /// Encodes the listed rows of `table`, with `categorical` replacing the table's categorical
  /// values when given (rows x categorical_count, aligned with `rows`), into `out` (rows x width).
  void encode(const Table& table, const std::vector<std::int64_t>& rows,
              const std::int32_t* categorical, double* out) const;
  void encode_all(const Table& table, double* out) const;

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
