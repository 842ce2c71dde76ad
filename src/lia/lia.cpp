// fluence lia (seed 002 Algorithm 1 with the set-up of §IV): set-up, the filtering stage, then the
// FL comparison method by method, each stage a resumable unit (docs/operations.md).
#include "fluence/lia/lia.hpp"

#include <mpi.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "experiment.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/resume.hpp"
#include "fluence/lia/accounting.hpp"
#include "fluence/lia/record_canaries.hpp"
#include "fluence/lia/votes.hpp"
#include "fluence/privacy/rdp_accountant.hpp"

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
  arrays["lia/subset_votes"] = r.subset_votes;
  if (!r.rounds.recall.empty()) {
    arrays["lia/round/recall"] = r.rounds.recall;
    arrays["lia/round/precision"] = r.rounds.precision;
    arrays["lia/round/accuracy"] = r.rounds.accuracy;
    arrays["lia/round/threshold"] = r.rounds.threshold;
    arrays["lia/round/test_accuracy"] = r.rounds.test_accuracy;
    arrays["lia/round/accepted"] = as_double(r.rounds.accepted);
  }
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
  r.subset_votes = state_array(arrays, "lia/subset_votes", P * config.validation_subsets);
  if (!config.minority_fractions.empty()) r.minority.fractions = config.minority_fractions;
}

void restore_rounds(const StateArrays& arrays, int participants, int rounds, LiaResult& r) {
  const auto T = static_cast<std::size_t>(rounds);
  r.rounds.recall = state_array(arrays, "lia/round/recall", T);
  r.rounds.precision = state_array(arrays, "lia/round/precision", T);
  r.rounds.accuracy = state_array(arrays, "lia/round/accuracy", T);
  r.rounds.threshold = state_array(arrays, "lia/round/threshold", T);
  r.rounds.test_accuracy = state_array(arrays, "lia/round/test_accuracy", T);
  const auto& accepted =
      state_array(arrays, "lia/round/accepted", T * static_cast<std::size_t>(participants));
  r.rounds.accepted.assign(accepted.begin(), accepted.end());
}

// The restored vote counts back on the ranks that host their validators.
void restore_subset_votes(const LiaResult& r, Experiment& e) {
  const std::size_t s = static_cast<std::size_t>(e.config.validation_subsets);
  const auto first = r.subset_votes.begin() + static_cast<std::ptrdiff_t>(e.local.first * s);
  const auto last = r.subset_votes.begin() + static_cast<std::ptrdiff_t>(e.local.last * s);
  e.local.subset_votes.assign(first, last);
}

// Every validator's total eps (docs/math.md §9, "Vote privacy per validator"): its votes'
// randomized responses composed over the subsets they read, plus its relevance histogram when
// released. `epsilon_validator` is pure (delta = 0) in the accounting of lia.vote_accounting, as
// /lia/epsilon_vote; `epsilon_validator_rdp` is at lia.delta by Renyi DP, with each vote's exact
// eps (the randomized response actually run, whatever lia.vote_accounting states).
void account_validators(const LiaConfig& config, LiaResult& r) {
  const double p = config.vote_flip_probability();
  const double stated = vote_epsilon(p, config.vote_accounting == "seed"),
               exact = vote_epsilon(p, false);
  const double histogram = config.relevance_weighted() ? config.relevance_epsilon : 0.0;
  const std::size_t s = static_cast<std::size_t>(config.validation_subsets);
  const std::size_t P = r.subset_votes.size() / s;
  r.epsilon_validator.resize(P);
  r.epsilon_validator_rdp.resize(P);
  for (std::size_t b = 0; b < P; ++b) {
    const auto votes = std::span(r.subset_votes).subspan(b * s, s);
    r.epsilon_validator[b] = validator_epsilon(votes, config.votes_coupled(), stated, histogram);
    r.epsilon_validator_rdp[b] =
        validator_epsilon_rdp(votes, config.votes_coupled(), exact, histogram, config.delta);
  }
}

// The record-canary audit (audit.canaries > 0): contributor 0's DP-SGD training as configured (q,
// sigma, S, the steps of one training, from M0's layer), run again on its records with the
// canaries and its own draws, so that the experiment's results do not change. The rank hosting
// contributor 0 runs it and broadcasts the scores: the same bits on any rank count.
void audit_contributor(const Experiment& e, const CanaryAuditConfig& audit, LiaResult& r) {
  const LiaConfig& config = e.config;
  const bool host = e.local.first == 0 && e.local.last > 0;
  int root = host ? world_rank() : -1;
  MPI_Allreduce(MPI_IN_PLACE, &root, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CanaryAuditResult result;
  const auto m = static_cast<std::size_t>(audit.canaries);
  result.inserted.resize(m);
  result.score_all_iterates.resize(m);
  result.score_final.resize(m);
  if (host) {
    const Client& contributor = e.participant(0);
    result = audit_dp_sgd_records(contributor.features(), contributor.labels().data(),
                                  contributor.size(), e.D, e.C, e.dp, e.theta0.data(), e.seed,
                                  audit, config.delta);
  }
  MPI_Bcast(result.inserted.data(), static_cast<int>(m), MPI_UINT8_T, root, MPI_COMM_WORLD);
  MPI_Bcast(result.score_all_iterates.data(), static_cast<int>(m), MPI_DOUBLE, root,
            MPI_COMM_WORLD);
  MPI_Bcast(result.score_final.data(), static_cast<int>(m), MPI_DOUBLE, root, MPI_COMM_WORLD);
  canary_audit_bounds(result, config.delta, audit.confidence);
  r.audit = std::move(result);
  const double q = dp_sgd_rate(static_cast<std::size_t>(config.train_size), e.dp);
  r.audit_epsilon =
      dp_sgd_epsilon(q, e.dp.noise_multiplier,
                     dp_sgd_steps(static_cast<std::size_t>(config.train_size), e.dp), config.delta)
          .epsilon;
  if (e.progress)
    log::info(
        "audit: {} record canaries ({} inserted) in contributor 0's DP-SGD (eps {:.4g}): eps lower "
        "bound {:.4g} (white box), {:.4g} (final model) at {:.0f}% confidence; canary estimate "
        "{:.4g} (white box), {:.4g} (final)",
        m, std::count(r.audit->inserted.begin(), r.audit->inserted.end(), 1), r.audit_epsilon,
        r.audit->epsilon_lower_all_iterates, r.audit->epsilon_lower_final,
        100.0 * r.audit->confidence, r.audit->epsilon_estimate_all_iterates,
        r.audit->epsilon_estimate_final);
}

}  // namespace

LiaResult run_lia(const Deck& deck, bool progress, SweepCheckpoint* checkpoint) {
  LiaResult result;
  Experiment e = in_stage(Stage::setup, [&] { return set_up_experiment(deck, progress, result); });
  const LiaConfig& config = e.config;
  const CanaryAuditConfig audit = CanaryAuditConfig::from_deck(deck);
  if (audit.canaries > 0 && !(e.dp.noise_multiplier > 0.0))
    throw InputError(fmt::format(
        "audit.canaries = {} needs a private lia run: a finite lia.epsilon_train (DP-SGD with "
        "noise)",
        audit.canaries));
  // A restart after the filtering stage takes its outcome from the checkpoint.
  const StateArrays none;
  const StateArrays& restored = checkpoint ? checkpoint->restored() : none;
  const bool filtered = restored.count("lia/vote_sum") > 0;
  if (filtered) {
    restore_filtering(restored, e.P, config, result);
    restore_subset_votes(result, e);
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
  if (config.per_round()) {
    if (restored.count("lia/round/recall")) {
      restore_rounds(restored, e.P, config.rounds, result);
    } else {
      run_per_round(e, result);
      if (checkpoint &&
          checkpoint->units_done(static_cast<long>(config.methods.size()) + 2,
                                 [&](StateArrays& arrays) { save_lia_state(result, arrays); })) {
        result.stopped = true;
        return result;
      }
    }
  }
  result.time_fl = fl_clock.seconds();
  account_validators(config, result);
  if (audit.canaries > 0) audit_contributor(e, audit, result);
  return result;
}

}  // namespace fluence::lia
