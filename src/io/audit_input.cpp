#include "fluence/io/audit_input.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <filesystem>

#include "fluence/core/error.hpp"
#include "silent_hdf5.hpp"
#include "string_attribute.hpp"

namespace fluence {

namespace {

// The 1-D dataset at `name` as `type`'s values, or false when it is absent or unreadable.
template <class T>
bool read_array(hid_t file, const char* name, hid_t type, std::vector<T>& values) {
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0) return false;
  hid_t set = H5Dopen2(file, name, H5P_DEFAULT);
  if (set < 0) return false;
  hid_t space = H5Dget_space(set);
  const hssize_t count = H5Sget_simple_extent_npoints(space);
  H5Sclose(space);
  values.resize(static_cast<std::size_t>(std::max<hssize_t>(count, 0)));
  const bool read =
      count >= 0 && H5Dread(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0;
  H5Dclose(set);
  return read;
}

}  // namespace

CanaryRun read_canary_run(const std::string& path) {
  if (!std::filesystem::is_regular_file(path))
    throw InputError(fmt::format("{}: no such file", path));
  SilentHdf5 silent;
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) throw InputError(fmt::format("{}: not an HDF5 file", path));
  CanaryRun run;
  run.path = path;
  std::string problem;
  const auto deck = io_detail::read_string_attribute(file, "deck");
  const auto command = io_detail::read_string_attribute(file, "command");
  std::vector<double> epsilon, delta;
  if (deck.empty() || command.empty()) {
    problem = "it holds no deck (not a Fluence results file)";
  } else if (command.front().rfind("fluence train ", 0) != 0) {
    problem = fmt::format("it was written by `{}`, not `fluence train`", command.front());
  } else if (!read_array(file, "/audit/canary_inserted", H5T_NATIVE_INT64, run.inserted)) {
    problem = "it holds no canaries (/audit/canary_inserted): train privately with audit.canaries";
  } else if (!read_array(file, "/audit/canary_score_all_iterates", H5T_NATIVE_DOUBLE,
                         run.score_all_iterates) ||
             !read_array(file, "/audit/canary_score_final", H5T_NATIVE_DOUBLE, run.score_final) ||
             !read_array(file, "/privacy/epsilon", H5T_NATIVE_DOUBLE, epsilon) ||
             !read_array(file, "/privacy/delta", H5T_NATIVE_DOUBLE, delta) || delta.size() != 1 ||
             run.score_final.size() != run.inserted.size() ||
             run.score_all_iterates.size() != run.inserted.size() || run.inserted.empty()) {
    problem = "its canary scores or /privacy/epsilon and /privacy/delta cannot be read";
  } else {
    run.deck = deck.front();
    run.epsilon = epsilon.empty() ? 0.0 : epsilon.back();
    run.delta = delta.front();
    if (H5Aexists(file, "seed") > 0) {
      hid_t attr = H5Aopen(file, "seed", H5P_DEFAULT);
      if (H5Aread(attr, H5T_NATIVE_INT64, &run.seed) < 0) problem = "its seed cannot be read";
      H5Aclose(attr);
    }
  }
  H5Fclose(file);
  if (!problem.empty()) throw InputError(fmt::format("{}: {}", path, problem));
  return run;
}

bool holds_multi_run_audit(const std::string& path) {
  SilentHdf5 silent;
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return false;
  const bool holds = H5Lexists(file, "/audit", H5P_DEFAULT) > 0 &&
                     H5Lexists(file, "/audit/multi_run", H5P_DEFAULT) > 0;
  H5Fclose(file);
  return holds;
}

}  // namespace fluence
