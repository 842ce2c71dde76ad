#include "trained_model.hpp"

#include "fluence/core/log.hpp"
#include "fluence/io/model_input.hpp"

namespace fluence::app {

TrainingResult obtain_trained_model(const CommandLine& command_line, Federation& federation,
                                    const FederationConfig& config) {
  TrainingResult result;
  if (command_line.model.empty()) {
    FederationConfig training = config;
    training.polish_verbose = !command_line.quiet;
    result = federation.train(training, [&](const RoundMetrics& m) {
      if (command_line.quiet) return;
      log::info("round {:>5d}/{}  test loss {:.5f}  test acc {:6.2f}%  elapsed {}  ETA {}", m.round,
                config.rounds, m.test_loss, 100.0 * m.test_accuracy, format_duration(m.wall_time),
                format_eta(m.wall_time, m.round, config.rounds));
    });
  } else {
    result.theta = read_trained_theta(command_line.model, federation.problem());
    std::tie(result.final_metrics.test_loss, result.final_metrics.test_accuracy) =
        federation.evaluate_test(result.theta);
    result.final_metrics.train_loss = federation.objective(result.theta);
    log::info("model: {} (loaded)", command_line.model);
  }
  std::vector<double> gradient;
  federation.gradient(result.theta, gradient);
  result.gradient_norm = norm2(gradient);
  log::info("model: test loss {:.6f}  test accuracy {:.2f}%  |grad h| {:.3e}",
            result.final_metrics.test_loss, 100.0 * result.final_metrics.test_accuracy,
            result.gradient_norm);
  if (result.gradient_norm > 1e-6)
    log::warn(
        "|grad h| = {:.3e}: influence functions assume the exact minimizer; use federation.polish "
        "= \"newton\" (estimates carry an error of the order of the gradient)",
        result.gradient_norm);
  return result;
}

}  // namespace fluence::app
