// fluence lia (seed 002 Algorithm 1 with the set-up of §IV): set-up, the filtering stage, then the
// FL comparison method by method, each stage a resumable unit (docs/operations.md).
#include "fluence/lia/lia.hpp"

#include "experiment.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
#include "fluence/core/resume.hpp"

namespace fluence::lia {

namespace {

// The filtering outcome's scalars, stored as the array `lia/scalars` in this order.
const ScalarFields<LiaResult> kScalars = {{"threshold", &LiaResult::threshold},
                                          {"recall", &LiaResult::recall},
                                          {"precision", &LiaResult::precision},
                                          {"accuracy", &LiaResult::accuracy},
                                          {"epsilon_train", &LiaResult::epsilon_train},
                                          {"epsilon_vote", &LiaResult::epsilon_vote},
                                          {"noise_multiplier", &LiaResult::noise_multiplier},
                                          {"sign_agreement", &LiaResult::sign_agreement},
                                          {"vote_gflops", &LiaResult::vote_gflops},
                                          {"time_training", &LiaResult::time_training},
                                          {"time_votes", &LiaResult::time_votes}};

// A finished FL method as the array `lia/fl/<method>`: its client count, then its accuracy curve.
std::string fl_method_name(const std::string& method) {
  return "lia/fl/" + method;
}

// The resumable state (docs/operations.md): the filtering outcome, then each finished FL method.
void save_lia_state(const LiaResult& r, StateArrays& arrays) {
  auto as_double = [](const std::vector<std::int64_t>& v) {
    return std::vector<double>(v.begin(), v.end());
  };
  arrays["lia/vote_sum"] = r.vote_sum;
  arrays["lia/true_vote_sum"] = r.true_vote_sum;
  arrays["lia/votes_cast"] = as_double(r.votes_cast);
  arrays["lia/accepted"] = as_double(r.accepted);
  arrays["lia/scalars"] = kScalars.pack(r);
  arrays["lia/sign_checked"] = as_double(r.sign_checked);
  arrays["lia/relevance/batch_histogram"] = r.batch_histogram;
  arrays["lia/relevance/validation_histogram"] = r.validation_histogram;
  arrays["lia/minority/acceptance"] = r.minority.acceptance;
  arrays["lia/minority/vote_sum"] = r.minority.vote_sum;
  for (const auto& method : r.fl) {
    std::vector<double> stored{static_cast<double>(method.clients)};
    stored.insert(stored.end(), method.test_accuracy.begin(), method.test_accuracy.end());
    arrays[fl_method_name(method.method)] = stored;
  }
}

// A finished FL method of the interrupted run into `method` (its name set); false when the
// checkpoint has none of that name.
bool restore_fl_method(const StateArrays& arrays, int rounds, FlMethodResult& method) {
  if (!arrays.count(fl_method_name(method.method))) return false;
  const auto& stored =
      state_array(arrays, fl_method_name(method.method), static_cast<std::size_t>(rounds) + 2);
  method.clients = static_cast<int>(stored[0]);
  method.test_accuracy.assign(stored.begin() + 1, stored.end());
  return true;
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
  kScalars.read(arrays, "lia/scalars", r);
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
    FlMethodResult finished{.method = method};
    if (restore_fl_method(restored, config.rounds, finished)) {
      result.fl.push_back(std::move(finished));
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
