// fluence influence DECK: parse -> build the federation -> train (or --model) -> influence of
// removing each client (optionally against exact retraining) -> write <out>/results.h5.
#include "fluence/app/cli.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/influence/client_influence.hpp"
#include "fluence/io/influence_output.hpp"
#include "fluence/io/model_input.hpp"
#include "fluence/io/results.hpp"
#include "fluence/io/training_output.hpp"

namespace fluence::app {

namespace {

TrainingResult obtain_model(const CommandLine& command_line, Federation& federation,
                            const FederationConfig& config) {
  if (command_line.model.empty())
    return federation.train(config, [&](const RoundMetrics& m) {
      if (command_line.quiet) return;
      log::info("round {:>5d}/{}  test loss {:.5f}  test acc {:6.2f}%  elapsed {}  ETA {}", m.round,
                config.rounds, m.test_loss, 100.0 * m.test_accuracy, format_duration(m.wall_time),
                format_eta(m.wall_time, m.round, config.rounds));
    });
  TrainingResult result;
  result.theta = read_trained_theta(command_line.model, federation.problem());
  std::tie(result.final_metrics.test_loss, result.final_metrics.test_accuracy) =
      federation.evaluate_test(result.theta);
  result.final_metrics.train_loss = federation.objective(result.theta);
  log::info("model: {} (loaded)", command_line.model);
  return result;
}

}  // namespace

int run_influence(const CommandLine& command_line) {
  std::vector<std::string> sets = command_line.sets;
  if (!command_line.out.empty()) sets.push_back("output.dir=\"" + command_line.out + "\"");
  Deck deck = Deck::from_file(command_line.deck, sets);
  const std::string out_dir = deck.string("output.dir");
  const InfluenceConfig config = InfluenceConfig::from_deck(deck);
  const FederationConfig training = FederationConfig::from_deck(deck);
  prepare_output_directory(out_dir);

  FederatedProblem problem = build_problem(deck);
  log::info("fluence influence: {} clients on {} rank(s), {} training rows, {} parameters",
            problem.client_rows.size(), world_size(), problem.total_train_rows,
            problem.model->parameters());
  Federation federation(problem);
  TrainingResult model = obtain_model(command_line, federation, training);
  std::vector<double> gradient;
  federation.gradient(model.theta, gradient);
  model.gradient_norm = norm2(gradient);
  log::info("model: test loss {:.6f}  test accuracy {:.2f}%  |grad h| {:.3e}",
            model.final_metrics.test_loss, 100.0 * model.final_metrics.test_accuracy,
            model.gradient_norm);
  if (model.gradient_norm > 1e-6)
    log::warn(
        "|grad h| = {:.3e}: influence functions assume the exact minimizer; use federation.polish "
        "= \"newton\" (estimates carry an error of the order of the gradient)",
        model.gradient_norm);

  Stopwatch clock;
  const ClientInfluence influence =
      client_removal_influence(federation, model.theta, config, training, !command_line.quiet);
  log::info("influence: {} clients scored in {}", influence.estimate.size(),
            format_duration(clock.seconds()));

  ResultsFile file(out_dir);
  write_run_attributes(file, command_line.invocation, deck.integer("seed"), deck.resolved_toml());
  write_training_output(file, problem, model);
  write_influence_output(file, problem, config, influence);
  log::info("results: {}", file.commit());
  return 0;
}

}  // namespace fluence::app
