// GoogleTest main for unit and MPI tests: one Environment (MPI + PETSc + SLEPc) for the binary, and
// only rank 0 prints, so results of multi-rank runs stay readable. A failure on any rank fails the
// run.
#include <gtest/gtest.h>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/blas_tuning.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"

int main(int argc, char** argv) {
  fluence::select_blas_core(argv);
  ::testing::InitGoogleTest(&argc, argv);
  fluence::Environment environment(&argc, &argv);
  // The deck schema is built once, now, from the built-in parts: tests that register a part of
  // their own (an accountant, an aggregator, ...) then leave inputs/README.md's tables as they are
  // whatever order the tests run in.
  fluence::deck_schema();
  if (fluence::world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any_failed;
}
