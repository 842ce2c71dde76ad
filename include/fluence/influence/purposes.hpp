#pragma once
// The random streams of influence/ (IHVP solvers: LiSSA samples and eigensolver start vectors;
// FL-LDS's subset federations): each a Purpose (core/rng.hpp) whose number keys the stream with the
// run seed. The numbers are part of the reproducibility contract: never renumber or reuse one
// (tests/core/test_rng.cpp checks that no two modules share one).
#include "fluence/core/rng.hpp"

namespace fluence::purpose {

inline constexpr Purpose lissa_sample{8};
inline constexpr Purpose spectrum_start{9};
inline constexpr Purpose lds_subset{45};  // the clients an FL-LDS subset federation leaves out
// The objective perturbation b of certified removal (Guo et al. 2020; influence.certified_epsilon)
inline constexpr Purpose certified_removal_noise{49};

/// Every purpose above (for the check that no two modules share a number).
inline constexpr Purpose influence_purposes[] = {lissa_sample, spectrum_start, lds_subset,
                                                 certified_removal_noise};

}  // namespace fluence::purpose
