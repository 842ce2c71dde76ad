#include "arrays.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "fluence/core/error.hpp"

namespace fluence::arrays {

std::size_t Features::width() const {
  return std::accumulate(row_shape.begin(), row_shape.end(), std::size_t{1},
                         std::multiplies<std::size_t>());
}

void Features::append(const Features& more) {
  if (more.rows == 0) return;
  if (rows == 0) {
    const std::string keep = origin;
    *this = more;
    if (!keep.empty()) origin = keep;
    return;
  }
  if (more.row_shape != row_shape)
    throw InputError(fmt::format("{} has rows of shape [{}] but {} has rows of shape [{}]",
                                 more.origin, fmt::join(more.row_shape, ", "), origin,
                                 fmt::join(row_shape, ", ")));
  values.insert(values.end(), more.values.begin(), more.values.end());
  for (const std::int64_t row : more.held) held.push_back(static_cast<std::int64_t>(rows) + row);
  partial = partial || more.partial;
  rows += more.rows;
  pixels = pixels && more.pixels;
}

void Ids::append(const Ids& more) {
  if (more.size() == 0) return;
  if (size() == 0) {
    const std::string keep = origin;
    *this = more;
    if (!keep.empty()) origin = keep;
    return;
  }
  if (more.names.empty() != names.empty())
    throw InputError(fmt::format("{} holds {} but {} holds {}: one kind is needed", more.origin,
                                 more.names.empty() ? "integers" : "strings", origin,
                                 names.empty() ? "integers" : "strings"));
  if (more.unsigned_numbers != unsigned_numbers) {
    // One side holds values at or above 2^63 (as uint64): the other side's must be >= 0.
    const Ids& big = unsigned_numbers ? *this : more;
    const Ids& other = unsigned_numbers ? more : *this;
    const auto negative = std::find_if(other.numbers.begin(), other.numbers.end(),
                                       [](std::int64_t v) { return v < 0; });
    if (negative != other.numbers.end()) {
      const auto above = std::find_if(big.numbers.begin(), big.numbers.end(),
                                      [](std::int64_t v) { return v < 0; });
      throw InputError(fmt::format(
          "{} holds {} (beyond int64) and {} holds {}: unsigned and negative integers cannot "
          "be ordered together",
          big.origin, static_cast<std::uint64_t>(*above), other.origin, *negative));
    }
    unsigned_numbers = true;
  }
  numbers.insert(numbers.end(), more.numbers.begin(), more.numbers.end());
  names.insert(names.end(), more.names.begin(), more.names.end());
}

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

namespace {

// Integer ids sort numerically, string ids lexicographically; both become their decimal or
// string names.
template <class Id>
std::vector<std::int32_t> code_sorted(const std::vector<Id>& ids, std::vector<std::string>& names,
                                      const std::function<std::string(const Id&)>& name_of) {
  std::map<Id, std::int32_t> codes;
  for (const auto& id : ids) codes.emplace(id, 0);
  names.clear();
  for (auto& [id, code] : codes) {
    code = static_cast<std::int32_t>(names.size());
    names.push_back(name_of(id));
  }
  std::vector<std::int32_t> coded(ids.size());
  for (std::size_t r = 0; r < ids.size(); ++r) coded[r] = codes.at(ids[r]);
  return coded;
}

std::vector<std::int32_t> code_ids(const Ids& ids, std::vector<std::string>& names) {
  if (!ids.names.empty())
    return code_sorted<std::string>(ids.names, names, [](const std::string& s) { return s; });
  if (ids.unsigned_numbers) {
    const std::vector<std::uint64_t> values(ids.numbers.begin(), ids.numbers.end());
    return code_sorted<std::uint64_t>(values, names,
                                      [](const std::uint64_t& v) { return std::to_string(v); });
  }
  return code_sorted<std::int64_t>(ids.numbers, names,
                                   [](const std::int64_t& v) { return std::to_string(v); });
}

// The class names and each split's coded labels, from the union of both splits' values.
std::vector<std::string> code_labels(const Split& train, const Split& test,
                                     std::vector<std::int32_t>& train_codes,
                                     std::vector<std::int32_t>& test_codes) {
  if (test.labels.size() > 0 && test.labels.names.empty() != train.labels.names.empty())
    throw InputError(fmt::format(
        "{} holds {} labels but {} holds {} labels: the training and test labels need one type",
        train.labels.origin, train.labels.names.empty() ? "integer" : "string", test.labels.origin,
        test.labels.names.empty() ? "integer" : "string"));
  Ids both = train.labels;
  both.append(test.labels);
  std::vector<std::string> names;
  auto codes = code_ids(both, names);
  train_codes.assign(codes.begin(),
                     codes.begin() + static_cast<std::ptrdiff_t>(train.labels.size()));
  test_codes.assign(codes.begin() + static_cast<std::ptrdiff_t>(train.labels.size()), codes.end());
  return names;
}

void check_rows(const Split& split) {
  if (split.labels.size() != split.features.rows)
    throw InputError(fmt::format(
        "{} holds {} rows but {} holds {} labels: expected one label per row",
        split.features.origin, split.features.rows, split.labels.origin, split.labels.size()));
  if (split.features.rows == 0)
    throw InputError(fmt::format("{} holds no rows", split.features.origin));
}

// An image's height, width and channels from a row shape of {h, w} or {h, w, c}; zeros otherwise.
std::array<int, 3> image_shape_of(const std::vector<std::size_t>& row_shape) {
  if (row_shape.size() != 2 && row_shape.size() != 3) return {0, 0, 0};
  for (const auto side : row_shape)
    if (side == 0 || side > static_cast<std::size_t>(INT_MAX)) return {0, 0, 0};
  return {static_cast<int>(row_shape[0]), static_cast<int>(row_shape[1]),
          row_shape.size() == 3 ? static_cast<int>(row_shape[2]) : 1};
}

Table table_of(Split& split, const Table& layout, std::vector<std::int32_t> labels) {
  Table table = layout;
  table.rows = split.features.rows;
  table.numeric = std::move(split.features.values);
  table.partial = split.features.partial;
  table.held = std::move(split.features.held);
  table.label = std::move(labels);
  table.client = std::move(split.client);
  return table;
}

}  // namespace

std::vector<std::int32_t> code_clients(const Ids& ids, std::vector<std::string>& names) {
  return code_ids(ids, names);
}

TrainTest make_tables(Split& train, Split& test, const Naming& naming,
                      std::vector<std::string> client_names) {
  const auto& names = naming.columns;
  const auto& names_origin = naming.columns_origin;
  check_rows(train);
  const bool has_test = test.features.rows > 0 || test.labels.size() > 0;
  if (has_test) {
    check_rows(test);
    if (test.features.row_shape != train.features.row_shape)
      throw InputError(fmt::format(
          "{} has rows of shape [{}] but {} has rows of shape [{}]: the test rows need the "
          "training rows' shape",
          test.features.origin, fmt::join(test.features.row_shape, ", "), train.features.origin,
          fmt::join(train.features.row_shape, ", ")));
  }
  const std::size_t width = train.features.width();
  if (!names.empty() && names.size() != width)
    throw InputError(
        fmt::format("{} holds {} names but {} has {} columns: expected one name per "
                    "column",
                    names_origin, names.size(), train.features.origin, width));
  std::set<std::string> seen;
  for (const auto& name : names)
    if (!seen.insert(name).second)
      throw InputError(fmt::format("{} names column '{}' twice: expected distinct names",
                                   names_origin, message_excerpt(name)));
  Table layout;
  layout.attributes.reserve(width);
  for (std::size_t j = 0; j < width; ++j)
    layout.attributes.push_back({names.empty() ? fmt::format("{}{}", naming.prefix, j) : names[j],
                                 AttributeKind::numeric,
                                 {},
                                 static_cast<int>(j)});
  std::vector<std::int32_t> train_labels, test_labels;
  layout.class_names = code_labels(train, test, train_labels, test_labels);
  layout.label_name = naming.label;
  layout.image_shape = image_shape_of(train.features.row_shape);
  layout.byte_denominator =
      train.features.pixels && (!has_test || test.features.pixels) ? 255.0 : 0.0;
  layout.client_names = std::move(client_names);
  TrainTest out;
  out.train = table_of(train, layout, std::move(train_labels));
  out.test = has_test ? table_of(test, layout, std::move(test_labels)) : layout;
  // The test rows serve the server, whose clients are not the training clients.
  out.test.client.clear();
  out.test.client_names.clear();
  return out;
}

}  // namespace fluence::arrays
