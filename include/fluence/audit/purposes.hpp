#pragma once
// The random streams of audit/ (each a Purpose, core/rng.hpp, keyed with the run seed). The numbers
// are part of the reproducibility contract: never renumber or reuse one (tests/core/test_rng.cpp).
#include "fluence/core/rng.hpp"

namespace fluence::purpose {

inline constexpr Purpose ldp_audit_draws{42};   // the LDP audit's runs of the mechanism
inline constexpr Purpose canary_inclusion{43};  // which canaries a one-run audit includes
inline constexpr Purpose canary_direction{44};  // a canary client's random unit direction
inline constexpr Purpose lira_halves{46};       // which clients a LiRA target or shadow trains on
// The record-canary audit of LIA's DP-SGD: its run's own draws (key 0), the canaries' sampling
// per step (1, step) and their directions (2, canary).
inline constexpr Purpose record_canaries{47};
inline constexpr Purpose lira_examples{48};  // which examples an example-level LiRA model trains on

/// Every purpose above (for the check that no two modules share a number).
inline constexpr Purpose audit_purposes[] = {ldp_audit_draws, canary_inclusion, canary_direction,
                                             lira_halves,     record_canaries,  lira_examples};

}  // namespace fluence::purpose
