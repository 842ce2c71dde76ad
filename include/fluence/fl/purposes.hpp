#pragma once
// The random streams of fl/ (federated training: local shuffles, client sampling, server noise,
// opt-out clients, local test splits, cohorts): each a Purpose (core/rng.hpp) whose number
// keys the stream with the run seed. The numbers are part of the reproducibility contract:
// never renumber or reuse one (tests/core/test_rng.cpp checks that no two modules share one).
#include "fluence/core/rng.hpp"

namespace fluence::purpose {

inline constexpr Purpose local_shuffle{6};
inline constexpr Purpose client_sampling{15};
inline constexpr Purpose server_noise{16};
inline constexpr Purpose opt_out{17};
inline constexpr Purpose personal_shuffle{19};
inline constexpr Purpose local_test_split{20};
inline constexpr Purpose client_cohort{33};

/// Every purpose above (for the check that no two modules share a number).
inline constexpr Purpose fl_purposes[] = {local_shuffle,    client_sampling,  server_noise, opt_out,
                                          personal_shuffle, local_test_split, client_cohort};

}  // namespace fluence::purpose
