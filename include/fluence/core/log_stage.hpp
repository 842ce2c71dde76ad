#pragma once
// The phases of a run as PETSc log stages, so that `-log_view` breaks a run's time down by phase
// (docs/architecture.md). PETSc charges time and events to the stage on top of its stack: a stage
// pushed inside another pauses the outer one, so each phase's time is its own.
namespace fluence {

enum class Stage { setup, training, ihvp, retraining, votes, output };

/// The name -log_view prints for `stage` ("Set-up", "Training", "IHVP", "Retraining", "Votes",
/// "Output").
const char* stage_name(Stage stage);

/// RAII: pushes `stage` on PETSc's stage stack, pops it when it goes out of scope (an exception
/// included). Every stage is registered on first use, all of them in one fixed order, so that the
/// stage numbers agree on every rank whichever stage a rank pushes first.
class LogStage {
 public:
  explicit LogStage(Stage stage);
  ~LogStage();
  LogStage(const LogStage&) = delete;
  LogStage& operator=(const LogStage&) = delete;

 private:
  Stage stage_;
};

/// The innermost stage that the exception now propagating left (nullptr when none since the last
/// stage began): the message of a failed allocation names the phase it ended.
const char* unwound_stage();

/// Runs `work` inside `stage` and returns what it returns.
template <class Work>
decltype(auto) in_stage(Stage stage, Work&& work) {
  LogStage guard(stage);
  return work();
}

}  // namespace fluence
