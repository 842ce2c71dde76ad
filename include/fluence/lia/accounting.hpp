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

/// Renyi DP of order `order` > 1 of one binary randomized response that keeps its bit with
/// probability e^eps / (1 + e^eps): log(q^a (1-q)^(1-a) + (1-q)^a q^(1-a)) / (a - 1).
double randomized_response_rdp(double epsilon, double order);
/// Renyi DP of order `order` > 1 of the Laplace mechanism of scale 1/eps on a count of L1
/// sensitivity 1 (Mironov 2017, Prop. 6): log(a/(2a-1) e^((a-1) eps) + (a-1)/(2a-1) e^(-a eps)) /
/// (a - 1).
double laplace_rdp(double epsilon, double order);

/// The same composition as validator_epsilon at delta > 0: the votes' and the histogram's RDP
/// added at each of the accountant's orders and converted to (eps, delta) by epsilon_from_rdp
/// (privacy/rdp_accountant.hpp); the smaller of that and the pure eps (which holds at any delta).
double validator_epsilon_rdp(std::span<const double> votes_per_subset, bool coupled,
                             double epsilon_vote, double epsilon_histogram, double delta);

}  // namespace fluence::lia
