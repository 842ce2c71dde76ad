#pragma once
// NumPy files written by the tests that read them (no numpy needed): .npy arrays and the zip
// archives numpy.savez (stored members) and numpy.savez_compressed (deflated ones) write.
#include <fmt/core.h>
#include <zlib.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fluence::testing {

using Bytes = std::string;

// A .npy file: magic, version 1.0, a header padded with spaces to a multiple of 64 bytes, then
// the raw values.
inline Bytes npy(const std::string& descr, const std::vector<std::size_t>& shape, const void* data,
                 std::size_t bytes, const std::string& order = "False") {
  std::string dims;
  for (const auto d : shape) dims += fmt::format("{}, ", d);
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': ({}), }}", descr, order, dims);
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(data), bytes);
  return out;
}

inline void put_little_endian(Bytes& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

// A zip archive (what numpy.savez writes: stored members; savez_compressed: deflated ones).
inline Bytes zip(const std::vector<std::pair<std::string, Bytes>>& members, bool deflated) {
  Bytes out, directory;
  for (const auto& [name, data] : members) {
    Bytes stored = data;
    if (deflated) {
      z_stream stream{};
      deflateInit2(&stream, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
      stored.resize(deflateBound(&stream, data.size()));
      stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
      stream.avail_in = static_cast<uInt>(data.size());
      stream.next_out = reinterpret_cast<Bytef*>(stored.data());
      stream.avail_out = static_cast<uInt>(stored.size());
      deflate(&stream, Z_FINISH);
      stored.resize(stream.total_out);
      deflateEnd(&stream);
    }
    const auto crc =
        crc32(0L, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size()));
    const std::uint64_t offset = out.size();
    Bytes common;
    put_little_endian(common, 20, 2);  // version needed
    put_little_endian(common, 0, 2);   // flags
    put_little_endian(common, deflated ? 8 : 0, 2);
    put_little_endian(common, 0, 4);  // time and date
    put_little_endian(common, crc, 4);
    put_little_endian(common, stored.size(), 4);
    put_little_endian(common, data.size(), 4);
    put_little_endian(common, name.size(), 2);
    put_little_endian(common, 0, 2);  // extra length
    put_little_endian(out, 0x04034b50, 4);
    out += common + name + stored;
    put_little_endian(directory, 0x02014b50, 4);
    put_little_endian(directory, 20, 2);  // version made by
    directory += common;
    put_little_endian(directory, 0, 2);  // comment length
    put_little_endian(directory, 0, 2);  // disk
    put_little_endian(directory, 0, 2);  // internal attributes
    put_little_endian(directory, 0, 4);  // external attributes
    put_little_endian(directory, offset, 4);
    directory += name;
  }
  const std::uint64_t directory_offset = out.size();
  out += directory;
  put_little_endian(out, 0x06054b50, 4);
  put_little_endian(out, 0, 4);
  put_little_endian(out, members.size(), 2);
  put_little_endian(out, members.size(), 2);
  put_little_endian(out, directory.size(), 4);
  put_little_endian(out, directory_offset, 4);
  put_little_endian(out, 0, 2);
  return out;
}

}  // namespace fluence::testing
