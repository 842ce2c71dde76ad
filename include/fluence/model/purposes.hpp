#pragma once
// The random streams of model/ (a network's initial weights): each a Purpose (core/rng.hpp) whose
// number keys the stream with the run seed. The numbers are part of the reproducibility contract:
// never renumber or reuse one (tests/core/test_rng.cpp checks that no two modules share one).
#include "fluence/core/rng.hpp"

namespace fluence::purpose {

inline constexpr Purpose model_init{32};

/// Every purpose above (for the check that no two modules share a number).
inline constexpr Purpose model_purposes[] = {model_init};

}  // namespace fluence::purpose
