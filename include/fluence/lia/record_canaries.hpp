#pragma once
// Record-level canaries in DP-SGD (LIA's contributors; docs/math.md §11.3b): m extra records, each
// included with probability 1/2 (Steinke, Nasr & Jagielski 2023) and, when included, Poisson-
// sampled every step at the run's rate like every record. A canary is a gradient canary: its
// clipped gradient is a fixed random direction u_c = s_c / sqrt(p) (Rademacher signs s_c) at the
// clipping norm, the strongest white-box canary. Scores per canary:
//   - white box (every step's model, hence every step's noisy gradient sum g_t, is released):
//     x_t = <u_c, g_t> / S, combined over steps by the likelihood ratio of the subsampled Gaussian,
//     sum_t log(1 - q + q exp((x_t - 1/2) / sigma^2)) (the plain sum of x_t when sigma = 0);
//   - black box: cos(u_c, theta_0 - theta_T) (a step moves the layer against the gradient).
// From them the one-run eps lower bound (audit/one_run.hpp) and Andrew et al.'s estimate
// (audit/canary_estimate.hpp), as CanaryAuditResult (/audit/* in docs/outputs.md).
#include <cstdint>
#include <span>
#include <vector>

#include "fluence/audit/canary_clients.hpp"
#include "fluence/lia/dp_sgd.hpp"

namespace fluence {

class RecordCanaries final : public lia::DpSgdCanaries {
 public:
  /// m canaries over `parameters` coordinates in a run of noise multiplier `noise_multiplier`:
  /// directions from the streams (seed, record_canaries, 2, c), inclusion from (seed,
  /// canary_inclusion, c) or forced, the sampling of step t from (seed, record_canaries, 1, t).
  RecordCanaries(std::uint64_t seed, long canaries, std::size_t parameters, double noise_multiplier,
                 CanaryInclusion inclusion = CanaryInclusion::random);

  void add(long step, double clip, double rate, double* gradient) override;
  void observe(long step, const double* noisy_gradient) override;
  /// The scores and bounds of a run from theta_start to theta_final (p values each).
  CanaryAuditResult finish(const double* theta_start, const double* theta_final, double delta,
                           double confidence) const;

  std::span<const std::uint8_t> inserted() const { return inserted_; }
  /// Canary c's sign s_ci (+1 or -1).
  int sign(long canary, std::size_t i) const {
    return signs_[static_cast<std::size_t>(canary) * parameters_ + i];
  }
  /// The canaries sampled in the last step added (1 = in that step's sum).
  std::span<const std::uint8_t> sampled() const { return sampled_; }

 private:
  std::uint64_t seed_;
  long canaries_;
  std::size_t parameters_;
  double noise_multiplier_, clip_ = 0.0, rate_ = 0.0;
  std::vector<std::int8_t> signs_;  // canary-major, m x p
  std::vector<std::uint8_t> inserted_, sampled_;
  std::vector<double> white_;  // per canary, the white-box score so far
};

/// The audited run: DP-SGD as `config` from `theta_start` (classes x features) on `rows` records
/// (x, y) plus the canaries of `audit`, its own draws from (seed, record_canaries, 0); the scores
/// and bounds at `delta`.
CanaryAuditResult audit_dp_sgd_records(const double* x, const std::int32_t* y, std::size_t rows,
                                       int features, int classes, const lia::DpSgdConfig& config,
                                       const double* theta_start, std::uint64_t seed,
                                       const CanaryAuditConfig& audit, double delta);

}  // namespace fluence
