#include "checkpoints.hpp"

#include <fmt/format.h>

#include <csignal>

#include "fluence/core/deck_keys.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/signals.hpp"

namespace fluence::app {

void register_output_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      section("output", "where results go"),
      key("output.dir", T::string, "\"out\"", "output directory (results.h5 is written there)"),
      key("output.checkpoint_every", T::integer, "0",
          "write `<dir>/chk_<n>.h5` every this many training rounds (`train`, and the "
          "training of `influence`, `fldp`, `whatif`), and every this many finished units "
          "of the sweeps of `influence` (a client's solve or retrain), `fldp` (a case) and "
          "`whatif` (a second-order row or a retrain chain); 0 = only on a stop signal; "
          "docs/operations.md",
          0),
      key("output.keep", T::integer, "2", "the newest checkpoints kept", 1),
  });
}

CommandCheckpoints::CommandCheckpoints(const CommandLine& command_line, const Deck& deck,
                                       std::string command)
    : deck_(deck),
      command_(std::move(command)),
      directory_(deck.string("output.dir")),
      every_(deck.integer("output.checkpoint_every")),
      keep_(static_cast<int>(deck.integer("output.keep"))),
      stop_at_(command_line.test_stop_at) {
  install_stop_handlers();
  if (command_line.test_stop_inside > 0 && world_rank() == world_size() - 1)
    arm_test_stop_inside(command_line.test_stop_inside);
  if (command_line.restart.empty()) return;
  std::string used;
  restored_ = read_restart(command_line.restart, directory_, deck, used, command_);
  log::info("restart: {} (checkpoint {})", used, restored_->round);
}

bool CommandCheckpoints::due(long before, long after) const {
  return every_ > 0 && after / every_ != before / every_;
}

bool CommandCheckpoints::boundary(int counter, bool due, const std::function<StateArrays()>& state,
                                  const std::string& after) {
  // The testing aid delivers a real signal to one rank: the same path as SLURM's USR1.
  if (counter == stop_at_ && world_rank() == world_size() - 1) std::raise(SIGUSR1);
  const bool stop = stop_requested_anywhere();
  if (!stop && !due) return false;
  CheckpointState checkpoint;
  checkpoint.command = command_;
  checkpoint.round = counter;
  checkpoint.arrays = state();
  const std::string path = write_checkpoint(directory_, deck_, checkpoint, keep_);
  if (stop)
    log::info(
        "stop signal received: checkpoint {} written after {}; resume with --restart latest "
        "(exit {})",
        path, after, kExitStopped);
  return stop;
}

SweepCheckpoints::SweepCheckpoints(CommandCheckpoints& checkpoints, StateArrays model, int base,
                                   std::string unit)
    : checkpoints_(checkpoints), model_(std::move(model)), unit_(std::move(unit)), base_(base) {
  const CheckpointState* restored = checkpoints.restored();
  if (!restored || restored->arrays.count("sweep/units") == 0) return;
  sweep_restored_ = true;
  units_ = static_cast<long>(state_array(restored->arrays, "sweep/units", 1)[0]);
  // A checkpoint of the finished model alone holds nothing of the sweep yet, unless a stop
  // inside the first unit saved its partial state.
  if (units_ > 0 || restored->arrays.count(kPartialUnit)) restored_ = restored->arrays;
}

bool SweepCheckpoints::model_ready() {
  if (sweep_restored_) return false;
  return checkpoints_.boundary(
      base_, checkpoints_.enabled(),
      [&] {
        StateArrays arrays = model_;
        arrays["sweep/units"] = {0.0};
        return arrays;
      },
      "training");
}

bool SweepCheckpoints::units_done(long units, const std::function<void(StateArrays&)>& save) {
  const bool due = checkpoints_.due(units_, units);
  units_ = units;
  return checkpoints_.boundary(
      base_ + static_cast<int>(units), due,
      [&] {
        StateArrays arrays = model_;
        arrays["sweep/units"] = {static_cast<double>(units)};
        save(arrays);
        return arrays;
      },
      fmt::format("{} {}", units, unit_));
}

}  // namespace fluence::app
