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
#include <memory>
#include <optional>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arrays.hpp"
#include "built_in_sources.hpp"
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

// A file read at given offsets: the .npz directory, an array's header and the runs of wanted rows,
// never the whole file (distributed ownership, issue 25).
class RandomFile {
 public:
  explicit RandomFile(std::string path) : path_(std::move(path)) {
    std::error_code ignored;
    if (std::filesystem::is_regular_file(path_, ignored))
      descriptor_ = ::open(path_.c_str(), O_RDONLY);
    struct stat status {};
    if (descriptor_ < 0 || ::fstat(descriptor_, &status) != 0)
      throw InputError(fmt::format("cannot read data file '{}'", path_));
    size_ = static_cast<std::uint64_t>(status.st_size);
  }
  ~RandomFile() {
    if (descriptor_ >= 0) ::close(descriptor_);
  }
  RandomFile(const RandomFile&) = delete;
  RandomFile& operator=(const RandomFile&) = delete;

  const std::string& path() const { return path_; }
  std::uint64_t size() const { return size_; }

  // `length` bytes from `offset`, which the caller has checked lie within the file.
  void read(std::uint64_t offset, unsigned char* out, std::size_t length) const {
    while (length > 0) {
      const ssize_t count = ::pread(descriptor_, out, length, static_cast<off_t>(offset));
      if (count <= 0) throw InputError(fmt::format("cannot read data file '{}'", path_));
      out += count;
      offset += static_cast<std::uint64_t>(count);
      length -= static_cast<std::size_t>(count);
    }
  }

  Bytes read(std::uint64_t offset, std::size_t length) const {
    Bytes bytes(length);
    read(offset, bytes.data(), length);
    return bytes;
  }

 private:
  std::string path_;
  int descriptor_ = -1;
  std::uint64_t size_ = 0;
};

Bytes read_file(const std::string& path) {
  const RandomFile file(path);
  return file.read(0, file.size());
}

// An array's bytes (a .npy file, or an .npz member) read front to back, with runs passed over:
// a stored array seeks past them, a deflated one decompresses and drops them.
class ByteStream {
 public:
  virtual ~ByteStream() = default;
  std::uint64_t size() const { return size_; }
  std::uint64_t position() const { return position_; }
  // The next `length` bytes (the caller has checked that they exist).
  virtual void read(unsigned char* out, std::size_t length) = 0;
  virtual void skip(std::uint64_t length) = 0;
  // After the last read: where every byte was read, checks the member's CRC-32.
  virtual void finish() = 0;

 protected:
  std::uint64_t size_ = 0, position_ = 0;
};

class StoredStream : public ByteStream {
 public:
  // `crc`: the member's CRC-32 (.npz), checked when every byte is read; none for a .npy file.
  StoredStream(std::shared_ptr<const RandomFile> file, std::uint64_t start, std::uint64_t size,
               std::optional<std::uint32_t> crc, std::string origin)
      : file_(std::move(file)), start_(start), expected_crc_(crc), origin_(std::move(origin)) {
    size_ = size;
  }

  void read(unsigned char* out, std::size_t length) override {
    file_->read(start_ + position_, out, length);
    if (expected_crc_) crc_ = crc32_z(crc_, out, length);
    position_ += length;
  }

  void skip(std::uint64_t length) override {
    skipped_ = skipped_ || length > 0;
    position_ += length;
  }

  // A member read in part cannot be checked without reading the rest: its CRC is not.
  void finish() override {
    if (expected_crc_ && !skipped_ && position_ == size_ && crc_ != *expected_crc_)
      throw InputError(fmt::format("{}: its CRC-32 does not match (a damaged archive?)", origin_));
  }

 private:
  std::shared_ptr<const RandomFile> file_;
  std::uint64_t start_;
  std::optional<std::uint32_t> expected_crc_;
  std::string origin_;
  uLong crc_ = crc32(0L, Z_NULL, 0);
  bool skipped_ = false;
};

class DeflatedStream : public ByteStream {
 public:
  DeflatedStream(std::shared_ptr<const RandomFile> file, std::uint64_t start,
                 std::uint64_t compressed, std::uint64_t size, std::uint32_t crc,
                 std::string origin)
      : file_(std::move(file)),
        next_input_(start),
        input_left_(compressed),
        expected_crc_(crc),
        origin_(std::move(origin)) {
    size_ = size;
    if (inflateInit2(&stream_, -MAX_WBITS) != Z_OK)
      throw InputError(fmt::format("{}: zlib cannot start", origin_));
  }
  ~DeflatedStream() override { inflateEnd(&stream_); }
  DeflatedStream(const DeflatedStream&) = delete;
  DeflatedStream& operator=(const DeflatedStream&) = delete;

  void read(unsigned char* out, std::size_t length) override {
    crc_ = crc32_z(crc_, out, inflate_into(out, length));
    position_ += length;
  }

  void skip(std::uint64_t length) override {
    Bytes scratch(static_cast<std::size_t>(std::min<std::uint64_t>(length, kChunk)));
    while (length > 0) {
      const auto part = static_cast<std::size_t>(std::min<std::uint64_t>(length, kChunk));
      read(scratch.data(), part);
      length -= part;
    }
  }

  // The whole member is decompressed (the rest of it dropped), so that its end and its CRC-32
  // are checked as when it was read whole.
  void finish() override {
    skip(size_ - position_);
    unsigned char beyond = 0;
    if (inflate_into(&beyond, 1, true) != 0) damaged();
    if (crc_ != expected_crc_)
      throw InputError(fmt::format("{}: its CRC-32 does not match (a damaged archive?)", origin_));
  }

 private:
  static constexpr std::size_t kChunk = 1u << 20;

  [[noreturn]] void damaged() const {
    throw InputError(fmt::format("{}: the deflated data are damaged or truncated", origin_));
  }

  // Fills `out` with `length` decompressed bytes; with `at_end`, expects the end of the data
  // instead and returns how many bytes came out beyond it.
  std::size_t inflate_into(unsigned char* out, std::size_t length, bool at_end = false) {
    if (ended_) {  // the end came with the last bytes read
      if (!at_end && length > 0) damaged();
      return 0;
    }
    stream_.next_out = out;
    stream_.avail_out = static_cast<uInt>(length);
    while (stream_.avail_out > 0) {
      if (stream_.avail_in == 0 && input_left_ > 0) {
        input_.resize(static_cast<std::size_t>(std::min<std::uint64_t>(input_left_, kChunk)));
        file_->read(next_input_, input_.data(), input_.size());
        next_input_ += input_.size();
        input_left_ -= input_.size();
        stream_.next_in = input_.data();
        stream_.avail_in = static_cast<uInt>(input_.size());
      }
      const int result = inflate(&stream_, Z_NO_FLUSH);
      if (result == Z_STREAM_END) {
        ended_ = true;
        break;
      }
      if (result != Z_OK) damaged();
    }
    const std::size_t produced = length - stream_.avail_out;
    if (!at_end && produced != length) damaged();
    return produced;
  }

  std::shared_ptr<const RandomFile> file_;
  std::uint64_t next_input_, input_left_;
  std::uint32_t expected_crc_;
  std::string origin_;
  z_stream stream_{};
  bool ended_ = false;
  Bytes input_;
  uLong crc_ = crc32(0L, Z_NULL, 0);
};

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
  explicit ZipArchive(std::string path)
      : path_(std::move(path)), file_(std::make_shared<const RandomFile>(path_)) {
    read_directory();
  }

  const std::vector<ZipMember>& members() const { return members_; }

  // A member whole (the labels, client ids and names: one number or string a row).
  Bytes extract(const ZipMember& member) const {
    const auto stream = open(member);
    Bytes out(static_cast<std::size_t>(stream->size()));
    stream->read(out.data(), out.size());
    stream->finish();
    return out;
  }

  // Reads the member through, checking it as extract does, in blocks of bounded size: a damaged
  // member is reported as damaged before anything read from it is judged.
  void verify(const ZipMember& member) const {
    const auto stream = open(member);
    Bytes block;
    while (stream->position() < stream->size()) {
      block.resize(static_cast<std::size_t>(
          std::min<std::uint64_t>(stream->size() - stream->position(), 1u << 20)));
      stream->read(block.data(), block.size());
    }
    stream->finish();
  }

  // A member to read front to back (the features).
  std::unique_ptr<ByteStream> open(const ZipMember& member) const {
    const std::string origin = fmt::format("{}, member {}", path_, member.name);
    if (member.offset > file_->size() || file_->size() - member.offset < 30) truncated(origin);
    const Bytes local = file_->read(member.offset, 30);
    if (little_endian(local.data(), 4) != 0x04034b50) damaged("a member's local header is missing");
    const std::uint64_t start =
        member.offset + 30 + little_endian(&local[26], 2) + little_endian(&local[28], 2);
    if (start > file_->size() || file_->size() - start < member.compressed) truncated(origin);
    if (member.flags & 1u) throw InputError(fmt::format("{}: the member is encrypted", origin));
    if (member.method == 0) {
      if (member.compressed != member.size) damaged("a stored member's sizes differ");
      return std::make_unique<StoredStream>(file_, start, member.size, member.crc, origin);
    }
    if (member.method == 8)
      return std::make_unique<DeflatedStream>(file_, start, member.compressed, member.size,
                                              member.crc, origin);
    throw InputError(
        fmt::format("{}: compression method {} is not supported (stored or "
                    "deflated members only, as numpy.savez and savez_compressed "
                    "write)",
                    origin, member.method));
  }

 private:
  [[noreturn]] void damaged(const std::string& what) const {
    throw InputError(fmt::format("{}: not a readable .npz (zip) archive: {}", path_, what));
  }

  [[noreturn]] static void truncated(const std::string& origin) {
    throw InputError(
        fmt::format("{}: the archive ends before the member's data (truncated?)", origin));
  }

  // `length` bytes of the directory part of the file (read from directory_start_ to its end).
  const unsigned char* at(std::uint64_t offset, std::uint64_t length) const {
    if (offset < directory_start_ || offset - directory_start_ > directory_.size() ||
        length > directory_.size() - (offset - directory_start_))
      truncated(path_);
    return directory_.data() + (offset - directory_start_);
  }

  // The end-of-central-directory record: the last 22 bytes plus a comment of up to 65,535.
  std::uint64_t find_end_record() {
    if (file_->size() < 22) damaged("too short for a zip archive");
    directory_start_ = file_->size() > 22 + 65535 ? file_->size() - 22 - 65535 : 0;
    directory_ = file_->read(directory_start_, file_->size() - directory_start_);
    for (std::size_t p = directory_.size() - 22;; --p) {
      if (little_endian(directory_.data() + p, 4) == 0x06054b50) return directory_start_ + p;
      if (p == 0) break;
    }
    damaged("no end-of-central-directory record");
  }

  // Reads the directory from `offset` to the end of the file (the central directory, the zip64
  // records and the end record: small beside the members).
  void read_from(std::uint64_t offset) {
    if (offset >= directory_start_) return;
    if (offset > file_->size()) truncated(path_);
    directory_start_ = offset;
    directory_ = file_->read(offset, file_->size() - offset);
  }

  void read_directory() {
    const std::uint64_t end = find_end_record();
    const unsigned char* record = at(end, 22);
    std::uint64_t entries = little_endian(record + 10, 2);
    std::uint64_t offset = little_endian(record + 16, 4);
    if (entries == 0xFFFF || offset == 0xFFFFFFFF) {  // zip64: the locator precedes the record
      if (end < 20) damaged("a zip64 archive without its locator");
      read_from(end - 20);
      if (little_endian(at(end - 20, 4), 4) != 0x07064b50)
        damaged("a zip64 archive without its locator");
      const std::uint64_t zip64 = little_endian(at(end - 16, 8), 8);
      read_from(zip64);
      const unsigned char* record64 = at(zip64, 56);
      if (little_endian(record64, 4) != 0x06064b50) damaged("the zip64 record is missing");
      entries = little_endian(record64 + 32, 8);
      offset = little_endian(record64 + 48, 8);
    }
    read_from(offset);
    for (std::uint64_t i = 0; i < entries; ++i) offset = read_entry(offset);
  }

  std::uint64_t read_entry(std::uint64_t offset) {
    const unsigned char* entry = at(offset, 46);
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
    const unsigned char* name = at(offset + 46, name_length + extra_length);
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

  std::string path_;
  std::shared_ptr<const RandomFile> file_;
  std::uint64_t directory_start_ = 0;
  Bytes directory_;  // the file from directory_start_ to its end
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

// Where the header of an array of `total` bytes ends (its data start), from its first bytes
// (`head`: 12 of them or all there are); 0 when they are not a .npy array's (parse_npy_header
// then says what is wrong).
std::uint64_t npy_header_end(const Bytes& head, std::uint64_t total) {
  static constexpr unsigned char kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (head.size() < 12 || !std::equal(kMagic, kMagic + 6, head.begin())) return 0;
  const std::uint64_t length_bytes = head[6] == 1 ? 2 : 4;
  return std::min(total,
                  8 + length_bytes + little_endian(&head[8], static_cast<int>(length_bytes)));
}

// The array's description from `bytes`, which begin with its magic string and header (and may
// hold no data), for an array of `total` bytes in all.
NpyArray parse_npy_header(const Bytes& bytes, std::uint64_t total, const std::string& origin) {
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
  if (bytes.size() < header_start || total - header_start < header_length ||
      bytes.size() - header_start < header_length)
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
  if (total - array.data_offset != bytes_needed)
    throw InputError(fmt::format(
        "{}: the header's shape ({}) of {} needs {} bytes of data but the "
        "file holds {} (truncated?)",
        origin, fmt::join(array.shape, ", "), descr, bytes_needed, total - array.data_offset));
  return array;
}

// A small array (labels, client ids, names) held whole.
NpyArray parse_npy(Bytes bytes, const std::string& origin) {
  NpyArray array = parse_npy_header(bytes, bytes.size(), origin);
  array.bytes = std::move(bytes);
  return array;
}

// A streamed array's description, the stream left at its first value.
NpyArray read_npy_header(ByteStream& stream, const std::string& origin) {
  Bytes head(static_cast<std::size_t>(std::min<std::uint64_t>(12, stream.size())));
  stream.read(head.data(), head.size());
  const std::uint64_t end = npy_header_end(head, stream.size());
  if (end > head.size()) {
    const std::size_t read = head.size();
    head.resize(static_cast<std::size_t>(end));
    stream.read(head.data() + read, head.size() - read);
  }
  return parse_npy_header(head, stream.size(), origin);
}

// The features' shape and kind from their header: rows x columns (or rows x height x width [x
// channels]) of float32, float64 or uint8 (pixels), no values yet.
Features feature_shape(const NpyArray& array) {
  Features features;
  features.origin = array.origin;
  if (array.shape.size() < 2 || array.shape.size() > 4)
    throw InputError(fmt::format(
        "{} has shape ({}): expected features of rows x columns (or rows x height x width [x "
        "channels] for images)",
        array.origin, fmt::join(array.shape, ", ")));
  const bool known = (array.kind == 'f' && (array.item_size == 4 || array.item_size == 8)) ||
                     (array.kind == 'u' && array.item_size == 1);
  if (!known)
    throw InputError(fmt::format("{} holds dtype {}: expected float32, float64 or uint8 features",
                                 array.origin, array.dtype()));
  features.rows = array.shape[0];
  features.row_shape.assign(array.shape.begin() + 1, array.shape.end());
  features.pixels = array.kind == 'u';
  return features;
}

// Appends `rows` rows of raw values (`block`) to features.values as doubles; the first is row
// `first` of the array, for the message that names a value that is not finite.
void append_values(const unsigned char* block, const NpyArray& array, std::size_t first,
                   std::size_t rows, Features& features) {
  const std::size_t n = rows * features.width(), start = features.values.size();
  features.values.resize(start + n);
  double* out = features.values.data() + start;
  if (array.kind == 'f' && array.item_size == 4) {
    for (std::size_t i = 0; i < n; ++i) {
      float value;
      std::memcpy(&value, block + 4 * i, 4);
      out[i] = value;
    }
  } else if (array.kind == 'f') {
    std::memcpy(out, block, 8 * n);
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = block[i] / 255.0;
  }
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(out[i]))
      throw InputError(fmt::format("{}: row {} column {} is {}: expected finite numbers",
                                   array.origin, first + i / features.width(), i % features.width(),
                                   out[i]));
}

// The values of rows `wanted` (ascending; every row without it), streamed from `stream` (at the
// array's first value) in blocks of at most 16 MiB, each converted to doubles before the next is
// read, so that the memory is the rows kept and one block. A block spans wanted rows with gaps of
// at most 1 MiB between them, read through and dropped (rows dealt at random, as `iid` does, would
// otherwise cost a read call or two per row); a longer gap is passed over (a stored array seeks
// past it). The values of the rows not kept are not checked.
void read_feature_rows(ByteStream& stream, const NpyArray& array,
                       const std::vector<std::int64_t>* wanted, Features& features) {
  if (wanted) {
    features.partial = true;
    const auto end =
        std::lower_bound(wanted->begin(), wanted->end(), static_cast<std::int64_t>(features.rows));
    features.held.assign(wanted->begin(), end);
  }
  const std::size_t count = wanted ? features.held.size() : features.rows;
  const std::size_t row_bytes = features.width() * array.item_size;
  constexpr std::size_t kBlockBytes = std::size_t{16} << 20, kGapBytes = std::size_t{1} << 20;
  const std::size_t block_rows =
      std::max<std::size_t>(1, kBlockBytes / std::max<std::size_t>(row_bytes, 1));
  const auto row_at = [&](std::size_t i) {
    return wanted ? static_cast<std::size_t>(features.held[i]) : i;
  };
  features.values.reserve(count * features.width());
  Bytes block;
  std::size_t next_row = 0;  // the row the stream is at
  for (std::size_t i = 0; i < count;) {
    const std::size_t first = row_at(i);
    std::size_t end = i + 1;  // the block's wanted rows are i .. end - 1
    while (end < count && row_at(end) - first < block_rows &&
           (row_at(end) - row_at(end - 1) - 1) * row_bytes <= kGapBytes)
      ++end;
    const std::size_t span = row_at(end - 1) - first + 1;
    stream.skip((first - next_row) * row_bytes);
    block.resize(span * row_bytes);
    stream.read(block.data(), block.size());
    for (std::size_t k = i; k < end;) {  // runs of consecutive wanted rows
      std::size_t run = 1;
      while (k + run < end && row_at(k + run) == row_at(k) + run) ++run;
      append_values(block.data() + (row_at(k) - first) * row_bytes, array, row_at(k), run,
                    features);
      k += run;
    }
    next_row = first + span;
    i = end;
  }
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

// The features streamed from `stream`, with the values of the rows `wanted` only (every row
// without it; none when it is empty: the first pass of distributed ownership reads the header
// alone).
Features read_features(ByteStream& stream, const std::string& origin,
                       const std::vector<std::int64_t>* wanted) {
  const NpyArray array = read_npy_header(stream, origin);
  Features features = feature_shape(array);
  if (wanted && wanted->empty()) {
    features.partial = true;
    return features;
  }
  read_feature_rows(stream, array, wanted, features);
  stream.finish();
  return features;
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

  // A small array (labels, client ids, names), read whole.
  NpyArray array(const std::string& name) const {
    std::string origin;
    if (archive_) {
      const ZipMember& found = member(name, origin);
      return parse_npy(archive_->extract(found), origin);
    }
    const std::string file = array_file(name);
    return parse_npy(read_file(file), file);
  }

  // The features `name`, with the values of the rows `wanted` only (every row without it; none
  // when it is empty: the first pass of distributed ownership reads the header alone).
  Features features(const std::string& name, const std::vector<std::int64_t>* wanted) const {
    if (!archive_) {
      const std::string file = array_file(name);
      auto opened = std::make_shared<const RandomFile>(file);
      const std::uint64_t size = opened->size();
      StoredStream stream(std::move(opened), 0, size, std::nullopt, file);
      return read_features(stream, file, wanted);
    }
    std::string origin;
    const ZipMember& found = member(name, origin);
    try {
      return read_features(*archive_->open(found), origin, wanted);
    } catch (const InputError&) {
      archive_->verify(found);  // as when members were read whole: damage is reported first
      throw;
    }
  }

 private:
  const ZipMember& member(const std::string& name, std::string& origin) const {
    origin = fmt::format("{}, array {}", path_, name);
    for (const auto& member : archive_->members())
      if (member.name == name || member.name == name + ".npy") return member;
    std::vector<std::string> names;
    for (const auto& member : archive_->members()) names.push_back(member.name);
    throw InputError(fmt::format(
        "{}: no array '{}' (see data.arrays); the archive holds: {}", path_, message_excerpt(name),
        message_excerpt(fmt::format("{}", fmt::join(names, ", ")), 4 * kExcerptBytes)));
  }

  std::string array_file(const std::string& name) const {
    std::error_code ignored;
    auto file = std::filesystem::path(path_) / name;
    if (!std::filesystem::is_regular_file(file, ignored)) file += ".npy";
    if (!std::filesystem::is_regular_file(file, ignored))
      throw InputError(fmt::format("{}: no array file '{}' nor '{}.npy' (see data.arrays)", path_,
                                   message_excerpt(name), message_excerpt(name)));
    return file.string();
  }

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
                 std::vector<std::string>* client_names, const std::vector<std::int64_t>* wanted) {
  Split split;
  split.features = container.features(features, wanted);
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

TrainTest read_npy(const std::string& path, const std::string& test_path, const ArrayNames& names,
                   const RowRequest* rows) {
  const std::vector<std::int64_t>* train_rows = rows ? &rows->train : nullptr;
  const std::vector<std::int64_t>* test_rows = rows ? &rows->test : nullptr;
  std::vector<std::string> client_names, column_names;
  std::string names_origin;
  Split train, test;
  {
    const NpyContainer container(path);
    train = read_split(container, names.features, names.labels, names.clients, &client_names,
                       train_rows);
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
      test = read_split(container, names.test_features, names.test_labels, "", nullptr, test_rows);
  }
  if (!test_path.empty()) {
    const NpyContainer container(test_path);
    const bool own = !names.test_features.empty();
    test = read_split(container, own ? names.test_features : names.features,
                      own ? names.test_labels : names.labels, "", nullptr, test_rows);
  }
  const arrays::Naming naming{arrays::base_name(names.labels), arrays::base_name(names.features),
                              std::move(column_names), std::move(names_origin)};
  return arrays::make_tables(train, test, naming, std::move(client_names));
}

namespace built_in_sources {

DataSourceSpec npy() {
  return array_source("npy",
                      {"data.arrays.features", "data.arrays.labels", "data.arrays.clients",
                       "data.arrays.names", "data.arrays.test_features", "data.arrays.test_labels"},
                      read_npy);
}

}  // namespace built_in_sources

}  // namespace fluence
