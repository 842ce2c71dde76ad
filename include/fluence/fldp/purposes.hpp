#pragma once
// The random streams of fldp/ (FLDP-FL: re-randomized retrains and Monte Carlo expectations): each
// a Purpose (core/rng.hpp) whose number keys the stream with the run seed. The numbers are part of
// the reproducibility contract: never renumber or reuse one (tests/core/test_rng.cpp checks that no
// two modules share one).
#include "fluence/core/rng.hpp"

namespace fluence::purpose {

inline constexpr Purpose fldp_rerandomization{10};
inline constexpr Purpose fldp_expectation_sample{11};

/// Every purpose above (for the check that no two modules share a number).
inline constexpr Purpose fldp_purposes[] = {fldp_rerandomization, fldp_expectation_sample};

}  // namespace fluence::purpose
