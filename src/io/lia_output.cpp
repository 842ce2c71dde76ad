#include "fluence/io/lia_output.hpp"

#include <cmath>
#include <variant>

#include "fluence/io/audit_output.hpp"

namespace fluence {

namespace {

// A per-participant dataset of /lia: its path, the result's member, its second dimension (none or
// the class), units and long name (docs/outputs.md).
struct ParticipantDataset {
  const char* path;
  std::variant<std::vector<double> lia::LiaResult::*, std::vector<std::int64_t> lia::LiaResult::*>
      member;
  bool by_class;
  const char* units;
  const char* long_name;
};
const ParticipantDataset kParticipantDatasets[] = {
    {"/lia/vote_sum", &lia::LiaResult::vote_sum, false, "1",
     "contributor's vote sum after randomized response"},
    {"/lia/true_vote_sum", &lia::LiaResult::true_vote_sum, false, "1",
     "contributor's vote sum before randomized response"},
    {"/lia/votes_cast", &lia::LiaResult::votes_cast, false, "count",
     "validators that voted on the contributor"},
    {"/lia/accepted", &lia::LiaResult::accepted, false, "1", "1 when the contributor is accepted"},
    {"/lia/corrupted", &lia::LiaResult::corrupted, false, "1",
     "1 when the participant's batch was corrupted"},
    {"/lia/batch_labels", &lia::LiaResult::batch_labels, true, "count",
     "true-label histogram of the participant's batch"},
    {"/lia/validation_labels", &lia::LiaResult::validation_labels, true, "count",
     "true-label histogram of the participant's validation set"},
    {"/lia/epsilon_validator", &lia::LiaResult::epsilon_validator, false, "1",
     "validator's total epsilon (delta = 0) over its votes and relevance histogram"},
    {"/lia/epsilon_validator_rdp", &lia::LiaResult::epsilon_validator_rdp, false, "1",
     "validator's total epsilon at lia.delta by Renyi DP (each vote's exact epsilon)"}};
const ParticipantDataset kRelevanceDatasets[] = {
    {"/lia/relevance/batch_histogram", &lia::LiaResult::batch_histogram, true, "count",
     "released histogram of predicted classes over the batch"},
    {"/lia/relevance/validation_histogram", &lia::LiaResult::validation_histogram, true, "count",
     "released histogram of predicted classes over the validation set"}};

// A scalar of /lia: path, the result's member, units and long name.
struct LiaScalar {
  const char* path;
  double lia::LiaResult::*member;
  const char* units;
  const char* long_name;
};
const LiaScalar kLiaScalars[] = {
    {"/lia/threshold", &lia::LiaResult::threshold, "1", "vote-sum threshold of acceptance"},
    {"/lia/recall", &lia::LiaResult::recall, "1", "rejected corrupted over corrupted"},
    {"/lia/precision", &lia::LiaResult::precision, "1", "rejected corrupted over rejected"},
    {"/lia/accuracy", &lia::LiaResult::accuracy, "1", "share of correct decisions"},
    {"/lia/epsilon_train", &lia::LiaResult::epsilon_train, "1", "DP-SGD epsilon of the training"},
    {"/lia/epsilon_vote", &lia::LiaResult::epsilon_vote, "1", "epsilon of one vote"},
    {"/lia/noise_multiplier", &lia::LiaResult::noise_multiplier, "1", "DP-SGD noise multiplier"}};

template <std::size_t N>
void write_participant_datasets(ResultsFile& file, const lia::LiaResult& result,
                                const ParticipantDataset (&datasets)[N]) {
  const std::vector<std::string> participant{"participant"}, by_class{"participant", "class"};
  for (const ParticipantDataset& d : datasets)
    std::visit(
        [&](auto member) {
          file.dataset(d.path, result.*member,
                       {d.by_class ? by_class : participant, d.units, d.long_name});
        },
        d.member);
}

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
  write_participant_datasets(file, result, kParticipantDatasets);
  if (config.relevance_weighted()) {
    write_participant_datasets(file, result, kRelevanceDatasets);
    file.scalar("/lia/relevance/epsilon", config.relevance_epsilon, "1",
                "epsilon of each released histogram");
  }
  for (const LiaScalar& s : kLiaScalars)
    file.scalar(s.path, result.*s.member, s.units, s.long_name);
  file.dimension("/lia/subset", static_cast<std::size_t>(config.validation_subsets));
  file.dataset("/lia/subset_votes",
               std::vector<std::int64_t>(result.subset_votes.begin(), result.subset_votes.end()),
               {{"participant", "subset"},
                "count",
                "votes the validator cast that read the validation subset"});
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
  if (result.audit) {
    write_canary_audit_output(
        file, *result.audit,
        "the likelihood ratio of the canary's per-step dots with the noisy gradient sums, summed "
        "over steps (white box)",
        "cosine of the canary's direction with the audited run's initial layer minus the final "
        "one (black box: a step moves against the gradient)");
    file.scalar("/audit/epsilon_accountant", result.audit_epsilon, "1",
                "the RDP accountant's eps of the audited DP-SGD training (one contributor's, one "
                "training) at /audit/delta");
  }
  if (!result.minority.fractions.empty()) write_minority(file, config, result.minority);
  write_timing(file, result);
}

}  // namespace fluence
