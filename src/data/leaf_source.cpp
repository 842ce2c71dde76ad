// data.source = "leaf": LEAF's JSON files ({"users": [...], "num_samples": [...], "user_data":
// {user: {"x": [...], "y": [...]}}}), read by simdjson's On-Demand parser, which fills the arrays
// directly, without a document tree (FEMNIST's files are hundreds of megabytes of numbers).
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <utility>

// The definition the library's CMake package gives its users, here only: linked by file
// (CMakeLists.txt), the package's usage requirements do not reach every other source.
#define SIMDJSON_THREADS_ENABLED 1
#include <simdjson.h>

#include "arrays.hpp"
#include "built_in_sources.hpp"
#include "fluence/core/error.hpp"
#include "fluence/data/array_sources.hpp"

namespace fluence {
namespace {

using arrays::Features;
using arrays::Split;
namespace ondemand = simdjson::ondemand;

// A LEAF file's JSON as simdjson's On-Demand parser reads it (Debian's libsimdjson-dev): values
// are parsed where they are visited, straight into the arrays, with no document tree. What the
// parser leaves to its user is done here: nesting is bounded (kMaxNesting), every value is
// visited (so that a malformed one is refused, not skipped), and messages give the file, line and
// column.
class LeafJson {
 public:
  LeafJson(std::string path, const simdjson::padded_string& text)
      : path_(std::move(path)), text_(text) {}

  // The root object (a file that is not an object is refused at its first character).
  ondemand::object root() {
    const std::string_view view(text_.data(), text_.size());
    const auto first = view.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos)
      fail_at(view.size(), "the JSON text ends early (a truncated file?)");
    if (view[first] != '{')
      fail_at(first,
              fmt::format("expected '{{', found '{}'", message_excerpt(view.substr(first, 20))));
    document_ = parser_.iterate(text_);
    iterating_ = true;
    return document_.get_object();
  }

  // Refuses text after the root object (once it has been read to its end).
  void finish() {
    const char* at = nullptr;
    if (document_.current_location().get(at) == simdjson::SUCCESS && at != nullptr &&
        at < text_.data() + text_.size())
      fail_at(static_cast<std::size_t>(at - text_.data()), "text after the JSON object");
  }

  [[noreturn]] void fail(const std::string& what) { fail_at(offset(), what); }

  static ondemand::json_type type_of(ondemand::value& value) { return value.type().value(); }

  // A simdjson error, in the words of this reader's own messages where one fits. A text nested
  // too deep is named so first, wherever simdjson stopped (an unclosed run of brackets is also a
  // text that ends early).
  [[noreturn]] void fail(const simdjson::simdjson_error& error) {
    if (const auto deep = too_deep()) fail_at(*deep, nested_too_deep());
    switch (error.error()) {
      case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
      case simdjson::UNCLOSED_STRING:
      case simdjson::EMPTY:
      case simdjson::OUT_OF_BOUNDS:
        fail_at(text_.size(), "the JSON text ends early (a truncated file?)");
      case simdjson::NUMBER_ERROR:
      case simdjson::NUMBER_OUT_OF_RANGE:
        fail(fmt::format("expected a number, found '{}'", found()));
      case simdjson::INCORRECT_TYPE:
      case simdjson::T_ATOM_ERROR:
      case simdjson::F_ATOM_ERROR:
      case simdjson::N_ATOM_ERROR:
        fail(fmt::format("unexpected '{}'", found()));
      case simdjson::UTF8_ERROR:
        fail("the text is not valid UTF-8");
      default:
        fail(fmt::format("not valid JSON ({}) near '{}'", simdjson::error_message(error.error()),
                         found()));
    }
  }

  double number(ondemand::value value) {
    if (type_of(value) != ondemand::json_type::number)
      fail(fmt::format("expected a number, found '{}'", found()));
    const double result = value.get_double();
    if (!std::isfinite(result)) fail(fmt::format("expected a number, found '{}'", found()));
    return result;
  }

  std::string string(ondemand::value value) {
    if (type_of(value) != ondemand::json_type::string)
      fail(fmt::format("expected a string, found '{}'", found()));
    return std::string(std::string_view(value.get_string()));
  }

  ondemand::array array(ondemand::value value) {
    if (type_of(value) != ondemand::json_type::array)
      fail(fmt::format("expected '[', found '{}'", found()));
    return value.get_array();
  }

  ondemand::object object(ondemand::value value) {
    if (type_of(value) != ondemand::json_type::object)
      fail(fmt::format("expected '{{', found '{}'", found()));
    return value.get_object();
  }

  // Visits a value this reader does not use, every part of it parsed.
  void skip(ondemand::value value) {
    switch (type_of(value)) {
      case ondemand::json_type::object: {
        const Nesting nested(*this);
        for (auto field : value.get_object()) {
          ondemand::field member = std::move(field);
          static_cast<void>(std::string_view(member.unescaped_key()));
          skip(member.value());
        }
        break;
      }
      case ondemand::json_type::array: {
        const Nesting nested(*this);
        for (auto element : value.get_array()) skip(element.value());
        break;
      }
      case ondemand::json_type::number:
        static_cast<void>(number(value));
        break;
      case ondemand::json_type::string:
        static_cast<void>(std::string_view(value.get_string()));
        break;
      case ondemand::json_type::boolean:
        static_cast<void>(bool(value.get_bool()));
        break;
      case ondemand::json_type::null:
        if (!bool(value.is_null())) fail(fmt::format("unexpected '{}'", found()));
        break;
    }
  }

  static std::string nested_too_deep() {
    return fmt::format("arrays and objects nested more than {} deep", kMaxNesting);
  }

  // Where an array or object opens kMaxNesting + 1 deep, brackets in strings aside; nullopt when
  // none does.
  std::optional<std::size_t> too_deep() const {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (std::size_t i = 0; i < text_.size(); ++i) {
      const char c = text_.data()[i];
      if (in_string) {
        if (escaped)
          escaped = false;
        else if (c == '\\')
          escaped = true;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '[' || c == '{') {
        if (++depth > kMaxNesting) return i;
      } else if (c == ']' || c == '}') {
        --depth;
      }
    }
    return std::nullopt;
  }

  // Arrays and objects nest at most kMaxNesting deep (LEAF's rows need a few levels): a deeper
  // file is refused with a clear error, not a stack overflow in the recursion over x's rows.
  static constexpr int kMaxNesting = 64;
  struct Nesting {
    LeafJson& reader;
    explicit Nesting(LeafJson& r) : reader(r) {
      if (++reader.depth_ > kMaxNesting) reader.fail(nested_too_deep());
    }
    ~Nesting() { --reader.depth_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;
  };

 private:
  // Where the parser is (the end of the text when it is past the last token).
  std::size_t offset() {
    const char* at = nullptr;
    if (!iterating_ || document_.current_location().get(at) != simdjson::SUCCESS || at == nullptr)
      return text_.size();
    return static_cast<std::size_t>(at - text_.data());
  }

  std::string found() {
    const std::string_view view(text_.data(), text_.size());
    return message_excerpt(view.substr(std::min(offset(), view.size()), 20));
  }

  [[noreturn]] void fail_at(std::size_t position, const std::string& what) const {
    const std::string_view before(text_.data(), std::min(position, text_.size()));
    const auto newline = before.rfind('\n');
    const std::size_t column =
        before.size() - (newline == std::string_view::npos ? 0 : newline + 1) + 1;
    throw InputError(fmt::format("{}:{}:{}: {}", path_,
                                 1 + std::count(before.begin(), before.end(), '\n'), column, what));
  }

  std::string path_;
  const simdjson::padded_string& text_;
  ondemand::parser parser_;
  ondemand::document document_;
  bool iterating_ = false;  // document_ is the text's (stage 1 passed)
  int depth_ = 0;           // arrays and objects open
};

// One user's rows as the file holds them.
struct LeafUser {
  Features x;
  std::vector<std::int64_t> y;
  bool has_x = false, has_y = false;
};

struct LeafFile {
  std::string path;
  std::vector<std::string> users;
  std::vector<std::int64_t> num_samples;
  std::map<std::string, LeafUser> data;
};

std::int64_t integer(LeafJson& json, ondemand::value value, const char* what) {
  const double number = json.number(value);
  if (number != std::floor(number) || std::abs(number) > 0x1p53)
    json.fail(fmt::format("{} {} is not an integer", what, number));
  return static_cast<std::int64_t>(number);
}

// A row of x: a number, or arrays of numbers nested to any depth, appended to `values` in C
// order; returns its shape (sibling arrays must have one shape).
std::vector<std::size_t> read_row(LeafJson& json, ondemand::value value,
                                  std::vector<double>& values) {
  const auto type = LeafJson::type_of(value);
  if (type == ondemand::json_type::string)
    json.fail(
        "x holds text: expected numbers (LEAF's text data sets, Shakespeare and Sent140, need "
        "their text turned into numbers first)");
  if (type != ondemand::json_type::array) {
    values.push_back(json.number(value));
    return {};
  }
  const LeafJson::Nesting nested(json);
  std::vector<std::size_t> inner;
  std::size_t count = 0;
  for (auto element : value.get_array()) {
    const auto shape = read_row(json, element.value(), values);
    if (count == 0) inner = shape;
    if (shape != inner)
      json.fail(fmt::format("a ragged x row: an inner array of shape [{}] beside one of [{}]",
                            fmt::join(shape, ", "), fmt::join(inner, ", ")));
    ++count;
  }
  inner.insert(inner.begin(), count);
  return inner;
}

LeafUser read_user(LeafJson& json, ondemand::value value, const std::string& path,
                   const std::string& user) {
  LeafUser data;
  data.x.origin = fmt::format("{}, user '{}'", path, message_excerpt(user));
  const LeafJson::Nesting nested(json);
  for (auto field : json.object(value)) {
    ondemand::field member = std::move(field);
    const std::string_view key = member.unescaped_key();
    if (key == "x") {
      data.has_x = true;
      const LeafJson::Nesting rows(json);
      for (auto row : json.array(member.value())) {
        const auto shape = read_row(json, row.value(), data.x.values);
        if (data.x.rows == 0) data.x.row_shape = shape;
        if (shape != data.x.row_shape)
          json.fail(fmt::format("user '{}': x row {} has shape [{}] but row 0 has [{}]",
                                message_excerpt(user), data.x.rows, fmt::join(shape, ", "),
                                fmt::join(data.x.row_shape, ", ")));
        ++data.x.rows;
      }
    } else if (key == "y") {
      data.has_y = true;
      const LeafJson::Nesting labels(json);
      for (auto label : json.array(member.value())) {
        ondemand::value y = label.value();
        if (LeafJson::type_of(y) == ondemand::json_type::string)
          json.fail("y holds text: expected integer labels");
        data.y.push_back(integer(json, y, "label"));
      }
    } else {
      json.skip(member.value());
    }
  }
  return data;
}

LeafFile parse_leaf(const std::string& path, const simdjson::padded_string& text) {
  LeafFile file;
  file.path = path;
  LeafJson json(path, text);
  bool has_users = false, has_samples = false, has_data = false;
  try {
    const LeafJson::Nesting nested(json);
    for (auto field : json.root()) {
      ondemand::field member = std::move(field);
      const std::string key(std::string_view(member.unescaped_key()));
      if (key == "users") {
        has_users = true;
        const LeafJson::Nesting list(json);
        for (auto user : json.array(member.value()))
          file.users.push_back(json.string(user.value()));
      } else if (key == "num_samples") {
        has_samples = true;
        const LeafJson::Nesting list(json);
        for (auto count : json.array(member.value()))
          file.num_samples.push_back(integer(json, count.value(), "num_samples"));
      } else if (key == "user_data") {
        has_data = true;
        const LeafJson::Nesting users(json);
        for (auto entry : json.object(member.value())) {
          ondemand::field user_field = std::move(entry);
          const std::string user(std::string_view(user_field.unescaped_key()));
          if (file.data.count(user))
            json.fail(fmt::format("user_data has user '{}' twice", message_excerpt(user)));
          file.data.emplace(user, read_user(json, user_field.value(), path, user));
        }
      } else {
        json.skip(member.value());
      }
    }
    json.finish();
  } catch (const simdjson::simdjson_error& error) {
    json.fail(error);
  }
  if (!has_users || !has_samples || !has_data)
    throw InputError(
        fmt::format("{}: a LEAF file needs the keys users, num_samples and "
                    "user_data; {} is missing",
                    path,
                    !has_users     ? "users"
                    : !has_samples ? "num_samples"
                                   : "user_data"));
  return file;
}

// Checks a file's users against its user_data: LEAF promises num_samples[i] rows of x and y for
// users[i], and nothing else.
void check_users(const LeafFile& file) {
  if (file.users.size() != file.num_samples.size())
    throw InputError(fmt::format("{}: users lists {} users but num_samples has {} entries",
                                 file.path, file.users.size(), file.num_samples.size()));
  const std::set<std::string> listed(file.users.begin(), file.users.end());
  if (listed.size() != file.users.size())
    throw InputError(fmt::format("{}: users lists a user twice", file.path));
  for (const auto& [user, data] : file.data)
    if (!listed.count(user))
      throw InputError(fmt::format("{}: user_data has user '{}', who is not in users", file.path,
                                   message_excerpt(user)));
  for (std::size_t i = 0; i < file.users.size(); ++i) {
    const auto found = file.data.find(file.users[i]);
    const std::string user = message_excerpt(file.users[i]);
    if (found == file.data.end())
      throw InputError(
          fmt::format("{}: user '{}' is in users but has no user_data", file.path, user));
    const LeafUser& data = found->second;
    if (!data.has_x || !data.has_y)
      throw InputError(fmt::format("{}: user '{}' has no {} in user_data", file.path, user,
                                   data.has_x ? "y" : "x"));
    const auto expected = static_cast<std::size_t>(std::max<std::int64_t>(file.num_samples[i], 0));
    if (data.x.rows != expected || data.y.size() != expected)
      throw InputError(
          fmt::format("{}: user '{}' is ragged: num_samples says {} but x has {} rows "
                      "and y {} labels",
                      file.path, user, file.num_samples[i], data.x.rows, data.y.size()));
  }
}

std::vector<std::string> leaf_files(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_regular_file(path, ignored)) return {path};
  if (!std::filesystem::is_directory(path, ignored))
    throw InputError(fmt::format("cannot read data file '{}'", path));
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(path, ignored))
    if (entry.path().extension() == ".json" && entry.is_regular_file(ignored))
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  if (files.empty())
    throw InputError(
        fmt::format("{}: the directory holds no .json files (LEAF's train or test "
                    "directory)",
                    path));
  return files;
}

simdjson::padded_string read_text(const std::string& path) {
  simdjson::padded_string text;
  if (simdjson::padded_string::load(path).get(text) != simdjson::SUCCESS)
    throw InputError(fmt::format("cannot read data file '{}'", path));
  return text;
}

// Every user of every file, in file order and then in each file's users order.
Split read_leaf_split(const std::string& path, std::vector<std::string>& users) {
  Split split;
  split.features.origin = path;
  split.labels.origin = path;
  std::set<std::string> seen;
  for (const auto& name : leaf_files(path)) {
    LeafFile file = parse_leaf(name, read_text(name));
    check_users(file);
    for (const auto& user : file.users) {
      if (!seen.insert(user).second)
        throw InputError(fmt::format("{}: user '{}' appears in an earlier file too", name,
                                     message_excerpt(user)));
      LeafUser& data = file.data.at(user);
      split.features.append(data.x);
      split.labels.numbers.insert(split.labels.numbers.end(), data.y.begin(), data.y.end());
      split.client.insert(split.client.end(), data.x.rows, static_cast<std::int32_t>(users.size()));
      users.push_back(user);
    }
  }
  return split;
}

}  // namespace

TrainTest read_leaf(const std::string& path, const std::string& test_path) {
  std::vector<std::string> users, test_users;
  Split train = read_leaf_split(path, users);
  Split test;
  if (!test_path.empty()) test = read_leaf_split(test_path, test_users);
  return arrays::make_tables(train, test, {"y", "x", {}, ""}, std::move(users));
}

namespace built_in_sources {

DataSourceSpec leaf() {
  return {.name = "leaf", .read = [](const DataConfig& config, std::uint64_t, const std::string&) {
            return read_leaf(config.path, config.test_path);
          }};
}

}  // namespace built_in_sources

}  // namespace fluence
