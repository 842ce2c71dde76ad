#include "fluence/core/log_stage.hpp"

#include <petsclog.h>

#include <array>
#include <exception>
#include <iterator>

#include "fluence/core/error.hpp"

namespace fluence {

namespace {

// In the order of Stage's values.
constexpr const char* kStageNames[] = {"Set-up",     "Training", "IHVP",
                                       "Retraining", "Votes",    "Output"};
constexpr std::size_t kStages = std::size(kStageNames);

const std::array<PetscLogStage, kStages>& registered_stages() {
  static const std::array<PetscLogStage, kStages> stages = [] {
    std::array<PetscLogStage, kStages> ids{};
    for (std::size_t k = 0; k < kStages; ++k)
      petsc_check(PetscLogStageRegister(kStageNames[k], &ids[k]), "PetscLogStageRegister");
    return ids;
  }();
  return stages;
}

const char* unwound = nullptr;

}  // namespace

const char* stage_name(Stage stage) {
  return kStageNames[static_cast<std::size_t>(stage)];
}

LogStage::LogStage(Stage stage) : stage_(stage) {
  unwound = nullptr;
  petsc_check(PetscLogStagePush(registered_stages()[static_cast<std::size_t>(stage)]),
              "PetscLogStagePush");
}

// A failed pop (PETSc's stack already unwound) must not throw from a destructor: ignored.
LogStage::~LogStage() {
  if (std::uncaught_exceptions() > 0 && unwound == nullptr) unwound = stage_name(stage_);
  (void)PetscLogStagePop();
}

const char* unwound_stage() {
  return unwound;
}

}  // namespace fluence
