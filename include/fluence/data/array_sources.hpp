#pragma once
// Readers for array data: HDF5 files, TFF's federated HDF5 layout, NumPy .npy/.npz and LEAF's JSON.
// Features are numeric attributes; labels become classes (their distinct values, in increasing
// order); client ids, where the data have them, become Table::client. Every problem is an
// InputError naming the file, the dataset (or array, or JSON user) and what was expected.
#include <cstdint>
#include <string>
#include <vector>

#include "fluence/data/dataset.hpp"

namespace fluence {

/// Which arrays hold what ([data.arrays] in the deck). For hdf5 they are dataset paths inside the
/// file; for npy the names of .npz members or of .npy files in a directory (".npy" may be left
/// off); for tff the field names inside every client's group. Filled in by DataConfig::from_deck
/// (the defaults are the declared keys', register_data_keys).
struct ArrayNames {
  std::string features;
  std::string labels;
  std::string clients;          // optional: one client id per row (hdf5, npy)
  std::string names;            // optional: an array of the feature columns' names
  std::string names_attribute;  // hdf5 only: a string-array attribute of the features dataset
  std::string test_features;    // optional: the test split's arrays (with test_labels)
  std::string test_labels;
};

/// Which source rows' feature values a reader keeps (distributed ownership, fl/problem.cpp):
/// ascending row indices into the training arrays and into the test arrays (for TFF, rows count
/// through the client groups in name order). The tables read with it are partial (Table::held):
/// labels and client ids of every row, the values of the requested rows only.
struct RowRequest {
  std::vector<std::int64_t> train, test;
  /// hdf5, tff (data.hdf5_driver = "mpio"): every rank of MPI_COMM_WORLD reads its rows together,
  /// the file opened with the MPI-IO driver and each dataset's rows read by collective H5Dread
  /// calls. Every rank must then call the reader, with the same files and arrays.
  bool collective = false;
};

/// An HDF5 file (parallel HDF5's C API; each rank reads what `rows` asks for, all by default,
/// through MPI-IO when rows->collective, else POSIX): 2-D
/// (or image-shaped N x h x w [x c]) float32/float64 or uint8 features (uint8 values k are read as
/// k / 255, pixels as for IDX), 1-D integer or string labels. The test split comes from
/// `names.test_features` and `names.test_labels` (in `test_path` when given, else in `path`), or,
/// without them, from the same dataset paths in `test_path`; with neither the test table is empty.
TrainTest read_hdf5(const std::string& path, const std::string& test_path, const ArrayNames& names,
                    const RowRequest* rows = nullptr);

/// TensorFlow Federated's HDF5 layout: examples/<client id>/<field>, the client groups in name
/// order becoming the natural clients (Table::client); `names.features` and `names.labels` are
/// the field names. The test file (optional) has the same layout; its rows form the server's test
/// set whatever their client.
TrainTest read_tff(const std::string& path, const std::string& test_path, const ArrayNames& names,
                   const RowRequest* rows = nullptr);

/// NumPy arrays: `path` is a .npz file (stored or deflated members) or a directory of .npy files.
/// Version 1-3 headers, C order, little-endian float32/float64/uint8/int32/int64 (labels and
/// client ids: the integer types; names: unicode or byte strings). Labels, client ids and names
/// are read whole; the features are streamed, only the rows `rows` asks for kept (all by
/// default): a .npy file or a stored member is read at the runs of those rows, a deflated member
/// is decompressed whole in blocks. Its CRC-32 is checked when the member is decompressed or read
/// whole (not when a stored member is read in part).
TrainTest read_npy(const std::string& path, const std::string& test_path, const ArrayNames& names,
                   const RowRequest* rows = nullptr);

/// LEAF's JSON (users, num_samples, user_data: {user: {x, y}}): `path` is a .json file or a
/// directory whose *.json files are read in name order; users become the natural clients in the
/// order the files list them; x rows are numbers or nested arrays of numbers (flattened), y
/// integers. The test directory or file (optional) has the same layout; its rows form the server's
/// test set.
TrainTest read_leaf(const std::string& path, const std::string& test_path);

}  // namespace fluence
