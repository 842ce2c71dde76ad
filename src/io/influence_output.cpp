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
  }
  write_hessian_spectrum(file, result.spectrum);
  file.string("/ihvp/solver", to_string(config.ihvp.method), "inverse-Hessian-vector solver");
  file.dimension("/ihvp/solve", result.iterations.size());
  file.dataset("/ihvp/iterations", result.iterations,
               {{"solve"}, "count", "iterations of the solve"});
  file.dataset("/ihvp/relative_residual", result.relative_residual,
               {{"solve"}, "1", "relative residual of the solve"});
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

}  // namespace fluence
