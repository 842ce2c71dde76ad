// data.source = "npy": NumPy's .npy format (a magic string, a Python-literal header, then the raw
// C-order values) read directly, from single files or from a .npz zip archive (stored or deflated
// members, zip64 as numpy writes it). The format is documented in numpy.lib.format.
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "arrays.hpp"
#include "fluence/core/error.hpp"
#include "fluence/data/array_sources.hpp"

namespace fluence {
namespace {

using arrays::Features;
using arrays::Ids;
using arrays::Split;
using Bytes = std::vector<unsigned char>;

std::uint64_t little_endian(const unsigned char* p, int bytes) {
  std::uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

Bytes read_file(const std::string& path) {
  std::error_code ignored;
  std::ifstream in;
  if (std::filesystem::is_regular_file(path, ignored)) in.open(path, std::ios::binary);
  if (!in.is_open()) throw InputError(fmt::format("cannot read data file '{}'", path));
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::streamoff>(in.tellg());
  Bytes bytes(static_cast<std::size_t>(std::max<std::streamoff>(size, 0)));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in || size < 0) throw InputError(fmt::format("cannot read data file '{}'", path));
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// .npz: a zip archive of .npy files. The central directory gives each member's sizes (numpy
// writes zip64 local headers whose 32-bit sizes are placeholders, so those are not trusted).

struct ZipMember {
  std::string name;
  std::uint16_t method = 0, flags = 0;
  std::uint32_t crc = 0;
  std::uint64_t compressed = 0, size = 0, offset = 0;
};

class ZipArchive {
 public:
  explicit ZipArchive(std::string path) : path_(std::move(path)), bytes_(read_file(path_)) {
    read_directory();
  }

  const std::vector<ZipMember>& members() const { return members_; }

  Bytes extract(const ZipMember& member) const {
    const std::string origin = fmt::format("{}, member {}", path_, member.name);
    const unsigned char* local = at(member.offset, 30, origin);
    if (little_endian(local, 4) != 0x04034b50) damaged("a member's local header is missing");
    const std::uint64_t start =
        member.offset + 30 + little_endian(local + 26, 2) + little_endian(local + 28, 2);
    const unsigned char* data = at(start, member.compressed, origin);
    if (member.flags & 1u) throw InputError(fmt::format("{}: the member is encrypted", origin));
    Bytes out;
    if (member.method == 0) {
      if (member.compressed != member.size) damaged("a stored member's sizes differ");
      out.assign(data, data + member.size);
    } else if (member.method == 8) {
      out = inflate_raw(data, member.compressed, member.size, origin);
    } else {
      throw InputError(
          fmt::format("{}: compression method {} is not supported (stored or "
                      "deflated members only, as numpy.savez and savez_compressed "
                      "write)",
                      origin, member.method));
    }
    if (crc32(0L, out.data(), static_cast<uInt>(out.size())) != member.crc)
      throw InputError(fmt::format("{}: its CRC-32 does not match (a damaged archive?)", origin));
    return out;
  }

 private:
  [[noreturn]] void damaged(const std::string& what) const {
    throw InputError(fmt::format("{}: not a readable .npz (zip) archive: {}", path_, what));
  }

  const unsigned char* at(std::uint64_t offset, std::uint64_t length,
                          const std::string& origin) const {
    if (offset > bytes_.size() || length > bytes_.size() - offset)
      throw InputError(
          fmt::format("{}: the archive ends before the member's data (truncated?)", origin));
    return bytes_.data() + offset;
  }

  // The end-of-central-directory record: the last 22 bytes plus a comment of up to 65,535.
  std::size_t find_end_record() const {
    if (bytes_.size() < 22) damaged("too short for a zip archive");
    const std::size_t lowest = bytes_.size() > 22 + 65535 ? bytes_.size() - 22 - 65535 : 0;
    for (std::size_t p = bytes_.size() - 22;; --p) {
      if (little_endian(bytes_.data() + p, 4) == 0x06054b50) return p;
      if (p == lowest) break;
    }
    damaged("no end-of-central-directory record");
  }

  void read_directory() {
    const std::size_t end = find_end_record();
    const unsigned char* record = bytes_.data() + end;
    std::uint64_t entries = little_endian(record + 10, 2);
    std::uint64_t offset = little_endian(record + 16, 4);
    if (entries == 0xFFFF || offset == 0xFFFFFFFF) {  // zip64: the locator precedes the record
      if (end < 20 || little_endian(bytes_.data() + end - 20, 4) != 0x07064b50)
        damaged("a zip64 archive without its locator");
      const std::uint64_t zip64 = little_endian(bytes_.data() + end - 16, 8);
      const unsigned char* record64 = at(zip64, 56, path_);
      if (little_endian(record64, 4) != 0x06064b50) damaged("the zip64 record is missing");
      entries = little_endian(record64 + 32, 8);
      offset = little_endian(record64 + 48, 8);
    }
    for (std::uint64_t i = 0; i < entries; ++i) offset = read_entry(offset);
  }

  std::uint64_t read_entry(std::uint64_t offset) {
    const unsigned char* entry = at(offset, 46, path_);
    if (little_endian(entry, 4) != 0x02014b50) damaged("a central directory entry is missing");
    ZipMember member;
    member.flags = static_cast<std::uint16_t>(little_endian(entry + 8, 2));
    member.method = static_cast<std::uint16_t>(little_endian(entry + 10, 2));
    member.crc = static_cast<std::uint32_t>(little_endian(entry + 16, 4));
    member.compressed = little_endian(entry + 20, 4);
    member.size = little_endian(entry + 24, 4);
    member.offset = little_endian(entry + 42, 4);
    const std::uint64_t name_length = little_endian(entry + 28, 2),
                        extra_length = little_endian(entry + 30, 2),
                        comment_length = little_endian(entry + 32, 2);
    const unsigned char* name = at(offset + 46, name_length + extra_length, path_);
    member.name.assign(reinterpret_cast<const char*>(name), name_length);
    read_zip64_sizes(name + name_length, extra_length, member);
    members_.push_back(std::move(member));
    return offset + 46 + name_length + extra_length + comment_length;
  }

  // The zip64 extra field holds, in this order, each of the sizes and the offset whose 32-bit
  // field is 0xFFFFFFFF.
  static void read_zip64_sizes(const unsigned char* extra, std::uint64_t length,
                               ZipMember& member) {
    for (std::uint64_t p = 0; p + 4 <= length;) {
      const std::uint64_t id = little_endian(extra + p, 2), size = little_endian(extra + p + 2, 2);
      if (id == 1) {
        std::uint64_t q = p + 4;
        for (std::uint64_t* field : {&member.size, &member.compressed, &member.offset})
          if (*field == 0xFFFFFFFF && q + 8 <= p + 4 + size && q + 8 <= length) {
            *field = little_endian(extra + q, 8);
            q += 8;
          }
      }
      p += 4 + size;
    }
  }

  static Bytes inflate_raw(const unsigned char* data, std::uint64_t compressed, std::uint64_t size,
                           const std::string& origin) {
    Bytes out(size);
    z_stream stream{};
    if (inflateInit2(&stream, -MAX_WBITS) != Z_OK)
      throw InputError(fmt::format("{}: zlib cannot start", origin));
    stream.next_in = const_cast<unsigned char*>(data);
    stream.avail_in = static_cast<uInt>(compressed);
    stream.next_out = out.data();
    stream.avail_out = static_cast<uInt>(size);
    const int result = inflate(&stream, Z_FINISH);
    const bool complete = result == Z_STREAM_END && stream.total_out == size;
    inflateEnd(&stream);
    if (!complete)
      throw InputError(fmt::format("{}: the deflated data are damaged or truncated", origin));
    return out;
  }

  std::string path_;
  Bytes bytes_;
  std::vector<ZipMember> members_;
};

// ---------------------------------------------------------------------------------------------
// .npy

struct NpyArray {
  std::string origin;
  char kind = 0;              // 'f', 'u', 'i', 'U', 'S', ...
  std::size_t item_size = 0;  // bytes per element
  std::vector<std::size_t> shape;
  Bytes bytes;  // the whole file; the values start at data_offset
  std::size_t data_offset = 0;
  std::size_t elements() const {
    std::size_t count = 1;
    for (const auto d : shape) count *= d;
    return count;
  }
  const unsigned char* data() const { return bytes.data() + data_offset; }
  std::string dtype() const { return fmt::format("{}{}", kind, item_size); }
};

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string origin)
      : text_(text), origin_(std::move(origin)) {}

  void parse(std::string& descr, bool& fortran_order, std::vector<std::size_t>& shape) {
    bool has_descr = false, has_order = false, has_shape = false;
    expect('{');
    while (skip_blanks() != '}') {
      const std::string key = quoted();
      expect(':');
      if (key == "descr") {
        if (skip_blanks() == '[')
          bad("a structured dtype (a list of fields); expected one plain numeric dtype");
        descr = quoted();
        has_descr = true;
      } else if (key == "fortran_order") {
        fortran_order = word() == "True";
        has_order = true;
      } else if (key == "shape") {
        shape = tuple();
        has_shape = true;
      } else {
        bad(fmt::format("an unexpected key '{}'", message_excerpt(key)));
      }
      if (skip_blanks() == ',') ++position_;
    }
    if (!has_descr || !has_order || !has_shape)
      bad("the keys 'descr', 'fortran_order' and 'shape' are required");
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    throw InputError(
        fmt::format("{}: a bad .npy header ({}): '{}'", origin_, what, message_excerpt(text_)));
  }

  char skip_blanks() {
    while (position_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[position_])))
      ++position_;
    if (position_ >= text_.size()) bad("it ends early");
    return text_[position_];
  }

  void expect(char c) {
    if (skip_blanks() != c) bad(fmt::format("expected '{}'", c));
    ++position_;
  }

  std::string quoted() {
    const char quote = skip_blanks();
    if (quote != '\'' && quote != '"') bad("expected a quoted string");
    const auto end = text_.find(quote, position_ + 1);
    if (end == std::string_view::npos) bad("a string is not closed");
    std::string value(text_.substr(position_ + 1, end - position_ - 1));
    position_ = end + 1;
    return value;
  }

  std::string word() {
    skip_blanks();
    const auto start = position_;
    while (position_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[position_])))
      ++position_;
    const std::string value(text_.substr(start, position_ - start));
    if (value != "True" && value != "False") bad("fortran_order must be True or False");
    return value;
  }

  std::vector<std::size_t> tuple() {
    expect('(');
    std::vector<std::size_t> values;
    while (skip_blanks() != ')') {
      const auto start = position_;
      while (position_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[position_])))
        ++position_;
      std::size_t value = 0;
      const auto result = std::from_chars(text_.data() + start, text_.data() + position_, value);
      if (position_ == start || result.ec != std::errc()) bad("the shape holds a non-integer");
      values.push_back(value);
      if (skip_blanks() == 'L') ++position_;  // Python 2's long integers
      if (skip_blanks() == ',') ++position_;
    }
    ++position_;
    return values;
  }

  std::string_view text_;
  std::string origin_;
  std::size_t position_ = 0;
};

NpyArray parse_npy(Bytes bytes, const std::string& origin) {
  static constexpr unsigned char kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (bytes.size() < 10 || !std::equal(kMagic, kMagic + 6, bytes.begin()))
    throw InputError(fmt::format("{}: not a .npy array (no \\x93NUMPY magic string)", origin));
  const int major = bytes[6];
  if (major < 1 || major > 3)
    throw InputError(
        fmt::format("{}: .npy format version {} is not supported (1 to 3)", origin, major));
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t header_start = 8 + length_bytes;
  const std::size_t header_length =
      bytes.size() >= header_start ? little_endian(bytes.data() + 8, static_cast<int>(length_bytes))
                                   : 0;
  if (bytes.size() < header_start || bytes.size() - header_start < header_length)
    throw InputError(fmt::format("{}: the file ends inside its .npy header", origin));
  NpyArray array;
  array.origin = origin;
  array.data_offset = header_start + header_length;
  std::string descr;
  bool fortran_order = false;
  HeaderParser(
      std::string_view(reinterpret_cast<const char*>(bytes.data()) + header_start, header_length),
      origin)
      .parse(descr, fortran_order, array.shape);
  if (fortran_order)
    throw InputError(
        fmt::format("{}: the array is in Fortran order; save it in C order "
                    "(numpy.ascontiguousarray)",
                    origin));
  std::size_t item_size = 0;
  const char order = descr.empty() ? '?' : descr[0];
  const auto parsed = std::from_chars(descr.data() + std::min<std::size_t>(2, descr.size()),
                                      descr.data() + descr.size(), item_size);
  if (descr.size() < 3 || std::string_view("<>|=").find(order) == std::string_view::npos ||
      parsed.ec != std::errc() || parsed.ptr != descr.data() + descr.size() || item_size == 0)
    throw InputError(
        fmt::format("{}: dtype '{}' in the .npy header is not a plain numeric or "
                    "string dtype",
                    origin, message_excerpt(descr)));
  array.kind = descr[1];
  // A unicode dtype counts characters of 4 bytes each ('<U10' is 40 bytes).
  if (array.kind == 'U' && __builtin_mul_overflow(item_size, std::size_t{4}, &item_size))
    throw InputError(fmt::format("{}: dtype '{}' is too wide", origin, message_excerpt(descr)));
  array.item_size = item_size;
  const bool byte_order_matters = item_size > 1 && array.kind != 'S';
  if (order == '>' && byte_order_matters)
    throw InputError(
        fmt::format("{}: dtype '{}' is big-endian; save it little-endian "
                    "(array.astype('<{}{}'))",
                    origin, descr, array.kind, item_size));
  std::size_t bytes_needed = item_size;
  for (const auto d : array.shape)
    if (__builtin_mul_overflow(bytes_needed, d, &bytes_needed))
      throw InputError(fmt::format("{}: the header's shape ({}) exceeds 2^64 bytes", origin,
                                   fmt::join(array.shape, ", ")));
  if (bytes.size() - array.data_offset != bytes_needed)
    throw InputError(
        fmt::format("{}: the header's shape ({}) of {} needs {} bytes of data but the "
                    "file holds {} (truncated?)",
                    origin, fmt::join(array.shape, ", "), descr, bytes_needed,
                    bytes.size() - array.data_offset));
  array.bytes = std::move(bytes);
  return array;
}

Features features_of(const NpyArray& array) {
  Features features;
  features.origin = array.origin;
  if (array.shape.size() < 2 || array.shape.size() > 4)
    throw InputError(fmt::format(
        "{} has shape ({}): expected features of rows x columns (or rows x height x width [x "
        "channels] for images)",
        array.origin, fmt::join(array.shape, ", ")));
  features.rows = array.shape[0];
  features.row_shape.assign(array.shape.begin() + 1, array.shape.end());
  const std::size_t n = array.elements();
  const unsigned char* data = array.data();
  features.values.resize(n);
  if (array.kind == 'f' && array.item_size == 4) {
    for (std::size_t i = 0; i < n; ++i) {
      float value;
      std::memcpy(&value, data + 4 * i, 4);
      features.values[i] = value;
    }
  } else if (array.kind == 'f' && array.item_size == 8) {
    std::memcpy(features.values.data(), data, 8 * n);
  } else if (array.kind == 'u' && array.item_size == 1) {
    for (std::size_t i = 0; i < n; ++i) features.values[i] = data[i] / 255.0;
    features.pixels = true;
  } else {
    throw InputError(fmt::format("{} holds dtype {}: expected float32, float64 or uint8 features",
                                 array.origin, array.dtype()));
  }
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(features.values[i]))
      throw InputError(fmt::format("{}: row {} column {} is {}: expected finite numbers",
                                   array.origin, i / features.width(), i % features.width(),
                                   features.values[i]));
  return features;
}

// Unicode ('U': UCS-4 code points, written as UTF-8 here) or byte ('S') strings, without their
// NUL padding.
std::vector<std::string> strings_of(const NpyArray& array) {
  std::vector<std::string> out;
  const std::size_t n = array.elements();
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char* item = array.data() + i * array.item_size;
    std::string text;
    if (array.kind == 'S') {
      text.assign(reinterpret_cast<const char*>(item), array.item_size);
    } else {
      for (std::size_t k = 0; k + 4 <= array.item_size; k += 4) {
        const auto code = static_cast<std::uint32_t>(little_endian(item + k, 4));
        if (code < 0x80) {
          text += static_cast<char>(code);
        } else if (code < 0x800) {
          text += static_cast<char>(0xC0 | (code >> 6));
          text += static_cast<char>(0x80 | (code & 0x3F));
        } else if (code < 0x10000) {
          text += static_cast<char>(0xE0 | (code >> 12));
          text += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
          text += static_cast<char>(0x80 | (code & 0x3F));
        } else {
          text += static_cast<char>(0xF0 | (code >> 18));
          text += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
          text += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
          text += static_cast<char>(0x80 | (code & 0x3F));
        }
      }
    }
    text.erase(std::find(text.begin(), text.end(), '\0'), text.end());
    out.push_back(std::move(text));
  }
  return out;
}

Ids ids_of(const NpyArray& array, const char* what) {
  Ids ids;
  ids.origin = array.origin;
  const auto& shape = array.shape;
  if (shape.empty() || shape.size() > 2 || (shape.size() == 2 && shape[1] != 1))
    throw InputError(
        fmt::format("{} has shape ({}): expected one of the {} per row (rows, or "
                    "rows x 1)",
                    array.origin, fmt::join(shape, ", "), what));
  const std::size_t n = array.elements();
  const unsigned char* data = array.data();
  if (array.kind == 'U' || array.kind == 'S') {
    ids.names = strings_of(array);
  } else if ((array.kind == 'i' && (array.item_size == 4 || array.item_size == 8)) ||
             (array.kind == 'u' && array.item_size == 1)) {
    ids.numbers.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t raw =
          little_endian(data + i * array.item_size, static_cast<int>(array.item_size));
      ids.numbers[i] = array.kind == 'u'      ? static_cast<std::int64_t>(raw)
                       : array.item_size == 4 ? static_cast<std::int32_t>(raw)
                                              : static_cast<std::int64_t>(raw);
    }
  } else {
    throw InputError(
        fmt::format("{} holds dtype {}: expected int32, int64 or uint8 {} (or "
                    "strings)",
                    array.origin, array.dtype(), what));
  }
  return ids;
}

// A .npz archive or a directory of .npy files; an array is found by its name with or without
// ".npy".
class NpyContainer {
 public:
  explicit NpyContainer(std::string path) : path_(std::move(path)) {
    std::error_code ignored;
    if (std::filesystem::is_directory(path_, ignored)) return;
    if (!std::filesystem::is_regular_file(path_, ignored))
      throw InputError(fmt::format("cannot read data file '{}'", path_));
    const Bytes head = first_bytes(path_, 6);
    if (head.size() == 6 && head[0] == 0x93)
      throw InputError(
          fmt::format("{}: a single .npy file; data.path names a .npz archive or a "
                      "directory of .npy files (one for the features, one for the "
                      "labels)",
                      path_));
    archive_.emplace(path_);
  }

  NpyArray array(const std::string& name) const {
    if (archive_) {
      for (const auto& member : archive_->members())
        if (member.name == name || member.name == name + ".npy")
          return parse_npy(archive_->extract(member), fmt::format("{}, array {}", path_, name));
      std::vector<std::string> names;
      for (const auto& member : archive_->members()) names.push_back(member.name);
      throw InputError(fmt::format(
          "{}: no array '{}' (see data.arrays); the archive holds: {}", path_,
          message_excerpt(name),
          message_excerpt(fmt::format("{}", fmt::join(names, ", ")), 4 * kExcerptBytes)));
    }
    std::error_code ignored;
    auto file = std::filesystem::path(path_) / name;
    if (!std::filesystem::is_regular_file(file, ignored)) file += ".npy";
    if (!std::filesystem::is_regular_file(file, ignored))
      throw InputError(fmt::format("{}: no array file '{}' nor '{}.npy' (see data.arrays)", path_,
                                   message_excerpt(name), message_excerpt(name)));
    return parse_npy(read_file(file.string()), file.string());
  }

 private:
  static Bytes first_bytes(const std::string& path, std::size_t count) {
    std::ifstream in(path, std::ios::binary);
    Bytes bytes(count);
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(count));
    bytes.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
    return bytes;
  }

  std::string path_;
  std::optional<ZipArchive> archive_;
};

Split read_split(const NpyContainer& container, const std::string& features,
                 const std::string& labels, const std::string& clients,
                 std::vector<std::string>* client_names) {
  Split split;
  split.features = features_of(container.array(features));
  split.labels = ids_of(container.array(labels), "labels");
  if (!clients.empty()) {
    const Ids ids = ids_of(container.array(clients), "client ids");
    if (ids.size() != split.features.rows)
      throw InputError(
          fmt::format("{} holds {} rows but {} holds {} client ids: expected one "
                      "client id per row",
                      split.features.origin, split.features.rows, ids.origin, ids.size()));
    split.client = arrays::code_clients(ids, *client_names);
  }
  return split;
}

}  // namespace

TrainTest read_npy(const std::string& path, const std::string& test_path, const ArrayNames& names) {
  std::vector<std::string> client_names, column_names;
  std::string names_origin;
  Split train, test;
  {
    const NpyContainer container(path);
    train = read_split(container, names.features, names.labels, names.clients, &client_names);
    if (!names.names.empty()) {
      const NpyArray array = container.array(names.names);
      names_origin = array.origin;
      if ((array.kind != 'U' && array.kind != 'S') || array.shape.size() != 1)
        throw InputError(
            fmt::format("{} holds dtype {} of shape ({}): expected a 1-D array of "
                        "strings (the column names)",
                        array.origin, array.dtype(), fmt::join(array.shape, ", ")));
      column_names = strings_of(array);
    }
    if (!names.test_features.empty() && test_path.empty())
      test = read_split(container, names.test_features, names.test_labels, "", nullptr);
  }
  if (!test_path.empty()) {
    const NpyContainer container(test_path);
    const bool own = !names.test_features.empty();
    test = read_split(container, own ? names.test_features : names.features,
                      own ? names.test_labels : names.labels, "", nullptr);
  }
  const arrays::Naming naming{arrays::base_name(names.labels), arrays::base_name(names.features),
                              std::move(column_names), std::move(names_origin)};
  return arrays::make_tables(train, test, naming, std::move(client_names));
}

}  // namespace fluence
