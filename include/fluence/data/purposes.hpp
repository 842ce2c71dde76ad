#pragma once
// The random streams of data/ (the data: synthetic generation, the test split and the partition):
// each a Purpose (core/rng.hpp) whose number keys the stream with the run seed. The numbers are
// part of the reproducibility contract: never renumber or reuse one (tests/core/test_rng.cpp checks
// that no two modules share one).
#include "fluence/core/rng.hpp"

namespace fluence::purpose {

inline constexpr Purpose synthetic_model{1};
inline constexpr Purpose synthetic_rows{2};
inline constexpr Purpose test_split{3};
inline constexpr Purpose partition{4};
inline constexpr Purpose public_split{41};

/// Every purpose above (for the check that no two modules share a number).
inline constexpr Purpose data_purposes[] = {synthetic_model, synthetic_rows, test_split, partition,
                                            public_split};

}  // namespace fluence::purpose
