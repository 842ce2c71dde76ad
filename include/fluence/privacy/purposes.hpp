#pragma once
// The random streams of privacy/ (privatization of the data): each a Purpose (core/rng.hpp) whose
// number keys the stream with the run seed. The numbers are part of the reproducibility contract:
// never renumber or reuse one (tests/core/test_rng.cpp checks that no two modules share one).
#include "fluence/core/rng.hpp"

namespace fluence::purpose {

inline constexpr Purpose randomized_response{5};

/// Every purpose above (for the check that no two modules share a number).
inline constexpr Purpose privacy_purposes[] = {randomized_response};

}  // namespace fluence::purpose
