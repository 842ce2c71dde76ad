#include "fluence/io/influence_output.hpp"

namespace fluence {

void write_hessian_spectrum(ResultsFile& file, const std::optional<HessianSpectrum>& spectrum) {
  if (!spectrum) return;
  file.scalar("/hessian/eigenvalue_min", spectrum->eigenvalue_min, "1",
              "smallest eigenvalue of the federated Hessian");
  file.scalar("/hessian/eigenvalue_max", spectrum->eigenvalue_max, "1",
              "largest eigenvalue of the federated Hessian");
  file.scalar("/hessian/condition_number", spectrum->condition_number, "1",
              "condition number of the federated Hessian");
}

void write_model_stationarity(ResultsFile& file, const std::string& path,
                              const Stationarity& stationarity) {
  file.scalar(path, stationarity.gradient_norm, "1",
              "gradient norm of the objective at the model the scores are computed at");
  file.attribute(path, "stationary", std::int64_t{stationarity.stationary ? 1 : 0});
  file.real_attribute(path, "tolerance", stationarity.tolerance);
}

namespace {
std::vector<std::int64_t> flags(const std::vector<char>& values) {
  return std::vector<std::int64_t>(values.begin(), values.end());
}
}  // namespace

void write_influence_output(ResultsFile& file, const FederatedProblem& problem,
                            const InfluenceConfig& config, const ClientInfluence& result) {
  file.dimension("/influence/client", problem.client_rows.size());
  file.dataset("/influence/client_removal_estimate", result.estimate,
               {{"client"}, "nat", "estimated change of the test loss without the client"});
  file.scalar("/influence/base_test_loss", result.base_test_loss, "nat",
              "test loss of the trained model");
  file.string("/influence/hessian_scope", to_string(config.scope), "Hessian of the estimate");
  file.string("/influence/removal_gradient",
              config.removal_gradient == RemovalGradient::regularized ? "regularized" : "loss",
              "gradient removed with a client");
  file.scalar("/influence/damping", result.damping, "1", "damping of the Hessian solves");
  if (!result.actual.empty()) {
    file.dataset(
        "/influence/client_removal_actual", result.actual,
        {{"client"}, "nat", "change of the test loss after retraining without the client"});
    file.dataset("/influence/retrain_gradient_norm", result.retrain_gradient_norm,
                 {{"client"}, "1", "gradient norm of the model retrained without the client"});
    file.scalar("/influence/spearman", result.spearman, "1",
                "Spearman correlation of estimate and retraining");
    file.scalar("/influence/mae", result.mae, "nat",
                "mean absolute error of the estimate against retraining");
    file.dataset("/influence/retrain_converged", flags(result.retrain_converged),
                 {{"client"}, "1", "1 when the retrain reached federation.tolerance"});
    if (config.spectrum) {
      file.dataset("/influence/retrain_min_eigenvalue", result.retrain_min_eigenvalue,
                   {{"client"},
                    "1",
                    "smallest eigenvalue of the Hessian without the client at its retrained "
                    "model"});
      file.dataset("/influence/retrain_saddle", flags(result.retrain_saddle),
                   {{"client"}, "1", "1 when the retrain stopped at a saddle point"});
    }
    file.scalar("/influence/spearman_trusted", result.trusted.spearman, "1",
                "Spearman correlation over the converged retrains at minima");
    file.attribute("/influence/spearman_trusted", "retrains", result.trusted.count);
    file.scalar("/influence/mae_trusted", result.trusted.mae, "nat",
                "mean absolute error over the converged retrains at minima");
    file.attribute("/influence/mae_trusted", "retrains", result.trusted.count);
  }
  if (result.estimator_error) {
    const auto& error = *result.estimator_error;
    file.scalar("/influence/estimator/seconds", error.seconds, "s",
                "time of s_test by the estimator (influence.solver)");
    file.scalar("/influence/estimator/exact_seconds", error.exact_seconds, "s",
                "time of s_test by exact CG");
    file.scalar("/influence/estimator/exact_iterations",
                static_cast<double>(error.exact_iterations), "count",
                "CG iterations of the exact s_test");
    file.dataset("/influence/estimator/exact_estimate", error.exact_estimate,
                 {{"client"}, "nat", "client_removal_estimate from the exact s_test by CG"});
    file.scalar("/influence/estimator/score_relative_difference", error.score_relative_difference,
                "1", "relative 2-norm difference of the estimator's and CG's client scores");
    file.scalar("/influence/estimator/spearman", error.spearman, "1",
                "Spearman correlation of the estimator's and CG's client scores");
    file.scalar("/influence/estimator/solution_relative_difference",
                error.solution_relative_difference, "1",
                "relative 2-norm difference of the estimator's and CG's s_test");
  }
  write_hessian_spectrum(file, result.spectrum);
  file.string("/ihvp/solver", to_string(config.ihvp.method), "inverse-Hessian-vector solver");
  file.dimension("/ihvp/solve", result.iterations.size());
  file.dataset("/ihvp/iterations", result.iterations,
               {{"solve"}, "count", "iterations of the solve"});
  file.dataset("/ihvp/relative_residual", result.relative_residual,
               {{"solve"}, "1", "relative residual of the solve"});
  file.dataset("/ihvp/residual_above_tolerance", flags(result.residual_above_tolerance),
               {{"solve"}, "1", "1 when the relative residual is above influence.rtol (cg)"});
  write_model_stationarity(file, "/influence/model_gradient_norm", result.stationarity);
  if (config.vectors) {
    const std::size_t p = problem.model->parameters();
    file.dimension("/influence/parameter", p);
    file.distributed_rows(
        "/influence/vectors", problem.client_rows.size(), p,
        static_cast<std::size_t>(result.first_local_client),
        static_cast<std::size_t>(result.local_clients), result.local_vectors.data(),
        {{"client", "parameter"}, "1", "estimated parameter change without the client"});
  }
}

void write_unlearning_output(ResultsFile& file, const Unlearning& result) {
  file.dimension("/unlearning/removal", result.clients.size());
  const std::vector<std::string> removal = {"removal"};
  file.dataset("/unlearning/client", result.clients, {removal, "1", "the removed client's id"});
  file.dataset("/unlearning/first_order_distance", result.first_order_distance,
               {removal, "1", "distance of the influence step's model to the exact retrain"});
  file.dataset("/unlearning/newton_distance", result.newton_distance,
               {removal, "1", "distance of the Newton-refined model to the exact retrain"});
  file.dataset("/unlearning/removal_norm", result.removal_norm,
               {removal, "1", "distance of the exact retrain to the trained model"});
  file.dataset("/unlearning/first_order_gradient_residual", result.first_order_gradient_residual,
               {removal, "1", "gradient norm without the client at the influence step"});
  file.dataset("/unlearning/chord_steps", result.chord_steps,
               {removal, "count",
                "chord steps theta - H(theta^)^-1 grad h_-k after the influence step (explicit "
                "solver)"});
  file.dataset("/unlearning/newton_distance_bound", result.newton_distance_bound,
               {removal, "1",
                "proven bound |grad h_-k| / l2 on the refined model's distance to the minimizer"});
  file.dataset("/unlearning/newton_steps", result.newton_steps,
               {removal, "count", "Newton steps after the influence step (and chord steps)"});
  file.dataset("/unlearning/newton_cg_iterations", result.newton_cg_iterations,
               {removal, "count", "CG iterations of those Newton steps in all"});
  file.dataset("/unlearning/newton_gradient_norm", result.newton_gradient_norm,
               {removal, "1", "gradient norm without the client at the Newton-refined model"});
  file.dataset("/unlearning/retrain_loss_change", result.retrain_loss_change,
               {removal, "nat", "change of the test loss by the exact retrain"});
  file.dataset("/unlearning/first_order_loss_error", result.first_order_loss_error,
               {removal, "nat", "test loss of the influence step minus the retrain's"});
  file.dataset("/unlearning/newton_loss_error", result.newton_loss_error,
               {removal, "nat", "test loss of the Newton-refined model minus the retrain's"});
  file.dataset("/unlearning/timing/first_order", result.first_order_seconds,
               {removal, "s", "time of the influence step"});
  file.dataset("/unlearning/timing/newton", result.newton_seconds,
               {removal, "s", "time of the influence step and its Newton refinement"});
  file.dataset("/unlearning/timing/retrain", result.retrain_seconds,
               {removal, "s", "time of the exact retrain"});
  file.scalar("/unlearning/control_distance", result.control_distance, "1",
              "move of the retrain with every client (network or warm retrain; else 0)");
  file.dataset("/unlearning/timing/factored_retrain", result.factored_retrain_seconds,
               {removal, "s",
                "time of the retrain's Newton preconditioned by the Hessian's factor (explicit "
                "solver; NaN otherwise)"});
  file.scalar("/unlearning/timing/setup", result.setup_seconds, "s",
              "one-time set-up of the solver shared by the removals");
  if (!result.certified) return;
  const Unlearning::Certified& c = *result.certified;
  file.scalar("/unlearning/certified/epsilon", c.epsilon, "1", "epsilon of the certified removal");
  file.scalar("/unlearning/certified/delta", c.delta, "1", "delta of the certified removal");
  file.scalar("/unlearning/certified/budget", c.budget, "1",
              "budget eps' on the gradient-residual norm (summed objective)");
  file.scalar("/unlearning/certified/c", c.c, "1", "sqrt(2 ln(1.5 / delta))");
  file.scalar("/unlearning/certified/sigma", c.sigma, "1",
              "scale of the objective perturbation b ~ N(0, sigma^2 I): c budget / epsilon");
  file.scalar("/unlearning/certified/training_residual", c.training_residual, "1",
              "gradient norm of the perturbed summed objective at the perturbed model");
  file.dataset("/unlearning/certified/residual_bound", c.residual_bound,
               {removal, "1", "data-dependent bound on the removed model's gradient residual"});
  file.dataset("/unlearning/certified/linear_residual", c.linear_residual,
               {removal, "1", "the bound's exact linear part |grad L'_b + H' Delta|"});
  file.dataset("/unlearning/certified/lipschitz_bound", c.lipschitz_bound,
               {removal, "1",
                "the bound's Lipschitz part (gamma/2) sum |x_j| |P Delta W x_j|^2, P centring"});
  file.dataset("/unlearning/certified/residual", c.residual,
               {removal, "1", "exact gradient residual |grad L'_b| at the removed model"});
  file.dataset(
      "/unlearning/certified/budget_exceeded", c.budget_exceeded,
      {removal, "1", "1: the bound exceeds the budget, the removal is not certified (retrain)"});
}

void write_lds_output(ResultsFile& file, const ClientLds& result) {
  file.dimension("/lds/subset", result.predicted.size());
  file.dimension("/lds/left_out", static_cast<std::size_t>(result.left_out));
  const std::vector<std::string> subset = {"subset"};
  file.dataset(
      "/lds/clients", result.left_out_ids,
      {{"subset", "left_out"}, "1", "ids of the clients the subset federation leaves out"});
  file.dataset("/lds/predicted", result.predicted,
               {subset, "nat", "sum of the left-out clients' estimated test-loss changes"});
  file.dataset("/lds/actual", result.actual,
               {subset, "nat", "change of the test loss by the exact retrain without them"});
  file.dataset("/lds/timing/retrain", result.retrain_seconds,
               {subset, "s", "time of the exact retrain"});
  file.scalar("/lds/score", result.score, "1",
              "FL-LDS: Spearman correlation of predicted and actual over the subsets");
}

}  // namespace fluence
