// Record-level canaries in DP-SGD and their audit (docs/math.md §11.3b).
#include "fluence/lia/record_canaries.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "fluence/audit/one_run.hpp"
#include "fluence/audit/purposes.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"

namespace fluence {

RecordCanaries::RecordCanaries(std::uint64_t seed, long canaries, std::size_t parameters,
                               double noise_multiplier, CanaryInclusion inclusion)
    : seed_(seed),
      canaries_(canaries),
      parameters_(parameters),
      noise_multiplier_(noise_multiplier) {
  if (canaries < 1)
    throw InputError(fmt::format(
        "audit.canaries = {}: a canary audit needs at least 1 canary (or 0 for none)", canaries));
  const auto m = static_cast<std::size_t>(canaries);
  inserted_ = inclusion == CanaryInclusion::random
                  ? draw_canary_inclusion(seed, canaries)
                  : std::vector<std::uint8_t>(m, inclusion == CanaryInclusion::all ? 1 : 0);
  signs_.resize(m * parameters);
  for (std::size_t c = 0; c < m; ++c) {
    Stream stream(seed, purpose::record_canaries, 2, static_cast<std::uint64_t>(c));
    std::uint64_t word = 0;
    for (std::size_t i = 0; i < parameters; ++i) {
      if (i % 64 == 0) word = stream.next_u64();
      signs_[c * parameters + i] = (word >> (i % 64)) & 1 ? std::int8_t{-1} : std::int8_t{1};
    }
  }
  sampled_.assign(m, 0);
  white_.assign(m, 0.0);
}

void RecordCanaries::add(long step, double clip, double rate, double* gradient) {
  clip_ = clip;
  rate_ = rate;
  // Every canary draws in every step (the same sequence whatever is included); an included one is
  // in the step's batch with probability q, like every record.
  Stream stream(seed_, purpose::record_canaries, 1, static_cast<std::uint64_t>(step));
  const double length = clip / std::sqrt(static_cast<double>(parameters_));
  for (std::size_t c = 0; c < sampled_.size(); ++c) {
    sampled_[c] = stream.uniform() < rate && inserted_[c] ? 1 : 0;
    if (!sampled_[c]) continue;
    const std::int8_t* s = signs_.data() + c * parameters_;
    for (std::size_t i = 0; i < parameters_; ++i) gradient[i] += s[i] * length;
  }
}

void RecordCanaries::observe(long, const double* noisy_gradient) {
  // x = <u_c, g> / S: 1 + N(0, sigma^2) + the other records' projection when the canary is in the
  // step, N(0, sigma^2) + that projection when not; the likelihood ratio of the subsampled pair
  // at x is 1 - q + q exp((x - 1/2) / sigma^2), its log summed over the steps.
  const double unit = 1.0 / (std::sqrt(static_cast<double>(parameters_)) * clip_);
  const double variance = noise_multiplier_ * noise_multiplier_;
  const double q = rate_;
  for (std::size_t c = 0; c < white_.size(); ++c) {
    const std::int8_t* s = signs_.data() + c * parameters_;
    double dot = 0.0;
    for (std::size_t i = 0; i < parameters_; ++i) dot += s[i] * noisy_gradient[i];
    const double x = dot * unit;
    if (!(variance > 0.0)) {
      white_[c] += x;
      continue;
    }
    const double a = (x - 0.5) / variance;
    white_[c] += q >= 1.0  ? a
                 : a > 0.0 ? a + std::log(q + (1.0 - q) * std::exp(-a))
                           : std::log1p(q * std::expm1(a));
  }
}

CanaryAuditResult RecordCanaries::finish(const double* theta_start, const double* theta_final,
                                         double delta, double confidence) const {
  CanaryAuditResult result;
  result.inserted = inserted_;
  result.score_all_iterates = white_;
  std::vector<double> change(parameters_);
  double norm = 0.0;
  // A step moves the layer against the gradient sum: the canary pushes it along -u_c.
  for (std::size_t i = 0; i < parameters_; ++i) {
    change[i] = theta_start[i] - theta_final[i];
    norm += change[i] * change[i];
  }
  norm = std::sqrt(norm) * std::sqrt(static_cast<double>(parameters_));
  result.score_final.assign(static_cast<std::size_t>(canaries_), 0.0);
  for (std::size_t c = 0; c < result.score_final.size(); ++c) {
    const std::int8_t* s = signs_.data() + c * parameters_;
    double dot = 0.0;
    for (std::size_t i = 0; i < parameters_; ++i) dot += s[i] * change[i];
    result.score_final[c] = norm > 0.0 ? dot / norm : 0.0;
  }
  canary_audit_bounds(result, delta, confidence);
  return result;
}

CanaryAuditResult audit_dp_sgd_records(const double* x, const std::int32_t* y, std::size_t rows,
                                       int features, int classes, const lia::DpSgdConfig& config,
                                       const double* theta_start, std::uint64_t seed,
                                       const CanaryAuditConfig& audit, double delta) {
  const std::size_t p = static_cast<std::size_t>(features) * static_cast<std::size_t>(classes);
  RecordCanaries canaries(seed, audit.canaries, p, config.noise_multiplier, audit.inclusion);
  std::vector<double> theta(theta_start, theta_start + p);
  Stream stream(seed, purpose::record_canaries, 0);
  lia::DpSgdWorkspace work;
  lia::dp_sgd(x, y, rows, features, classes, config, stream, theta.data(), work, &canaries);
  return canaries.finish(theta_start, theta.data(), delta, audit.confidence);
}

}  // namespace fluence
