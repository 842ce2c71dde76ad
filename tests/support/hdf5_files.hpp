#pragma once
// HDF5 files written by the tests that read them, through the C API: datasets (intermediate
// groups created), string datasets and string attributes.
#include <hdf5.h>

#include <string>
#include <vector>

namespace fluence::testing {

// One file, truncated on construction and closed on destruction.
class H5Writer {
 public:
  explicit H5Writer(const std::string& path)
      : file_(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)) {}
  ~H5Writer() { H5Fclose(file_); }
  H5Writer(const H5Writer&) = delete;
  H5Writer& operator=(const H5Writer&) = delete;

  template <class T>
  void write(const std::string& name, hid_t type, const std::vector<hsize_t>& dims,
             const std::vector<T>& values) {
    const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t set = create(name, type, space);
    H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Dclose(set);
    H5Sclose(space);
  }

  void write_strings(const std::string& name, const std::vector<std::string>& values) {
    const hsize_t count = values.size();
    const hid_t space = H5Screate_simple(1, &count, nullptr);
    const hid_t type = string_type();
    const hid_t set = create(name, type, space);
    const auto pointers = c_strings(values);
    H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, pointers.data());
    H5Dclose(set);
    H5Tclose(type);
    H5Sclose(space);
  }

  void write_strings_attribute(const std::string& dataset, const std::string& name,
                               const std::vector<std::string>& values) {
    const hsize_t count = values.size();
    const hid_t space = H5Screate_simple(1, &count, nullptr);
    const hid_t type = string_type();
    const hid_t set = H5Dopen2(file_, dataset.c_str(), H5P_DEFAULT);
    const hid_t attribute = H5Acreate2(set, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
    const auto pointers = c_strings(values);
    H5Awrite(attribute, type, pointers.data());
    H5Aclose(attribute);
    H5Dclose(set);
    H5Tclose(type);
    H5Sclose(space);
  }

 private:
  hid_t create(const std::string& name, hid_t type, hid_t space) {
    const hid_t links = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(links, 1);
    const hid_t set = H5Dcreate2(file_, name.c_str(), type, space, links, H5P_DEFAULT, H5P_DEFAULT);
    H5Pclose(links);
    return set;
  }

  static hid_t string_type() {
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    return type;
  }

  static std::vector<const char*> c_strings(const std::vector<std::string>& values) {
    std::vector<const char*> pointers;
    for (const auto& value : values) pointers.push_back(value.c_str());
    return pointers;
  }

  hid_t file_;
};

}  // namespace fluence::testing
