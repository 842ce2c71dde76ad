#include "fluence/io/results.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include <mpi.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>
#include <utility>

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

constexpr const char* kNoSpace = "no space left on device";

// The bytes free for this process on the file system holding `path` (+inf when unknown).
double free_bytes(const fs::path& path) {
  struct statvfs status {};
  if (statvfs(path.c_str(), &status) != 0) return std::numeric_limits<double>::infinity();
  return static_cast<double>(status.f_bavail) * static_cast<double>(status.f_frsize);
}

// Whether the file system holding `directory` is (nearly) full: the reason of a failed write when
// HDF5's error stack does not carry errno's (the MPI-IO driver reports MPI's error class).
bool out_of_space(const fs::path& directory) {
  return free_bytes(directory) < 1048576.0;
}

// Refuses (a RuntimeError saying kNoSpace) to write `bytes` of data into `file` and flush it when
// its file system has not room for them and for what a flush may add: the file's allocated size
// beyond its blocks on disk and its metadata cache (an upper bound of the dirty entries), with a
// margin. HDF5 1.10 does not survive a failed flush: its metadata cache is left "slist already
// enabled", the file cannot be closed any more, and HDF5's clean-up at MPI_Finalize crashes on
// it. A full disk must therefore be found before the flush, by this check.
void require_room(hid_t file, double bytes) {
  const ssize_t length = H5Fget_name(file, nullptr, 0);
  if (length <= 0) return;
  std::string path(static_cast<std::size_t>(length), '\0');
  H5Fget_name(file, path.data(), path.size() + 1);
  hsize_t size = 0;
  std::size_t cache_max = 0, cache_min_clean = 0, cache_size = 0;
  int entries = 0;
  if (H5Fget_filesize(file, &size) < 0 ||
      H5Fget_mdc_size(file, &cache_max, &cache_min_clean, &cache_size, &entries) < 0)
    return;
  struct stat status {};
  const double on_disk =
      stat(path.c_str(), &status) == 0 ? 512.0 * static_cast<double>(status.st_blocks) : 0.0;
  constexpr double kMargin = 65536.0;
  const double needed = bytes + std::max(0.0, static_cast<double>(size) - on_disk) +
                        static_cast<double>(cache_size) + kMargin;
  if (free_bytes(path) < needed) throw RuntimeError(kNoSpace);
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
  double bytes = static_cast<double>(H5Tget_size(type));
  for (const hsize_t length : dims) bytes *= static_cast<double>(length);
  require_room(file, bytes);
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

// While a results file is open, HDF5's error stack is not printed (up to 149 lines of it on a full
// disk): the operating system's reason it carries ("errno = 28, error message = 'No space left
// on device'") is kept for the one line that names the failure.
class ResultsFile::ErrorCapture {
 public:
  ErrorCapture() {
    H5Eget_auto2(H5E_DEFAULT, &function_, &data_);
    H5Eset_auto2(H5E_DEFAULT, &ErrorCapture::capture, this);
  }
  ~ErrorCapture() { H5Eset_auto2(H5E_DEFAULT, function_, data_); }
  ErrorCapture(const ErrorCapture&) = delete;
  ErrorCapture& operator=(const ErrorCapture&) = delete;

  /// The reason kept since the last call ("" when none), forgotten.
  std::string take() { return std::exchange(reason_, std::string()); }

 private:
  static herr_t capture(hid_t stack, void* self) {
    H5Ewalk2(stack, H5E_WALK_DOWNWARD, &ErrorCapture::visit, self);
    return 0;
  }
  static herr_t visit(unsigned, const H5E_error2_t* error, void* self) {
    auto& reason = static_cast<ErrorCapture*>(self)->reason_;
    if (!reason.empty() || error == nullptr || error->desc == nullptr) return 0;
    const std::string text = error->desc;
    constexpr std::string_view kMarker = "error message = '";
    if (const auto at = text.find(kMarker); at != std::string::npos) {
      const auto start = at + kMarker.size();
      reason = text.substr(start, text.find('\'', start) - start);
    } else if (text.find("MPI_ERR_NO_SPACE") != std::string::npos) {
      reason = "no space left on device";
    } else if (text.find("MPI_ERR_QUOTA") != std::string::npos) {
      reason = "disk quota exceeded";
    }
    return 0;
  }

  H5E_auto2_t function_ = nullptr;
  void* data_ = nullptr;
  std::string reason_;
};

template <class Work>
void ResultsFile::on_root(Work&& work) {
  if (!root_ || !failure_.empty()) return;
  capture_->take();  // a reason from before this write is not its reason
  try {
    work();
  } catch (const RuntimeError& error) {
    keep_failure(error.what());
  }
}

void ResultsFile::keep_failure(const std::string& what) {
  if (!failure_.empty()) return;
  std::string reason = what == kNoSpace ? what : capture_->take();
  if (reason.empty() && out_of_space(fs::path(partial_path_).parent_path())) reason = kNoSpace;
  if (!reason.empty()) {
    reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
    failure_ = fmt::format("{} writing {}", reason, final_path_);
  } else {
    failure_ = fmt::format("writing {}: {}", final_path_, what);
  }
  if (root_) abandon_file();
}

void ResultsFile::abandon_file() {
  if (file_ >= 0) {
    // The close still flushes HDF5's cached metadata: into memory, not into the full disk. A flush
    // that fails leaves HDF5 1.10's metadata cache unusable (require_room), and HDF5's own
    // clean-up at MPI_Finalize then crashes on the file it could not close.
    void* handle = nullptr;
    if (H5Fget_vfd_handle(file_, H5P_DEFAULT, &handle) >= 0 && handle != nullptr) {
      const int memory = memfd_create("fluence-abandoned", MFD_CLOEXEC);
      if (memory >= 0) {
        dup2(memory, *static_cast<int*>(handle));
        close(memory);
      }
    }
    H5Fclose(file_);
    file_ = -1;
  }
  std::remove(partial_path_.c_str());
}

void ResultsFile::agree_on_failure() {
  int first = failure_.empty() ? world_size() : world_rank();
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first == world_size()) return;
  throw WriteError(broadcast_string(failure_, first));
}

ResultsFile::ResultsFile(const std::string& directory, const std::string& name)
    : capture_(std::make_unique<ErrorCapture>()), root_(world_rank() == 0) {
  final_path_ = (fs::path(directory) / name).string();
  partial_path_ = final_path_ + ".partial";
  on_root([&] {
    file_ = H5Fcreate(partial_path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    h5_check(file_, "create " + partial_path_);
  });
}

ResultsFile::~ResultsFile() {
  if (!root_ || committed_) return;
  // A failed run (an exception, a full disk) leaves no results.h5.partial behind, and its
  // metadata are not flushed into a file that is removed (the disk may be full).
  abandon_file();
}

void ResultsFile::close_serial() {
  require_room(file_, 0.0);  // before the close's flush (require_room says why)
  // The id is given up before the status is checked: a failed close must not be closed again by
  // the destructor (that double close was a segfault).
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
  on_root([&] { string_attribute(file_, path, name, {value}, true); });
}

void ResultsFile::attribute(const std::string& path, const std::string& name, std::int64_t value) {
  on_root([&] {
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate_by_name(file_, path.c_str(), name.c_str(), H5T_NATIVE_INT64, space,
                                   H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Sclose(space);
    h5_check(attr, "attribute " + path + "@" + name);
    const herr_t status = H5Awrite(attr, H5T_NATIVE_INT64, &value);
    H5Aclose(attr);
    h5_check(status, "write attribute " + name);
  });
}

void ResultsFile::attribute(const std::string& path, const std::string& name,
                            const std::vector<std::string>& values) {
  // Each variable-length string takes 16 bytes of the attribute's object-header message, which
  // HDF5 caps at 64 KiB: beyond that H5Acreate fails (and the run was lost at its last step).
  if (values.size() <= kMaxAttributeStrings)
    on_root([&] { string_attribute(file_, path, name, values, false); });
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
  on_root([&] {
    // netCDF-4's own layout of such a dimension: a float32 array that is never written (so it
    // takes no space), named by this fixed text and its length.
    hid_t set = create_array(file_, path, H5T_IEEE_F32BE, {static_cast<hsize_t>(size)});
    const std::string name =
        fmt::format("This is a netCDF dimension but not a netCDF variable.{:>10}", size);
    const herr_t status = H5DSset_scale(set, name.c_str());
    H5Dclose(set);
    h5_check(status, "dimension scale " + path);
  });
}

void ResultsFile::write_coordinate(const std::string& path, long type, const void* data,
                                   std::size_t count, const std::string& units,
                                   const std::string& long_name) {
  on_root([&] {
    write_array(file_, path, type, data, {static_cast<hsize_t>(count)});
    hid_t set = H5Dopen2(file_, path.c_str(), H5P_DEFAULT);
    const herr_t status = H5DSset_scale(set, base_name(path).c_str());
    H5Dclose(set);
    h5_check(status, "dimension scale " + path);
    if (!units.empty()) attribute(path, "units", units);
    attribute(path, "long_name", long_name);
  });
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
  // Called by rank 0 inside on_root: its failures are kept by the caller.
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
  on_root([&] {
    create_parents(file_, path);  // the scales are looked up from the array's own group upwards
    const std::vector<hsize_t> shape = shape_of(file_, path, variable.dimensions);
    std::size_t expected = 1;
    for (hsize_t length : shape) expected *= static_cast<std::size_t>(length);
    if (expected != count)
      throw RuntimeError(fmt::format("results file: {} has {} values, its dimensions hold {}", path,
                                     count, expected));
    write_array(file_, path, type, data, shape);
    label(path, variable);
  });
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
  on_root([&] {
    std::vector<hsize_t> dims(shape.begin(), shape.end());
    if (shape.empty()) dims = {static_cast<hsize_t>(values.size())};
    write_array(file_, path, H5T_NATIVE_DOUBLE, values.data(), dims);
  });
}

void ResultsFile::scalar(const std::string& path, double value, const std::string& units,
                         const std::string& long_name) {
  write_variable(path, H5T_NATIVE_DOUBLE, &value, 1, {{}, units, long_name});
}

void ResultsFile::string(const std::string& path, const std::string& value,
                         const std::string& long_name) {
  on_root([&] {
    hid_t type = string_type();
    const char* text = value.c_str();
    write_array(file_, path, type, &text, {});
    H5Tclose(type);
    attribute(path, "long_name", long_name);
  });
}

void ResultsFile::strings(const std::string& path, const std::vector<std::string>& values,
                          const std::string& dimension, const std::string& long_name) {
  on_root([&] {
    create_parents(file_, path);
    const std::vector<hsize_t> shape = shape_of(file_, path, {dimension});
    if (shape.front() != values.size())
      throw RuntimeError(fmt::format("results file: {} has {} values, its dimension {} holds {}",
                                     path, values.size(), dimension, shape.front()));
    hid_t type = string_type();
    const auto pointers = c_strings(values);
    write_array(file_, path, type, pointers.data(), shape);
    H5Tclose(type);
    hid_t set = H5Dopen2(file_, path.c_str(), H5P_DEFAULT);
    h5_check(set, "open " + path);
    hid_t scale = open_scale(file_, path, dimension);
    const herr_t status = H5DSattach_scale(set, scale, 0);
    H5Dclose(scale);
    H5Dclose(set);
    h5_check(status, "attach dimension " + dimension + " to " + path);
    attribute(path, "long_name", long_name);
  });
}

void ResultsFile::distributed_rows(const std::string& path, std::size_t total_rows,
                                   std::size_t columns, std::size_t first_row, std::size_t rows,
                                   const double* data, const Variable& variable) {
  write_distributed(path, H5T_NATIVE_DOUBLE, total_rows, columns, first_row, rows, data);
  // After the collective part, on rank 0's serial handle: attaching scales and writing
  // attributes are metadata changes that parallel HDF5 would need every rank to make alike.
  on_root([&] { label(path, variable); });
}

void ResultsFile::distributed_rows(const std::string& path, std::size_t total_rows,
                                   std::size_t columns, std::size_t first_row, std::size_t rows,
                                   const std::int64_t* data, const Variable& variable) {
  write_distributed(path, H5T_NATIVE_INT64, total_rows, columns, first_row, rows, data);
  on_root([&] { label(path, variable); });
}

void ResultsFile::write_distributed(const std::string& path, long type, std::size_t total_rows,
                                    std::size_t columns, std::size_t first_row, std::size_t rows,
                                    const void* data) {
  // Rank 0 holds the file open serially; hand it over to a collective MPI-IO open and back. A
  // failure rank 0 met alone (a full disk) is every rank's before the collective open.
  on_root([&] {
    const double width = static_cast<double>(columns == 0 ? 1 : columns);
    require_room(file_, 8.0 * static_cast<double>(total_rows) * width);
    close_serial();
  });
  agree_on_failure();
  hid_t access = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(access, MPI_COMM_WORLD, MPI_INFO_NULL);
  hid_t shared = H5Fopen(partial_path_.c_str(), H5F_ACC_RDWR, access);
  H5Pclose(access);
  // Every rank makes the same collective calls below whatever fails, and the failure is agreed
  // after them, the file closed once rank 0 has emptied it (abandon_file).
  capture_->take();
  try {
    h5_check(shared, "parallel open " + partial_path_);
    h5_check(write_shared(shared, path, type, total_rows, columns, first_row, rows, data),
             "collective write " + path);
  } catch (const RuntimeError& error) {
    keep_failure(error.what());
  }
  int failed = failure_.empty() ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (failed) {
    if (root_) abandon_file();
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (shared >= 0 && H5Fclose(shared) < 0) keep_failure("close " + partial_path_);
  agree_on_failure();
  on_root([&] {
    file_ = H5Fopen(partial_path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    h5_check(file_, "reopen " + partial_path_);
  });
}

long ResultsFile::write_shared(long shared, const std::string& path, long type,
                               std::size_t total_rows, std::size_t columns, std::size_t first_row,
                               std::size_t rows, const void* data) {
  create_parents(shared, path);  // metadata calls are collective: every rank makes the same ones
  // columns = 0: a 1-D dataset of total_rows values.
  const int rank_of_set = columns == 0 ? 1 : 2;
  const hsize_t width = columns == 0 ? 1 : columns;
  const hsize_t dims[2] = {total_rows, width};
  hid_t file_space = H5Screate_simple(rank_of_set, dims, nullptr);
  hid_t set =
      H5Dcreate2(shared, path.c_str(), type, file_space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (set < 0) H5Sclose(file_space);  // nothing left open: the MPI-IO file must close after this
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
  return status;
}

std::string ResultsFile::commit() {
  on_root([&] { close_serial(); });
  agree_on_failure();  // every rank, in place of a barrier: the file is complete, or no rank goes
                       // on
  on_root([&] {
    std::error_code error;
    fs::rename(partial_path_, final_path_, error);
    if (error) throw RuntimeError("cannot rename " + partial_path_ + ": " + error.message());
    committed_ = true;
  });
  agree_on_failure();
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
  // The root attribute `hosts` is left out beyond kMaxAttributeStrings ranks (HDF5's 64 KiB limit
  // on an attribute); this dataset holds the same names at any rank count.
  file.strings("/metrics/host", rank_hosts(), "/metrics/rank",
               "the host each rank ran on (MPI_Get_processor_name)");
  if (world_rank() != 0) return;
  const auto largest = std::max_element(peaks.begin(), peaks.end());
  if (*largest > 0)
    log::info("peak memory {} (rank {}{})", format_bytes(static_cast<double>(*largest)),
              largest - peaks.begin(), peaks.size() > 1 ? ", the largest" : "");
}

}  // namespace fluence
