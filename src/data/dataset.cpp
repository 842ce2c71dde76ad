#include "fluence/data/dataset.hpp"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "fluence/core/quantized_sum.hpp"

namespace fluence {
namespace {
// A held row's values with the column counts given: counting the attributes (numeric_count())
// costs as much as copying a row of an image, so loops over rows count them once.
const double* numeric_values(const Table& table, std::int64_t row, std::size_t columns) {
  return table.numeric.data() + table.position(row) * columns;
}
const std::int32_t* categorical_values(const Table& table, std::int64_t row, std::size_t columns) {
  return table.categorical.data() + table.position(row) * columns;
}
// Whether numeric column j is encoded column j for every j (image rows: no categorical columns
// before them), so that a row's numeric block is encoded by a loop the compiler vectorizes.
bool numeric_leading(const std::vector<int>& numeric_offset) {
  for (std::size_t j = 0; j < numeric_offset.size(); ++j)
    if (numeric_offset[j] != static_cast<int>(j)) return false;
  return true;
}
}  // namespace

int Table::numeric_count() const {
  return static_cast<int>(std::count_if(attributes.begin(), attributes.end(), [](const auto& a) {
    return a.kind == AttributeKind::numeric;
  }));
}

int Table::categorical_count() const {
  return static_cast<int>(attributes.size()) - numeric_count();
}

int Table::find_attribute(const std::string& name) const {
  for (std::size_t i = 0; i < attributes.size(); ++i)
    if (attributes[i].name == name) return static_cast<int>(i);
  return -1;
}

Table Table::empty_like() const {
  Table out;
  out.attributes = attributes;
  out.label_name = label_name;
  out.class_names = class_names;
  out.byte_denominator = byte_denominator;
  out.image_shape = image_shape;
  out.client_names = client_names;
  return out;
}

bool Table::holds(std::int64_t row) const {
  if (!partial) return row >= 0 && static_cast<std::size_t>(row) < rows;
  return std::binary_search(held.begin(), held.end(), row);
}

std::size_t Table::position(std::int64_t row) const {
  if (!partial) return static_cast<std::size_t>(row);
  const auto found = std::lower_bound(held.begin(), held.end(), row);
  if (found == held.end() || *found != row)
    throw std::logic_error("Table: row " + std::to_string(row) +
                           " is not held by this rank (distributed ownership)");
  return static_cast<std::size_t>(found - held.begin());
}

void Table::retain(const std::vector<std::int64_t>& keep) {
  const auto nn = static_cast<std::size_t>(numeric_count()),
             nc = static_cast<std::size_t>(categorical_count());
  std::vector<double> kept_numeric(keep.size() * nn);
  std::vector<std::int32_t> kept_categorical(keep.size() * nc);
  for (std::size_t i = 0; i < keep.size(); ++i) {
    std::copy_n(numeric_values(*this, keep[i], nn), nn, kept_numeric.begin() + i * nn);
    std::copy_n(categorical_values(*this, keep[i], nc), nc, kept_categorical.begin() + i * nc);
  }
  numeric = std::move(kept_numeric);
  categorical = std::move(kept_categorical);
  held = keep;
  partial = true;
}

Table Table::select_rows(const std::vector<std::int64_t>& rows) const {
  Table out = empty_like();
  const auto nn = static_cast<std::size_t>(numeric_count()),
             nc = static_cast<std::size_t>(categorical_count());
  out.rows = rows.size();
  out.partial = partial;
  out.label.resize(rows.size());
  if (!partial) {
    out.numeric.reserve(rows.size() * nn);
    out.categorical.reserve(rows.size() * nc);
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out.label[i] = label[static_cast<std::size_t>(rows[i])];
    if (partial && !holds(rows[i])) continue;
    if (partial) out.held.push_back(static_cast<std::int64_t>(i));
    const double* numeric_from = numeric_values(*this, rows[i], nn);
    const std::int32_t* categorical_from = categorical_values(*this, rows[i], nc);
    out.numeric.insert(out.numeric.end(), numeric_from, numeric_from + nn);
    out.categorical.insert(out.categorical.end(), categorical_from, categorical_from + nc);
  }
  if (!client.empty())
    for (const auto r : rows) out.client.push_back(client[static_cast<std::size_t>(r)]);
  if (!source_row.empty())
    for (const auto r : rows) out.source_row.push_back(source_row[static_cast<std::size_t>(r)]);
  return out;
}

void Table::append_row(const double* numeric_values, const std::int32_t* categorical_values,
                       std::int32_t label_value, std::int32_t client_value) {
  numeric.insert(numeric.end(), numeric_values, numeric_values + numeric_count());
  categorical.insert(categorical.end(), categorical_values,
                     categorical_values + categorical_count());
  label.push_back(label_value);
  if (has_clients()) client.push_back(client_value);
  ++rows;
}

namespace {
// Per numeric column, the exact sum over `rows` of (x - centre) (or its square), over every
// rank's rows with RowsHeld::across_ranks: two-limb quantized sums (core/quantized_sum.hpp) are
// order-independent, so the rank count cannot change a bit, and their rounding (2^-100 of the
// largest term or less for up to 2^20 rows) is far below the row-order sum's own error. The bound
// on the terms is the largest |term| over the rows; fl(x - c) is monotone in x and fl(d d) in |d|,
// so it is attained at a column's smallest or largest value: `lowest` and `highest` give it
// without a pass over the rows.
std::vector<double> exact_column_sums(const Table& table, const std::vector<std::int64_t>& rows,
                                      std::size_t total_rows, RowsHeld held,
                                      const std::vector<double>& centre, bool squared,
                                      const std::vector<double>& lowest,
                                      const std::vector<double>& highest) {
  const auto nn = static_cast<std::size_t>(table.numeric_count());
  std::vector<double> terms(nn), sums(nn, 0.0);
  const auto term = [&](double x, std::size_t j) {
    const double d = x - centre[j];
    return squared ? d * d : d;
  };
  const bool across = held == RowsHeld::across_ranks;
  double bound = 0.0;
  if (!rows.empty())
    for (std::size_t j = 0; j < nn; ++j)
      if (lowest[j] <= highest[j])  // a column of NaN adds no bound, as the row loop did not
        bound = std::max({bound, std::abs(term(lowest[j], j)), std::abs(term(highest[j], j))});
  if (across) MPI_Allreduce(MPI_IN_PLACE, &bound, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  QuantizedSum sum;
  sum.reset(nn, 0, bound, static_cast<std::int64_t>(total_rows), 2);
  for (const auto row : rows) {
    const double* x = numeric_values(table, row, nn);
    for (std::size_t j = 0; j < nn; ++j) terms[j] = term(x[j], j);
    sum.add(0, terms.data(), 1.0, nn);
  }
  if (across)
    sum.allreduce(sums);
  else
    sum.local_total(sums);
  return sums;
}

// Per numeric column, the smallest and the largest value of `rows`.
void column_range(const Table& table, const std::vector<std::int64_t>& rows,
                  std::vector<double>& lowest, std::vector<double>& highest) {
  const auto nn = static_cast<std::size_t>(table.numeric_count());
  lowest.assign(nn, std::numeric_limits<double>::infinity());
  highest.assign(nn, -std::numeric_limits<double>::infinity());
  for (const auto row : rows) {
    const double* x = numeric_values(table, row, nn);
    for (std::size_t j = 0; j < nn; ++j) {
      lowest[j] = std::min(lowest[j], x[j]);
      highest[j] = std::max(highest[j], x[j]);
    }
  }
}

// The row ids whose values `table` holds, ascending.
std::vector<std::int64_t> held_row_ids(const Table& table) {
  if (table.partial) return table.held;
  std::vector<std::int64_t> rows(table.rows);
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}
}  // namespace

NumericScaling NumericScaling::identity(const Table& schema) {
  const auto nn = static_cast<std::size_t>(schema.numeric_count());
  return {std::vector<double>(nn, 0.0), std::vector<double>(nn, 1.0)};
}

NumericScaling standardizing_scaling(const Table& table, const std::vector<std::int64_t>& rows,
                                     std::size_t total_rows, RowsHeld held) {
  NumericScaling scaling = NumericScaling::identity(table);
  if (total_rows == 0) return scaling;
  // Two passes (mean, then squared deviations): numerically stable.
  const auto n = static_cast<double>(total_rows);
  std::vector<double> lowest, highest;
  column_range(table, rows, lowest, highest);
  scaling.mean =
      exact_column_sums(table, rows, total_rows, held, scaling.mean, false, lowest, highest);
  for (auto& m : scaling.mean) m /= n;
  const std::vector<double> variance =
      exact_column_sums(table, rows, total_rows, held, scaling.mean, true, lowest, highest);
  for (std::size_t j = 0; j < variance.size(); ++j) {
    const double sd = std::sqrt(variance[j] / n);
    scaling.scale[j] = sd > 1e-12 ? 1.0 / sd : 1.0;  // constant columns (blank pixels) stay centred
  }
  return scaling;
}

Encoding::Encoding(const Table& train, bool standardize, bool bias)
    : Encoding(train,
               standardize
                   ? standardizing_scaling(train, held_row_ids(train), train.rows,
                                           train.partial ? RowsHeld::across_ranks : RowsHeld::local)
                   : NumericScaling::identity(train),
               bias) {}

Encoding::Encoding(const Table& schema, NumericScaling scaling, bool bias)
    : mean_(std::move(scaling.mean)), scale_(std::move(scaling.scale)) {
  int offset = 0;
  for (const auto& attribute : schema.attributes) {
    if (attribute.kind == AttributeKind::numeric) {
      numeric_offset_.push_back(offset);
      offset += 1;
    } else {
      categorical_offset_.push_back(offset);
      offset += static_cast<int>(attribute.categories.size());
    }
  }
  if (bias) bias_column_ = offset++;
  width_ = offset;
}

Encoding Encoding::with_scaling(NumericScaling scaling) const {
  Encoding out = *this;
  out.mean_ = std::move(scaling.mean);
  out.scale_ = std::move(scaling.scale);
  return out;
}

std::vector<std::string> Encoding::column_names(const Table& schema) const {
  std::vector<std::string> names(width_);
  for (const auto& attribute : schema.attributes) {
    if (attribute.kind == AttributeKind::numeric) {
      names[numeric_offset_[attribute.column]] = attribute.name;
    } else {
      for (std::size_t v = 0; v < attribute.categories.size(); ++v)
        names[categorical_offset_[attribute.column] + v] =
            attribute.name + "=" + attribute.categories[v];
    }
  }
  if (bias_column_ >= 0) names[bias_column_] = "(bias)";
  return names;
}

void Encoding::encode(const Table& table, const std::vector<std::int64_t>& rows,
                      const std::int32_t* categorical, double* out) const {
  const int nn = table.numeric_count(), nc = table.categorical_count();
  const auto numeric_columns = static_cast<std::size_t>(nn),
             categorical_columns = static_cast<std::size_t>(nc);
  // Image rows: the numeric columns come first, one encoded column each (a loop the compiler
  // vectorizes; the same arithmetic as the general one).
  const bool leading = numeric_leading(numeric_offset_);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double* numeric = numeric_values(table, rows[i], numeric_columns);
    double* row = out + i * width_;
    if (leading) {
      for (int j = 0; j < nn; ++j) row[j] = (numeric[j] - mean_[j]) * scale_[j];
      std::fill(row + nn, row + width_, 0.0);
    } else {
      std::fill(row, row + width_, 0.0);
      for (int j = 0; j < nn; ++j) row[numeric_offset_[j]] = (numeric[j] - mean_[j]) * scale_[j];
    }
    const std::int32_t* values = categorical
                                     ? categorical + i * nc
                                     : categorical_values(table, rows[i], categorical_columns);
    for (int j = 0; j < nc; ++j) row[categorical_offset_[j] + values[j]] = 1.0;
    if (bias_column_ >= 0) row[bias_column_] = 1.0;
  }
}

std::optional<ByteCoding> Encoding::byte_coding(const Table& schema) const {
  if (!(schema.byte_denominator > 0.0)) return std::nullopt;
  ByteCoding coding;
  coding.denominator = schema.byte_denominator;
  coding.offset.assign(width_, 0.0);
  coding.step.assign(width_, 1.0);
  for (std::size_t j = 0; j < mean_.size(); ++j) {
    coding.offset[numeric_offset_[j]] = -mean_[j] * scale_[j];
    coding.step[numeric_offset_[j]] = scale_[j] / schema.byte_denominator;
  }
  return coding;
}

bool Encoding::encode_bytes(const Table& table, const std::vector<std::int64_t>& rows,
                            const std::int32_t* categorical, const ByteCoding& coding,
                            std::uint8_t* out) const {
  const double d = coding.denominator;
  if (!(d > 0.0)) return false;
  const int nn = table.numeric_count(), nc = table.categorical_count();
  const auto numeric_columns = static_cast<std::size_t>(nn),
             categorical_columns = static_cast<std::size_t>(nc);
  std::array<double, 256> value_of{};  // k / d: the check below without a division per value
  for (int k = 0; k < 256; ++k) value_of[k] = k / d;
  const bool leading = numeric_leading(numeric_offset_);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double* numeric = numeric_values(table, rows[i], numeric_columns);
    std::uint8_t* row = out + i * width_;
    std::fill(row + (leading ? nn : 0), row + width_, 0);
    for (int j = 0; j < nn; ++j) {
      const double value = numeric[j];
      const double k = std::nearbyint(value * d);
      // The claim is checked, not trusted: the codes must reproduce the value exactly.
      if (!(k >= 0.0 && k <= 255.0)) return false;
      const auto code = static_cast<std::uint8_t>(k);
      if (value_of[code] != value) return false;
      row[leading ? j : numeric_offset_[j]] = code;
    }
    const std::int32_t* values = categorical
                                     ? categorical + i * nc
                                     : categorical_values(table, rows[i], categorical_columns);
    for (int j = 0; j < nc; ++j) row[categorical_offset_[j] + values[j]] = 1;
    if (bias_column_ >= 0) row[bias_column_] = 1;
  }
  return true;
}

void Encoding::encode_all(const Table& table, double* out) const {
  std::vector<std::int64_t> rows(table.rows);
  std::iota(rows.begin(), rows.end(), 0);
  encode(table, rows, nullptr, out);
}

}  // namespace fluence
