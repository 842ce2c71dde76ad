#pragma once
// Reading a string attribute of an HDF5 object in either form Fluence has written: variable-length
// UTF-8 (results and checkpoints since issue 27) or fixed-length (older files); and a string
// dataset (the names a results file holds in /model/feature and /model/class).
#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace fluence::io_detail {

/// The attribute's strings (one for a scalar attribute); empty when it is absent or unreadable.
inline std::vector<std::string> read_string_attribute(hid_t object, const char* name) {
  if (H5Aexists(object, name) <= 0) return {};
  hid_t attr = H5Aopen(object, name, H5P_DEFAULT);
  hid_t type = H5Aget_type(attr);
  hid_t space = H5Aget_space(attr);
  const auto count = static_cast<std::size_t>(H5Sget_simple_extent_npoints(space));
  std::vector<std::string> values;
  hid_t memory = H5Tcopy(H5T_C_S1);
  if (H5Tget_class(type) != H5T_STRING) {
    // not text: no strings
  } else if (H5Tis_variable_str(type) > 0) {
    H5Tset_size(memory, H5T_VARIABLE);
    H5Tset_cset(memory, H5Tget_cset(type));
    std::vector<char*> pointers(count, nullptr);
    if (H5Aread(attr, memory, pointers.data()) >= 0) {
      for (char* text : pointers) values.emplace_back(text ? text : "");
      H5Dvlen_reclaim(memory, space, H5P_DEFAULT, pointers.data());
    }
  } else {
    const std::size_t length = H5Tget_size(type);
    std::vector<char> packed(count * length + 1, '\0');
    H5Tset_size(memory, length);
    if (H5Aread(attr, memory, packed.data()) >= 0)
      for (std::size_t i = 0; i < count; ++i) {
        const char* start = packed.data() + i * length;
        values.emplace_back(start, strnlen(start, length));
      }
  }
  H5Tclose(memory);
  H5Sclose(space);
  H5Tclose(type);
  H5Aclose(attr);
  return values;
}

/// A 1-D variable-length string dataset's values; empty when it is absent or unreadable.
inline std::vector<std::string> read_string_dataset(hid_t file, const char* path) {
  if (H5Lexists(file, path, H5P_DEFAULT) <= 0) return {};
  hid_t set = H5Dopen2(file, path, H5P_DEFAULT);
  if (set < 0) return {};
  hid_t type = H5Dget_type(set);
  hid_t space = H5Dget_space(set);
  const auto count =
      static_cast<std::size_t>(std::max<hssize_t>(H5Sget_simple_extent_npoints(space), 0));
  std::vector<std::string> values;
  if (H5Tget_class(type) == H5T_STRING && H5Tis_variable_str(type) > 0) {
    hid_t memory = H5Tcopy(H5T_C_S1);
    H5Tset_size(memory, H5T_VARIABLE);
    H5Tset_cset(memory, H5Tget_cset(type));
    std::vector<char*> pointers(count, nullptr);
    if (H5Dread(set, memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, pointers.data()) >= 0) {
      for (char* text : pointers) values.emplace_back(text ? text : "");
      H5Dvlen_reclaim(memory, space, H5P_DEFAULT, pointers.data());
    }
    H5Tclose(memory);
  }
  H5Sclose(space);
  H5Tclose(type);
  H5Dclose(set);
  return values;
}

}  // namespace fluence::io_detail
