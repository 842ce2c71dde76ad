#pragma once
// Whether an influence output can be trusted (issue 41; docs/outputs.md): influence functions
// assume the model is a stationary point of h (grad h = 0, docs/math.md §1) and that a retrain
// reaches the minimizer it stands for; a solve is as good as its residual. Each test here is
// written into results.h5 beside the numbers it qualifies, and warned about on the console.
#include <cstdint>
#include <string>
#include <vector>

#include "fluence/fl/federation.hpp"
#include "fluence/influence/ihvp.hpp"
#include "fluence/influence/spectrum.hpp"

namespace fluence {

struct Stationarity {
  double gradient_norm = 0.0;  // ||grad h(theta)|| over the federation's included clients
  double tolerance = 0.0;      // federation.tolerance, the polish's target
  bool stationary = true;      // gradient_norm <= tolerance
};

/// Collective. Warns, naming `command`, when theta is not a stationary point of h within
/// `tolerance`: the scores then assume a minimum the model is not at.
Stationarity model_stationarity(Federation& federation, const std::vector<double>& theta,
                                double tolerance, const std::string& command);

/// Whether a solve's recomputed relative residual ||Hx - b|| / ||b|| is above the target it was
/// solved to: influence.rtol for CG. The other solvers have no residual target: never.
bool residual_above_tolerance(const IhvpConfig& config, double relative_residual);

/// Negative curvature below rounding: lambda_min < -kNegativeCurvature lambda_max. The Hessian
/// products carry rounding of order 1e-16 lambda_max per entry, far below; damping_for treats
/// lambda_min <= 1e-12 lambda_max as not positive definite on the same scale.
inline constexpr double kNegativeCurvature = 1e-12;
/// A stationary point whose Hessian has negative curvature is a saddle point, not a minimum:
/// eigenvalue_min < -kNegativeCurvature |eigenvalue_max|.
bool is_saddle(double eigenvalue_min, double eigenvalue_max);

/// "3, 7, 12": ids for a message, the first `most` of them and "and N more".
std::string id_list(const std::vector<int>& ids, std::size_t most = 20);

/// Spearman's rho and the MAE of a against b over the entries where keep[i] != 0 (NaN for rho
/// with fewer than two entries, for the MAE with none).
struct KeptStatistics {
  double spearman = 0.0, mae = 0.0;
  std::int64_t count = 0;
};
KeptStatistics statistics_over(const std::vector<double>& a, const std::vector<double>& b,
                               const std::vector<char>& keep);

}  // namespace fluence
