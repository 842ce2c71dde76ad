#pragma once
// Checkpoints of `fluence train` (docs/operations.md): <out>/chk_<round, 6 digits>.h5, written by
// rank 0 through a temporary name and renamed, holding everything the run needs to continue
// bitwise-identically on any number of ranks: the round, the model, the metrics so far, the
// private-training state (clipping norm, accountant, per-round histories), the resolved deck and
// its results hash, the Fluence version, and a checksum over every stored number.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fluence/core/config.hpp"

namespace fluence {

/// Named numeric arrays: the state a command declares resumable.
struct CheckpointState {
  int round = 0;
  std::map<std::string, std::vector<double>> arrays;
};

/// A hash of the resolved deck without the keys that cannot change results (`[output]`), so a
/// checkpoint is refused for a deck that would compute something else.
std::string results_hash(const Deck& deck);

/// Collective (rank 0 writes): `<directory>/chk_<round>.h5`; keeps the newest `keep` checkpoints.
/// Returns the path written.
std::string write_checkpoint(const std::string& directory, const Deck& deck,
                             const CheckpointState& state, int keep);

/// Collective: reads and verifies a checkpoint (format, version, checksum, results hash);
/// InputError naming the file and what is wrong.
CheckpointState read_checkpoint(const std::string& path, const Deck& deck);

/// Collective: `path`, or with "latest" the newest valid checkpoint in `directory` (each invalid
/// newer one is reported and skipped). InputError when there is none.
CheckpointState read_restart(const std::string& path, const std::string& directory,
                             const Deck& deck, std::string& used);

}  // namespace fluence
