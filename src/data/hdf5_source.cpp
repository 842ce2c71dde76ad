// data.source = "hdf5" and "tff": arrays read with the HDF5 C API. HDF5's own error printing is off
// while a file is open, so that a damaged or unexpected file gives one message naming the file,
// the dataset and what was expected, not HDF5's error stack.
//
// With RowRequest::collective (data.hdf5_driver = "mpio") every rank of MPI_COMM_WORLD opens the
// file with the MPI-IO driver and reads its rows with collective H5Dread calls. Every rank then
// makes the same HDF5 calls in the same order: a step that can fail on one rank alone (a NaN only
// that rank reads) is agreed (collective_check) before the next collective call, so that every rank
// throws at the same point and none waits in a call the others never make.
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <utility>

#include "arrays.hpp"
#include "built_in_sources.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/memory.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/data/array_sources.hpp"

namespace fluence {
namespace {

using arrays::Features;
using arrays::Ids;
using arrays::Split;

// An HDF5 identifier closed by its own close function when it goes out of scope.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, -1)), close_(other.close_) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

class SilentErrors {
 public:
  SilentErrors() {
    H5Eget_auto2(H5E_DEFAULT, &function_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  SilentErrors(const SilentErrors&) = delete;
  SilentErrors& operator=(const SilentErrors&) = delete;
  ~SilentErrors() { H5Eset_auto2(H5E_DEFAULT, function_, data_); }

 private:
  H5E_auto2_t function_ = nullptr;
  void* data_ = nullptr;
};

// "float32", "uint8", "string", ...: what a message says a dataset holds.
std::string type_name(hid_t type) {
  const std::size_t bits = 8 * H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_FLOAT:
      return fmt::format("float{}", bits);
    case H5T_INTEGER:
      return fmt::format("{}int{}", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", bits);
    case H5T_STRING:
      return "strings";
    case H5T_COMPOUND:
      return "a compound type";
    case H5T_ENUM:
      return "an enum";
    default:
      return "a type that is neither numbers nor strings";
  }
}

struct Extent {
  std::vector<std::size_t> dims;
  std::size_t elements = 1;
};

// How a features dataset's values are read by the collective path: in the file's own type where
// that is a native one, so that HDF5 converts nothing (HDF5 1.10 reads collectively only without a
// conversion: H5D_MPIO_DATATYPE_CONVERSION), else as double.
enum class Stored { float32, float64_or_other, bytes };

class Hdf5File {
 public:
  explicit Hdf5File(std::string path, bool collective = false)
      : collective_(collective),
        path_(std::move(path)),
        file_(open(path_, collective_), H5Fclose) {}

  const std::string& path() const { return path_; }

  // What is at `name`: a dataset, a group, or nothing (H5I_BADID).
  H5I_type_t kind(const std::string& name) const {
    // H5Lexists needs every parent to exist, so the path is checked one component at a time.
    std::string prefix = name.front() == '/' ? "" : ".";
    std::size_t start = name.front() == '/' ? 1 : 0;
    while (start <= name.size()) {
      const auto end = std::min(name.find('/', start), name.size());
      if (end > start) {
        prefix += '/';
        prefix.append(name, start, end - start);
        if (H5Lexists(file_.get(), prefix.c_str(), H5P_DEFAULT) <= 0) return H5I_BADID;
      }
      start = end + 1;
    }
    Handle object(H5Oopen(file_.get(), name.c_str(), H5P_DEFAULT), H5Oclose);
    return object.valid() ? H5Iget_type(object.get()) : H5I_BADID;
  }

  // With `wanted` (ascending row indices counted from `offset`, this dataset's first row), only
  // the wanted rows in [offset, offset + rows) are read and kept (Features::held, from 0).
  Features read_features(const std::string& name, const std::vector<std::int64_t>* wanted = nullptr,
                         std::int64_t offset = 0) const {
    std::optional<Handle> set;
    Extent extent;
    Stored stored = Stored::float64_or_other;
    Features features;
    agreed([&] {
      set.emplace(open_dataset(name, "features"));
      Handle type(H5Dget_type(set->get()), H5Tclose);
      extent = extent_of(*set, name);
      features = features_of(name, extent, type);
      if (features.pixels) stored = Stored::bytes;
      if (H5Tequal(type.get(), H5T_NATIVE_FLOAT) > 0) stored = Stored::float32;
    });
    if (wanted) {
      features.partial = true;
      const auto end = offset + static_cast<std::int64_t>(features.rows);
      for (auto row = std::lower_bound(wanted->begin(), wanted->end(), offset);
           row != wanted->end() && *row < end; ++row)
        features.held.push_back(*row - offset);
    }
    if (wanted && collective_) {
      features.values = read_rows_collective(*set, extent, features.held, name, stored);
    } else if (features.pixels) {
      const auto raw =
          wanted ? read_rows<unsigned char>(*set, H5T_NATIVE_UCHAR, extent, features.held, name)
                 : read_all<unsigned char>(*set, H5T_NATIVE_UCHAR, extent, name);
      features.values = fresh_array<double>(raw.size());
      std::transform(raw.begin(), raw.end(), features.values.begin(),
                     [](unsigned char k) { return k / 255.0; });
    } else {
      features.values =
          wanted ? read_rows<double>(*set, H5T_NATIVE_DOUBLE, extent, features.held, name)
                 : read_all<double>(*set, H5T_NATIVE_DOUBLE, extent, name);
    }
    if (!features.pixels) agreed([&] { check_finite(features, name); });
    return features;
  }

  // Labels or client ids: one integer or string per row.
  Ids read_ids(const std::string& name, const char* what) const {
    Ids ids;
    agreed([&] { ids = read_ids_here(name, what); });
    return ids;
  }

  std::vector<std::string> read_names(const std::string& name) const {
    std::vector<std::string> names;
    agreed([&] { names = read_names_here(name); });
    return names;
  }

  std::vector<std::string> read_names_attribute(const std::string& dataset,
                                                const std::string& attribute) const {
    std::vector<std::string> names;
    agreed([&] { names = read_names_attribute_here(dataset, attribute); });
    return names;
  }

  // The members of a group, in name order.
  std::vector<std::string> members(const std::string& group) const {
    std::vector<std::string> names;
    agreed([&] { names = members_here(group); });
    return names;
  }

  std::string where(const std::string& name) const {
    return fmt::format("{}, dataset {}", path_, message_excerpt(name));
  }

 private:
  // Runs `step` on this rank; in a collective read, agreed over the ranks (collective_check).
  template <class Step>
  void agreed(const Step& step) const {
    if (collective_)
      collective_check(step);
    else
      step();
  }

  // What a features dataset of `extent` and file type `type` holds; no values yet.
  Features features_of(const std::string& name, const Extent& extent, const Handle& type) const {
    Features features;
    features.origin = where(name);
    if (extent.dims.size() < 2 || extent.dims.size() > 4)
      throw InputError(fmt::format(
          "{} has {} dimension(s) [{}]: expected features of rows x columns (or rows x height x "
          "width [x channels] for images)",
          features.origin, extent.dims.size(), fmt::join(extent.dims, ", ")));
    features.rows = extent.dims[0];
    features.row_shape.assign(extent.dims.begin() + 1, extent.dims.end());
    const H5T_class_t type_class = H5Tget_class(type.get());
    features.pixels = type_class == H5T_INTEGER && H5Tget_size(type.get()) == 1 &&
                      H5Tget_sign(type.get()) == H5T_SGN_NONE;
    if (type_class != H5T_FLOAT && !features.pixels)
      throw InputError(fmt::format("{} holds {}: expected float32, float64 or uint8 features",
                                   features.origin, type_name(type.get())));
    return features;
  }

  // Labels or client ids: one integer or string per row.
  Ids read_ids_here(const std::string& name, const char* what) const {
    Handle set = open_dataset(name, what);
    Handle type(H5Dget_type(set.get()), H5Tclose);
    const Extent extent = extent_of(set, name);
    Ids ids;
    ids.origin = where(name);
    if (extent.dims.empty() || extent.dims.size() > 2 ||
        (extent.dims.size() == 2 && extent.dims[1] != 1))
      throw InputError(
          fmt::format("{} has shape [{}]: expected one of the {} per row (rows, or "
                      "rows x 1)",
                      ids.origin, fmt::join(extent.dims, ", "), what));
    const H5T_class_t type_class = H5Tget_class(type.get());
    if (type_class == H5T_INTEGER) {
      // Read in the file's own signedness: HDF5 clamps a uint64 at or above 2^63 read as int64
      // (12 hashed client ids became one). Wider integers have no exact reading here.
      if (H5Tget_size(type.get()) > sizeof(std::int64_t))
        throw InputError(
            fmt::format("{} holds {}: expected integers of at most 64 bits (or "
                        "strings) as {}",
                        ids.origin, type_name(type.get()), what));
      ids.numbers.resize(extent.elements);
      if (H5Tget_sign(type.get()) == H5T_SGN_NONE) {
        std::vector<std::uint64_t> values(extent.elements);
        read(set, H5T_NATIVE_UINT64, values.data(), name);
        std::transform(values.begin(), values.end(), ids.numbers.begin(),
                       [](std::uint64_t v) { return static_cast<std::int64_t>(v); });
        ids.unsigned_numbers = std::any_of(values.begin(), values.end(), [](std::uint64_t v) {
          return v > static_cast<std::uint64_t>(INT64_MAX);
        });
      } else {
        read(set, H5T_NATIVE_INT64, ids.numbers.data(), name);
      }
    } else if (type_class == H5T_STRING) {
      ids.names = read_strings(set, type, extent.elements, name);
    } else {
      throw InputError(fmt::format("{} holds {}: expected integer (or string) {}", ids.origin,
                                   type_name(type.get()), what));
    }
    return ids;
  }

  std::vector<std::string> read_names_here(const std::string& name) const {
    Handle set = open_dataset(name, "column names");
    Handle type(H5Dget_type(set.get()), H5Tclose);
    const Extent extent = extent_of(set, name);
    if (H5Tget_class(type.get()) != H5T_STRING || extent.dims.size() != 1)
      throw InputError(
          fmt::format("{} holds {} of shape [{}]: expected a 1-D array of strings "
                      "(the column names)",
                      where(name), type_name(type.get()), fmt::join(extent.dims, ", ")));
    return read_strings(set, type, extent.elements, name);
  }

  std::vector<std::string> read_names_attribute_here(const std::string& dataset,
                                                     const std::string& attribute) const {
    Handle set = open_dataset(dataset, "features");
    const std::string origin = fmt::format("{}, attribute '{}' of dataset {}", path_,
                                           message_excerpt(attribute), message_excerpt(dataset));
    if (H5Aexists(set.get(), attribute.c_str()) <= 0)
      throw InputError(fmt::format("{}: no such attribute (data.arrays.names_attribute)", origin));
    Handle held(H5Aopen(set.get(), attribute.c_str(), H5P_DEFAULT), H5Aclose);
    Handle type(H5Aget_type(held.get()), H5Tclose);
    Handle space(H5Aget_space(held.get()), H5Sclose);
    const hssize_t count = H5Sget_simple_extent_npoints(space.get());
    if (H5Tget_class(type.get()) != H5T_STRING || H5Sget_simple_extent_ndims(space.get()) > 1 ||
        count < 0)
      throw InputError(fmt::format("{} holds {}: expected an array of strings (the column names)",
                                   origin, type_name(type.get())));
    return read_string_values(
        type, static_cast<std::size_t>(count), origin,
        [&](hid_t memory, void* buffer) { return H5Aread(held.get(), memory, buffer); }, space);
  }

  std::vector<std::string> members_here(const std::string& group) const {
    Handle held(H5Gopen2(file_.get(), group.c_str(), H5P_DEFAULT), H5Gclose);
    H5G_info_t info;
    if (!held.valid() || H5Gget_info(held.get(), &info) < 0)
      throw InputError(
          fmt::format("{}: group {} cannot be read (a truncated or damaged file?)", path_, group));
    std::vector<std::string> names;
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      const ssize_t length = H5Lget_name_by_idx(held.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i,
                                                nullptr, 0, H5P_DEFAULT);
      std::string name(static_cast<std::size_t>(std::max<ssize_t>(length, 0)), '\0');
      if (length < 0 || H5Lget_name_by_idx(held.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i,
                                           name.data(), name.size() + 1, H5P_DEFAULT) < 0)
        throw InputError(
            fmt::format("{}: group {} cannot be listed (a truncated or damaged "
                        "file?)",
                        path_, group));
      names.push_back(std::move(name));
    }
    return names;
  }

  // The MPI-IO driver's open is collective: the checks before it are agreed first.
  static hid_t open(const std::string& path, bool collective) {
    hid_t file = -1;
    const auto open_file = [&] {
      std::error_code ignored;
      if (!std::filesystem::is_regular_file(path, ignored))
        throw InputError(fmt::format("cannot read data file '{}'", path));
      if (H5Fis_hdf5(path.c_str()) <= 0)
        throw InputError(fmt::format("{}: not an HDF5 file", path));
      Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
      if (collective) H5Pset_fapl_mpio(access.get(), MPI_COMM_WORLD, MPI_INFO_NULL);
      file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get());
      if (file < 0)
        throw InputError(
            fmt::format("{}: the HDF5 file cannot be opened (truncated or damaged)", path));
    };
    if (collective)
      collective_check(open_file);
    else
      open_file();
    return file;
  }

  Handle open_dataset(const std::string& name, const char* role) const {
    const H5I_type_t found = name.empty() ? H5I_BADID : kind(name);
    if (found != H5I_DATASET)
      throw InputError(fmt::format("{}, {}: {} (the {}; see data.arrays)", path_,
                                   message_excerpt(name.empty() ? "\"\"" : name),
                                   found == H5I_BADID ? "no such dataset" : "not a dataset", role));
    return Handle(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
  }

  Extent extent_of(const Handle& set, const std::string& name) const {
    Handle space(H5Dget_space(set.get()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    Extent extent;
    if (rank < 0) throw InputError(fmt::format("{}: its shape cannot be read", where(name)));
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    for (const hsize_t d : dims) {
      extent.dims.push_back(static_cast<std::size_t>(d));
      if (__builtin_mul_overflow(extent.elements, static_cast<std::size_t>(d), &extent.elements))
        throw InputError(fmt::format("{}: its shape [{}] exceeds 2^64 elements", where(name),
                                     fmt::join(dims, ", ")));
    }
    return extent;
  }

  template <class T>
  std::vector<T> read_all(const Handle& set, hid_t memory_type, const Extent& extent,
                          const std::string& name) const {
    std::vector<T> values(extent.elements);
    read(set, memory_type, values.data(), name);
    return values;
  }

  // The rows `rows` (ascending) of a dataset. Wanted rows less than a 16th of a block apart are
  // read as one hyperslab of at most kReadBytes, and only the wanted rows kept: a rank whose
  // clients' rows are contiguous reads about its share of the file, one whose rows are scattered
  // (an iid partition) streams the file through a bounded buffer, and neither holds other rows.
  template <class T>
  std::vector<T> read_rows(const Handle& set, hid_t memory_type, const Extent& extent,
                           const std::vector<std::int64_t>& rows, const std::string& name) const {
    constexpr std::size_t kReadBytes = std::size_t{16} << 20;
    const std::size_t width = extent.dims[0] > 0 ? extent.elements / extent.dims[0] : 0;
    std::vector<T> out = fresh_array<T>(rows.size() * width), buffer;
    if (rows.empty() || width == 0) return out;
    const auto block =
        static_cast<std::int64_t>(std::max<std::size_t>(1, kReadBytes / (width * sizeof(T))));
    const std::int64_t gap = std::max<std::int64_t>(1, block / 16);
    Handle file_space(H5Dget_space(set.get()), H5Sclose);
    std::vector<hsize_t> start(extent.dims.size(), 0),
        count(extent.dims.begin(), extent.dims.end());
    for (std::size_t i = 0; i < rows.size();) {
      std::size_t j = i + 1;
      while (j < rows.size() && rows[j] - rows[j - 1] <= gap && rows[j] - rows[i] < block) ++j;
      const std::int64_t first = rows[i], span = rows[j - 1] - first + 1;
      start[0] = static_cast<hsize_t>(first);
      count[0] = static_cast<hsize_t>(span);
      Handle memory(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr),
                    H5Sclose);
      buffer.resize(static_cast<std::size_t>(span) * width);
      if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                              nullptr) < 0 ||
          H5Dread(set.get(), memory_type, memory.get(), file_space.get(), H5P_DEFAULT,
                  buffer.data()) < 0)
        throw InputError(
            fmt::format("{}: rows {} to {} cannot be read (a truncated or damaged file?)",
                        where(name), first, first + span - 1));
      for (std::size_t k = i; k < j; ++k)
        std::copy_n(buffer.data() + static_cast<std::size_t>(rows[k] - first) * width, width,
                    out.data() + k * width);
      i = j;
    }
    return out;
  }

  // The rows `rows` (ascending) read by every rank at once through MPI-IO (RowRequest::
  // collective), widened to double into the result. A rank reads its rows in rounds of at most
  // kReadBytes and kMaxRuns runs of consecutive rows (HDF5 builds a selection in time growing with
  // its runs), each round ONE collective H5Dread of the union of the round's runs; every rank takes
  // part in as many rounds as the rank that needs the most, selecting nothing once it has read all
  // its rows. The values are read in the file's own type (Stored) and widened here: float32 to
  // double and uint8 k to k / 255 are exact, so they equal the POSIX path's bit for bit.
  std::vector<double> read_rows_collective(const Handle& set, const Extent& extent,
                                           const std::vector<std::int64_t>& rows,
                                           const std::string& name, Stored stored) const {
    switch (stored) {
      case Stored::float32:
        return read_rounds<float>(set, H5T_NATIVE_FLOAT, extent, rows, name,
                                  [](float v) { return static_cast<double>(v); });
      case Stored::bytes:
        return read_rounds<unsigned char>(set, H5T_NATIVE_UCHAR, extent, rows, name,
                                          [](unsigned char k) { return k / 255.0; });
      default:
        return read_rounds<double>(set, H5T_NATIVE_DOUBLE, extent, rows, name,
                                   [](double v) { return v; });
    }
  }

  template <class Raw, class Widen>
  std::vector<double> read_rounds(const Handle& set, hid_t memory_type, const Extent& extent,
                                  const std::vector<std::int64_t>& rows, const std::string& name,
                                  const Widen& widen) const {
    constexpr std::size_t kReadBytes = std::size_t{16} << 20, kMaxRuns = 4096;
    const std::size_t width = extent.dims[0] > 0 ? extent.elements / extent.dims[0] : 0;
    std::vector<double> out = fresh_array<double>(rows.size() * width);
    if (width == 0) return out;  // the same dataset on every rank: all return here
    const std::size_t block = std::max<std::size_t>(1, kReadBytes / (width * sizeof(Raw)));
    // This rank's rounds: rows[bounds[k], bounds[k + 1]), each of at most `block` rows in at most
    // kMaxRuns runs.
    std::vector<std::size_t> bounds{0};
    std::size_t runs = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const bool new_run = i == bounds.back() || rows[i] != rows[i - 1] + 1;
      if (i > bounds.back() && (i - bounds.back() == block || (new_run && runs == kMaxRuns))) {
        bounds.push_back(i);
        runs = 0;
      }
      if (i == bounds.back() || new_run) ++runs;
    }
    if (!rows.empty()) bounds.push_back(rows.size());
    long rounds = static_cast<long>(bounds.size()) - 1;
    MPI_Allreduce(MPI_IN_PLACE, &rounds, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    std::vector<Raw> buffer(std::min(block, rows.size()) * width + 1);
    Handle file_space(H5Dget_space(set.get()), H5Sclose);
    Handle transfer(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
    H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_COLLECTIVE);
    std::vector<hsize_t> start(extent.dims.size(), 0),
        count(extent.dims.begin(), extent.dims.end());
    for (long round = 0; round < rounds; ++round) {
      const auto k = static_cast<std::size_t>(round);
      const std::size_t begin = k + 1 < bounds.size() ? bounds[k] : rows.size(),
                        end = k + 1 < bounds.size() ? bounds[k + 1] : rows.size();
      const hsize_t elements = std::max<hsize_t>(1, (end - begin) * width);
      Handle memory(H5Screate_simple(1, &elements, nullptr), H5Sclose);
      bool selected = true;
      if (begin == end) {
        selected = H5Sselect_none(memory.get()) >= 0 && H5Sselect_none(file_space.get()) >= 0;
      }
      for (std::size_t i = begin; i < end && selected;) {
        std::size_t j = i + 1;
        while (j < end && rows[j] == rows[j - 1] + 1) ++j;
        start[0] = static_cast<hsize_t>(rows[i]);
        count[0] = static_cast<hsize_t>(j - i);
        selected =
            H5Sselect_hyperslab(file_space.get(), i == begin ? H5S_SELECT_SET : H5S_SELECT_OR,
                                start.data(), nullptr, count.data(), nullptr) >= 0;
        i = j;
      }
      // Every rank calls H5Dread, whatever its selection did, so that none is left waiting.
      const bool read = H5Dread(set.get(), memory_type, memory.get(), file_space.get(),
                                transfer.get(), buffer.data()) >= 0;
      collective_check([&] {
        if (begin < end && (!selected || !read))
          throw InputError(
              fmt::format("{}: rows {} to {} cannot be read (a truncated or damaged file?)",
                          where(name), rows[begin], rows[end - 1]));
        if (!selected || !read)
          throw InputError(fmt::format("{}: a collective read failed", where(name)));
      });
      std::transform(buffer.begin(),
                     buffer.begin() + static_cast<std::ptrdiff_t>((end - begin) * width),
                     out.begin() + static_cast<std::ptrdiff_t>(begin * width), widen);
    }
    return out;
  }

  void read(const Handle& set, hid_t memory_type, void* buffer, const std::string& name) const {
    if (H5Dread(set.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer) < 0)
      throw InputError(
          fmt::format("{}: the values cannot be read (a truncated or damaged file?)", where(name)));
  }

  void check_finite(const Features& features, const std::string& name) const {
    const auto bad = std::find_if(features.values.begin(), features.values.end(),
                                  [](double v) { return !std::isfinite(v); });
    if (bad != features.values.end()) {
      const auto index = static_cast<std::size_t>(bad - features.values.begin());
      const std::size_t row = index / features.width();
      throw InputError(fmt::format("{}: row {} column {} is {}: expected finite numbers",
                                   where(name), features.partial ? features.held[row] : row,
                                   index % features.width(), *bad));
    }
  }

  std::vector<std::string> read_strings(const Handle& set, const Handle& type, std::size_t count,
                                        const std::string& name) const {
    Handle space(H5Dget_space(set.get()), H5Sclose);
    return read_string_values(
        type, count, where(name),
        [&](hid_t memory, void* buffer) {
          return H5Dread(set.get(), memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer);
        },
        space);
  }

  // Fixed-length strings lose their NUL or space padding; variable-length ones are copied and
  // HDF5's buffers reclaimed.
  static std::vector<std::string> read_string_values(
      const Handle& type, std::size_t count, const std::string& origin,
      const std::function<herr_t(hid_t, void*)>& read_into, const Handle& space) {
    // The memory type takes the file's character set (HDF5 converts no ASCII to UTF-8) and, for
    // fixed-length strings, NUL padding: a NUL-terminated type of the file's size would cut a
    // padded string short by one byte.
    Handle memory(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_cset(memory.get(), H5Tget_cset(type.get()));
    std::vector<std::string> out;
    if (H5Tis_variable_str(type.get()) > 0) {
      H5Tset_size(memory.get(), H5T_VARIABLE);
      std::vector<char*> pointers(count, nullptr);
      if (read_into(memory.get(), pointers.data()) < 0)
        throw InputError(fmt::format("{}: the strings cannot be read", origin));
      for (const char* text : pointers) out.emplace_back(text ? text : "");
      H5Dvlen_reclaim(memory.get(), space.get(), H5P_DEFAULT, pointers.data());
      return out;
    }
    const std::size_t size = H5Tget_size(type.get());
    H5Tset_size(memory.get(), size);
    H5Tset_strpad(memory.get(), H5T_STR_NULLPAD);
    std::vector<char> buffer(count * size);
    if (read_into(memory.get(), buffer.data()) < 0)
      throw InputError(fmt::format("{}: the strings cannot be read", origin));
    for (std::size_t i = 0; i < count; ++i) {
      std::string text(buffer.data() + i * size, size);
      text.erase(std::find(text.begin(), text.end(), '\0'), text.end());
      text.erase(text.find_last_not_of(' ') + 1);
      out.push_back(std::move(text));
    }
    return out;
  }

  SilentErrors silent_;  // first: HDF5 stays quiet from the open to the last close
  bool collective_;
  std::string path_;
  Handle file_;
};

Split read_split(const Hdf5File& file, const std::string& features, const std::string& labels,
                 const std::string& clients, std::vector<std::string>* client_names,
                 const std::vector<std::int64_t>* wanted = nullptr, std::int64_t offset = 0) {
  Split split;
  split.features = file.read_features(features, wanted, offset);
  split.labels = file.read_ids(labels, "labels");
  if (!clients.empty()) {
    const Ids ids = file.read_ids(clients, "client ids");
    if (ids.size() != split.features.rows)
      throw InputError(
          fmt::format("{} holds {} rows but {} holds {} client ids: expected one "
                      "client id per row",
                      split.features.origin, split.features.rows, ids.origin, ids.size()));
    split.client = arrays::code_clients(ids, *client_names);
  }
  return split;
}

// One TFF file: every client group's fields, the clients in name order.
Split read_tff_split(const Hdf5File& file, const ArrayNames& names,
                     std::vector<std::string>* client_names,
                     const std::vector<std::int64_t>* wanted = nullptr) {
  const H5I_type_t examples = file.kind("/examples");
  if (examples != H5I_GROUP)
    throw InputError(
        fmt::format("{}: {}: a TFF file holds examples/<client id>/<field>", file.path(),
                    examples == H5I_BADID ? "no group 'examples'" : "'examples' is not a group"));
  const std::vector<std::string> clients = file.members("/examples");
  if (clients.empty())
    throw InputError(fmt::format("{}: group 'examples' holds no clients", file.path()));
  Split split;
  split.features.origin = file.where(fmt::format("/examples/*/{}", names.features));
  split.labels.origin = file.where(fmt::format("/examples/*/{}", names.labels));
  for (std::size_t c = 0; c < clients.size(); ++c) {
    const std::string group = fmt::format("/examples/{}", clients[c]);
    if (file.kind(group) != H5I_GROUP)
      throw InputError(
          fmt::format("{}: examples/{} is not a group: a TFF file holds "
                      "examples/<client id>/<field>",
                      file.path(), message_excerpt(clients[c])));
    Split one = read_split(file, fmt::format("{}/{}", group, names.features),
                           fmt::format("{}/{}", group, names.labels), "", nullptr, wanted,
                           static_cast<std::int64_t>(split.features.rows));
    if (one.labels.size() != one.features.rows)
      throw InputError(fmt::format(
          "{} holds {} rows but {} holds {} labels: expected one label "
          "per row",
          one.features.origin, one.features.rows, one.labels.origin, one.labels.size()));
    if (!split.labels.numbers.empty() || !split.labels.names.empty())
      if (one.labels.names.empty() != split.labels.names.empty())
        throw InputError(fmt::format("{} holds labels of another type than the clients before it",
                                     one.labels.origin));
    split.features.append(one.features);
    split.labels.append(one.labels);
    split.client.insert(split.client.end(), one.features.rows, static_cast<std::int32_t>(c));
  }
  if (client_names) *client_names = clients;
  return split;
}

std::vector<std::string> column_names(const Hdf5File& file, const ArrayNames& names,
                                      std::string& origin) {
  if (!names.names.empty()) {
    origin = file.where(names.names);
    return file.read_names(names.names);
  }
  if (!names.names_attribute.empty()) {
    origin = fmt::format("{}, attribute '{}' of dataset {}", file.path(), names.names_attribute,
                         names.features);
    return file.read_names_attribute(names.features, names.names_attribute);
  }
  return {};
}

}  // namespace

TrainTest read_hdf5(const std::string& path, const std::string& test_path, const ArrayNames& names,
                    const RowRequest* rows) {
  std::vector<std::string> client_names, names_of_columns;
  std::string names_origin;
  Split train, test;
  const std::vector<std::int64_t>* train_rows = rows ? &rows->train : nullptr;
  const std::vector<std::int64_t>* test_rows = rows ? &rows->test : nullptr;
  {
    const Hdf5File file(path, rows && rows->collective);
    train =
        read_split(file, names.features, names.labels, names.clients, &client_names, train_rows);
    names_of_columns = column_names(file, names, names_origin);
    if (!names.test_features.empty() && test_path.empty())
      test = read_split(file, names.test_features, names.test_labels, "", nullptr, test_rows);
  }
  if (!test_path.empty()) {
    const Hdf5File file(test_path, rows && rows->collective);
    const bool own = !names.test_features.empty();
    test = read_split(file, own ? names.test_features : names.features,
                      own ? names.test_labels : names.labels, "", nullptr, test_rows);
  }
  const arrays::Naming naming{arrays::base_name(names.labels), arrays::base_name(names.features),
                              std::move(names_of_columns), std::move(names_origin)};
  return arrays::make_tables(train, test, naming, std::move(client_names));
}

TrainTest read_tff(const std::string& path, const std::string& test_path, const ArrayNames& names,
                   const RowRequest* rows) {
  std::vector<std::string> client_names;
  Split train, test;
  {
    const Hdf5File file(path, rows && rows->collective);
    train = read_tff_split(file, names, &client_names, rows ? &rows->train : nullptr);
  }
  if (!test_path.empty()) {
    const Hdf5File file(test_path, rows && rows->collective);
    test = read_tff_split(file, names, nullptr, rows ? &rows->test : nullptr);
    test.client.clear();
  }
  return arrays::make_tables(train, test, {names.labels, names.features, {}, ""},
                             std::move(client_names));
}

namespace built_in_sources {

DataSourceSpec hdf5() {
  return array_source("hdf5",
                      {"data.hdf5_driver", "data.arrays.features", "data.arrays.labels",
                       "data.arrays.clients", "data.arrays.names", "data.arrays.test_features",
                       "data.arrays.test_labels", "data.arrays.names_attribute"},
                      read_hdf5);
}

DataSourceSpec tff() {
  return array_source("tff", {"data.hdf5_driver", "data.arrays.features", "data.arrays.labels"},
                      read_tff);
}

}  // namespace built_in_sources

}  // namespace fluence
