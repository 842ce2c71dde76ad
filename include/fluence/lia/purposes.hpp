#pragma once
// The random streams of lia/ (lazy-influence filtering: the split, participants, corruption,
// DP-SGD, votes, validators, sign check, minority runs, body, relevance): each a Purpose
// (core/rng.hpp) whose number keys the stream with the run seed. The numbers are part of the
// reproducibility contract: never renumber or reuse one (tests/core/test_rng.cpp checks that no two
// modules share one).
#include "fluence/core/rng.hpp"

namespace fluence::purpose {

inline constexpr Purpose lia_split{21};
inline constexpr Purpose lia_participant_data{22};
inline constexpr Purpose lia_corruption{23};
inline constexpr Purpose lia_dp_sgd{24};
inline constexpr Purpose lia_vote{25};
inline constexpr Purpose lia_validators{26};
inline constexpr Purpose lia_sign_check{28};
inline constexpr Purpose lia_minority{29};
inline constexpr Purpose lia_body{30};
inline constexpr Purpose lia_relevance{31};

/// Every purpose above (for the check that no two modules share a number).
inline constexpr Purpose lia_purposes[] = {
    lia_split,      lia_participant_data, lia_corruption, lia_dp_sgd, lia_vote,
    lia_validators, lia_sign_check,       lia_minority,   lia_body,   lia_relevance};

}  // namespace fluence::purpose
