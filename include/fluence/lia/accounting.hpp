#pragma once
// A validator's privacy loss over everything it releases in one run (docs/math.md §9, "Vote
// privacy per validator"). Each vote is an eps-DP randomized response (seed 002 Eq. 2-3) of a bit
// computed from the validator's validation rows; one validation set serves all of a validator's
// votes, so the guarantee a validator gets is the composition over its votes, not one vote's eps.
#include <span>

namespace fluence::lia {

/// Pure eps (delta = 0) of one validator: `votes_per_subset[s]` votes read validation subset s,
/// each eps_vote-DP, and the relevance histogram (eps_histogram; 0 when none is released) reads
/// every row. Votes that read the same rows compose sequentially (k eps_vote); disjoint subsets
/// compose in parallel (a row lies in one subset, so the largest subset's count counts); with
/// `coupled` every vote reads every subset (a baseline over all the validator's differences) and
/// all votes compose. Basic composition is tight at delta = 0: the k reports that each agree with
/// the bit one neighbouring data set gives and disagree with the other's have likelihood ratio
/// e^(k eps_vote). eps_vote = inf gives inf when any vote is cast.
double validator_epsilon(std::span<const double> votes_per_subset, bool coupled,
                         double epsilon_vote, double epsilon_histogram);

}  // namespace fluence::lia
