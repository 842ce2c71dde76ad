#pragma once
// Checkpoints (docs/operations.md): <out>/chk_<counter, 6 digits>.h5, written by rank 0 through a
// temporary name and renamed, holding everything a command needs to continue bitwise-identically
// on any number of ranks: the state it declares resumable as named arrays (train: the model, the
// metrics so far, the private-training state; whatif, fldp, influence: the trained model and the
// finished units of their sweeps), the counter (rounds, units), the command, the resolved deck and
// its results hash, the Fluence version, and a checksum over every stored number.
#include <cstdint>
#include <string>
#include <vector>

#include "fluence/core/config.hpp"
#include "fluence/core/resume.hpp"

namespace fluence {

/// Named numeric arrays: the state a command declares resumable.
struct CheckpointState {
  std::string command = "train";  // the command that wrote it (and alone may resume it)
  int round = 0;                  // the counter in the name: rounds, then finished units
  StateArrays arrays;
};

/// A hash of the resolved deck without the keys that cannot change results (`[output]`), so a
/// checkpoint is refused for a deck that would compute something else.
std::string results_hash(const Deck& deck);

/// Collective (rank 0 writes): `<directory>/chk_<round>.h5`; keeps the newest `keep` checkpoints.
/// Returns the path written.
std::string write_checkpoint(const std::string& directory, const Deck& deck,
                             const CheckpointState& state, int keep);

/// Collective: reads and verifies a checkpoint of `command` (format, version, command, checksum,
/// results hash); InputError naming the file and what is wrong.
CheckpointState read_checkpoint(const std::string& path, const Deck& deck,
                                const std::string& command = "train");

/// Collective: `path`, or with "latest" the newest valid checkpoint of `command` in `directory`
/// (each invalid newer one is reported and skipped). InputError when there is none.
CheckpointState read_restart(const std::string& path, const std::string& directory,
                             const Deck& deck, std::string& used,
                             const std::string& command = "train");

}  // namespace fluence
