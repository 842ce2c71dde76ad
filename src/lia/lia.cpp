// fluence lia (seed 002 Algorithm 1 with the set-up of §IV): set-up, the filtering stage, then the
// FL comparison method by method, each stage a resumable unit (docs/operations.md).
#include "fluence/lia/lia.hpp"

#include "experiment.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
#include "fluence/core/resume.hpp"

namespace fluence::lia {

namespace {

// The resumable state (docs/operations.md): the filtering outcome, then each finished FL method.
void save_lia_state(const LiaResult& r, StateArrays& arrays) {
  auto as_double = [](const std::vector<std::int64_t>& v) {
    return std::vector<double>(v.begin(), v.end());
  };
  arrays["lia/vote_sum"] = r.vote_sum;
  arrays["lia/true_vote_sum"] = r.true_vote_sum;
  arrays["lia/votes_cast"] = as_double(r.votes_cast);
  arrays["lia/accepted"] = as_double(r.accepted);
  arrays["lia/scalars"] = {r.threshold,     r.recall,        r.precision,        r.accuracy,
                           r.epsilon_train, r.epsilon_vote,  r.noise_multiplier, r.sign_agreement,
                           r.vote_gflops,   r.time_training, r.time_votes};
  arrays["lia/sign_checked"] = as_double(r.sign_checked);
  arrays["lia/relevance/batch_histogram"] = r.batch_histogram;
  arrays["lia/relevance/validation_histogram"] = r.validation_histogram;
  arrays["lia/minority/acceptance"] = r.minority.acceptance;
  arrays["lia/minority/vote_sum"] = r.minority.vote_sum;
  for (const auto& method : r.fl) {
    std::vector<double> stored{static_cast<double>(method.clients)};
    stored.insert(stored.end(), method.test_accuracy.begin(), method.test_accuracy.end());
    arrays["lia/fl/" + method.method] = stored;
  }
}

void restore_filtering(const StateArrays& arrays, int participants, const LiaConfig& config,
                       LiaResult& r) {
  const auto P = static_cast<std::size_t>(participants);
  auto as_int = [](const std::vector<double>& v) {
    return std::vector<std::int64_t>(v.begin(), v.end());
  };
  r.vote_sum = state_array(arrays, "lia/vote_sum", P);
  r.true_vote_sum = state_array(arrays, "lia/true_vote_sum", P);
  r.votes_cast = as_int(state_array(arrays, "lia/votes_cast", P));
  r.accepted = as_int(state_array(arrays, "lia/accepted", P));
  const auto& scalars = state_array(arrays, "lia/scalars", 11);
  r.threshold = scalars[0];
  r.recall = scalars[1];
  r.precision = scalars[2];
  r.accuracy = scalars[3];
  r.epsilon_train = scalars[4];
  r.epsilon_vote = scalars[5];
  r.noise_multiplier = scalars[6];
  r.sign_agreement = scalars[7];
  r.vote_gflops = scalars[8];
  r.time_training = scalars[9];
  r.time_votes = scalars[10];
  r.sign_checked = as_int(state_array(arrays, "lia/sign_checked"));
  r.batch_histogram = state_array(arrays, "lia/relevance/batch_histogram");
  r.validation_histogram = state_array(arrays, "lia/relevance/validation_histogram");
  r.minority.acceptance = state_array(arrays, "lia/minority/acceptance");
  r.minority.vote_sum = state_array(arrays, "lia/minority/vote_sum");
  if (!config.minority_fractions.empty()) r.minority.fractions = config.minority_fractions;
}

}  // namespace

LiaResult run_lia(const Deck& deck, bool progress, SweepCheckpoint* checkpoint) {
  LiaResult result;
  Experiment e = in_stage(Stage::setup, [&] { return set_up_experiment(deck, progress, result); });
  const LiaConfig& config = e.config;
  // A restart after the filtering stage takes its outcome from the checkpoint.
  const StateArrays none;
  const StateArrays& restored = checkpoint ? checkpoint->restored() : none;
  const bool filtered = restored.count("lia/vote_sum") > 0;
  if (filtered) {
    restore_filtering(restored, e.P, config, result);
  } else {
    filter_contributors(e, result);
    if (checkpoint &&
        checkpoint->units_done(1, [&](StateArrays& arrays) { save_lia_state(result, arrays); })) {
      result.stopped = true;
      return result;
    }
  }
  LogStage training_stage(Stage::training);
  Stopwatch fl_clock;
  for (std::size_t m = 0; m < config.methods.size() && config.rounds > 0; ++m) {
    const std::string& method = config.methods[m];
    if (restored.count("lia/fl/" + method)) {
      FlMethodResult fl;
      fl.method = method;
      const auto& stored =
          state_array(restored, "lia/fl/" + method, static_cast<std::size_t>(config.rounds) + 2);
      fl.clients = static_cast<int>(stored[0]);
      fl.test_accuracy.assign(stored.begin() + 1, stored.end());
      result.fl.push_back(std::move(fl));
      continue;
    }
    result.fl.push_back(run_fl_method(e, method, result));
    if (progress)
      log::info("lia: FL {:<17} ({} clients): test accuracy {:.4f} after {} rounds", method,
                result.fl.back().clients, result.fl.back().test_accuracy.back(), config.rounds);
    if (checkpoint && checkpoint->units_done(static_cast<long>(m) + 2, [&](StateArrays& arrays) {
          save_lia_state(result, arrays);
        })) {
      result.stopped = true;
      return result;
    }
  }
  result.time_fl = fl_clock.seconds();
  return result;
}

}  // namespace fluence::lia
