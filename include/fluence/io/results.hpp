#pragma once
// <out>/results.h5, written by rank 0 through a temporary name and renamed when complete, so a
// crashed run never leaves a file that looks finished (DESIGN.md "Outputs").
#include <cstdint>
#include <string>
#include <vector>

namespace fluence {

/// Creates the output directory (rank 0), checks that it is writable and takes it for this run:
/// collective, an InputError on every rank when it cannot be created or written, when another
/// live run holds it (a POSIX record lock on <directory>/.fluence.lock, held until this process
/// exits however it exits, so a crash leaves no stale lock), or when it already holds a finished
/// results.h5 and `overwrite` (--force) is not given.
void prepare_output_directory(const std::string& directory, bool overwrite);
/// After a refused or failed run (rank 0, local): removes the output directory when this process
/// created it and it holds nothing but the lock file, so that a refusal leaves no empty --out.
void remove_unused_output_directory();

class ResultsFile {
 public:
  /// Rank 0 opens `<directory>/<name>.partial`; other ranks hold an inert object.
  explicit ResultsFile(const std::string& directory, const std::string& name = "results.h5");
  ~ResultsFile();  // removes the partial file unless commit() ran
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  void attribute(const std::string& name, const std::string& value);
  void attribute(const std::string& name, std::int64_t value);
  /// Attributes of the group or dataset at `path` (which must exist).
  void attribute(const std::string& path, const std::string& name, const std::string& value);
  void attribute(const std::string& path, const std::string& name, std::int64_t value);
  void attribute(const std::string& path, const std::string& name,
                 const std::vector<std::string>& values);
  /// Writes a dataset (intermediate groups created); `shape` empty = 1-D of values.size().
  void dataset(const std::string& path, const std::vector<double>& values,
               const std::vector<std::size_t>& shape = {});
  void dataset(const std::string& path, const std::vector<std::int64_t>& values,
               const std::vector<std::size_t>& shape = {});
  void scalar(const std::string& path, double value);
  void string(const std::string& path, const std::string& value);
  /// Collective: a [total_rows, columns] float64 (or int64) dataset written with parallel HDF5
  /// (MPI-IO, collective transfer), each rank writing its own rows [first_row, first_row + rows)
  /// from `data` (rows x columns, row-major). Data never travels to rank 0. columns = 0 writes a
  /// 1-D dataset [total_rows].
  void distributed_rows(const std::string& path, std::size_t total_rows, std::size_t columns,
                        std::size_t first_row, std::size_t rows, const double* data);
  void distributed_rows(const std::string& path, std::size_t total_rows, std::size_t columns,
                        std::size_t first_row, std::size_t rows, const std::int64_t* data);
  /// Closes and renames to results.h5; returns the final path.
  std::string commit();

 private:
  void close_serial();  // rank 0's serial handle, closed once whatever H5Fclose returns
  void write_distributed(const std::string& path, long type, std::size_t total_rows,
                         std::size_t columns, std::size_t first_row, std::size_t rows,
                         const void* data);
  long file_ = -1;
  std::string partial_path_, final_path_;
  bool root_ = false;
  bool committed_ = false;  // renamed to the final name: the destructor leaves it alone
};

/// Standard root attributes: fluence_version, git_revision, command, ranks, hosts, nodes, seed,
/// deck. Collective.
void write_run_attributes(ResultsFile& file, const std::string& command, std::int64_t seed,
                          const std::string& resolved_deck);

}  // namespace fluence
