#include "fluence/io/lia_output.hpp"

#include <cmath>

namespace fluence {

namespace {
void write_minority(ResultsFile& file, const lia::LiaConfig& config,
                    const lia::MinorityResult& minority) {
  file.coordinate("/lia/minority/fractions", minority.fractions, "1",
                  "newcomers' share of the participants");
  file.dimension("/lia/minority/run", static_cast<std::size_t>(config.minority_runs));
  file.dataset("/lia/minority/acceptance", minority.acceptance,
               {{"fractions"}, "1", "share of newcomers accepted"});
  file.dataset("/lia/minority/vote_sum", minority.vote_sum,
               {{"fractions", "run"}, "1", "newcomer's vote sum"});
}

void write_fl(ResultsFile& file, const lia::LiaResult& result) {
  for (const auto& method : result.fl) {
    const std::string group = "/lia/fl/" + method.method;
    std::vector<std::int64_t> round(method.test_accuracy.size());
    for (std::size_t t = 0; t < round.size(); ++t) round[t] = static_cast<std::int64_t>(t);
    file.coordinate(group + "/round", round, "1", "federated round (0: the initial model M0)");
    file.dataset(group + "/test_accuracy", method.test_accuracy,
                 {{"round"}, "1", "fraction of test rows classified correctly"});
    file.attribute(group, "clients", static_cast<std::int64_t>(method.clients));
  }
}

// lia.mode = "per_round": each round's filtration and the test accuracy after its aggregation.
void write_rounds(ResultsFile& file, const lia::LiaResult& result) {
  const lia::RoundsResult& rounds = result.rounds;
  std::vector<std::int64_t> round(rounds.recall.size());
  for (std::size_t t = 0; t < round.size(); ++t) round[t] = static_cast<std::int64_t>(t) + 1;
  file.coordinate("/lia/round/round", round, "1", "federated round");
  const std::vector<std::string> by_round{"round"};
  file.dataset("/lia/round/recall", rounds.recall,
               {by_round, "1", "rejected corrupted over corrupted in the round"});
  file.dataset("/lia/round/precision", rounds.precision,
               {by_round, "1", "rejected corrupted over rejected in the round"});
  file.dataset("/lia/round/accuracy", rounds.accuracy,
               {by_round, "1", "share of correct decisions in the round"});
  file.dataset("/lia/round/threshold", rounds.threshold,
               {by_round, "1", "vote-sum threshold of acceptance in the round"});
  file.dataset("/lia/round/test_accuracy", rounds.test_accuracy,
               {by_round, "1", "test accuracy after the round's aggregation"});
  file.dataset("/lia/round/accepted", rounds.accepted,
               {{"round", "participant"}, "1", "1 when the contributor is accepted in the round"});
}

void write_timing(ResultsFile& file, const lia::LiaResult& result) {
  file.scalar("/lia/timing/setup", result.time_setup, "s", "wall time of the set-up");
  file.scalar("/lia/timing/contributors", result.time_training, "s",
              "wall time of the contributors' training");
  file.scalar("/lia/timing/votes", result.time_votes, "s", "wall time of the votes");
  file.scalar("/lia/timing/fl", result.time_fl, "s", "wall time of the federated runs");
  file.scalar("/lia/timing/vote_gflops", result.vote_gflops, "GFLOP s-1",
              "rate of the vote matrix products on rank 0");
}
}  // namespace

void write_lia_output(ResultsFile& file, const lia::LiaConfig& config,
                      const lia::LiaResult& result) {
  file.dimension("/lia/participant", result.corrupted.size());
  file.dimension("/lia/class", static_cast<std::size_t>(result.classes));
  const std::vector<std::string> participant{"participant"}, by_class{"participant", "class"};
  file.dataset("/lia/vote_sum", result.vote_sum,
               {participant, "1", "contributor's vote sum after randomized response"});
  file.dataset("/lia/true_vote_sum", result.true_vote_sum,
               {participant, "1", "contributor's vote sum before randomized response"});
  file.dataset("/lia/votes_cast", result.votes_cast,
               {participant, "count", "validators that voted on the contributor"});
  file.dataset("/lia/accepted", result.accepted,
               {participant, "1", "1 when the contributor is accepted"});
  file.dataset("/lia/corrupted", result.corrupted,
               {participant, "1", "1 when the participant's batch was corrupted"});
  file.dataset("/lia/batch_labels", result.batch_labels,
               {by_class, "count", "true-label histogram of the participant's batch"});
  file.dataset("/lia/validation_labels", result.validation_labels,
               {by_class, "count", "true-label histogram of the participant's validation set"});
  if (config.relevance_weighted()) {
    file.dataset("/lia/relevance/batch_histogram", result.batch_histogram,
                 {by_class, "count", "released histogram of predicted classes over the batch"});
    file.dataset(
        "/lia/relevance/validation_histogram", result.validation_histogram,
        {by_class, "count", "released histogram of predicted classes over the validation set"});
    file.scalar("/lia/relevance/epsilon", config.relevance_epsilon, "1",
                "epsilon of each released histogram");
  }
  file.scalar("/lia/threshold", result.threshold, "1", "vote-sum threshold of acceptance");
  file.scalar("/lia/recall", result.recall, "1", "rejected corrupted over corrupted");
  file.scalar("/lia/precision", result.precision, "1", "rejected corrupted over rejected");
  file.scalar("/lia/accuracy", result.accuracy, "1", "share of correct decisions");
  file.scalar("/lia/epsilon_train", result.epsilon_train, "1", "DP-SGD epsilon of the training");
  file.scalar("/lia/epsilon_vote", result.epsilon_vote, "1", "epsilon of one vote");
  file.dimension("/lia/subset", static_cast<std::size_t>(config.validation_subsets));
  file.dataset("/lia/subset_votes",
               std::vector<std::int64_t>(result.subset_votes.begin(), result.subset_votes.end()),
               {{"participant", "subset"},
                "count",
                "votes the validator cast that read the validation subset"});
  file.dataset("/lia/epsilon_validator", result.epsilon_validator,
               {participant, "1",
                "validator's total epsilon (delta = 0) over its votes and relevance histogram"});
  file.dataset("/lia/epsilon_validator_rdp", result.epsilon_validator_rdp,
               {participant, "1",
                "validator's total epsilon at lia.delta by Renyi DP (each vote's exact epsilon)"});
  file.scalar("/lia/noise_multiplier", result.noise_multiplier, "1", "DP-SGD noise multiplier");
  file.scalar("/lia/vote_flip_probability", config.vote_flip_probability(), "1",
              "randomized response flip probability of a vote");
  file.scalar("/lia/m0_test_accuracy", result.m0_test_accuracy, "1",
              "test accuracy of the initial model M0");
  file.scalar("/lia/overlapping_data", result.overlapping_data ? 1.0 : 0.0, "1",
              "1 when participants' sets were drawn independently");
  if (!result.sign_checked.empty()) {
    file.scalar("/lia/sign_agreement", result.sign_agreement, "1",
                "share of lazy votes whose sign equals the exact influence's");
    file.dimension("/lia/checked", result.sign_checked.size());
    file.dataset("/lia/sign_checked", result.sign_checked,
                 {{"checked"}, "1", "ids of the contributors checked"});
  }
  write_fl(file, result);
  if (config.per_round()) write_rounds(file, result);
  if (!result.minority.fractions.empty()) write_minority(file, config, result.minority);
  write_timing(file, result);
}

}  // namespace fluence
