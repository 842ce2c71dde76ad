#pragma once
// The random streams of privacy/ (privatization of the data, FeO2 point estimation): each a Purpose
// (core/rng.hpp) whose number keys the stream with the run seed. The numbers are part of the
// reproducibility contract: never renumber or reuse one (tests/core/test_rng.cpp checks that no two
// modules share one).
#include "fluence/core/rng.hpp"

namespace fluence::purpose {

inline constexpr Purpose randomized_response{5};
inline constexpr Purpose point_estimation{18};  // FeO2 Lemma 1's simulation (point_estimation.cpp)

/// Every purpose above (for the check that no two modules share a number).
inline constexpr Purpose privacy_purposes[] = {randomized_response, point_estimation};

}  // namespace fluence::purpose
