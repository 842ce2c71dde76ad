#include "fluence/io/results.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include <mpi.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/memory.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/version.hpp"

namespace fluence {

namespace fs = std::filesystem;

namespace {

// The lock on the output directory, held by rank 0 for the life of the process. POSIX record
// locks (fcntl) rather than flock: NFS carries them to the server, and the kernel drops them when
// the process ends, also on SIGKILL. Closing any descriptor of the file would drop them too, so
// the file is opened once and never closed.
int output_lock = -1;
// The output directory when this process created it (rank 0), for remove_unused_output_directory.
std::string created_output;

void lock_output_directory(const fs::path& directory) {
  const fs::path path = directory / ".fluence.lock";
  const int descriptor = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (descriptor < 0)
    throw InputError(fmt::format("output directory '{}': cannot create its lock file {}: {}",
                                 directory.string(), path.string(), std::strerror(errno)));
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (fcntl(descriptor, F_SETLK, &lock) == -1) {
    const int reason = errno;
    if (reason == EACCES || reason == EAGAIN) {
      close(descriptor);
      std::string holder;
      std::ifstream file(path);
      std::getline(file, holder);
      throw InputError(fmt::format(
          "output directory '{}' is in use by another fluence run ({}): wait for it to end, or "
          "give this run another --out",
          directory.string(), holder.empty() ? "holder unknown" : holder));
    }
    // A filesystem without record locks: run unprotected rather than not at all.
    log::warn("output directory '{}': cannot lock {} ({}); two runs there would not be stopped",
              directory.string(), path.string(), std::strerror(reason));
  }
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  const std::string holder = fmt::format("pid {} on host {}", getpid(), host);
  // Only for the message of a refused run: a failed write leaves it "holder unknown".
  [[maybe_unused]] const bool recorded =
      ftruncate(descriptor, 0) == 0 &&
      pwrite(descriptor, holder.data(), holder.size(), 0) == static_cast<ssize_t>(holder.size());
  output_lock = descriptor;
}

}  // namespace

void prepare_output_directory(const std::string& directory, bool overwrite) {
  collective_check([&] {
    if (world_rank() != 0) return;
    std::error_code error;
    const bool existed = fs::exists(directory, error);
    fs::create_directories(directory, error);
    if (error)
      throw InputError(
          fmt::format("output directory '{}' cannot be created: {}", directory, error.message()));
    if (!existed) created_output = directory;
    const fs::path probe = fs::path(directory) / ".fluence_write_test";
    {
      std::ofstream file(probe);
      if (!file)
        throw InputError(
            fmt::format("output directory '{}' is not writable (set output.dir or "
                        "--out to a writable directory)",
                        directory));
    }
    fs::remove(probe, error);
    if (output_lock < 0) lock_output_directory(directory);
    const fs::path results = fs::path(directory) / "results.h5";
    if (!overwrite && fs::exists(results))
      throw InputError(fmt::format(
          "output directory '{}' already holds a finished run's results.h5: give this run another "
          "--out, or pass --force to overwrite it",
          directory));
  });
}

void remove_unused_output_directory() {
  if (created_output.empty() || world_rank() != 0) return;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(created_output, error))
    if (entry.path().filename() != ".fluence.lock") return;  // the run wrote something: keep it
  fs::remove(fs::path(created_output) / ".fluence.lock", error);
  fs::remove(created_output, error);
  created_output.clear();
}

namespace {
void h5_check(long status, const std::string& what) {
  if (status < 0) throw RuntimeError("HDF5 error: " + what);
}

// Creates the intermediate groups of `path` ("/a/b/name").
void create_parents(hid_t file, const std::string& path) {
  for (std::size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string group = path.substr(0, slash);
    if (H5Lexists(file, group.c_str(), H5P_DEFAULT) > 0) continue;
    hid_t id = H5Gcreate2(file, group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    h5_check(id, "create group " + group);
    H5Gclose(id);
  }
}

hid_t create_array(hid_t file, const std::string& path, hid_t type,
                   const std::vector<hsize_t>& dims) {
  create_parents(file, path);
  hid_t space = dims.empty()
                    ? H5Screate(H5S_SCALAR)
                    : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t set = H5Dcreate2(file, path.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Sclose(space);
  h5_check(set, "create dataset " + path);
  return set;
}

void write_array(hid_t file, const std::string& path, hid_t type, const void* data,
                 const std::vector<hsize_t>& dims) {
  hid_t set = create_array(file, path, type, dims);
  const herr_t status = H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(set);
  h5_check(status, "write " + path);
}

// Variable-length UTF-8: what netCDF-4, xarray and h5py read as text without a decode step.
hid_t string_type() {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  return type;
}

std::vector<const char*> c_strings(const std::vector<std::string>& values) {
  std::vector<const char*> pointers;
  for (const auto& value : values) pointers.push_back(value.c_str());
  return pointers;
}

std::string parent_group(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

// The dimension scale `name` seen from the dataset at `path`: in its group or the nearest group
// above (netCDF's scoping rule, which netCDF-C, h5netcdf and xarray follow). Open; the caller
// closes it.
hid_t open_scale(hid_t file, const std::string& path, const std::string& name) {
  for (std::string group = parent_group(path);; group = parent_group(group)) {
    const std::string candidate = (group == "/" ? "" : group) + "/" + name;
    if (candidate != path && H5Lexists(file, candidate.c_str(), H5P_DEFAULT) > 0) {
      hid_t set = H5Dopen2(file, candidate.c_str(), H5P_DEFAULT);
      if (set >= 0 && H5DSis_scale(set) > 0) return set;
      if (set >= 0) H5Dclose(set);
    }
    if (group == "/") break;
  }
  throw RuntimeError(
      fmt::format("results file: {} names the dimension '{}', which no group "
                  "above it defines",
                  path, name));
}

hsize_t scale_length(hid_t scale) {
  hid_t space = H5Dget_space(scale);
  hsize_t length = 0;
  H5Sget_simple_extent_dims(space, &length, nullptr);
  H5Sclose(space);
  return length;
}

std::vector<hsize_t> shape_of(hid_t file, const std::string& path,
                              const std::vector<std::string>& dimensions) {
  std::vector<hsize_t> shape;
  for (const auto& name : dimensions) {
    hid_t scale = open_scale(file, path, name);
    shape.push_back(scale_length(scale));
    H5Dclose(scale);
  }
  return shape;
}

void string_attribute(hid_t file, const std::string& path, const std::string& name,
                      const std::vector<std::string>& values, bool scalar) {
  hid_t type = string_type();
  const hsize_t count = values.size();
  hid_t space = scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &count, nullptr);
  hid_t attr = H5Acreate_by_name(file, path.c_str(), name.c_str(), type, space, H5P_DEFAULT,
                                 H5P_DEFAULT, H5P_DEFAULT);
  h5_check(attr, "attribute " + path + "@" + name);
  const auto pointers = c_strings(values);
  const herr_t status = count == 0 ? 0 : H5Awrite(attr, type, pointers.data());
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
  h5_check(status, "write attribute " + path + "@" + name);
}
}  // namespace

ResultsFile::ResultsFile(const std::string& directory, const std::string& name)
    : root_(world_rank() == 0) {
  final_path_ = (fs::path(directory) / name).string();
  partial_path_ = final_path_ + ".partial";
  if (!root_) return;
  file_ = H5Fcreate(partial_path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  h5_check(file_, "create " + partial_path_);
}

ResultsFile::~ResultsFile() {
  if (!root_ || committed_) return;
  // A failed run (an exception, a full disk) leaves no results.h5.partial behind.
  if (file_ >= 0) H5Fclose(file_);
  std::remove(partial_path_.c_str());
}

void ResultsFile::close_serial() {
  // The id is given up before the status is checked: a failed close (a full disk) must not be
  // closed again by the destructor (that double close was a segfault).
  const long file = file_;
  file_ = -1;
  h5_check(H5Fclose(file), "close " + partial_path_);
}

void ResultsFile::attribute(const std::string& name, const std::string& value) {
  attribute("/", name, value);
}

void ResultsFile::attribute(const std::string& name, std::int64_t value) {
  attribute("/", name, value);
}

void ResultsFile::attribute(const std::string& path, const std::string& name,
                            const std::string& value) {
  if (root_) string_attribute(file_, path, name, {value}, true);
}

void ResultsFile::attribute(const std::string& path, const std::string& name, std::int64_t value) {
  if (!root_) return;
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate_by_name(file_, path.c_str(), name.c_str(), H5T_NATIVE_INT64, space,
                                 H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  h5_check(attr, "attribute " + path + "@" + name);
  h5_check(H5Awrite(attr, H5T_NATIVE_INT64, &value), "write attribute " + name);
  H5Aclose(attr);
  H5Sclose(space);
}

void ResultsFile::attribute(const std::string& path, const std::string& name,
                            const std::vector<std::string>& values) {
  if (root_) string_attribute(file_, path, name, values, false);
}

void ResultsFile::real_attribute(const std::string& path, const std::string& name, double value) {
  if (!root_) return;
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate_by_name(file_, path.c_str(), name.c_str(), H5T_NATIVE_DOUBLE, space,
                                 H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  h5_check(attr, "attribute " + path + "@" + name);
  h5_check(H5Awrite(attr, H5T_NATIVE_DOUBLE, &value), "write attribute " + name);
  H5Aclose(attr);
  H5Sclose(space);
}

void ResultsFile::dimension(const std::string& path, std::size_t size) {
  if (!root_) return;
  // netCDF-4's own layout of such a dimension: a float32 array that is never written (so it
  // takes no space), named by this fixed text and its length.
  hid_t set = create_array(file_, path, H5T_IEEE_F32BE, {static_cast<hsize_t>(size)});
  const std::string name =
      fmt::format("This is a netCDF dimension but not a netCDF variable.{:>10}", size);
  const herr_t status = H5DSset_scale(set, name.c_str());
  H5Dclose(set);
  h5_check(status, "dimension scale " + path);
}

void ResultsFile::write_coordinate(const std::string& path, long type, const void* data,
                                   std::size_t count, const std::string& units,
                                   const std::string& long_name) {
  if (!root_) return;
  write_array(file_, path, type, data, {static_cast<hsize_t>(count)});
  hid_t set = H5Dopen2(file_, path.c_str(), H5P_DEFAULT);
  const herr_t status = H5DSset_scale(set, base_name(path).c_str());
  H5Dclose(set);
  h5_check(status, "dimension scale " + path);
  if (!units.empty()) attribute(path, "units", units);
  attribute(path, "long_name", long_name);
}

void ResultsFile::coordinate(const std::string& path, const std::vector<double>& values,
                             const std::string& units, const std::string& long_name) {
  write_coordinate(path, H5T_NATIVE_DOUBLE, values.data(), values.size(), units, long_name);
}

void ResultsFile::coordinate(const std::string& path, const std::vector<std::int64_t>& values,
                             const std::string& units, const std::string& long_name) {
  write_coordinate(path, H5T_NATIVE_INT64, values.data(), values.size(), units, long_name);
}

void ResultsFile::coordinate(const std::string& path, const std::vector<std::string>& values,
                             const std::string& long_name) {
  if (!root_) return;
  hid_t type = string_type();
  const auto pointers = c_strings(values);
  write_coordinate(path, type, pointers.data(), values.size(), "", long_name);
  H5Tclose(type);
}

void ResultsFile::label(const std::string& path, const Variable& variable) {
  hid_t set = H5Dopen2(file_, path.c_str(), H5P_DEFAULT);
  h5_check(set, "open " + path);
  hid_t space = H5Dget_space(set);
  std::vector<hsize_t> shape(static_cast<std::size_t>(H5Sget_simple_extent_ndims(space)));
  H5Sget_simple_extent_dims(space, shape.data(), nullptr);
  H5Sclose(space);
  const bool fits = shape == shape_of(file_, path, variable.dimensions);
  for (std::size_t axis = 0; fits && axis < shape.size(); ++axis) {
    hid_t scale = open_scale(file_, path, variable.dimensions[axis]);
    const herr_t status = H5DSattach_scale(set, scale, static_cast<unsigned>(axis));
    H5Dclose(scale);
    if (status < 0) H5Dclose(set);
    h5_check(status, "attach dimension " + variable.dimensions[axis] + " to " + path);
  }
  H5Dclose(set);
  if (!fits)
    throw RuntimeError(fmt::format("results file: the shape of {} is not that of its dimensions {}",
                                   path, fmt::join(variable.dimensions, ", ")));
  attribute(path, "units", variable.units);
  attribute(path, "long_name", variable.long_name);
}

void ResultsFile::write_variable(const std::string& path, long type, const void* data,
                                 std::size_t count, const Variable& variable) {
  if (!root_) return;
  create_parents(file_, path);  // the scales are looked up from the array's own group upwards
  const std::vector<hsize_t> shape = shape_of(file_, path, variable.dimensions);
  std::size_t expected = 1;
  for (hsize_t length : shape) expected *= static_cast<std::size_t>(length);
  if (expected != count)
    throw RuntimeError(fmt::format("results file: {} has {} values, its dimensions hold {}", path,
                                   count, expected));
  write_array(file_, path, type, data, shape);
  label(path, variable);
}

void ResultsFile::dataset(const std::string& path, const std::vector<double>& values,
                          const Variable& variable) {
  write_variable(path, H5T_NATIVE_DOUBLE, values.data(), values.size(), variable);
}

void ResultsFile::dataset(const std::string& path, const std::vector<std::int64_t>& values,
                          const Variable& variable) {
  write_variable(path, H5T_NATIVE_INT64, values.data(), values.size(), variable);
}

void ResultsFile::dataset(const std::string& path, const std::vector<double>& values,
                          const std::vector<std::size_t>& shape) {
  if (!root_) return;
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  if (shape.empty()) dims = {static_cast<hsize_t>(values.size())};
  write_array(file_, path, H5T_NATIVE_DOUBLE, values.data(), dims);
}

void ResultsFile::scalar(const std::string& path, double value, const std::string& units,
                         const std::string& long_name) {
  write_variable(path, H5T_NATIVE_DOUBLE, &value, 1, {{}, units, long_name});
}

void ResultsFile::string(const std::string& path, const std::string& value,
                         const std::string& long_name) {
  if (!root_) return;
  hid_t type = string_type();
  const char* text = value.c_str();
  write_array(file_, path, type, &text, {});
  H5Tclose(type);
  attribute(path, "long_name", long_name);
}

void ResultsFile::distributed_rows(const std::string& path, std::size_t total_rows,
                                   std::size_t columns, std::size_t first_row, std::size_t rows,
                                   const double* data, const Variable& variable) {
  write_distributed(path, H5T_NATIVE_DOUBLE, total_rows, columns, first_row, rows, data);
  // After the collective part, on rank 0's serial handle: attaching scales and writing
  // attributes are metadata changes that parallel HDF5 would need every rank to make alike.
  if (root_) label(path, variable);
}

void ResultsFile::distributed_rows(const std::string& path, std::size_t total_rows,
                                   std::size_t columns, std::size_t first_row, std::size_t rows,
                                   const std::int64_t* data, const Variable& variable) {
  write_distributed(path, H5T_NATIVE_INT64, total_rows, columns, first_row, rows, data);
  if (root_) label(path, variable);
}

void ResultsFile::write_distributed(const std::string& path, long type, std::size_t total_rows,
                                    std::size_t columns, std::size_t first_row, std::size_t rows,
                                    const void* data) {
  // Rank 0 holds the file open serially; hand it over to a collective MPI-IO open and back.
  if (root_) close_serial();
  hid_t access = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(access, MPI_COMM_WORLD, MPI_INFO_NULL);
  hid_t shared = H5Fopen(partial_path_.c_str(), H5F_ACC_RDWR, access);
  H5Pclose(access);
  h5_check(shared, "parallel open " + partial_path_);
  create_parents(shared, path);  // metadata calls are collective: every rank makes the same ones
  // columns = 0: a 1-D dataset of total_rows values.
  const int rank_of_set = columns == 0 ? 1 : 2;
  const hsize_t width = columns == 0 ? 1 : columns;
  const hsize_t dims[2] = {total_rows, width};
  hid_t file_space = H5Screate_simple(rank_of_set, dims, nullptr);
  hid_t set =
      H5Dcreate2(shared, path.c_str(), type, file_space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  h5_check(set, "create dataset " + path);
  const hsize_t start[2] = {first_row, 0}, count[2] = {rows, width};
  hid_t memory_space = H5Screate_simple(rank_of_set, count, nullptr);
  if (rows > 0) {
    H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  } else {
    H5Sselect_none(file_space);
    H5Sselect_none(memory_space);
  }
  hid_t transfer = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(transfer, H5FD_MPIO_COLLECTIVE);
  const herr_t status = H5Dwrite(set, type, memory_space, file_space, transfer, data);
  H5Pclose(transfer);
  H5Sclose(memory_space);
  H5Sclose(file_space);
  H5Dclose(set);
  H5Fclose(shared);
  h5_check(status, "collective write " + path);
  if (root_) {
    file_ = H5Fopen(partial_path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    h5_check(file_, "reopen " + partial_path_);
  }
}

std::string ResultsFile::commit() {
  if (root_) {
    close_serial();
    std::error_code error;
    fs::rename(partial_path_, final_path_, error);
    if (error) throw RuntimeError("cannot rename " + partial_path_ + ": " + error.message());
    committed_ = true;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return final_path_;
}

void write_run_attributes(ResultsFile& file, const std::string& command, std::int64_t seed,
                          const std::string& resolved_deck) {
  file.attribute("fluence_version", version());
  file.attribute("git_revision", git_revision());
  file.attribute("command", command);
  file.attribute("ranks", static_cast<std::int64_t>(world_size()));
  // Where the ranks ran: the node count is what splits the node-shared work queues, so a
  // multi-node run can be told from one host's by its results alone.
  file.attribute("/", "hosts", rank_hosts());
  file.attribute("nodes", static_cast<std::int64_t>(shared_memory_nodes()));
  file.attribute("seed", seed);
  file.attribute("deck", resolved_deck);
}

void write_run_resources(ResultsFile& file, double setup_seconds) {
  const std::int64_t peak = peak_resident_bytes().value_or(-1);
  std::vector<std::int64_t> peaks(static_cast<std::size_t>(world_size()));
  MPI_Gather(&peak, 1, MPI_INT64_T, peaks.data(), 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  MPI_Bcast(&setup_seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  file.scalar("/metrics/setup_time_s", setup_seconds, "s",
              "wall time until the data, clients and model were ready (reading, partitioning, "
              "encoding, randomizing, building the model)");
  file.dimension("/metrics/rank", peaks.size());
  file.dataset("/metrics/peak_memory_bytes", peaks,
               {{"rank"}, "bytes", "peak resident memory of each rank (VmHWM)"});
  if (world_rank() != 0) return;
  const auto largest = std::max_element(peaks.begin(), peaks.end());
  if (*largest > 0)
    log::info("peak memory {} (rank {}{})", format_bytes(static_cast<double>(*largest)),
              largest - peaks.begin(), peaks.size() > 1 ? ", the largest" : "");
}

}  // namespace fluence
