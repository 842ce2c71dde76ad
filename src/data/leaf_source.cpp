// data.source = "leaf": LEAF's JSON files ({"users": [...], "num_samples": [...], "user_data":
// {user: {"x": [...], "y": [...]}}}), read by a small JSON reader that fills the arrays directly,
// without a document tree (FEMNIST's files are hundreds of megabytes of numbers).
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "arrays.hpp"
#include "built_in_sources.hpp"
#include "fluence/core/error.hpp"
#include "fluence/data/array_sources.hpp"

namespace fluence {
namespace {

using arrays::Features;
using arrays::Split;

class JsonReader {
 public:
  JsonReader(std::string_view text, std::string path) : text_(text), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& what) const {
    const std::string_view before = text_.substr(0, std::min(position_, text_.size()));
    const auto newline = before.rfind('\n');
    const std::size_t column =
        position_ - (newline == std::string_view::npos ? 0 : newline + 1) + 1;
    throw InputError(fmt::format("{}:{}:{}: {}", path_,
                                 1 + std::count(before.begin(), before.end(), '\n'), column, what));
  }

  char peek() {
    while (position_ < text_.size() && (text_[position_] == ' ' || text_[position_] == '\n' ||
                                        text_[position_] == '\r' || text_[position_] == '\t'))
      ++position_;
    if (position_ >= text_.size()) fail("the JSON text ends early (a truncated file?)");
    return text_[position_];
  }

  bool at_end() {
    while (position_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[position_])))
      ++position_;
    return position_ >= text_.size();
  }

  void expect(char c) {
    if (peek() != c) fail(fmt::format("expected '{}', found '{}'", c, message_excerpt(found())));
    ++position_;
  }

  template <class Member>
  void object(Member&& member) {
    const Nesting nested(*this);
    expect('{');
    if (peek() == '}') {
      ++position_;
      return;
    }
    do {
      const std::string key = string();
      expect(':');
      member(key);
    } while (consume(','));
    expect('}');
  }

  template <class Element>
  void array(Element&& element) {
    const Nesting nested(*this);
    expect('[');
    if (peek() == ']') {
      ++position_;
      return;
    }
    do element();
    while (consume(','));
    expect(']');
  }

  std::string string() {
    if (peek() != '"') fail(fmt::format("expected a string, found '{}'", message_excerpt(found())));
    std::string out;
    for (++position_; position_ < text_.size(); ++position_) {
      const char c = text_[position_];
      if (c == '"') {
        ++position_;
        return out;
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (++position_ >= text_.size()) break;
      const char e = text_[position_];
      const std::string_view plain = "\"\\/bfnrt", meaning = "\"\\/\b\f\n\r\t";
      if (const auto k = plain.find(e); k != std::string_view::npos)
        out += meaning[k];
      else if (e == 'u')
        append_utf8(out, code_point());
      else
        fail(fmt::format("an unknown escape '\\{}' in a string", e));
    }
    fail("a string is not closed (a truncated file?)");
  }

  double number() {
    peek();
    const auto start = position_;
    while (position_ < text_.size() &&
           std::string_view("+-0123456789.eE").find(text_[position_]) != std::string_view::npos)
      ++position_;
    double value = 0;
    const auto result = std::from_chars(text_.data() + start, text_.data() + position_, value);
    if (position_ == start || result.ec != std::errc() || result.ptr != text_.data() + position_ ||
        !std::isfinite(value)) {
      position_ = start;
      fail(fmt::format("expected a number, found '{}'", message_excerpt(found())));
    }
    return value;
  }

  // Arrays and objects nest at most kMaxNesting deep (LEAF's rows need a few levels): a deeper
  // file is refused with a clear error, not a stack overflow.
  static constexpr int kMaxNesting = 64;
  struct Nesting {
    JsonReader& reader;
    explicit Nesting(JsonReader& r) : reader(r) {
      if (++reader.depth_ > kMaxNesting)
        reader.fail(fmt::format("arrays and objects nested more than {} deep", kMaxNesting));
    }
    ~Nesting() { --reader.depth_; }
  };

  void skip_value() {
    const char c = peek();
    if (c == '{') {
      object([&](const std::string&) { skip_value(); });
    } else if (c == '[') {
      array([&] { skip_value(); });
    } else if (c == '"') {
      string();
    } else if (c == 't' || c == 'f' || c == 'n') {
      for (const std::string_view word : {"true", "false", "null"})
        if (text_.substr(position_, word.size()) == word) {
          position_ += word.size();
          return;
        }
      fail(fmt::format("unexpected '{}'", message_excerpt(found())));
    } else {
      number();
    }
  }

 private:
  bool consume(char c) {
    if (peek() != c) return false;
    ++position_;
    return true;
  }

  std::string_view found() const { return text_.substr(position_, 20); }

  unsigned code_point() {
    auto hex4 = [&] {
      if (position_ + 4 >= text_.size()) fail("a \\u escape ends early");
      unsigned value = 0;
      const auto result =
          std::from_chars(text_.data() + position_ + 1, text_.data() + position_ + 5, value, 16);
      if (result.ptr != text_.data() + position_ + 5) fail("a bad \\u escape");
      position_ += 4;
      return value;
    };
    unsigned code = hex4();
    if (code >= 0xD800 && code < 0xDC00 && text_.substr(position_ + 1, 2) == "\\u") {
      position_ += 2;
      code = 0x10000 + ((code - 0xD800) << 10) + (hex4() - 0xDC00);
    }
    return code;
  }

  static void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  std::string_view text_;
  std::string path_;
  std::size_t position_ = 0;
  int depth_ = 0;  // arrays and objects open at position_
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

std::int64_t integer(JsonReader& reader, const char* what) {
  const double value = reader.number();
  if (value != std::floor(value) || std::abs(value) > 0x1p53)
    reader.fail(fmt::format("{} {} is not an integer", what, value));
  return static_cast<std::int64_t>(value);
}

// A row of x: a number, or arrays of numbers nested to any depth, appended to `values` in C
// order; returns its shape (sibling arrays must have one shape).
std::vector<std::size_t> read_row(JsonReader& reader, std::vector<double>& values) {
  if (reader.peek() == '"')
    reader.fail(
        "x holds text: expected numbers (LEAF's text data sets, Shakespeare and Sent140, need "
        "their text turned into numbers first)");
  if (reader.peek() != '[') {
    values.push_back(reader.number());
    return {};
  }
  std::vector<std::size_t> inner;
  std::size_t count = 0;
  reader.array([&] {
    const auto shape = read_row(reader, values);
    if (count == 0) inner = shape;
    if (shape != inner)
      reader.fail(fmt::format("a ragged x row: an inner array of shape [{}] beside one of [{}]",
                              fmt::join(shape, ", "), fmt::join(inner, ", ")));
    ++count;
  });
  inner.insert(inner.begin(), count);
  return inner;
}

LeafUser read_user(JsonReader& reader, const std::string& path, const std::string& user) {
  LeafUser data;
  data.x.origin = fmt::format("{}, user '{}'", path, message_excerpt(user));
  reader.object([&](const std::string& key) {
    if (key == "x") {
      data.has_x = true;
      reader.array([&] {
        const auto shape = read_row(reader, data.x.values);
        if (data.x.rows == 0) data.x.row_shape = shape;
        if (shape != data.x.row_shape)
          reader.fail(fmt::format("user '{}': x row {} has shape [{}] but row 0 has [{}]",
                                  message_excerpt(user), data.x.rows, fmt::join(shape, ", "),
                                  fmt::join(data.x.row_shape, ", ")));
        ++data.x.rows;
      });
    } else if (key == "y") {
      data.has_y = true;
      reader.array([&] {
        if (reader.peek() == '"') reader.fail("y holds text: expected integer labels");
        data.y.push_back(integer(reader, "label"));
      });
    } else {
      reader.skip_value();
    }
  });
  return data;
}

LeafFile parse_leaf(const std::string& path, std::string_view text) {
  LeafFile file;
  file.path = path;
  JsonReader reader(text, path);
  bool has_users = false, has_samples = false, has_data = false;
  reader.object([&](const std::string& key) {
    if (key == "users") {
      has_users = true;
      reader.array([&] { file.users.push_back(reader.string()); });
    } else if (key == "num_samples") {
      has_samples = true;
      reader.array([&] { file.num_samples.push_back(integer(reader, "num_samples")); });
    } else if (key == "user_data") {
      has_data = true;
      reader.object([&](const std::string& user) {
        if (file.data.count(user))
          reader.fail(fmt::format("user_data has user '{}' twice", message_excerpt(user)));
        file.data.emplace(user, read_user(reader, path, user));
      });
    } else {
      reader.skip_value();
    }
  });
  if (!reader.at_end()) reader.fail("text after the JSON object");
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

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw InputError(fmt::format("cannot read data file '{}'", path));
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
