#pragma once
// <out>/results.h5, written by rank 0 through a temporary name and renamed when complete, so a
// crashed run never leaves a file that looks finished. Every array carries netCDF-4 style
// dimension scales, `units` and `long_name`, so that xarray opens each group with named, aligned
// dimensions (docs/outputs.md "Conventions").
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fluence/core/error.hpp"

namespace fluence {

/// A failed write of a results file or a checkpoint (a full disk), agreed on every rank: every
/// rank exits cleanly with code 3 and rank 0 prints the message once, instead of one rank taking
/// the others down with MPI_Abort.
class WriteError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

/// Creates the output directory (rank 0), checks that it is writable and takes it for this run:
/// collective, an InputError on every rank when it cannot be created or written, when another
/// live run holds it (a POSIX record lock on <directory>/.fluence.lock, held until this process
/// exits however it exits, so a crash leaves no stale lock), or when it already holds a finished
/// results.h5 and `overwrite` (--force) is not given.
void prepare_output_directory(const std::string& directory, bool overwrite);
/// After a refused or failed run (rank 0, local): removes the output directory when this process
/// created it and it holds nothing but the lock file, so that a refusal leaves no empty --out.
void remove_unused_output_directory();

/// What readers need to label an array: the names of its dimensions (outermost first, none for a
/// scalar), its units (UDUNITS spelling, "1" for dimensionless, "count" for counts) and a
/// descriptive long name. A dimension name resolves to the dimension scale of that name in the
/// array's group or the nearest group above it (netCDF's scoping), which fixes its length.
struct Variable {
  std::vector<std::string> dimensions;
  std::string units;
  std::string long_name;
};

/// A failed write (a full disk, a quota, a directory gone) ends the run with one line naming the
/// cause and the file ("no space left on device writing out/results.h5"), exit 3 on every rank:
/// rank 0 keeps its first failure (HDF5's error stack is not printed) and skips the writes after
/// it, and the next collective step (a distributed write, commit()) throws a WriteError on every
/// rank. The partial file is removed.
class ResultsFile {
 public:
  /// Rank 0 opens `<directory>/<name>.partial`; other ranks hold an inert object.
  explicit ResultsFile(const std::string& directory, const std::string& name = "results.h5");
  ~ResultsFile();  // removes the partial file unless commit() ran
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  /// String attributes are variable-length UTF-8.
  void attribute(const std::string& name, const std::string& value);
  void attribute(const std::string& name, std::int64_t value);
  /// Attributes of the group or dataset at `path` (which must exist).
  void attribute(const std::string& path, const std::string& name, const std::string& value);
  void attribute(const std::string& path, const std::string& name, std::int64_t value);
  /// A list of names as an attribute, left out when it would exceed HDF5's 64 KiB limit on an
  /// attribute (kMaxAttributeStrings names): every such list is also a dataset (a coordinate or
  /// strings()), which holds the names whatever their number (a CSV of 5,000 columns).
  void attribute(const std::string& path, const std::string& name,
                 const std::vector<std::string>& values);
  static constexpr std::size_t kMaxAttributeStrings = 3840;
  /// A float64 attribute (a name of its own: an integer argument would be ambiguous).
  void real_attribute(const std::string& path, const std::string& name, double value);

  /// A dimension without coordinate values (e.g. the clients, indexed 0..size-1): netCDF's
  /// "dimension but not a variable", a dimension scale that netCDF readers do not list as data.
  void dimension(const std::string& path, std::size_t size);
  /// A coordinate variable: a 1-D array that is the dimension scale of its own name (the ε grid,
  /// the rounds, the class names), so the arrays along it are labelled by its values.
  void coordinate(const std::string& path, const std::vector<double>& values,
                  const std::string& units, const std::string& long_name);
  void coordinate(const std::string& path, const std::vector<std::int64_t>& values,
                  const std::string& units, const std::string& long_name);
  void coordinate(const std::string& path, const std::vector<std::string>& values,
                  const std::string& long_name);
  /// An array along `variable.dimensions` (intermediate groups created); the values are
  /// row-major and must fill the dimensions' lengths exactly.
  void dataset(const std::string& path, const std::vector<double>& values,
               const Variable& variable);
  void dataset(const std::string& path, const std::vector<std::int64_t>& values,
               const Variable& variable);
  void scalar(const std::string& path, double value, const std::string& units,
              const std::string& long_name);
  void string(const std::string& path, const std::string& value, const std::string& long_name);
  /// A 1-D string array along `dimension` (e.g. the fldp cases' descriptions), with a long_name.
  void strings(const std::string& path, const std::vector<std::string>& values,
               const std::string& dimension, const std::string& long_name);
  /// A plain array without dimensions or units, for internal files (checkpoints) that no one
  /// opens with xarray; `shape` empty = 1-D of values.size().
  void dataset(const std::string& path, const std::vector<double>& values,
               const std::vector<std::size_t>& shape = {});
  /// Collective: a [total_rows, columns] float64 (or int64) dataset along `variable.dimensions`
  /// written with parallel HDF5 (MPI-IO, collective transfer), each rank writing its own rows
  /// [first_row, first_row + rows) from `data` (rows x columns, row-major). Data never travels
  /// to rank 0. columns = 0 writes a 1-D dataset [total_rows].
  void distributed_rows(const std::string& path, std::size_t total_rows, std::size_t columns,
                        std::size_t first_row, std::size_t rows, const double* data,
                        const Variable& variable);
  void distributed_rows(const std::string& path, std::size_t total_rows, std::size_t columns,
                        std::size_t first_row, std::size_t rows, const std::int64_t* data,
                        const Variable& variable);
  /// Collective: closes and renames to results.h5; returns the final path.
  std::string commit();

 private:
  class ErrorCapture;  // HDF5's error printing replaced by a record of the system's reason
  template <class Work>
  void on_root(Work&& work);  // rank 0's part of a write, its failure kept in failure_
  void keep_failure(const std::string& what);
  void abandon_file();      // rank 0, after a failure: the partial file closed and removed
  void agree_on_failure();  // collective: a WriteError on every rank after a failure
  void close_serial();      // rank 0's serial handle, closed once whatever H5Fclose returns
  void write_distributed(const std::string& path, long type, std::size_t total_rows,
                         std::size_t columns, std::size_t first_row, std::size_t rows,
                         const void* data);
  // The collective part of write_distributed on the MPI-IO handle `shared`: H5Dwrite's status
  // (a failed metadata step throws).
  long write_shared(long shared, const std::string& path, long type, std::size_t total_rows,
                    std::size_t columns, std::size_t first_row, std::size_t rows, const void* data);
  // Rank 0: the array's shape from its dimensions, then the array, its scales and attributes.
  void write_variable(const std::string& path, long type, const void* data, std::size_t count,
                      const Variable& variable);
  void write_coordinate(const std::string& path, long type, const void* data, std::size_t count,
                        const std::string& units, const std::string& long_name);
  void label(const std::string& path, const Variable& variable);  // scales, units, long_name
  std::unique_ptr<ErrorCapture> capture_;
  std::string failure_;  // this rank's first failed write, its cause and file named
  long file_ = -1;
  std::string partial_path_, final_path_;
  bool root_ = false;
  bool committed_ = false;  // renamed to the final name: the destructor leaves it alone
};

/// Standard root attributes: fluence_version, git_revision, command, ranks, hosts, nodes, seed,
/// deck. Collective.
void write_run_attributes(ResultsFile& file, const std::string& command, std::int64_t seed,
                          const std::string& resolved_deck);

/// What the run cost, in /metrics (docs/outputs.md): setup_time_s, the seconds the command took
/// to have its data, clients and model ready (rank 0's clock; NaN for a command that reads no
/// data), and peak_memory_bytes[rank], each rank's peak resident memory (VmHWM) when the results
/// are written, -1 where the kernel does not report it. Both differ between identical runs, like
/// /metrics/wall_time_s. Logs the largest peak. Collective.
void write_run_resources(ResultsFile& file, double setup_seconds);

}  // namespace fluence
