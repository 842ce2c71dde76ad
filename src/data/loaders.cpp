#include "fluence/data/loaders.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <libdeflate.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "built_in_sources.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/memory.hpp"

namespace fluence {
namespace {

// ---------------------------------------------------------------------------------------------
// Text helpers shared by the CSV and ARFF readers.

constexpr std::string_view kBlanks = " \t";

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(kBlanks);
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(kBlanks);
  return text.substr(first, last - first + 1);
}

std::string to_lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// A name or a value from a data file as a message quotes it: shortened, control bytes escaped.
std::string shown(std::string_view text) {
  return message_excerpt(text);
}

// A list of names (a header's columns, a nominal attribute's values) as a message shows it.
std::string shown_list(const std::vector<std::string>& names) {
  return message_excerpt(join(names), 4 * kExcerptBytes);
}

// Accepts exactly one finite decimal number and nothing else: a half-parsed "12abc" or a "nan" in
// the data would silently poison training, so both count as non-numbers.
bool parse_number(std::string_view text, double& value) {
  text = trim(text);
  if (text.size() > 1 && text.front() == '+' && text[1] != '-') text.remove_prefix(1);
  if (text.empty()) return false;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  return result.ec == std::errc() && result.ptr == text.data() + text.size() &&
         std::isfinite(value);
}

bool is_index(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](unsigned char c) { return std::isdigit(c) != 0; });
}

// A NUL byte has no place in a text data file (a binary or compressed file given as CSV or ARFF
// has many): refused with the line it is on, before it becomes part of a name or a value.
void refuse_nul_bytes(std::string_view text, const std::string& path, std::int64_t first_line = 1) {
  const auto nul = text.find('\0');
  if (nul == std::string_view::npos) return;
  const std::string_view before = text.substr(0, nul);
  const auto newline = before.rfind('\n');
  const std::size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
  const std::size_t line_end = std::min(text.find('\n', nul), text.size());
  throw InputError(fmt::format(
      "{}:{}: a NUL byte at character {} of the line '{}': a data file must be text (is it a "
      "binary or compressed file?)",
      path, first_line + std::count(before.begin(), before.end(), '\n'), nul - line_start + 1,
      shown(text.substr(line_start, line_end - line_start))));
}

// Streams a text file (plain, or gzip-compressed: zlib tells them apart by gzip's magic bytes,
// whatever the name) line by line (LF or CRLF), counting lines from 1 for error messages: the
// memory is one line and a read buffer, not the file (distributed ownership reads a CSV or ARFF
// file twice, keeping only some rows; issue 25). A NUL byte is refused with its line.
class TextLines {
 public:
  explicit TextLines(std::string path) : path_(std::move(path)) {
    std::error_code ignored;
    // A directory opens as a stream on Linux and only fails on reading; reject it with the same
    // words.
    if (std::filesystem::is_regular_file(path_, ignored)) file_ = gzopen(path_.c_str(), "rb");
    if (file_ == nullptr) throw InputError(fmt::format("cannot read data file '{}'", path_));
    gzbuffer(file_, 1 << 18);
  }
  ~TextLines() {
    if (file_ != nullptr) gzclose_r(file_);
  }
  TextLines(const TextLines&) = delete;
  TextLines& operator=(const TextLines&) = delete;

  // The next line, without its line break (and without a UTF-8 BOM at the file's start); valid
  // until the next call.
  bool next(std::string_view& line) {
    std::size_t end = buffer_.find('\n', start_);
    while (end == std::string::npos && fill()) end = buffer_.find('\n', start_);
    if (start_ >= buffer_.size() && end == std::string::npos) return false;
    if (end == std::string::npos) end = buffer_.size();
    line = std::string_view(buffer_).substr(start_, end - start_);
    start_ = end + 1;
    ++line_number_;
    if (std::memchr(line.data(), '\0', line.size()) != nullptr)
      refuse_nul_bytes(line, path_, line_number_);
    if (line_number_ == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return true;
  }

  std::int64_t line_number() const { return line_number_; }

 private:
  // Appends the next chunk of the file to the unread part of the buffer; false at its end.
  bool fill() {
    if (file_ == nullptr) return false;
    buffer_.erase(0, std::min(start_, buffer_.size()));
    start_ = 0;
    constexpr unsigned kChunk = 1u << 20;
    const std::size_t used = buffer_.size();
    buffer_.resize(used + kChunk);
    const int count = gzread(file_, buffer_.data() + used, kChunk);
    buffer_.resize(used + static_cast<std::size_t>(std::max(count, 0)));
    if (count > 0) return true;
    int error = Z_OK;
    const std::string reason = count < 0 ? gzerror(file_, &error) : "";
    const int closed = gzclose_r(file_);
    file_ = nullptr;
    if (closed != Z_OK || count < 0)
      throw InputError(fmt::format("cannot read data file '{}': {}", path_,
                                   reason.empty() ? "truncated or corrupt gzip data" : reason));
    return false;
  }

  std::string path_;
  gzFile file_ = nullptr;
  std::string buffer_;
  std::size_t start_ = 0;
  std::int64_t line_number_ = 0;
};

// The whole-text readers refused a NUL byte anywhere in a file before parsing any of it; streamed,
// a line is checked only when it is read. So that a file's first reported problem stays the same,
// a refusal first looks for a NUL byte in the files opened until then, in their order (only when
// there is a refusal: a good file is read as often as before).
template <class Read>
auto nul_bytes_first(const std::vector<std::string>& opened, Read&& read) {
  try {
    return read();
  } catch (const InputError&) {
    for (const auto& path : opened) {
      TextLines lines(path);
      std::string_view line;
      while (lines.next(line)) {
      }
    }
    throw;
  }
}

// Resolves ColumnSelection::label against the column names of `path`: a name first (a column may
// well be called "3"), then a 0-based index; empty means the last column.
std::size_t resolve_label_column(const std::vector<std::string>& names, const std::string& label,
                                 const std::string& path) {
  if (label.empty()) return names.size() - 1;
  const auto named = std::find(names.begin(), names.end(), label);
  if (named != names.end()) return static_cast<std::size_t>(named - names.begin());
  if (is_index(label)) {
    std::size_t index = 0;
    const auto result = std::from_chars(label.data(), label.data() + label.size(), index);
    if (result.ec == std::errc() && index < names.size()) return index;
    throw InputError(fmt::format("label column {} is out of range: {} has {} columns (0..{})",
                                 shown(label), path, names.size(), names.size() - 1));
  }
  throw InputError(fmt::format("label column '{}' is not in {}; its columns are: {}", shown(label),
                               path, shown_list(names)));
}

// ---------------------------------------------------------------------------------------------
// CSV

// Reads a double-quoted field starting at line[start] == '"'; "" stands for one quote. Returns the
// index just past the closing quote.
std::size_t read_quoted_csv_field(std::string_view line, std::size_t start, std::string& field,
                                  const std::string& path, std::int64_t line_number) {
  for (std::size_t i = start + 1; i < line.size(); ++i) {
    if (line[i] != '"') {
      field += line[i];
    } else if (i + 1 < line.size() && line[i + 1] == '"') {
      field += '"';
      ++i;
    } else {
      return i + 1;
    }
  }
  throw InputError(fmt::format(
      "{}:{}: a quoted field has no closing '\"' (fields cannot span lines)", path, line_number));
}

// Splits one CSV line into `fields` (reused between rows): the delimiter separates, double quotes
// protect delimiters and blanks, and blanks around unquoted fields are dropped (a tab is a blank
// unless it is the delimiter).
void split_csv_line(std::string_view line, char delimiter, const std::string& path,
                    std::int64_t line_number, std::vector<std::string>& fields) {
  fields.clear();
  const auto blank = [delimiter](char c) { return (c == ' ' || c == '\t') && c != delimiter; };
  std::size_t i = 0;
  while (true) {
    while (i < line.size() && blank(line[i])) ++i;
    std::string& field = fields.emplace_back();
    if (i < line.size() && line[i] == '"') {
      i = read_quoted_csv_field(line, i, field, path, line_number);
      while (i < line.size() && blank(line[i])) ++i;
      if (i < line.size() && line[i] != delimiter)
        throw InputError(fmt::format("{}:{}: field {} has text after its closing quote", path,
                                     line_number, fields.size()));
    } else {
      const auto end = std::min(line.find(delimiter, i), line.size());
      auto text = line.substr(i, end - i);
      while (!text.empty() && blank(text.back())) text.remove_suffix(1);
      field = text;
      i = end;
    }
    if (i >= line.size()) return;
    ++i;  // past the delimiter
  }
}

bool is_blank(std::string_view line) {
  return trim(line).empty();
}

// A CSV file with its header parsed. Rows are streamed from the file on demand, each pass reading
// it again (to collect categories, then to fill the table), so that neither the file's text nor
// every field as a string is ever held.
class CsvFile {
 public:
  CsvFile(std::string path, CsvOptions dialect)
      : path_(std::move(path)), dialect_(std::move(dialect)) {
    TextLines lines(path_);
    std::string_view line;
    while (lines.next(line) && is_blank(line)) {
    }
    if (is_blank(line))
      throw InputError(
          fmt::format("{}: the file is empty; a CSV data file starts with a header line", path_));
    header_line_ = lines.line_number();
    split_csv_line(line, dialect_.delimiter, path_, header_line_, header_);
    check_unique_names(header_line_);
    bool has_rows = false;
    while (!has_rows && lines.next(line)) has_rows = !is_blank(line);
    if (!has_rows)
      throw InputError(fmt::format("{}: the file has a header line but no data rows", path_));
  }

  const std::string& path() const { return path_; }
  const std::vector<std::string>& header() const { return header_; }

  const CsvOptions& dialect() const { return dialect_; }

  // Calls visit(line_number, fields) for every non-blank row; a row whose field count differs from
  // the header's is an error.
  template <class Visit>
  void for_each_row(Visit&& visit) const {
    TextLines lines(path_);
    std::string_view line;
    while (lines.line_number() < header_line_ && lines.next(line)) {
    }
    std::vector<std::string> fields;
    while (lines.next(line)) {
      if (is_blank(line)) continue;
      split_csv_line(line, dialect_.delimiter, path_, lines.line_number(), fields);
      if (fields.size() != header_.size())
        throw InputError(fmt::format(
            "{}:{}: row has {} fields, the header has {}{}", path_, lines.line_number(),
            fields.size(), header_.size(),
            header_.size() == 1
                ? fmt::format(" (is the delimiter '{}' right? data.delimiter)", dialect_.delimiter)
                : ""));
      visit(lines.line_number(), fields);
    }
  }

  // Like for_each_row, for the rows with no missing value in a column that is `read`: a row with
  // one is refused, naming the line and the column, or (data.missing = "drop") skipped. Returns
  // the number of rows skipped.
  template <class Visit>
  std::size_t for_each_complete_row(const std::vector<bool>& read, Visit&& visit) const {
    std::size_t skipped = 0;
    const auto& missing = dialect_.missing_values;
    for_each_row([&](std::int64_t line_number, const std::vector<std::string>& fields) {
      for (std::size_t c = 0; c < fields.size(); ++c) {
        if (!read[c] || std::find(missing.begin(), missing.end(), fields[c]) == missing.end())
          continue;
        if (dialect_.drop_missing) {
          ++skipped;
          return;
        }
        throw InputError(fmt::format(
            "{}:{}: column '{}' is missing a value ('{}'); data.missing = \"drop\" drops such "
            "rows (data.missing_values lists what counts as missing)",
            path_, line_number, shown(header_[c]), shown(fields[c])));
      }
      visit(line_number, fields);
    });
    return skipped;
  }

 private:
  void check_unique_names(std::int64_t line_number) const {
    std::set<std::string> seen;
    for (const auto& name : header_)
      if (!seen.insert(name).second)
        throw InputError(fmt::format("{}:{}: column '{}' appears twice in the header", path_,
                                     line_number, shown(name)));
  }

  std::string path_;
  CsvOptions dialect_;
  std::int64_t header_line_ = 0;  // the header's line number; the rows follow it
  std::vector<std::string> header_;
};

void check_same_header(const CsvFile& train, const CsvFile& test) {
  const auto& expected = train.header();
  const auto& found = test.header();
  if (found.size() != expected.size())
    throw InputError(fmt::format(
        "test file {} has {} columns but training file {} has {}; both need the same header",
        test.path(), found.size(), train.path(), expected.size()));
  for (std::size_t c = 0; c < expected.size(); ++c)
    if (found[c] != expected[c])
      throw InputError(fmt::format(
          "test file {} names column {} '{}' but training file {} names it '{}'; both need the "
          "same header",
          test.path(), c, shown(found[c]), train.path(), shown(expected[c])));
}

// Which header columns are read, which is the label and which are read as categorical values.
struct CsvLayout {
  std::size_t label = 0;
  std::size_t client = std::string::npos;  // the column of partition.scheme = "column", if any
  std::vector<bool> read;                  // per header column: data.features and data.drop choose
  std::vector<bool> categorical;           // per header column; true for the label too
};

std::size_t find_column(const CsvFile& file, const std::string& name, const char* key) {
  const auto& header = file.header();
  const auto found = std::find(header.begin(), header.end(), name);
  if (found == header.end())
    throw InputError(fmt::format("{} lists column '{}', which is not in {}; its columns are: {}",
                                 key, shown(name), file.path(), shown_list(header)));
  return static_cast<std::size_t>(found - header.begin());
}

// data.features keeps the listed columns, data.drop every other; the label and the client column
// are read either way.
std::vector<bool> columns_read(const CsvFile& file, const CsvOptions& columns, std::size_t label) {
  const auto& header = file.header();
  std::vector<bool> read(header.size(), columns.features.empty());
  for (const auto& name : columns.features) read[find_column(file, name, "data.features")] = true;
  for (const auto& name : columns.drop) {
    const std::size_t c = find_column(file, name, "data.drop");
    if (c == label || name == columns.client)
      throw InputError(
          fmt::format("data.drop lists column '{}', which is the {}", shown(name),
                      c == label ? "label (data.label)" : "client column (partition.column)"));
    read[c] = false;
  }
  read[label] = true;
  if (!columns.client.empty()) read[find_column(file, columns.client, "partition.column")] = true;
  return read;
}

CsvLayout plan_csv_layout(const CsvFile& file, const ColumnSelection& columns) {
  const auto& header = file.header();
  CsvLayout layout;
  layout.label = resolve_label_column(header, columns.label, file.path());
  layout.read = columns_read(file, file.dialect(), layout.label);
  layout.categorical.assign(header.size(), false);
  layout.categorical[layout.label] = true;
  for (const auto& name : columns.categorical)
    layout.categorical[find_column(file, name, "data.categorical")] = true;
  const std::string& client = file.dialect().client;
  if (!client.empty()) {
    layout.client = find_column(file, client, "partition.column");
    layout.categorical[layout.client] = true;
  }
  return layout;
}

// A label column of numbers that are not all integers is a measurement, not a class: taking each
// distinct value as a class would train hundreds of meaningless classes.
void check_label_values(const std::set<std::string>& values, const CsvFile& file,
                        std::size_t column) {
  std::size_t fractional = 0;
  std::string example;
  for (const auto& text : values) {
    double value = 0;
    if (!parse_number(text, value)) return;
    if (value != std::floor(value) && fractional++ == 0) example = text;
  }
  if (fractional > 0)
    throw InputError(fmt::format(
        "{}: the label column '{}' holds {} distinct numbers, {} of them not integers (e.g. '{}'): "
        "a class label must be a small set of integers or strings; is data.label the right "
        "column?",
        file.path(), shown(file.header()[column]), values.size(), fractional, shown(example)));
}

// Orders category names numerically when every one is a number (so "2" comes before "10"), else
// lexicographically; ties ("1" and "1.0") keep lexicographic order so the result is deterministic
// (a label column's ties are then one class: code_categories).
std::vector<std::string> sorted_categories(const std::set<std::string>& values) {
  std::vector<std::string> names(values.begin(), values.end());
  std::vector<std::pair<double, std::string>> numbered;
  for (const auto& name : names) {
    double value = 0;
    if (!parse_number(name, value)) return names;
    numbered.emplace_back(value, name);
  }
  std::stable_sort(numbered.begin(), numbered.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = numbered[i].second;
  return names;
}

// A categorical column's categories in sorted_categories' order, each value's code in `codes`.
// For the label column (`merge_equal_numbers`) numerically equal numbers are one class ("1", "1.0"
// and "1e0" were three), named by the shortest of them, the lexicographically first among as short
// ("1"; "01" and "1" give "1"): as LEAF's JSON labels, which are numbers, and as the documented
// numeric order of numeric labels reads them.
std::vector<std::string> code_categories(const std::set<std::string>& values,
                                         bool merge_equal_numbers,
                                         std::unordered_map<std::string, std::int32_t>& codes) {
  const std::vector<std::string> sorted = sorted_categories(values);
  std::vector<double> numbers(sorted.size());
  bool numeric = merge_equal_numbers;
  for (std::size_t k = 0; numeric && k < sorted.size(); ++k)
    numeric = parse_number(sorted[k], numbers[k]);
  std::vector<std::string> categories;
  for (std::size_t k = 0; k < sorted.size(); ++k) {
    // sorted_categories put numerically equal numbers next to each other, in lexicographic order.
    if (numeric && k > 0 && numbers[k] == numbers[k - 1]) {
      if (sorted[k].size() < categories.back().size()) categories.back() = sorted[k];
    } else {
      categories.push_back(sorted[k]);
    }
    codes.emplace(sorted[k], static_cast<std::int32_t>(categories.size() - 1));
  }
  return categories;
}

// The shared schema of the training and test tables, with each categorical column's value lookup.
struct CsvSchema {
  Table layout;  // attributes, label name and class names; no rows
  std::vector<std::unordered_map<std::string, std::int32_t>> codes;  // per header column
};

// Ids of a column's values in the order they first appear, for the first pass of distributed
// ownership: a row's label (or client) is known as an id while the pass reads, and becomes its code
// once every value, hence the sorted order, is known.
class FirstSeen {
 public:
  std::int32_t id(const std::string& value) {
    const auto [found, added] = ids_.emplace(value, static_cast<std::int32_t>(values_.size()));
    if (added) values_.push_back(value);
    return found->second;
  }
  // Each id's code in `codes` (the column's final value lookup).
  std::vector<std::int32_t> codes(
      const std::unordered_map<std::string, std::int32_t>& codes) const {
    std::vector<std::int32_t> out;
    for (const auto& value : values_) out.push_back(codes.at(value));
    return out;
  }

 private:
  std::unordered_map<std::string, std::int32_t> ids_;
  std::vector<std::string> values_;
};

// What the first pass keeps of one file's rows (16 bytes a row at most): each kept row's line,
// its label's and client column's FirstSeen ids, and the first field that is not a number (thrown
// where fill_csv_table would have thrown it, so that the reported problem stays the same).
struct CsvRowIndex {
  std::vector<std::int64_t> lines;
  std::vector<std::int32_t> label, client;
  std::string number_error;
};

struct CsvFiles {
  std::vector<const CsvFile*> files;
  std::size_t skipped = 0;  // rows dropped for a missing value (counted on the first pass)
  /// With `index` (one per file), the first pass also indexes the rows (CsvRowIndex).
  std::vector<CsvRowIndex>* index = nullptr;
  FirstSeen labels, clients;
};

std::string not_a_number(const std::string& text, const CsvFile& file, std::int64_t line_number,
                         std::size_t column) {
  return fmt::format(
      "{}:{}: column '{}': '{}' is not a number; list the column in data.categorical to treat it "
      "as categorical",
      file.path(), line_number, shown(file.header()[column]), shown(text));
}

void index_row(CsvFiles& files, CsvRowIndex& index, const CsvLayout& layout, const CsvFile& file,
               std::int64_t line_number, const std::vector<std::string>& fields) {
  index.lines.push_back(line_number);
  index.label.push_back(files.labels.id(fields[layout.label]));
  if (layout.client != std::string::npos)
    index.client.push_back(files.clients.id(fields[layout.client]));
  if (!index.number_error.empty()) return;
  double value = 0;
  for (std::size_t c = 0; c < fields.size(); ++c)
    if (layout.read[c] && !layout.categorical[c] && !parse_number(fields[c], value)) {
      index.number_error = not_a_number(fields[c], file, line_number, c);
      return;
    }
}

std::vector<std::set<std::string>> collect_values(CsvFiles& files, const CsvLayout& layout) {
  std::vector<std::set<std::string>> values(layout.categorical.size());
  for (std::size_t f = 0; f < files.files.size(); ++f) {
    const CsvFile& file = *files.files[f];
    files.skipped += file.for_each_complete_row(
        layout.read, [&](std::int64_t line_number, const std::vector<std::string>& fields) {
          for (std::size_t c = 0; c < fields.size(); ++c)
            if (layout.categorical[c] && layout.read[c]) values[c].insert(fields[c]);
          if (files.index) index_row(files, (*files.index)[f], layout, file, line_number, fields);
        });
  }
  return values;
}

CsvSchema build_csv_schema(CsvFiles& files, const CsvLayout& layout) {
  const auto values = collect_values(files, layout);
  const auto& header = files.files.front()->header();
  check_label_values(values[layout.label], *files.files.front(), layout.label);
  CsvSchema schema;
  schema.codes.resize(header.size());
  int numeric_columns = 0, categorical_columns = 0;
  for (std::size_t c = 0; c < header.size(); ++c) {
    if (!layout.read[c]) continue;
    std::vector<std::string> categories;
    if (layout.categorical[c])
      categories = code_categories(values[c], c == layout.label, schema.codes[c]);
    if (c == layout.label) {
      schema.layout.label_name = header[c];
      schema.layout.class_names = std::move(categories);
    } else if (layout.categorical[c]) {
      schema.layout.attributes.push_back(
          {header[c], AttributeKind::categorical, std::move(categories), categorical_columns++});
    } else {
      schema.layout.attributes.push_back(
          {header[c], AttributeKind::numeric, {}, numeric_columns++});
    }
  }
  return schema;
}

double parse_csv_number(const std::string& text, const CsvFile& file, std::int64_t line_number,
                        std::size_t column) {
  double value = 0;
  if (!parse_number(text, value)) throw InputError(not_a_number(text, file, line_number, column));
  return value;
}

std::string every_row_missing(const CsvFile& file) {
  return fmt::format("{}: every data row has a missing value (data.missing = \"drop\" left none)",
                     file.path());
}

// Rows are appended in source column order, which is also the order of the numeric and
// categorical column indices, so plain push_back yields the row-major layout.
Table fill_csv_table(const CsvFile& file, const CsvLayout& layout, const CsvSchema& schema) {
  Table table = schema.layout;
  file.for_each_complete_row(
      layout.read, [&](std::int64_t line_number, const std::vector<std::string>& fields) {
        for (std::size_t c = 0; c < fields.size(); ++c) {
          if (!layout.read[c]) continue;
          if (c == layout.label)
            table.label.push_back(schema.codes[c].at(fields[c]));
          else if (layout.categorical[c])
            table.categorical.push_back(schema.codes[c].at(fields[c]));
          else
            table.numeric.push_back(parse_csv_number(fields[c], file, line_number, c));
        }
        ++table.rows;
      });
  if (table.rows == 0) throw InputError(every_row_missing(file));
  return table;
}

// The first pass's table of one file: every row's label (and client column value, as
// Table::client), the line of each row (Table::source_row), no values.
Table index_csv_table(const CsvFile& file, const CsvLayout& layout, const CsvSchema& schema,
                      CsvFiles& files, CsvRowIndex& index) {
  if (!index.number_error.empty()) throw InputError(index.number_error);
  if (index.lines.empty()) throw InputError(every_row_missing(file));
  Table table = schema.layout;
  table.rows = index.lines.size();
  table.partial = true;
  table.source_row = std::move(index.lines);
  const auto label_codes = files.labels.codes(schema.codes[layout.label]);
  for (const std::int32_t id : index.label) table.label.push_back(label_codes[id]);
  if (layout.client != std::string::npos) {
    const auto client_codes = files.clients.codes(schema.codes[layout.client]);
    for (const std::int32_t id : index.client) table.client.push_back(client_codes[id]);
  }
  return table;
}

// ---------------------------------------------------------------------------------------------
// ARFF

struct ArffAttribute {
  std::string name;
  bool nominal = false;
  std::vector<std::string> values;  // nominal only, in declared order
};

bool operator==(const ArffAttribute& a, const ArffAttribute& b) {
  return a.name == b.name && a.nominal == b.nominal && a.values == b.values;
}

std::string describe(const ArffAttribute& attribute) {
  return attribute.nominal
             ? fmt::format("'{}' {{{}}}", shown(attribute.name), shown_list(attribute.values))
             : fmt::format("'{}' numeric", shown(attribute.name));
}

// Reads a token quoted with ' or " starting at text[start]; a backslash takes the next character
// literally, as Weka writes embedded quotes. Returns the index just past the closing quote.
std::size_t read_quoted_arff_token(std::string_view text, std::size_t start, std::string& token,
                                   const std::string& path, std::int64_t line_number) {
  const char quote = text[start];
  for (std::size_t i = start + 1; i < text.size(); ++i) {
    if (text[i] == quote) return i + 1;
    if (text[i] == '\\' && i + 1 < text.size()) ++i;
    token += text[i];
  }
  throw InputError(
      fmt::format("{}:{}: a value quoted with {} has no closing quote", path, line_number, quote));
}

// Splits comma-separated ARFF values (a data row, or the inside of a nominal {..} declaration):
// ' and " quote, blanks around unquoted values are dropped and an unquoted % starts a comment.
std::vector<std::string> split_arff_values(std::string_view text, const std::string& path,
                                           std::int64_t line_number) {
  std::vector<std::string> values;
  std::size_t i = 0;
  while (true) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    std::string& value = values.emplace_back();
    if (i < text.size() && (text[i] == '\'' || text[i] == '"')) {
      i = read_quoted_arff_token(text, i, value, path, line_number);
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
      if (i < text.size() && text[i] != ',' && text[i] != '%')
        throw InputError(fmt::format("{}:{}: value {} has text after its closing quote", path,
                                     line_number, values.size()));
    } else {
      const auto end = std::min(text.find_first_of(",%", i), text.size());
      value = trim(text.substr(i, end - i));
      i = end;
    }
    if (i >= text.size() || text[i] == '%') return values;
    ++i;  // past the comma
  }
}

std::vector<std::string> parse_nominal_values(std::string_view type, const std::string& name,
                                              const std::string& path, std::int64_t line_number) {
  const auto close = type.rfind('}');
  if (close == std::string_view::npos)
    throw InputError(fmt::format("{}:{}: attribute '{}': the value list has no closing '}}'", path,
                                 line_number, shown(name)));
  auto values = split_arff_values(type.substr(1, close - 1), path, line_number);
  std::set<std::string> seen;
  for (const auto& value : values) {
    if (value.empty())
      throw InputError(fmt::format("{}:{}: attribute '{}': the value list has an empty value", path,
                                   line_number, shown(name)));
    if (!seen.insert(value).second)
      throw InputError(fmt::format("{}:{}: attribute '{}': value '{}' is declared twice", path,
                                   line_number, shown(name), shown(value)));
  }
  return values;
}

// Parses what follows "@attribute": a name (quoted or up to the first blank or '{') and a type.
ArffAttribute parse_arff_attribute(std::string_view rest, const std::string& path,
                                   std::int64_t line_number) {
  rest = trim(rest);
  ArffAttribute attribute;
  std::size_t end = 0;
  if (!rest.empty() && (rest[0] == '\'' || rest[0] == '"')) {
    end = read_quoted_arff_token(rest, 0, attribute.name, path, line_number);
  } else {
    end = std::min(rest.find_first_of(" \t{"), rest.size());
    attribute.name = rest.substr(0, end);
  }
  const auto type = trim(rest.substr(end));
  if (attribute.name.empty() || type.empty())
    throw InputError(fmt::format("{}:{}: @attribute needs a name and a type", path, line_number));
  if (type.front() == '{') {
    attribute.nominal = true;
    attribute.values = parse_nominal_values(type, attribute.name, path, line_number);
    return attribute;
  }
  const std::string keyword = to_lower(type.substr(0, type.find_first_of(kBlanks)));
  if (keyword == "numeric" || keyword == "real" || keyword == "integer") return attribute;
  if (keyword == "string" || keyword == "date" || keyword == "relational")
    throw InputError(fmt::format(
        "{}:{}: attribute '{}' has type {}, which is not supported; use numeric, real, integer or "
        "a nominal {{a, b, ...}} list",
        path, line_number, shown(attribute.name), shown(keyword)));
  throw InputError(fmt::format("{}:{}: attribute '{}' has unknown type '{}'", path, line_number,
                               shown(attribute.name), shown(type)));
}

// Reads the header up to and including "@data", leaving the cursor on the data section.
std::vector<ArffAttribute> read_arff_header(TextLines& cursor, const std::string& path) {
  std::vector<ArffAttribute> attributes;
  std::set<std::string> names;
  std::string_view line;
  while (cursor.next(line)) {
    line = trim(line);
    if (line.empty() || line.front() == '%') continue;
    const auto keyword_end = std::min(line.find_first_of(kBlanks), line.size());
    const std::string keyword = to_lower(line.substr(0, keyword_end));
    if (keyword == "@relation") continue;
    if (keyword == "@data") {
      if (attributes.empty())
        throw InputError(
            fmt::format("{}:{}: @data comes before any @attribute", path, cursor.line_number()));
      return attributes;
    }
    if (keyword != "@attribute")
      throw InputError(fmt::format("{}:{}: expected @relation, @attribute or @data, found '{}'",
                                   path, cursor.line_number(), shown(line)));
    attributes.push_back(
        parse_arff_attribute(line.substr(keyword_end), path, cursor.line_number()));
    if (!names.insert(attributes.back().name).second)
      throw InputError(fmt::format("{}:{}: attribute '{}' is declared twice", path,
                                   cursor.line_number(), shown(attributes.back().name)));
  }
  throw InputError(fmt::format("{}: no @data line; is this an ARFF file?", path));
}

void check_same_attributes(const std::vector<ArffAttribute>& train,
                           const std::vector<ArffAttribute>& test, const std::string& train_path,
                           const std::string& test_path) {
  if (test.size() != train.size())
    throw InputError(fmt::format(
        "test file {} declares {} attributes but training file {} declares {}; both need the "
        "same @attribute lines",
        test_path, test.size(), train_path, train.size()));
  for (std::size_t c = 0; c < train.size(); ++c)
    if (!(test[c] == train[c]))
      throw InputError(fmt::format(
          "test file {} declares attribute {} as {} but training file {} declares {}; both need "
          "the same @attribute lines",
          test_path, c, describe(test[c]), train_path, describe(train[c])));
}

// The schema shared by the training and test tables. Categories may still grow while rows are read:
// a '?' adds a "?" category to its column where it first occurs.
class ArffSchema {
 public:
  ArffSchema(std::vector<ArffAttribute> declared, const ColumnSelection& columns,
             const std::string& path)
      : declared_(std::move(declared)), codes_(declared_.size()) {
    choose_label(columns, path);
    build_layout();
  }

  const Table& layout() const { return layout_; }
  const std::vector<ArffAttribute>& declared() const { return declared_; }

  // The declared column called `name` when it is a nominal attribute other than the label (the
  // clients of partition.scheme = "column"); npos otherwise (load_data then says what is wrong).
  std::size_t nominal_column(const std::string& name) const {
    for (std::size_t c = 0; c < declared_.size(); ++c)
      if (declared_[c].name == name && declared_[c].nominal && c != label_) return c;
    return std::string::npos;
  }

  // Checks one data row's values as append_row reads them, and appends its label, its line
  // (Table::source_row) and its value of `client` (a nominal_column, or npos) to `table`.
  void index_row(const std::vector<std::string>& values, Table& table, std::size_t client,
                 const std::string& path, std::int64_t line_number) {
    for (std::size_t c = 0; c < values.size(); ++c) {
      if (!declared_[c].nominal) {
        number(c, values[c], path, line_number);
        continue;
      }
      const std::int32_t value = code(c, values[c], path, line_number);
      if (c == label_) table.label.push_back(value);
      if (c == client) table.client.push_back(value);
    }
    table.source_row.push_back(line_number);
    ++table.rows;
  }

  // Appends one data row's values to `table`.
  void append_row(const std::vector<std::string>& values, Table& table, const std::string& path,
                  std::int64_t line_number) {
    for (std::size_t c = 0; c < values.size(); ++c) {
      if (c == label_)
        table.label.push_back(code(c, values[c], path, line_number));
      else if (declared_[c].nominal)
        table.categorical.push_back(code(c, values[c], path, line_number));
      else
        table.numeric.push_back(number(c, values[c], path, line_number));
    }
    ++table.rows;
  }

 private:
  void choose_label(const ColumnSelection& columns, const std::string& path) {
    std::vector<std::string> names;
    for (const auto& attribute : declared_) names.push_back(attribute.name);
    label_ = resolve_label_column(names, columns.label, path);
    if (!declared_[label_].nominal)
      throw InputError(fmt::format(
          "label attribute '{}' in {} is numeric; the label must be a nominal {{a, b, ...}} "
          "attribute",
          shown(names[label_]), path));
  }

  void build_layout() {
    int numeric_columns = 0, categorical_columns = 0;
    attribute_of_column_.assign(declared_.size(), -1);
    for (std::size_t c = 0; c < declared_.size(); ++c) {
      const auto& source = declared_[c];
      for (std::size_t k = 0; k < source.values.size(); ++k)
        codes_[c].emplace(source.values[k], static_cast<std::int32_t>(k));
      if (c == label_) {
        layout_.label_name = source.name;
        layout_.class_names = source.values;
        continue;
      }
      attribute_of_column_[c] = static_cast<int>(layout_.attributes.size());
      if (source.nominal)
        layout_.attributes.push_back(
            {source.name, AttributeKind::categorical, source.values, categorical_columns++});
      else
        layout_.attributes.push_back({source.name, AttributeKind::numeric, {}, numeric_columns++});
    }
  }

  std::vector<std::string>& categories(std::size_t column) {
    return column == label_ ? layout_.class_names
                            : layout_.attributes[attribute_of_column_[column]].categories;
  }

  std::int32_t code(std::size_t column, const std::string& value, const std::string& path,
                    std::int64_t line_number) {
    const auto found = codes_[column].find(value);
    if (found != codes_[column].end()) return found->second;
    if (value != "?")
      throw InputError(fmt::format(
          "{}:{}: column '{}': '{}' is not one of the declared values {{{}}}", path, line_number,
          shown(declared_[column].name), shown(value), shown_list(declared_[column].values)));
    auto& names = categories(column);
    names.push_back("?");
    const auto missing = static_cast<std::int32_t>(names.size() - 1);
    codes_[column].emplace("?", missing);
    return missing;
  }

  double number(std::size_t column, const std::string& value, const std::string& path,
                std::int64_t line_number) const {
    double result = 0;
    if (parse_number(value, result)) return result;
    if (value == "?")
      throw InputError(fmt::format(
          "{}:{}: column '{}': missing value '?' in a numeric attribute is not supported", path,
          line_number, shown(declared_[column].name)));
    throw InputError(fmt::format("{}:{}: column '{}': '{}' is not a number", path, line_number,
                                 shown(declared_[column].name), shown(value)));
  }

  std::vector<ArffAttribute> declared_;
  std::size_t label_ = 0;
  Table layout_;
  std::vector<int> attribute_of_column_;                              // -1 for the label
  std::vector<std::unordered_map<std::string, std::int32_t>> codes_;  // per nominal column
};

// Calls visit(line_number, values) for every data row after the header; a sparse row or one whose
// value count differs from the header's is an error.
template <class Visit>
void for_each_arff_row(TextLines& cursor, const std::string& path, std::size_t expected,
                       Visit&& visit) {
  std::string_view line;
  while (cursor.next(line)) {
    line = trim(line);
    if (line.empty() || line.front() == '%') continue;
    if (line.front() == '{')
      throw InputError(fmt::format(
          "{}:{}: sparse ARFF rows ({{index value, ...}}) are not supported; write the data dense",
          path, cursor.line_number()));
    const auto values = split_arff_values(line, path, cursor.line_number());
    if (values.size() != expected)
      throw InputError(fmt::format("{}:{}: row has {} values, the header declares {} attributes",
                                   path, cursor.line_number(), values.size(), expected));
    visit(cursor.line_number(), values);
  }
}

// The rows of one file; with `index`, as index_arff keeps them (no values), with the clients of
// the declared column `client` (or none: npos).
void read_arff_rows(TextLines& cursor, const std::string& path, ArffSchema& schema, Table& table,
                    bool index = false, std::size_t client = std::string::npos) {
  for_each_arff_row(cursor, path, schema.declared().size(),
                    [&](std::int64_t line_number, const std::vector<std::string>& values) {
                      if (index)
                        schema.index_row(values, table, client, path, line_number);
                      else
                        schema.append_row(values, table, path, line_number);
                    });
  if (table.rows == 0) throw InputError(fmt::format("{}: the @data section has no rows", path));
  table.partial = index;
}

namespace {

// What both text formats' second pass builds: a partial table of `schema`'s attributes holding the
// rows on `lines`, with each categorical attribute's levels coded as the first pass coded them. The
// lines were checked by the first pass, so a line or a level that reads differently now means the
// file changed in between (changed()).
class SecondPassRows {
 public:
  SecondPassRows(std::string path, const Table& schema, const std::vector<std::int64_t>& lines)
      : path_(std::move(path)), table_(schema.empty_like()) {
    table_.partial = true;
    table_.held = lines;
    for (const auto& attribute : schema.attributes) {
      auto& lookup = codes_.emplace_back();
      for (std::size_t k = 0; k < attribute.categories.size(); ++k)
        lookup.emplace(attribute.categories[k], static_cast<std::int32_t>(k));
    }
  }

  InputError changed(std::int64_t line_number) const {
    return InputError(fmt::format(
        "{}:{}: the line differs from its first reading (did the file change while it was read?)",
        path_, line_number));
  }
  void add_numeric(double value) { table_.numeric.push_back(value); }
  void add_category(std::size_t attribute, const std::string& value, std::int64_t line_number) {
    const auto code = codes_[attribute].find(value);
    if (code == codes_[attribute].end()) throw changed(line_number);
    table_.categorical.push_back(code->second);
  }
  // The table, once every line was met (`next_wanted` is past the last one).
  Table finish(std::vector<std::int64_t>::const_iterator next_wanted) {
    if (next_wanted != table_.held.end()) throw changed(*next_wanted);
    return std::move(table_);
  }
  const std::vector<std::int64_t>& lines() const { return table_.held; }

 private:
  std::string path_;
  Table table_;
  std::vector<std::unordered_map<std::string, std::int32_t>> codes_;
};

}  // namespace

// The values of the data rows on `lines` (ascending) of the attributes of `schema`, each from the
// declared column of its name; the lines were checked by the first pass, so a line that no longer
// reads as then means the file changed in between.
Table read_arff_lines(const std::string& path, const Table& schema,
                      const std::vector<std::int64_t>& lines) {
  TextLines cursor(path);
  const auto declared = read_arff_header(cursor, path);
  SecondPassRows rows(path, schema, lines);
  std::vector<std::size_t> column;
  for (const auto& attribute : schema.attributes) {
    const auto found = std::find_if(declared.begin(), declared.end(),
                                    [&](const auto& d) { return d.name == attribute.name; });
    if (found == declared.end())
      throw InputError(
          fmt::format("{}: attribute '{}' is no longer declared (did the file "
                      "change while it was read?)",
                      path, shown(attribute.name)));
    column.push_back(static_cast<std::size_t>(found - declared.begin()));
  }
  auto wanted = rows.lines().begin();
  for_each_arff_row(cursor, path, declared.size(),
                    [&](std::int64_t line_number, const std::vector<std::string>& values) {
                      if (wanted == rows.lines().end() || line_number != *wanted) return;
                      ++wanted;
                      for (std::size_t a = 0; a < column.size(); ++a) {
                        const std::string& value = values[column[a]];
                        double number = 0;
                        if (schema.attributes[a].kind != AttributeKind::numeric)
                          rows.add_category(a, value, line_number);
                        else if (parse_number(value, number))
                          rows.add_numeric(number);
                        else
                          throw rows.changed(line_number);
                      }
                    });
  return rows.finish(wanted);
}

// ---------------------------------------------------------------------------------------------
// IDX

// Picks "name" or "name.gz" in `directory`; gzread passes plain files through unchanged, so both
// take the same path afterwards.
std::string find_idx_file(const std::string& directory, const std::string& name) {
  const auto plain = (std::filesystem::path(directory) / name).string();
  std::error_code ignored;
  if (std::filesystem::is_regular_file(plain, ignored)) return plain;
  if (std::filesystem::is_regular_file(plain + ".gz", ignored)) return plain + ".gz";
  throw InputError(fmt::format("cannot read data file '{}' (nor '{}.gz')", plain, plain));
}

std::uint32_t read_big_endian(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

// The bytes of a whole file, mapped read-only (the page cache's pages: nothing copied, no fresh
// memory for the compressed images).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) throw InputError(fmt::format("cannot read data file '{}'", path));
    struct stat status {};
    if (::fstat(descriptor, &status) == 0 && status.st_size > 0) {
      size_ = static_cast<std::size_t>(status.st_size);
      void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, descriptor, 0);
      if (mapped != MAP_FAILED) {
        data_ = static_cast<const unsigned char*>(mapped);
        ::madvise(mapped, size_, MADV_SEQUENTIAL);
      }
    }
    ::close(descriptor);
    if (size_ > 0 && data_ == nullptr)
      throw InputError(fmt::format("cannot read data file '{}'", path));
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  const unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

bool is_gzip(const unsigned char* bytes, std::size_t size) {
  return size >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

// An IDX file (possibly gzip-compressed) opened past its header. The header comes through zlib's
// stream (the index pass reads no more); the data are taken whole by data(): a gzip file inflated
// by libdeflate in one call per member (about twice zlib's speed, the set-up's largest single
// cost), a plain file mapped as it is.
class IdxFile {
 public:
  // Parses the header: magic 0x0000 08 NN (unsigned bytes, NN dimensions), then NN big-endian
  // sizes.
  IdxFile(std::string path, std::uint32_t dimension_count) : path_(std::move(path)) {
    file_ = gzopen(path_.c_str(), "rb");
    if (file_ == nullptr) throw InputError(fmt::format("cannot read data file '{}'", path_));
    gzbuffer(file_, 1 << 16);
    unsigned char word[4] = {0, 0, 0, 0};
    const std::uint32_t expected_magic = 0x800u + dimension_count;
    const std::uint32_t magic = read_bytes(word, 4) == 4 ? read_big_endian(word) : 0;
    if (magic != expected_magic)
      throw InputError(
          fmt::format("{}: not an IDX file of {} dimensions: magic number 0x{:08x}, "
                      "expected 0x{:08x}",
                      path_, dimension_count, magic, expected_magic));
    // The product of up to three 32-bit sizes can exceed 64 bits: a crafted header whose product
    // wraps around to the file's length must not pass the size check.
    bool overflow = false;
    items_ = 1;
    for (std::uint32_t d = 0; d < dimension_count; ++d) {
      if (read_bytes(word, 4) != 4)
        throw InputError(fmt::format("{}: the file ends inside its header", path_));
      dimensions_.push_back(read_big_endian(word));
      overflow =
          overflow || __builtin_mul_overflow(items_, std::size_t{dimensions_.back()}, &items_);
    }
    if (overflow)
      throw InputError(fmt::format("{}: the header's sizes ({}) multiply beyond 2^64 bytes", path_,
                                   fmt::join(dimensions_, " x ")));
    header_bytes_ = 4 * (1 + std::size_t{dimension_count});
    // An image side is stored as an int (the convolution geometry); MNIST's is 28.
    constexpr std::uint32_t kLargestSide = 1u << 16;
    for (std::uint32_t d = 1; d < dimension_count; ++d)
      if (dimensions_[d] == 0 || dimensions_[d] > kLargestSide)
        throw InputError(fmt::format("{}: image side {} in the header is not in 1..{}", path_,
                                     dimensions_[d], kLargestSide));
    // What the file can hold at most: deflate compresses at most 1032:1, and a plain file holds
    // its size. Buffers are sized by the header only up to this, so that a header promising more
    // than the file holds costs no memory before the size check refuses it.
    std::error_code ignored;
    const auto on_disk = std::filesystem::file_size(path_, ignored);
    capacity_ = ignored ? 0 : static_cast<std::size_t>(on_disk) * 1032 + 4096;
  }
  IdxFile(const IdxFile&) = delete;
  IdxFile& operator=(const IdxFile&) = delete;
  ~IdxFile() {
    if (file_ != nullptr) gzclose_r(file_);
  }

  const std::string& path() const { return path_; }
  const std::vector<std::uint32_t>& dimensions() const { return dimensions_; }
  std::size_t rows() const { return dimensions_[0]; }
  // Data bytes per row (pixels per image; 1 for labels).
  std::size_t row_bytes() const {
    std::size_t bytes = 1;
    for (std::size_t d = 1; d < dimensions_.size(); ++d) bytes *= dimensions_[d];
    return bytes;
  }

  // All the data bytes (rows() x row_bytes()), checked to end where the header says; valid while
  // the IdxFile lives.
  const unsigned char* data() {
    gzclose_r(file_);  // the header's stream is done with
    file_ = nullptr;
    mapped_.emplace(path_);
    if (!is_gzip(mapped_->data(), mapped_->size())) {  // read as it is, as gzread would
      check_size(mapped_->size() - std::min(mapped_->size(), header_bytes_));
      return mapped_->data() + header_bytes_;
    }
    // One byte beyond the promise: a file holding more fills it and is refused below.
    const std::size_t available = std::min(header_bytes_ + items_, capacity_) + 1;
    inflated_.reset(new unsigned char[available]);  // uninitialized: inflation writes it once
    // Mapped at once only when the gzip trailer's size (mod 2^32, of the last member) agrees with
    // the header, as in a one-member file: a header that lies commits no memory before the check.
    if (trailer_size() == static_cast<std::uint32_t>(available - 1))
      populate_pages(inflated_.get(), available);
    check_size(inflate_members(available) - std::min(inflated_size_, header_bytes_));
    return inflated_.get() + header_bytes_;
  }
  // Gives back what data() holds (the inflated images: 47 MB for Fashion-MNIST's training set).
  void release_data() {
    inflated_.reset();
    mapped_.reset();
  }

 private:
  std::size_t read_bytes(unsigned char* out, std::size_t size) {
    std::size_t got = 0;
    while (got < size) {
      const auto ask = static_cast<unsigned>(std::min<std::size_t>(size - got, 1u << 30));
      const int count = gzread(file_, out + got, ask);
      if (count < 0) {
        int error = Z_OK;
        const std::string reason = gzerror(file_, &error);
        throw InputError(fmt::format("cannot read data file '{}': {}", path_,
                                     reason.empty() ? "truncated or corrupt gzip data" : reason));
      }
      if (count == 0) break;
      got += static_cast<std::size_t>(count);
    }
    return got;
  }

  // The last 4 bytes of the mapped gzip file (ISIZE, little-endian); 0 for a file too short.
  std::uint32_t trailer_size() const {
    if (mapped_->size() < 18) return 0;  // shorter than a gzip header and trailer
    const unsigned char* trailer = mapped_->data() + mapped_->size() - 4;
    return std::uint32_t{trailer[0]} | std::uint32_t{trailer[1]} << 8 |
           std::uint32_t{trailer[2]} << 16 | std::uint32_t{trailer[3]} << 24;
  }

  // Inflates the gzip members of the mapped file into inflated_ (`available` bytes); returns the
  // bytes inflated. As gzread, bytes after a member that start no other member are ignored.
  std::size_t inflate_members(std::size_t available) {
    std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> inflater(
        libdeflate_alloc_decompressor(), libdeflate_free_decompressor);
    if (!inflater) throw std::bad_alloc();
    const unsigned char* in = mapped_->data();
    std::size_t left = mapped_->size();
    inflated_size_ = 0;
    while (is_gzip(in, left)) {
      std::size_t used = 0, produced = 0;
      const libdeflate_result result =
          libdeflate_gzip_decompress_ex(inflater.get(), in, left, inflated_.get() + inflated_size_,
                                        available - inflated_size_, &used, &produced);
      if (result == LIBDEFLATE_INSUFFICIENT_SPACE) return count_inflated_bytes();
      if (result != LIBDEFLATE_SUCCESS)
        throw InputError(
            fmt::format("cannot read data file '{}': truncated or corrupt gzip data", path_));
      inflated_size_ += produced;
      in += used;
      left -= used;
    }
    return inflated_size_;
  }

  // The inflated size of a file holding more than its header promises (zlib's stream counts it
  // without holding it), for the size check's message.
  std::size_t count_inflated_bytes() const {
    gzFile file = gzopen(path_.c_str(), "rb");
    if (file == nullptr) throw InputError(fmt::format("cannot read data file '{}'", path_));
    std::vector<unsigned char> chunk(1 << 16);
    std::size_t total = 0;
    int count = 0;
    while ((count = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()))) > 0)
      total += static_cast<std::size_t>(count);
    const int closed = gzclose_r(file);
    if (count < 0 || closed != Z_OK)
      throw InputError(
          fmt::format("cannot read data file '{}': truncated or corrupt gzip data", path_));
    return total;
  }

  void check_size(std::size_t data_bytes) const {
    if (data_bytes != items_)
      throw InputError(fmt::format("{}: the header promises {} bytes of data but the file holds {}",
                                   path_, items_, data_bytes));
  }

  std::string path_;
  gzFile file_ = nullptr;
  std::vector<std::uint32_t> dimensions_;
  std::size_t items_ = 0, header_bytes_ = 0, capacity_ = 0, inflated_size_ = 0;
  std::optional<MappedFile> mapped_;
  std::unique_ptr<unsigned char[]> inflated_;
};

// A label file's labels, checked to be as many as the images.
std::vector<std::int32_t> read_idx_labels(const std::string& path, const IdxFile& images) {
  IdxFile labels(path, 1);
  const unsigned char* bytes = labels.data();
  if (labels.rows() != images.rows())
    throw InputError(fmt::format("{} holds {} images but {} holds {} labels", images.path(),
                                 images.rows(), labels.path(), labels.rows()));
  return {bytes, bytes + labels.rows()};
}

// Turns the images of `images` into k / 255 doubles in `table.numeric`: every row, or with `rows`
// those listed (ascending), the table then partial and holding them.
void read_idx_pixels(IdxFile& images, const std::vector<std::int64_t>* rows, Table& table) {
  std::array<double, 256> scaled{};  // a lookup beats a division per pixel
  for (int v = 0; v < 256; ++v) scaled[v] = v / 255.0;
  const std::size_t pixels = images.row_bytes(), total = images.rows();
  if (rows && !rows->empty() && static_cast<std::size_t>(rows->back()) >= total)
    throw std::logic_error("read_idx: a row beyond the file's was asked for");
  const unsigned char* data = images.data();  // checked: total x pixels bytes
  const std::size_t kept = rows ? rows->size() : total;
  reserve_populated(table.numeric, kept * pixels);
  for (std::size_t i = 0; i < kept; ++i) {
    const std::size_t row = rows ? static_cast<std::size_t>((*rows)[i]) : i;
    const std::size_t at = table.numeric.size();
    table.numeric.resize(at + pixels);
    const unsigned char* in = data + row * pixels;
    double* out = table.numeric.data() + at;
    for (std::size_t p = 0; p < pixels; ++p) out[p] = scaled[in[p]];
  }
  images.release_data();
  if (rows) {
    table.partial = true;
    table.held = *rows;
  }
}

Table idx_layout(std::size_t height, std::size_t width, int classes) {
  const std::size_t pixels = height * width;
  Table layout;
  layout.image_shape = {static_cast<int>(height), static_cast<int>(width), 1};
  layout.attributes.reserve(pixels);
  for (std::size_t p = 0; p < pixels; ++p)
    layout.attributes.push_back(
        {fmt::format("px{}", p), AttributeKind::numeric, {}, static_cast<int>(p)});
  for (int k = 0; k < classes; ++k) layout.class_names.push_back(std::to_string(k));
  layout.byte_denominator = 255.0;
  return layout;
}

// One part (train or t10k) of an IDX set: the images' header read, their data not yet.
struct IdxPart {
  std::unique_ptr<IdxFile> images;
  std::vector<std::int32_t> labels;
  // With `values` the images are read at once (before the labels, so that an error in either file
  // is named in file order); without, only their header (the labels of distributed ownership's
  // index pass).
  IdxPart(const std::string& directory, const std::string& images_name,
          const std::string& labels_name, const std::vector<std::int64_t>* rows, bool values,
          Table& table)
      : images(std::make_unique<IdxFile>(find_idx_file(directory, images_name), 3)) {
    if (values) read_idx_pixels(*images, rows, table);
    labels = read_idx_labels(find_idx_file(directory, labels_name), *images);
  }
  int max_label() const {
    return labels.empty() ? -1 : *std::max_element(labels.begin(), labels.end());
  }
};

}  // namespace

namespace {
// read_csv, or with `index` index_csv: the files' headers checked, the first pass, then the tables.
TrainTest read_csv_files(const std::string& train_path, const std::string& test_path,
                         const ColumnSelection& columns, const CsvOptions& options, bool index) {
  std::vector<std::string> opened{train_path};
  return nul_bytes_first(opened, [&] {
    const CsvFile train(train_path, options);
    std::optional<CsvFile> test;
    if (!test_path.empty()) {
      opened.push_back(test_path);
      test.emplace(test_path, options);
      check_same_header(train, *test);
    }
    const CsvLayout layout = plan_csv_layout(train, columns);
    CsvFiles files;
    files.files.push_back(&train);
    if (test) files.files.push_back(&*test);
    std::vector<CsvRowIndex> rows(files.files.size());
    if (index) files.index = &rows;
    const CsvSchema schema = build_csv_schema(files, layout);
    if (files.skipped > 0)
      log::info("# data: {} row(s) with a missing value dropped (data.missing = \"drop\")",
                files.skipped);
    TrainTest out;
    if (index) {
      out.train = index_csv_table(train, layout, schema, files, rows[0]);
      out.test = test ? index_csv_table(*test, layout, schema, files, rows[1]) : schema.layout;
    } else {
      out.train = fill_csv_table(train, layout, schema);
      out.test = test ? fill_csv_table(*test, layout, schema) : schema.layout;
    }
    return out;
  });
}

// The values of the rows on `lines` (ascending) of the attributes of `schema`, each read from the
// header column of its name; the lines were checked by the first pass, so a line that is no longer
// a row means the file changed in between.
Table read_csv_lines(const std::string& path, const CsvOptions& dialect, const Table& schema,
                     const std::vector<std::int64_t>& lines) {
  const CsvFile file(path, dialect);
  SecondPassRows rows(path, schema, lines);
  std::vector<std::size_t> column;
  for (const auto& attribute : schema.attributes)
    column.push_back(find_column(file, attribute.name, "data.features"));
  TextLines text(path);
  std::string_view line;
  std::vector<std::string> fields;
  auto wanted = rows.lines().begin();
  while (wanted != rows.lines().end() && text.next(line)) {
    if (text.line_number() != *wanted) continue;
    ++wanted;
    split_csv_line(line, dialect.delimiter, path, text.line_number(), fields);
    if (fields.size() != file.header().size()) throw rows.changed(text.line_number());
    for (std::size_t a = 0; a < column.size(); ++a) {
      const std::string& field = fields[column[a]];
      if (schema.attributes[a].kind == AttributeKind::numeric)
        rows.add_numeric(parse_csv_number(field, file, text.line_number(), column[a]));
      else
        rows.add_category(a, field, text.line_number());
    }
  }
  return rows.finish(wanted);
}
}  // namespace

TrainTest read_csv(const std::string& train_path, const std::string& test_path,
                   const ColumnSelection& columns, const CsvOptions& options) {
  return read_csv_files(train_path, test_path, columns, options, false);
}

TrainTest index_csv(const std::string& train_path, const std::string& test_path,
                    const ColumnSelection& columns, const CsvOptions& options) {
  return read_csv_files(train_path, test_path, columns, options, true);
}

TrainTest read_csv_rows(const std::string& train_path, const std::string& test_path,
                        const CsvOptions& dialect, const Table& schema,
                        const std::vector<std::int64_t>& train_lines,
                        const std::vector<std::int64_t>& test_lines) {
  TrainTest out;
  out.train = read_csv_lines(train_path, dialect, schema, train_lines);
  out.test = test_path.empty() ? schema.empty_like()
                               : read_csv_lines(test_path, dialect, schema, test_lines);
  return out;
}

namespace {
// read_arff, or with `index` index_arff (the clients from the column `client`, if any).
TrainTest read_arff_files(const std::string& train_path, const std::string& test_path,
                          const ColumnSelection& columns, bool index, const std::string& client) {
  std::vector<std::string> opened{train_path};
  return nul_bytes_first(opened, [&] {
    TextLines train_cursor(train_path);
    ArffSchema schema(read_arff_header(train_cursor, train_path), columns, train_path);
    const std::size_t client_column = schema.nominal_column(client);
    TrainTest out;
    read_arff_rows(train_cursor, train_path, schema, out.train, index, client_column);
    if (!test_path.empty()) {
      opened.push_back(test_path);
      TextLines test_cursor(test_path);
      check_same_attributes(schema.declared(), read_arff_header(test_cursor, test_path), train_path,
                            test_path);
      read_arff_rows(test_cursor, test_path, schema, out.test, index, client_column);
    }
    // Copy the schema last: reading may have added "?" categories after the first rows.
    for (Table* table : {&out.train, &out.test}) {
      table->attributes = schema.layout().attributes;
      table->label_name = schema.layout().label_name;
      table->class_names = schema.layout().class_names;
    }
    return out;
  });
}
}  // namespace

TrainTest read_arff(const std::string& train_path, const std::string& test_path,
                    const ColumnSelection& columns) {
  return read_arff_files(train_path, test_path, columns, false, "");
}

TrainTest index_arff(const std::string& train_path, const std::string& test_path,
                     const ColumnSelection& columns, const std::string& client_column) {
  return read_arff_files(train_path, test_path, columns, true, client_column);
}

TrainTest read_arff_rows(const std::string& train_path, const std::string& test_path,
                         const Table& schema, const std::vector<std::int64_t>& train_lines,
                         const std::vector<std::int64_t>& test_lines) {
  TrainTest out;
  out.train = read_arff_lines(train_path, schema, train_lines);
  out.test =
      test_path.empty() ? schema.empty_like() : read_arff_lines(test_path, schema, test_lines);
  return out;
}

TrainTest read_idx(const std::string& directory, const RowRequest* rows) {
  // Whole (no request), the index pass (an empty request: labels only) or a rank's rows.
  const bool values = rows == nullptr || !rows->train.empty() || !rows->test.empty();
  TrainTest data;
  const IdxPart train(directory, "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                      rows ? &rows->train : nullptr, values, data.train);
  const IdxPart test(directory, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
                     rows ? &rows->test : nullptr, values, data.test);
  const auto& train_sides = train.images->dimensions();
  const auto& test_sides = test.images->dimensions();
  if (test_sides[1] != train_sides[1] || test_sides[2] != train_sides[2])
    throw InputError(fmt::format("{} holds {}x{} images but {} holds {}x{} images",
                                 test.images->path(), test_sides[1], test_sides[2],
                                 train.images->path(), train_sides[1], train_sides[2]));
  const int classes = std::max(train.max_label(), test.max_label()) + 1;
  const Table layout = idx_layout(train_sides[1], train_sides[2], classes);
  for (auto [table, part] : {std::pair{&data.train, &train}, std::pair{&data.test, &test}}) {
    std::vector<double> numeric = std::move(table->numeric);
    const bool partial = rows != nullptr;
    std::vector<std::int64_t> held = std::move(table->held);
    *table = layout;
    table->rows = part->labels.size();
    table->label = part->labels;
    table->numeric = std::move(numeric);
    table->partial = partial;
    table->held = std::move(held);
  }
  return data;
}

namespace {
// The [data] settings as the CSV reader takes them; `client_column` is read as categorical
// whatever data.features says.
CsvOptions csv_options(const DataConfig& config, const std::string& client_column) {
  CsvOptions options = config.csv;
  options.features = config.features;
  options.drop = config.drop;
  options.client = client_column;
  return options;
}

ColumnSelection columns_of(const DataConfig& config) {
  return {config.label, config.categorical};
}
}  // namespace

namespace built_in_sources {

DataSourceSpec csv() {
  return {.name = "csv",
          .keys = {"data.delimiter", "data.missing", "data.missing_values", "data.label"},
          .selects_attributes = true,
          .read =
              [](const DataConfig& config, std::uint64_t, const std::string& client_column) {
                return read_csv(config.path, config.test_path, columns_of(config),
                                csv_options(config, client_column));
              },
          // Streamed twice: the index pass keeps each row's label, client column and line.
          .selective = {
              .index =
                  [](const DataConfig& config, std::uint64_t, const std::string& client_column) {
                    return index_csv(config.path, config.test_path, columns_of(config),
                                     csv_options(config, client_column));
                  },
              .rows =
                  [](const DataConfig& config, std::uint64_t, const Table& schema,
                     const RowRequest& request) {
                    return read_csv_rows(config.path, config.test_path, csv_options(config, ""),
                                         schema, request.train, request.test);
                  },
              .with_client_column = true}};
}

DataSourceSpec arff() {
  return {.name = "arff",
          .keys = {"data.label"},
          .read =
              [](const DataConfig& config, std::uint64_t, const std::string&) {
                return read_arff(config.path, config.test_path, columns_of(config));
              },
          .selective = {
              .index =
                  [](const DataConfig& config, std::uint64_t, const std::string& client_column) {
                    return index_arff(config.path, config.test_path, columns_of(config),
                                      client_column);
                  },
              .rows =
                  [](const DataConfig& config, std::uint64_t, const Table& schema,
                     const RowRequest& request) {
                    return read_arff_rows(config.path, config.test_path, schema, request.train,
                                          request.test);
                  },
              .with_client_column = true}};
}

DataSourceSpec idx() {
  return {.name = "idx",
          .ink_levels = true,
          .has_test_file = [](const DataConfig&) { return true; },  // the t10k files
          .read = [](const DataConfig& config, std::uint64_t,
                     const std::string&) { return read_idx(config.path); },
          // The index pass reads the labels and the images' headers; a rank's pass inflates the
          // images and keeps its rows' pixels only.
          .selective =
              rows_by_request([](const DataConfig& config, std::uint64_t, const RowRequest& rows) {
                return read_idx(config.path, &rows);
              })};
}

}  // namespace built_in_sources

}  // namespace fluence
