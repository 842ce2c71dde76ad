#include "fluence/influence/trust.hpp"

#include <cmath>
#include <limits>

#include "fluence/core/log.hpp"
#include "fluence/core/vector_ops.hpp"
#include "fluence/influence/estimators.hpp"

namespace fluence {

Stationarity model_stationarity(Federation& federation, const std::vector<double>& theta,
                                double tolerance, const std::string& command) {
  std::vector<double> gradient;
  federation.gradient(theta, gradient);
  Stationarity result;
  result.gradient_norm = norm2(gradient);
  result.tolerance = tolerance;
  result.stationary = result.gradient_norm <= tolerance;
  if (!result.stationary)
    log::warn(
        "{}: the scores are computed at a model that is not a stationary point: |grad h| = "
        "{:.3e} > federation.tolerance = {:.1e} (flagged in results.h5). Influence functions "
        "assume the exact minimizer: use federation.polish = \"newton\" (or more "
        "federation.polish_max_steps); the estimates carry an error of the order of the gradient",
        command, result.gradient_norm, tolerance);
  return result;
}

bool residual_above_tolerance(const IhvpConfig& config, double relative_residual) {
  return config.method == IhvpMethod::cg && !(relative_residual <= config.rtol);
}

bool is_saddle(double eigenvalue_min, double eigenvalue_max) {
  return eigenvalue_min < -kNegativeCurvature * std::abs(eigenvalue_max);
}

std::string id_list(const std::vector<int>& ids, std::size_t most) {
  std::string text;
  for (std::size_t i = 0; i < ids.size() && i < most; ++i)
    text += (i == 0 ? "" : ", ") + std::to_string(ids[i]);
  if (ids.size() > most) text += fmt::format(" and {} more", ids.size() - most);
  return text;
}

KeptStatistics statistics_over(const std::vector<double>& a, const std::vector<double>& b,
                               const std::vector<char>& keep) {
  std::vector<double> x, y;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (keep[i]) {
      x.push_back(a[i]);
      y.push_back(b[i]);
    }
  KeptStatistics result;
  result.count = static_cast<std::int64_t>(x.size());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  result.spearman = x.size() >= 2 ? spearman(x, y) : nan;
  result.mae = x.empty() ? nan : mean_absolute_error(x, y);
  return result;
}

}  // namespace fluence
