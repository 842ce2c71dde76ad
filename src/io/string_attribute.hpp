#pragma once
// Reading a string attribute of an HDF5 object in either form Fluence has written: variable-length
// UTF-8 (results and checkpoints since issue 27) or fixed-length (older files).
#include <hdf5.h>

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

}  // namespace fluence::io_detail
