#include "fluence/data/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace fluence {

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

Table Table::select_rows(const std::vector<std::int64_t>& rows) const {
  Table out = empty_like();
  const int nn = numeric_count(), nc = categorical_count();
  out.rows = rows.size();
  out.numeric.resize(rows.size() * nn);
  out.categorical.resize(rows.size() * nc);
  out.label.resize(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto r = static_cast<std::size_t>(rows[i]);
    std::copy_n(numeric.begin() + r * nn, nn, out.numeric.begin() + i * nn);
    std::copy_n(categorical.begin() + r * nc, nc, out.categorical.begin() + i * nc);
    out.label[i] = label[r];
  }
  if (!client.empty())
    for (const auto r : rows) out.client.push_back(client[static_cast<std::size_t>(r)]);
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

Encoding::Encoding(const Table& train, bool standardize, bool bias) {
  const int nn = train.numeric_count();
  mean_.assign(nn, 0.0);
  scale_.assign(nn, 1.0);
  if (standardize && train.rows > 0) {
    // Two passes in row order: deterministic and numerically stable.
    for (std::size_t r = 0; r < train.rows; ++r)
      for (int j = 0; j < nn; ++j) mean_[j] += train.numeric[r * nn + j];
    for (auto& m : mean_) m /= static_cast<double>(train.rows);
    std::vector<double> variance(nn, 0.0);
    for (std::size_t r = 0; r < train.rows; ++r)
      for (int j = 0; j < nn; ++j) {
        const double d = train.numeric[r * nn + j] - mean_[j];
        variance[j] += d * d;
      }
    for (int j = 0; j < nn; ++j) {
      const double sd = std::sqrt(variance[j] / static_cast<double>(train.rows));
      scale_[j] = sd > 1e-12 ? 1.0 / sd : 1.0;  // constant columns (blank pixels) stay centred
    }
  }
  int offset = 0;
  for (const auto& attribute : train.attributes) {
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
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto r = static_cast<std::size_t>(rows[i]);
    double* row = out + i * width_;
    std::fill(row, row + width_, 0.0);
    for (int j = 0; j < nn; ++j)
      row[numeric_offset_[j]] = (table.numeric[r * nn + j] - mean_[j]) * scale_[j];
    const std::int32_t* values =
        categorical ? categorical + i * nc : table.categorical.data() + r * nc;
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
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto r = static_cast<std::size_t>(rows[i]);
    std::uint8_t* row = out + i * width_;
    std::fill(row, row + width_, 0);
    for (int j = 0; j < nn; ++j) {
      const double value = table.numeric[r * nn + j];
      const double k = std::nearbyint(value * d);
      // The claim is checked, not trusted: the codes must reproduce the value exactly.
      if (!(k >= 0.0 && k <= 255.0 && k / d == value)) return false;
      row[numeric_offset_[j]] = static_cast<std::uint8_t>(k);
    }
    const std::int32_t* values =
        categorical ? categorical + i * nc : table.categorical.data() + r * nc;
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
