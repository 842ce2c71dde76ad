// Canary clients in a private run and their audit (docs/math.md §11.2-11.3).
#include "fluence/audit/canary_clients.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
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

std::uint8_t reverse_bits(std::uint8_t byte) {
  byte = static_cast<std::uint8_t>((byte & 0xF0u) >> 4 | (byte & 0x0Fu) << 4);
  byte = static_cast<std::uint8_t>((byte & 0xCCu) >> 2 | (byte & 0x33u) << 2);
  return static_cast<std::uint8_t>((byte & 0xAAu) >> 1 | (byte & 0x55u) << 1);
}

double euclidean_norm(const double* v, std::size_t n) {
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += v[i] * v[i];
  return std::sqrt(sum);
}

// out[k R + r] += the R-lane entries that canary k's sign bytes select in `groups` consecutive
// tables (256 x R each), group by group in order; the canary's R running sums stay in registers.
template <std::size_t groups, std::size_t R>
void add_table_entries_of(const double* tables, const std::uint8_t* bytes, std::size_t count,
                          double* out) {
  for (std::size_t k = 0; k < count; ++k) {
    double sum[R];
    for (std::size_t r = 0; r < R; ++r) sum[r] = out[k * R + r];
    for (std::size_t g = 0; g < groups; ++g) {
      const double* entry = tables + (g * 256 + bytes[g * count + k]) * R;
      for (std::size_t r = 0; r < R; ++r) sum[r] += entry[r];
    }
    for (std::size_t r = 0; r < R; ++r) out[k * R + r] = sum[r];
  }
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
  // 8 coordinates, block-major (the order signed_sums reads them in), each byte bit-reversed.
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
      sign_bytes_[b * static_cast<std::size_t>(count_) + static_cast<std::size_t>(k)] =
          reverse_bits(byte);
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
  const double value = length(clip);
  const std::size_t count = static_cast<std::size_t>(count_);
  for (std::size_t i = 0; i < parameters_; ++i)
    out[i] = (sign_bytes_[(i / 8) * count + static_cast<std::size_t>(k)] >> (7 - i % 8)) & 1
                 ? -value
                 : value;
}

double CanaryAudit::length(double clip) const {
  return kCanaryNormInClips * clip / std::sqrt(static_cast<double>(parameters_));
}

void CanaryAudit::sign_sums(std::span<const long> canaries, std::int64_t* out) const {
  // Per block, the canaries' bytes spread to one byte lane per coordinate and added as 64-bit
  // words (at most 255 at a time, so no lane carries): the count of negative signs per coordinate.
  static const auto spread = [] {
    std::array<std::uint64_t, 256> table{};
    for (unsigned byte = 0; byte < 256; ++byte)
      for (unsigned bit = 0; bit < 8; ++bit)
        if (byte >> (7 - bit) & 1u) table[byte] |= std::uint64_t{1} << (8 * bit);
    return table;
  }();
  const std::size_t count = static_cast<std::size_t>(count_);
  const auto n = static_cast<std::int64_t>(canaries.size());
  std::vector<std::size_t> local(canaries.size());
  for (std::size_t j = 0; j < canaries.size(); ++j) {
    const long k = canaries[j] - first_;
    if (k < 0 || k >= count_)
      throw std::logic_error(fmt::format("canary {} is not hosted on this rank", canaries[j]));
    local[j] = static_cast<std::size_t>(k);
  }
  const std::size_t blocks = (parameters_ + 7) / 8;
  std::int64_t negative[8];
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::uint8_t* bytes = sign_bytes_.data() + b * count;
    std::fill(negative, negative + 8, 0);
    for (std::size_t first = 0; first < local.size(); first += 255) {
      std::uint64_t lanes = 0;
      const std::size_t last = std::min(local.size(), first + 255);
      for (std::size_t j = first; j < last; ++j) lanes += spread[bytes[local[j]]];
      for (std::size_t bit = 0; bit < 8; ++bit)
        negative[bit] += static_cast<std::int64_t>(lanes >> (8 * bit) & 0xFFu);
    }
    for (std::size_t bit = 0; bit < 8 && 8 * b + bit < parameters_; ++bit)
      out[8 * b + bit] = n - 2 * negative[bit];
  }
}

void CanaryAudit::signed_sums(const double* const* v, std::size_t vectors,
                              std::vector<double>& out) const {
  // sum_i s_ci v_ri for every hosted canary c and vector r at once, 8 coordinates at a time: the
  // 256 signed sums of a block's 8 values are tabulated once, then each canary adds the entry its 8
  // signs select. About (256 + canaries) / 8 operations a coordinate instead of one per canary and
  // coordinate; the same fixed order on every rank count. An entry flips the sign of its mask's
  // first negative coordinate in a smaller entry's sum: with the bits reversed (coordinate j is bit
  // 7 - j), entry 2^l + r is entry r (r < 2^l) less 2 x[7 - l], a contiguous, vectorized run per
  // level. The kRounds vectors (rounds) share each table entry's slot, so that one sign byte
  // selects kRounds sums in one vector load and add; a canary's kRounds running sums stay in a
  // register across a group of kGroup blocks. Every lane adds exactly the terms, in exactly the
  // order, that one vector alone would: the sums are the same bits however many rounds are batched.
  constexpr std::size_t kGroup = 4;
  constexpr std::size_t R = kRounds;
  if (vectors > R) throw std::logic_error("canary audit: too many vectors scored at once");
  const std::size_t count = static_cast<std::size_t>(count_);
  out.assign(count * R, 0.0);
  std::vector<double>& tables = tables_;  // kGroup x 256 x R, reused across rounds
  tables.resize(kGroup * 256 * R);
  const std::size_t blocks = (parameters_ + 7) / 8;
  for (std::size_t b0 = 0; b0 < blocks; b0 += kGroup) {
    const std::size_t group = std::min(kGroup, blocks - b0);
    for (std::size_t g = 0; g < group; ++g) {
      const std::size_t b = b0 + g;
      double x[8][R], twice[8][R];
      for (std::size_t i = 0; i < 8; ++i)
        for (std::size_t r = 0; r < R; ++r) {
          x[i][r] = r < vectors && 8 * b + i < parameters_ ? v[r][8 * b + i] : 0.0;
          twice[i][r] = 2.0 * x[i][r];
        }
      double* table = tables.data() + g * 256 * R;
      for (std::size_t r = 0; r < R; ++r)
        table[r] = ((x[0][r] + x[1][r]) + (x[2][r] + x[3][r])) +
                   ((x[4][r] + x[5][r]) + (x[6][r] + x[7][r]));
      for (std::size_t level = 0, size = 1; level < 8; ++level, size *= 2) {
        const double* lanes = twice[7 - level];
        for (std::size_t e = 0; e < size; ++e)
          for (std::size_t r = 0; r < R; ++r)
            table[(size + e) * R + r] = table[e * R + r] - lanes[r];
      }
    }
    const std::uint8_t* bytes = sign_bytes_.data() + b0 * count;
    if (group == kGroup)
      add_table_entries_of<kGroup, R>(tables.data(), bytes, count, out.data());
    else
      for (std::size_t g = 0; g < group; ++g)
        add_table_entries_of<1, R>(tables.data() + g * 256 * R, bytes + g * count, count,
                                   out.data());
  }
}

void CanaryAudit::set_likelihood_model(double sampling_rate, double update_noise_multiplier) {
  if (!(sampling_rate > 0.0 && sampling_rate <= 1.0) || !(update_noise_multiplier > 0.0))
    return;  // no noise or no sampling: no likelihood model (the statistic is left out)
  likelihood_rate_ = sampling_rate;
  likelihood_shift_ = 1.0 / update_noise_multiplier;
  likelihood_.assign(static_cast<std::size_t>(count_), 0.0);
}

namespace {

// log(1 - q + q e^x), without overflow for large x (a planted fault's unnoised canary) and without
// cancellation for small |x|.
double subsampled_log_likelihood_ratio(double q, double x) {
  if (x > 0.0) return x + std::log(q + (1.0 - q) * std::exp(-x));
  return std::log1p(q * std::expm1(x));
}

}  // namespace

void CanaryAudit::observe(int round, const std::vector<double>& theta) {
  if (round <= last_round_) return;
  // The round's model change waits in a slot until kRounds are there (or state() or finish() needs
  // the scores): each pass over the sign bytes then scores kRounds rounds.
  pending_deltas_.resize(kRounds * parameters_);
  double* delta = pending_deltas_.data() + static_cast<std::size_t>(pending_) * parameters_;
  for (std::size_t i = 0; i < parameters_; ++i) delta[i] = theta[i] - theta_previous_[i];
  ++pending_;
  theta_previous_ = theta;
  last_round_ = round;
  if (pending_ == static_cast<int>(kRounds)) score_pending();
}

void CanaryAudit::score_pending() {
  if (pending_ == 0) return;
  const std::size_t rounds = static_cast<std::size_t>(pending_);
  std::vector<const double*> deltas(rounds);
  for (std::size_t r = 0; r < rounds; ++r) deltas[r] = pending_deltas_.data() + r * parameters_;
  signed_sums(deltas.data(), rounds, sums_);
  const double root_p = std::sqrt(static_cast<double>(parameters_));
  const double mu = likelihood_shift_, q = likelihood_rate_;
  // Rounds in order, as each was observed: the running sums are the same bits as one round at a
  // time.
  for (std::size_t r = 0; r < rounds; ++r) {
    const double* delta = deltas[r];
    const double norm = euclidean_norm(delta, parameters_) * root_p;
    // cos(u_c, delta) = sum_i s_i delta_i / (sqrt(p) ||delta||); a round that did not move the
    // model carries no signal (0).
    for (long k = 0; k < count_; ++k) {
      const auto j = static_cast<std::size_t>(k);
      const double cosine = norm > 0.0 ? sums_[j * kRounds + r] / norm : 0.0;
      best_[j] = std::max(best_[j], cosine);
      if (likelihood_model())
        likelihood_[j] += subsampled_log_likelihood_ratio(q, mu * root_p * cosine - 0.5 * mu * mu);
    }
  }
  pending_ = 0;
}

std::vector<double> CanaryAudit::state() {
  score_pending();
  std::vector<double> all = ordered_allgather(best_, static_cast<int>(count_), 1);
  if (likelihood_model()) {
    const std::vector<double> sums = ordered_allgather(likelihood_, static_cast<int>(count_), 1);
    all.insert(all.end(), sums.begin(), sums.end());
  }
  all.push_back(static_cast<double>(last_round_));
  return all;
}

void CanaryAudit::restore(const std::vector<double>& state, const std::vector<double>& theta) {
  const auto m = static_cast<std::size_t>(canaries_);
  const std::size_t expected = (!likelihood_model() ? m : 2 * m) + 1;
  if (state.size() != expected)
    throw InputError(fmt::format(
        "checkpoint: the canary audit holds {} values, this run (audit.canaries = {}{}) needs {}",
        state.size(), canaries_, !likelihood_model() ? "" : ", with the likelihood statistic",
        expected));
  std::copy(state.begin() + first_, state.begin() + first_ + count_, best_.begin());
  if (likelihood_model())
    std::copy(state.begin() + static_cast<std::ptrdiff_t>(m) + first_,
              state.begin() + static_cast<std::ptrdiff_t>(m) + first_ + count_,
              likelihood_.begin());
  last_round_ = static_cast<int>(state.back());
  theta_previous_ = theta;
  pending_ = 0;
}

CanaryAuditResult CanaryAudit::finish(const std::vector<double>& theta_final, double delta,
                                      double confidence) {
  score_pending();
  CanaryAuditResult result;
  result.inserted = inserted_;
  std::vector<double> whole(parameters_);
  for (std::size_t i = 0; i < parameters_; ++i) whole[i] = theta_final[i] - theta_start_[i];
  const double norm =
      euclidean_norm(whole.data(), parameters_) * std::sqrt(static_cast<double>(parameters_));
  std::vector<double> sums;
  const double* whole_data = whole.data();
  signed_sums(&whole_data, 1, sums);
  std::vector<double> local_final(static_cast<std::size_t>(count_));
  for (std::size_t k = 0; k < local_final.size(); ++k)
    local_final[k] = norm > 0.0 ? sums[k * kRounds] / norm : 0.0;
  result.score_final = ordered_allgather(local_final, static_cast<int>(count_), 1);
  // A canary of a run without rounds has no all-iterates score: 0 (no signal).
  std::vector<double> best = best_;
  for (double& value : best)
    if (!std::isfinite(value)) value = 0.0;
  result.score_all_iterates = ordered_allgather(best, static_cast<int>(count_), 1);
  if (likelihood_model())
    result.score_likelihood = ordered_allgather(likelihood_, static_cast<int>(count_), 1);
  canary_audit_bounds(result, delta, confidence);
  return result;
}

void canary_audit_bounds(CanaryAuditResult& result, double delta, double confidence) {
  result.confidence = confidence;
  result.delta = delta;
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
  if (!result.score_likelihood.empty()) {
    result.epsilon_lower_likelihood =
        one_run_audit(result.score_likelihood, result.inserted, delta, beta).epsilon_lower;
    const auto [in_likelihood, out_likelihood] = split(result.score_likelihood);
    result.epsilon_estimate_likelihood = estimate(in_likelihood, out_likelihood);
  }
}

}  // namespace fluence
