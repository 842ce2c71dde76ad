#pragma once
// Resumable sweeps (docs/operations.md). A long computation (the what-if retrains, the FLDP cases,
// the client-influence solves and retrains) declares the state it needs to continue as named
// arrays and reports every finished unit of work; the command turns that into checkpoints, stops
// on a signal and restarts without redoing finished units. The computation itself knows nothing
// of files or signals: the command hands it a SweepCheckpoint.
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace fluence {

/// Named numeric arrays: the state a command declares resumable (what a checkpoint stores).
using StateArrays = std::map<std::string, std::vector<double>>;

class SweepCheckpoint {
 public:
  virtual ~SweepCheckpoint() = default;
  /// The state the interrupted run saved (empty: a fresh start).
  virtual const StateArrays& restored() const = 0;
  /// Collective, after finished units of work: `units` counts every finished unit, restored ones
  /// included. When a checkpoint is due (output.checkpoint_every) or a stop signal reached any
  /// rank, `save` is called on every rank to fill in the sweep's arrays. True: a stop signal
  /// arrived and the checkpoint is written; the sweep must return at once, marked stopped.
  virtual bool units_done(long units, const std::function<void(StateArrays&)>& save) = 0;
};

/// The array `name` of `state`; InputError naming it when it is missing (a checkpoint that does
/// not fit this run).
const std::vector<double>& state_array(const StateArrays& state, const std::string& name);
/// The same, checked to hold `size` values.
const std::vector<double>& state_array(const StateArrays& state, const std::string& name,
                                       std::size_t size);

/// Finished-unit flags as stored (1 = done); all false when `name` is absent.
std::vector<char> state_flags(const StateArrays& state, const std::string& name, std::size_t size);
std::vector<double> flags_array(const std::vector<char>& flags);

}  // namespace fluence
