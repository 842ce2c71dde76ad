// fluence train DECK [--restart chk.h5|latest]: parse -> build the federation -> train (resuming
// from a checkpoint; checkpoints every output.checkpoint_every rounds and on a stop signal) ->
// write <out>/results.h5.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <utility>

#include "checkpoints.hpp"
#include "fluence/app/cli.hpp"
#include "fluence/audit/canary_clients.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/signals.hpp"
#include "fluence/fl/federation.hpp"
#include "fluence/fl/private_training.hpp"
#include "fluence/influence/memory.hpp"
#include "fluence/io/audit_output.hpp"
#include "fluence/io/privacy_output.hpp"
#include "fluence/io/results.hpp"
#include "fluence/io/training_output.hpp"
#include "run_context.hpp"
#include "train_checkpoint.hpp"

namespace fluence::app {

namespace {

// The final round's FeO2 metrics that were computed: a client-level mean is NaN without clients of
// its group that hold local test data (no opt-out clients in DP-FedAvg; no
// partition.local_test_fraction), and is left out. Without any, Acc_g alone repeats the final test
// accuracy: no line.
void log_final_feo2_metrics(const Feo2Metrics& m) {
  const std::pair<const char*, double> client_level[] = {{"Acc_g,p", m.acc_g_p.back()},
                                                         {"Acc_g,np", m.acc_g_np.back()},
                                                         {"Acc_l,p", m.acc_l_p.back()},
                                                         {"Acc_l,np", m.acc_l_np.back()}};
  std::string fields;
  for (const auto& [name, value] : client_level)
    if (!std::isnan(value)) fields += fmt::format("  {} {:.4f}", name, value);
  if (!fields.empty()) log::info("feo2 metrics (final): Acc_g {:.4f}{}", m.acc_g.back(), fields);
}

// The canary audit of audit.canaries (audit/canary_clients.hpp), for the private run.
std::optional<CanaryAudit> canary_audit(const Deck& deck, const FederatedProblem& problem,
                                        std::optional<PrivateTraining>& private_training) {
  const CanaryAuditConfig config = CanaryAuditConfig::from_deck(deck);
  if (config.canaries == 0) return std::nullopt;
  if (!private_training)
    throw InputError(
        "audit.canaries needs a private run: privacy.mode = \"dp-fedavg\" or \"feo2\"");
  std::vector<double> theta_start(problem.model->parameters());
  problem.model->initialize(problem.seed, theta_start.data());  // as Federation::train does
  std::optional<CanaryAudit> audit;
  audit.emplace(problem.seed, config.canaries, problem.model->parameters(),
                static_cast<std::int64_t>(problem.client_rows.size()), theta_start,
                config.inclusion);
  log::info("audit: {} canary clients, {}", config.canaries,
            config.inclusion == CanaryInclusion::random ? "each inserted with probability 1/2"
            : config.inclusion == CanaryInclusion::all  ? "all inserted"
                                                        : "none inserted");
  return audit;
}

constexpr const char* kCanaryAuditPart = "audit_canaries";

void restore_canary_audit(CanaryAudit& canaries, const TrainingResume& resume) {
  const auto found = resume.parts.find(kCanaryAuditPart);
  if (found == resume.parts.end())
    throw InputError("checkpoint: it holds no canary audit, but audit.canaries > 0");
  canaries.restore(found->second, resume.theta);
}

// results.h5's datasets of a training run (the run's attributes and resources come from
// RunContext), with the privacy, FeO2 and audit lines of the console.
void write_results(ResultsFile& file, const FederatedProblem& problem, const TrainingResult& result,
                   PrivateTraining* private_training, const PrivacyConfig& privacy,
                   CanaryAudit* canaries, const Deck& deck) {
  write_training_output(file, problem, result);
  if (private_training && !private_training->history().epsilon.empty()) {
    const auto& history = private_training->history();
    for (const AccountantSeries& series : history.accountants) {
      // RDP's order for the run's own accountant; a bracket where the accountant has a lower end.
      std::string detail;
      if (series.name == "rdp" && &series == &history.accountants.front())
        detail = fmt::format(", best order {}", history.best_order.back());
      else if (series.lower.back() > 0.0)
        detail =
            fmt::format(", bracket [{:.4g}, {:.4g}]", series.lower.back(), series.upper.back());
      log::info("privacy: eps = {:.4g} at delta = {} after {} rounds ({} accountant{})",
                series.epsilon.back(), history.delta, series.epsilon.size(), series.name, detail);
    }
    write_privacy_output(file, privacy, history);
  }
  if (private_training && !private_training->metrics().acc_g.empty()) {
    private_training->take_server_accuracy(result.history);
    log_final_feo2_metrics(private_training->metrics());
    write_feo2_output(file, private_training->metrics());
  }
  if (canaries) {
    const CanaryAuditResult audit = canaries->finish(result.theta, privacy.delta,
                                                     CanaryAuditConfig::from_deck(deck).confidence);
    log::info(
        "audit: {} canaries ({} inserted): eps lower bound {:.4g} (all iterates), {:.4g} (final "
        "model) at {:.0f}% confidence; canary estimate {:.4g} (all iterates), {:.4g} (final)",
        audit.inserted.size(), std::count(audit.inserted.begin(), audit.inserted.end(), 1),
        audit.epsilon_lower_all_iterates, audit.epsilon_lower_final, 100.0 * audit.confidence,
        audit.epsilon_estimate_all_iterates, audit.epsilon_estimate_final);
    if (!audit.score_likelihood.empty())
      log::info(
          "audit: likelihood-ratio statistic (all iterates): eps lower bound {:.4g}, canary "
          "estimate {:.4g}",
          audit.epsilon_lower_likelihood, audit.epsilon_estimate_likelihood);
    write_canary_audit_output(file, audit);
  }
}

}  // namespace

int run_train(const CommandLine& command_line) {
  // Stop handlers first: a signal during set-up stops after the first round.
  RunContext run(command_line, {.checkpoints = "train"});
  const Deck& deck = run.deck();
  run.prepare_output();
  CommandCheckpoints& checkpoints = run.checkpoints();
  FederatedProblem problem = run.set_up();
  const FederationConfig config = FederationConfig::from_deck(deck);
  // A network's batch buffers grow with federation.batch_size (up to the largest client's rows):
  // refused here, before the first round allocates them.
  std::vector<MemoryTerm> memory = problem.memory;
  for (auto& term : training_batch_memory(problem, config.local)) memory.push_back(term);
  check_memory(memory);
  log::info(
      "fluence train: {} clients on {} rank(s), {} training rows, {} parameters ({:.2f}s "
      "set-up)",
      problem.client_rows.size(), world_size(), problem.total_train_rows,
      problem.model->parameters(), run.setup_seconds());

  if (config.client_update.rule != ClientUpdateRule::sgd)
    log::info("client update: {}{}", deck.string("federation.client_update"),
              config.client_update.rule == ClientUpdateRule::fedprox
                  ? fmt::format(" with mu = {}", config.client_update.proximal_mu)
                  : std::string(" (control variates c and c_i)"));

  const PrivacyConfig privacy =
      PrivacyConfig::from_deck(deck, static_cast<int>(problem.client_rows.size()), config.rounds);
  Federation federation(problem);
  const PersonalizationConfig personalization = PersonalizationConfig::from_deck(deck, config);
  std::optional<PrivateTraining> private_training;
  if (privacy.enabled() || personalization.ditto) {
    private_training.emplace(federation, privacy, personalization, config.aggregator);
    if (privacy.enabled())
      log::info("privacy: {} with q = {}, noise multiplier z = {:.4g} (updates {:.4g}), delta = {}",
                deck.string("privacy.mode"), privacy.sampling_rate, privacy.noise_multiplier,
                private_training->history().update_noise_multiplier, privacy.delta);
  }
  if (!private_training) {
    // Plain FedAvg reads no [privacy] key: one given there would otherwise do nothing in silence
    // (privacy.sampling_rate was the case reported: plain FedAvg samples by federation.*).
    std::string unused;
    for (const auto& key : deck.schema())
      if (key.path.rfind("privacy.", 0) == 0 && key.path != "privacy.mode" && deck.given(key.path))
        unused += (unused.empty() ? "" : ", ") + key.path;
    if (!unused.empty())
      log::warn(
          "{} {} no effect with privacy.mode = \"none\" and no personalization (plain FedAvg "
          "samples clients by federation.client_sampling and federation.sampling_rate)",
          unused, unused.find(',') == std::string::npos ? "has" : "have");
  }
  std::optional<CanaryAudit> canaries = canary_audit(deck, problem, private_training);
  if (canaries) {
    canaries->set_likelihood_model(privacy.sampling_rate,
                                   private_training->history().update_noise_multiplier);
    private_training->insert_canaries(&*canaries);
  }
  std::optional<TrainingResume> resume;
  if (const CheckpointState* restored = checkpoints.restored()) {
    resume = resume_training(*restored, federation.parameters(), config.rounds,
                             private_training ? &*private_training : nullptr);
    if (canaries) restore_canary_audit(*canaries, *resume);
  }
  auto checkpoint = [&](int round, const std::vector<double>& theta,
                        const std::vector<RoundMetrics>& history) {
    if (canaries) canaries->observe(round, theta);
    return checkpoints.boundary(
        round, checkpoints.due(round - 1, round),
        [&] {
          auto parts = federation.part_states();
          if (canaries) parts[kCanaryAuditPart] = canaries->state();
          return training_state(round, theta, history,
                                private_training ? &*private_training : nullptr, parts)
              .arrays;
        },
        fmt::format("round {}", round));
  };
  const auto result = in_stage(Stage::training, [&] {
    return federation.train(
        config,
        [&](const RoundMetrics& m) {
          if (command_line.quiet) return;
          // The training loss is evaluated only with federation.eval_train_loss: no "nan" field.
          log::info("round {:>5d}/{}  {}test loss {:.5f}  test acc {:6.2f}%  elapsed {}  ETA {}",
                    m.round, config.rounds,
                    config.eval_train_loss ? fmt::format("train loss {:.5f}  ", m.train_loss) : "",
                    m.test_loss, 100.0 * m.test_accuracy, format_duration(m.wall_time),
                    format_eta(m.wall_time, m.round, config.rounds));
        },
        private_training ? &*private_training : nullptr, checkpoint, resume ? &*resume : nullptr);
  });
  if (result.stopped) return kExitStopped;
  // A network computes the final gradient only with federation.eval_train_loss (a pass over every
  // training row): without it the norm is NaN, and the line leaves it out.
  log::info("final: test loss {:.6f}  test accuracy {:.2f}%{}", result.final_metrics.test_loss,
            100.0 * result.final_metrics.test_accuracy,
            std::isnan(result.gradient_norm)
                ? ""
                : fmt::format("  |grad h| {:.3e}", result.gradient_norm));

  return run.finish([&](ResultsFile& file) {
    write_results(file, problem, result, private_training ? &*private_training : nullptr, privacy,
                  canaries ? &*canaries : nullptr, deck);
  });
}

}  // namespace fluence::app
