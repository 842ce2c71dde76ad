#pragma once
// The random streams of whatif/ (what-if estimates: group and test samples, ground-truth
// randomization): each a Purpose (core/rng.hpp) whose number keys the stream with the run seed. The
// numbers are part of the reproducibility contract: never renumber or reuse one
// (tests/core/test_rng.cpp checks that no two modules share one).
#include "fluence/core/rng.hpp"

namespace fluence::purpose {

inline constexpr Purpose whatif_group_sample{12};
inline constexpr Purpose whatif_randomization{13};
inline constexpr Purpose whatif_test_sample{14};

/// Every purpose above (for the check that no two modules share a number).
inline constexpr Purpose whatif_purposes[] = {whatif_group_sample, whatif_randomization,
                                              whatif_test_sample};

}  // namespace fluence::purpose
