#pragma once
// The checkpoints of one command run (docs/operations.md), shared by train, whatif, fldp and
// influence: --restart (a checkpoint file or "latest"), output.checkpoint_every and output.keep,
// and the stop signals (SIGTERM, SIGUSR1, SIGINT, SIGHUP: finish the unit, write a checkpoint,
// exit 4).
#include <functional>
#include <optional>
#include <string>

#include "fluence/app/cli.hpp"
#include "fluence/core/resume.hpp"
#include "fluence/io/checkpoint.hpp"

namespace fluence::app {

class CommandCheckpoints {
 public:
  /// Installs the stop handlers; with --restart reads the checkpoint of `command` (collective;
  /// InputError when it is refused).
  CommandCheckpoints(const CommandLine& command_line, const Deck& deck, std::string command);

  /// The state of the interrupted run this one continues (null: a fresh start).
  const CheckpointState* restored() const { return restored_ ? &*restored_ : nullptr; }
  /// Whether output.checkpoint_every asks for a checkpoint when the finished units go from
  /// `before` to `after` (a multiple of it was reached).
  bool due(long before, long after) const;
  bool enabled() const { return every_ > 0; }
  /// Collective, between units of work: writes checkpoint number `counter` with `state` when
  /// `due` or when a stop signal reached any rank. Then, on a signal, says so (`after`: what is
  /// finished, "round 12") and returns true: the command exits with kExitStopped.
  bool boundary(int counter, bool due, const std::function<StateArrays()>& state,
                const std::string& after);

 private:
  const Deck& deck_;
  std::string command_, directory_;
  long every_ = 0;
  int keep_ = 2;
  int stop_at_ = -1;  // --test-stop-at: raise SIGUSR1 on the last rank at this boundary
  std::optional<CheckpointState> restored_;
};

/// Declares the [output] keys the commands and their checkpoints read: type, default, range and
/// meaning of each (inputs/README.md's tables).
void register_output_keys(DeckSchema& schema);

/// The checkpoints of a sweep after training: every one holds the trained model too (a restart
/// neither retrains nor reads --model) and is numbered rounds trained + 1 + finished units.
class SweepCheckpoints final : public SweepCheckpoint {
 public:
  /// `model`: the trained model's arrays; `base`: rounds trained + 1; `unit` names the units in
  /// messages ("cases").
  SweepCheckpoints(CommandCheckpoints& checkpoints, StateArrays model, int base, std::string unit);
  /// Collective, before the sweep: the checkpoint of the finished model (when checkpoints are on
  /// and the run did not restart from a later one), or a stop signal during the set-up. True:
  /// stopped.
  bool model_ready();
  const StateArrays& restored() const override { return restored_; }
  bool units_done(long units, const std::function<void(StateArrays&)>& save) override;

 private:
  CommandCheckpoints& checkpoints_;
  StateArrays model_;
  std::string unit_;
  int base_ = 1;
  long units_ = 0;  // finished at the last call (restored: at the checkpoint)
  bool sweep_restored_ = false;
  StateArrays restored_;
};

}  // namespace fluence::app
