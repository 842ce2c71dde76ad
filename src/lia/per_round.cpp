// fluence lia, lia.mode = "per_round" (seed 003 Algorithm 1): in every FL round t the center
// broadcasts theta_t, each participant trains its DP-SGD layer from theta_t (lines 4-7), the
// others vote on it with theta_t as seed 002 Eq. 1's current model (lines 9-14), and the round
// aggregates only the accepted participants (line 16). The aggregation is the FL comparison's (each
// accepted participant's local SGD from theta_t, the mean of their updates: the "lia" method of
// fl_comparison.cpp, with its acceptance renewed every round), so round 1, whose vote is the
// filtering stage's, equals that method's first round.
#include <numeric>

#include "experiment.hpp"
#include "fluence/core/log.hpp"
#include "fluence/fl/aggregators.hpp"
#include "fluence/fl/federation.hpp"

namespace fluence::lia {

namespace {

// Round t's filtering with the global model theta_t; round 1 is the filtering stage's (the same
// base M0 and streams), so it is taken from `result`.
VoteRound filter_round(Experiment& e, VoteKernel& kernel, int round,
                       const std::vector<double>& theta, const std::vector<std::int64_t>& weights,
                       const LiaResult& result) {
  if (round == 1) {
    VoteRound first;
    first.accepted = result.accepted;
    first.threshold = result.threshold;
    first.recall = result.recall;
    first.precision = result.precision;
    first.accuracy = result.accuracy;
    return first;
  }
  const auto key = static_cast<std::uint64_t>(round);
  const auto layers = contributor_layers(e, theta, key);
  return vote_on_contributors(e, kernel, theta, layers, key, weights, result.corrupted);
}

}  // namespace

void run_per_round(Experiment& e, LiaResult& result) {
  const LiaConfig& config = e.config;
  const int P = e.P;
  RoundsResult& rounds = result.rounds;
  rounds = RoundsResult{};
  Federation federation(e.federated);
  LocalTrainingConfig local;
  local.epochs = config.local_epochs;
  local.batch_size = config.batch_size;
  local.learning_rate = config.fl_learning_rate;
  // What the filter accepts is averaged with equal weights over the gathered updates (line 16).
  const std::unique_ptr<Aggregator> mean = make_aggregator(AggregatorConfig{}, "lia.methods");
  GatheredReduction reduction(e.p, *mean);
  const std::unique_ptr<Sampler> everyone = make_sampler({}, e.federated.seed, P);
  VoteKernel kernel(e.D, e.C,
                    config.vote_loss == "zero_one" ? VoteLoss::zero_one : VoteLoss::cross_entropy);
  const auto weights = relevance_vote_weights(e, result);
  std::vector<double> theta(e.theta0);
  for (int round = 1; round <= config.rounds; ++round) {
    const VoteRound decision = filter_round(e, kernel, round, theta, weights, result);
    std::vector<int> rejected;
    for (int a = 0; a < P; ++a)
      if (!decision.accepted[a]) rejected.push_back(a);
    // A round that rejects everyone leaves theta_t in place (line 16 has nothing to aggregate).
    if (static_cast<int>(rejected.size()) < P) {
      federation.exclude_clients(rejected);
      federation.round(round, theta, local, *everyone, reduction);
    }
    rounds.recall.push_back(decision.recall);
    rounds.precision.push_back(decision.precision);
    rounds.accuracy.push_back(decision.accuracy);
    rounds.threshold.push_back(decision.threshold);
    rounds.accepted.insert(rounds.accepted.end(), decision.accepted.begin(),
                           decision.accepted.end());
    rounds.test_accuracy.push_back(e.test.accuracy(e.model(), theta, e.work));
    if (e.progress)
      log::info(
          "lia: round {:>3}: {} of {} accepted; recall {:.4f}, precision {:.4f}; test accuracy "
          "{:.4f}",
          round, P - static_cast<int>(rejected.size()), P, decision.recall, decision.precision,
          rounds.test_accuracy.back());
  }
  result.subset_votes = gathered_subset_votes(e);
}

}  // namespace fluence::lia
