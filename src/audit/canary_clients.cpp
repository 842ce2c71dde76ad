// Canary clients in a private run and their audit (docs/math.md §11.2-11.3).
#include "fluence/audit/canary_clients.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "fluence/audit/canary_estimate.hpp"
#include "fluence/audit/one_run.hpp"
#include "fluence/audit/purposes.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/rng.hpp"

namespace fluence {

namespace {

// A canary's update before clipping is this many clipping norms long: clipping makes it S u_c, and
// a privatizer that forgets to clip lets it through ten times too long (a fault the audit must
// catch).
constexpr double kCanaryNormInClips = 10.0;

double dot_norm(const std::vector<double>& v) {
  double sum = 0.0;
  for (const double x : v) sum += x * x;
  return std::sqrt(sum);
}

}  // namespace

CanaryAuditConfig CanaryAuditConfig::from_deck(const Deck& deck) {
  CanaryAuditConfig config;
  config.canaries = static_cast<long>(deck.integer("audit.canaries"));
  config.confidence = deck.real("audit.confidence");
  const std::string inclusion = deck.string("audit.canary_inclusion");
  config.inclusion = inclusion == "all"    ? CanaryInclusion::all
                     : inclusion == "none" ? CanaryInclusion::none
                                           : CanaryInclusion::random;
  return config;
}

CanaryAudit::CanaryAudit(std::uint64_t seed, long canaries, std::size_t parameters,
                         std::int64_t clients, const std::vector<double>& theta_start,
                         CanaryInclusion inclusion)
    : seed_(seed),
      canaries_(canaries),
      parameters_(parameters),
      clients_(clients),
      theta_start_(theta_start),
      theta_previous_(theta_start) {
  // One canary is a multi-run audit's target: its run's own bound is then 0 and its estimate NaN.
  if (canaries < 1)
    throw InputError(fmt::format(
        "audit.canaries = {}: a canary audit needs at least 1 canary (or 0 for none)", canaries));
  if (clients + canaries > std::numeric_limits<int>::max())
    throw InputError(
        fmt::format("audit.canaries = {}: too many for {} clients", canaries, clients));
  // Contiguous blocks in canary order, as ordered_allgather joins them.
  const long ranks = world_size(), rank = world_rank();
  first_ = canaries * rank / ranks;
  count_ = canaries * (rank + 1) / ranks - first_;
  inserted_ = inclusion == CanaryInclusion::random
                  ? draw_canary_inclusion(seed, canaries)
                  : std::vector<std::uint8_t>(static_cast<std::size_t>(canaries),
                                              inclusion == CanaryInclusion::all ? 1 : 0);
  for (long c = first_; c < first_ + count_; ++c)
    if (inserted_[static_cast<std::size_t>(c)]) inserted_here_.push_back(c);
  // Each canary's signs, one bit a coordinate (1 = negative) from its own stream, kept by blocks of
  // 8 coordinates, block-major: the order signed_sums reads them in.
  const std::size_t blocks = (parameters + 7) / 8;
  sign_bytes_.assign(blocks * static_cast<std::size_t>(count_), 0);
  for (long k = 0; k < count_; ++k) {
    Stream stream(seed, purpose::canary_direction, static_cast<std::uint64_t>(first_ + k));
    std::uint64_t word = 0;
    for (std::size_t b = 0; b < blocks; ++b) {
      if (b % 8 == 0) word = stream.next_u64();
      std::uint8_t byte = static_cast<std::uint8_t>(word >> (8 * (b % 8)));
      if (8 * b + 8 > parameters)
        byte &= static_cast<std::uint8_t>((1u << (parameters - 8 * b)) - 1);
      sign_bytes_[b * static_cast<std::size_t>(count_) + static_cast<std::size_t>(k)] = byte;
    }
  }
  best_.assign(static_cast<std::size_t>(count_), -std::numeric_limits<double>::infinity());
}

void CanaryAudit::update(long canary, double clip, double* out) const {
  const long k = canary - first_;
  if (k < 0 || k >= count_)
    throw std::logic_error(fmt::format("canary {} is not hosted on this rank", canary));
  // u_c = s / sqrt(p) with Rademacher signs s: a unit vector whose cosine with any fixed vector has
  // mean 0 and variance exactly 1/p, like an isotropic direction's.
  const double length = kCanaryNormInClips * clip / std::sqrt(static_cast<double>(parameters_));
  const std::size_t count = static_cast<std::size_t>(count_);
  for (std::size_t i = 0; i < parameters_; ++i)
    out[i] = (sign_bytes_[(i / 8) * count + static_cast<std::size_t>(k)] >> (i % 8)) & 1 ? -length
                                                                                         : length;
}

void CanaryAudit::signed_sums(const double* v, std::vector<double>& out) const {
  // sum_i s_ci v_i for every hosted canary at once, 8 coordinates at a time: the 256 signed sums
  // of a block's 8 values are tabulated once (each from a smaller one: flipping the sign of the
  // mask's lowest coordinate), then each canary adds the entry its 8 signs select. About
  // (256 + canaries) / 8 operations a coordinate instead of one per canary and coordinate; the
  // same fixed order on every rank count.
  out.assign(static_cast<std::size_t>(count_), 0.0);
  double table[256];
  const std::size_t blocks = (parameters_ + 7) / 8;
  for (std::size_t b = 0; b < blocks; ++b) {
    double x[8];
    for (std::size_t i = 0; i < 8; ++i) x[i] = 8 * b + i < parameters_ ? v[8 * b + i] : 0.0;
    table[0] = ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]));
    for (unsigned mask = 1; mask < 256; ++mask)
      table[mask] = table[mask & (mask - 1)] - 2.0 * x[std::countr_zero(mask)];
    const std::uint8_t* bytes = sign_bytes_.data() + b * static_cast<std::size_t>(count_);
    for (long k = 0; k < count_; ++k) out[static_cast<std::size_t>(k)] += table[bytes[k]];
  }
}

void CanaryAudit::observe(int round, const std::vector<double>& theta) {
  if (round <= last_round_) return;
  delta_.resize(parameters_);
  for (std::size_t i = 0; i < parameters_; ++i) delta_[i] = theta[i] - theta_previous_[i];
  const double norm = dot_norm(delta_) * std::sqrt(static_cast<double>(parameters_));
  // cos(u_c, delta) = sum_i s_i delta_i / (sqrt(p) ||delta||); a round that did not move the
  // model carries no signal (0).
  signed_sums(delta_.data(), sums_);
  for (long k = 0; k < count_; ++k) {
    const double cosine = norm > 0.0 ? sums_[static_cast<std::size_t>(k)] / norm : 0.0;
    best_[static_cast<std::size_t>(k)] = std::max(best_[static_cast<std::size_t>(k)], cosine);
  }
  theta_previous_ = theta;
  last_round_ = round;
}

std::vector<double> CanaryAudit::state() const {
  std::vector<double> all = ordered_allgather(best_, static_cast<int>(count_), 1);
  all.push_back(static_cast<double>(last_round_));
  return all;
}

void CanaryAudit::restore(const std::vector<double>& state, const std::vector<double>& theta) {
  if (state.size() != static_cast<std::size_t>(canaries_) + 1)
    throw InputError(
        fmt::format("checkpoint: the canary audit holds {} canaries, this run audit.canaries = {}",
                    state.empty() ? 0 : state.size() - 1, canaries_));
  std::copy(state.begin() + first_, state.begin() + first_ + count_, best_.begin());
  last_round_ = static_cast<int>(state.back());
  theta_previous_ = theta;
}

CanaryAuditResult CanaryAudit::finish(const std::vector<double>& theta_final, double delta,
                                      double confidence) const {
  CanaryAuditResult result;
  result.inserted = inserted_;
  result.confidence = confidence;
  result.delta = delta;
  std::vector<double> whole(parameters_);
  for (std::size_t i = 0; i < parameters_; ++i) whole[i] = theta_final[i] - theta_start_[i];
  const double norm = dot_norm(whole) * std::sqrt(static_cast<double>(parameters_));
  std::vector<double> local_final;
  signed_sums(whole.data(), local_final);
  for (double& value : local_final) value = norm > 0.0 ? value / norm : 0.0;
  result.score_final = ordered_allgather(local_final, static_cast<int>(count_), 1);
  // A canary of a run without rounds has no all-iterates score: 0 (no signal).
  std::vector<double> best = best_;
  for (double& value : best)
    if (!std::isfinite(value)) value = 0.0;
  result.score_all_iterates = ordered_allgather(best, static_cast<int>(count_), 1);
  const double beta = 1.0 - confidence;
  result.epsilon_lower_all_iterates =
      one_run_audit(result.score_all_iterates, result.inserted, delta, beta).epsilon_lower;
  result.epsilon_lower_final =
      one_run_audit(result.score_final, result.inserted, delta, beta).epsilon_lower;
  // Andrew et al.'s estimate: the inserted canaries' scores against the held-out ones'.
  auto split = [&](const std::vector<double>& scores) {
    std::vector<double> in, out;
    for (std::size_t c = 0; c < scores.size(); ++c)
      (result.inserted[c] ? in : out).push_back(scores[c]);
    return std::pair{in, out};
  };
  const auto [in_all, out_all] = split(result.score_all_iterates);
  const auto [in_final, out_final] = split(result.score_final);
  // Each fit needs two canaries on each side and some spread (a run without rounds scored has
  // none): else NaN.
  auto estimate = [&](const std::vector<double>& in, const std::vector<double>& out) {
    if (in.size() < 2 || out.size() < 2 || fit_gaussian(in).std <= 0.0 ||
        fit_gaussian(out).std <= 0.0)
      return std::numeric_limits<double>::quiet_NaN();
    return canary_epsilon_estimate(in, out, delta).epsilon;
  };
  result.epsilon_estimate_all_iterates = estimate(in_all, out_all);
  result.epsilon_estimate_final = estimate(in_final, out_final);
  return result;
}

}  // namespace fluence
