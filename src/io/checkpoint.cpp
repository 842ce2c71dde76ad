// Checkpoint files (docs/operations.md).
#include "fluence/io/checkpoint.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/version.hpp"
#include "fluence/io/results.hpp"
#include "silent_hdf5.hpp"
#include "string_attribute.hpp"

namespace fluence {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "fluence-checkpoint-1";

// FNV-1a, 64 bits: stable across platforms and runs (std::hash is not).
std::uint64_t fnv1a(const void* data, std::size_t bytes,
                    std::uint64_t hash = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

std::string hex(std::uint64_t value) {
  return fmt::format("{:016x}", value);
}

std::string checksum(const CheckpointState& state) {
  std::uint64_t hash = fnv1a(&state.round, sizeof(state.round));
  for (const auto& [name, values] : state.arrays) {
    hash = fnv1a(name.data(), name.size(), hash);
    hash = fnv1a(values.data(), values.size() * sizeof(double), hash);
  }
  return hex(hash);
}

std::string checkpoint_name(int round) {
  return fmt::format("chk_{:06d}.h5", round);
}

// State names ("history/round") are stored as flat dataset names ("history.round") in /state.
std::string flat(std::string name) {
  std::replace(name.begin(), name.end(), '/', '.');
  return name;
}

std::string nested(std::string name) {
  std::replace(name.begin(), name.end(), '.', '/');
  return name;
}

// --- reading (rank 0), with HDF5's own error printing off
// -----------------------------------------

std::string read_string_attribute(hid_t file, const char* name) {
  const auto values = io_detail::read_string_attribute(file, name);
  return values.size() == 1 ? values.front() : "";
}

// Reads every dataset under /state; returns false on any HDF5 failure.
bool read_arrays(hid_t file, CheckpointState& state) {
  hid_t group = H5Gopen2(file, "/state", H5P_DEFAULT);
  if (group < 0) return false;
  H5G_info_t info;
  if (H5Gget_info(group, &info) < 0) return false;
  bool ok = true;
  for (hsize_t i = 0; i < info.nlinks && ok; ++i) {
    char name[256];
    if (H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof(name),
                           H5P_DEFAULT) < 0) {
      ok = false;
      break;
    }
    hid_t set = H5Dopen2(group, name, H5P_DEFAULT);
    if (set < 0) {
      ok = false;
      break;
    }
    hid_t space = H5Dget_space(set);
    const auto count = static_cast<std::size_t>(H5Sget_simple_extent_npoints(space));
    std::vector<double> values(count);
    ok = count == 0 ||
         H5Dread(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0;
    state.arrays[nested(name)] = std::move(values);
    H5Sclose(space);
    H5Dclose(set);
  }
  H5Gclose(group);
  return ok;
}

// Why `path` cannot be used for this deck and command ("" when it can), filling `state`.
std::string load(const std::string& path, const std::string& hash, const std::string& command,
                 CheckpointState& state) {
  SilentHdf5 silent;
  if (!fs::is_regular_file(path)) return "no such file";
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return "not a readable HDF5 file (truncated or corrupted)";
  std::string problem;
  const std::string format = read_string_attribute(file, "format");
  const std::string version_text = read_string_attribute(file, "fluence_version");
  const std::string stored_hash = read_string_attribute(file, "results_hash");
  const std::string stored_sum = read_string_attribute(file, "checksum");
  const std::string round_text = read_string_attribute(file, "round");
  // Checkpoints written before other commands could checkpoint are train's.
  std::string stored_command = read_string_attribute(file, "command");
  if (stored_command.empty()) stored_command = "train";
  if (format != kFormat)
    problem = fmt::format("not a Fluence checkpoint (format \"{}\")", format);
  else if (version_text != version())
    problem = fmt::format("written by Fluence {}, this is {} (incompatible version)", version_text,
                          version());
  else if (stored_command != command)
    problem = fmt::format("written by `fluence {}`, this is `fluence {}`", stored_command, command);
  else if (stored_hash != hash)
    problem = "written for another deck (the keys that change results differ)";
  else if (!read_arrays(file, state))
    problem = "its datasets cannot be read (corrupted)";
  H5Fclose(file);
  if (!problem.empty()) return problem;
  state.command = stored_command;
  state.round = std::atoi(round_text.c_str());
  if (checksum(state) != stored_sum) return "checksum mismatch (corrupted)";
  return "";
}

// Rank 0's verdict and state, sent to every rank.
std::string load_everywhere(const std::string& path, const std::string& hash,
                            const std::string& command, CheckpointState& state) {
  std::string problem;
  if (world_rank() == 0) problem = load(path, hash, command, state);
  problem = broadcast_string(problem);
  if (!problem.empty()) return problem;
  // Names and sizes, then the values.
  std::string names;
  if (world_rank() == 0)
    for (const auto& [name, values] : state.arrays)
      names += fmt::format("{} {}\n", name, values.size());
  names = broadcast_string(names);
  int round = state.round;
  MPI_Bcast(&round, 1, MPI_INT, 0, MPI_COMM_WORLD);
  state.round = round;
  state.command = command;
  std::istringstream lines(names);
  std::string name;
  std::size_t count = 0;
  while (lines >> name >> count) {
    auto& values = state.arrays[name];
    values.resize(count);
    if (count > 0) MPI_Bcast(values.data(), static_cast<int>(count), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  }
  return "";
}

}  // namespace

std::string results_hash(const Deck& deck) {
  toml::table table = deck.table();
  table.erase("output");
  std::ostringstream text;
  text << toml::toml_formatter(table);
  return hex(fnv1a(text.str().data(), text.str().size()));
}

std::string write_checkpoint(const std::string& directory, const Deck& deck,
                             const CheckpointState& state, int keep) {
  std::string path;
  {
    ResultsFile file(directory, checkpoint_name(state.round));
    file.attribute("format", std::string(kFormat));
    file.attribute("fluence_version", std::string(version()));
    file.attribute("command", state.command);
    file.attribute("results_hash", results_hash(deck));
    file.attribute("round", std::to_string(state.round));
    file.attribute("checksum", checksum(state));
    file.attribute("deck", deck.resolved_toml());
    for (const auto& [name, values] : state.arrays) file.dataset("/state/" + flat(name), values);
    path = file.commit();
  }
  if (world_rank() == 0 && keep > 0) {
    std::vector<std::string> existing;
    for (const auto& entry : fs::directory_iterator(directory)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("chk_", 0) == 0 && entry.path().extension() == ".h5") existing.push_back(name);
    }
    std::sort(existing.begin(), existing.end());
    for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < existing.size(); ++i)
      fs::remove(fs::path(directory) / existing[i]);
  }
  return path;
}

CheckpointState read_checkpoint(const std::string& path, const Deck& deck,
                                const std::string& command) {
  CheckpointState state;
  const std::string problem = load_everywhere(path, results_hash(deck), command, state);
  if (!problem.empty()) throw InputError(fmt::format("--restart {}: refused: {}", path, problem));
  return state;
}

CheckpointState read_restart(const std::string& path, const std::string& directory,
                             const Deck& deck, std::string& used, const std::string& command) {
  if (path != "latest") {
    used = path;
    return read_checkpoint(path, deck, command);
  }
  std::vector<std::string> candidates;
  if (world_rank() == 0 && fs::is_directory(directory))
    for (const auto& entry : fs::directory_iterator(directory)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("chk_", 0) == 0 && entry.path().extension() == ".h5")
        candidates.push_back(entry.path().string());
    }
  std::string joined;
  for (const auto& c : candidates) joined += c + "\n";
  joined = broadcast_string(joined);
  candidates.clear();
  std::istringstream lines(joined);
  for (std::string line; std::getline(lines, line);) candidates.push_back(line);
  std::sort(candidates.rbegin(), candidates.rend());  // newest round first
  const std::string hash = results_hash(deck);
  for (const auto& candidate : candidates) {
    CheckpointState state;
    const std::string problem = load_everywhere(candidate, hash, command, state);
    if (problem.empty()) {
      used = candidate;
      return state;
    }
    log::warn("--restart latest: skipping {}: {}; trying the previous checkpoint", candidate,
              problem);
  }
  throw InputError(
      fmt::format("--restart latest: no valid checkpoint in {} (chk_*.h5)", directory));
}

}  // namespace fluence
