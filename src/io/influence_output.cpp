#include "fluence/io/influence_output.hpp"

namespace fluence {

void write_hessian_spectrum(ResultsFile& file, const std::optional<HessianSpectrum>& spectrum) {
  if (!spectrum) return;
  file.scalar("/hessian/eigenvalue_min", spectrum->eigenvalue_min);
  file.scalar("/hessian/eigenvalue_max", spectrum->eigenvalue_max);
  file.scalar("/hessian/condition_number", spectrum->condition_number);
}

void write_influence_output(ResultsFile& file, const FederatedProblem& problem,
                            const InfluenceConfig& config, const ClientInfluence& result) {
  file.dataset("/influence/client_removal_estimate", result.estimate);
  file.scalar("/influence/base_test_loss", result.base_test_loss);
  file.string("/influence/hessian_scope", to_string(config.scope));
  file.string("/influence/removal_gradient",
              config.removal_gradient == RemovalGradient::regularized ? "regularized" : "loss");
  file.scalar("/influence/damping", result.damping);
  if (!result.actual.empty()) {
    file.dataset("/influence/client_removal_actual", result.actual);
    file.dataset("/influence/retrain_gradient_norm", result.retrain_gradient_norm);
    file.scalar("/influence/spearman", result.spearman);
    file.scalar("/influence/mae", result.mae);
  }
  write_hessian_spectrum(file, result.spectrum);
  file.string("/ihvp/solver", to_string(config.ihvp.method));
  file.dataset("/ihvp/iterations", result.iterations);
  file.dataset("/ihvp/relative_residual", result.relative_residual);
  if (config.vectors) {
    const std::size_t p = problem.model->parameters();
    file.distributed_rows("/influence/vectors", problem.client_rows.size(), p,
                          static_cast<std::size_t>(result.first_local_client),
                          static_cast<std::size_t>(result.local_clients),
                          result.local_vectors.data());
  }
}

}  // namespace fluence
