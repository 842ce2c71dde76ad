// Membership-inference metrics, the loss-threshold attack and LiRA (docs/math.md §11.5).
#include "fluence/audit/membership_inference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "fluence/core/error.hpp"

namespace fluence {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kStdFloor = 1e-30;

std::vector<double> descending(std::span<const double> scores, const char* side) {
  if (scores.empty()) throw InputError(fmt::format("ROC: no {} scores", side));
  std::vector<double> sorted(scores.begin(), scores.end());
  for (const double s : sorted)
    if (std::isnan(s)) throw InputError(fmt::format("ROC: a {} score is NaN", side));
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  return sorted;
}

}  // namespace

RocCurve roc_curve(std::span<const double> member_scores,
                   std::span<const double> nonmember_scores) {
  const std::vector<double> members = descending(member_scores, "member");
  const std::vector<double> nonmembers = descending(nonmember_scores, "non-member");
  const double n_members = static_cast<double>(members.size());
  const double n_nonmembers = static_cast<double>(nonmembers.size());
  RocCurve roc;
  roc.false_positive_rate.push_back(0.0);
  roc.true_positive_rate.push_back(0.0);
  roc.threshold.push_back(kInf);
  // Walk both sorted lists down through the distinct scores; at each, everything equal to it moves
  // across together (a tie of a member with a non-member is one diagonal step).
  std::size_t i = 0, j = 0;
  while (i < members.size() || j < nonmembers.size()) {
    const double next = std::max(i < members.size() ? members[i] : -kInf,
                                 j < nonmembers.size() ? nonmembers[j] : -kInf);
    while (i < members.size() && members[i] == next) ++i;
    while (j < nonmembers.size() && nonmembers[j] == next) ++j;
    roc.false_positive_rate.push_back(static_cast<double>(j) / n_nonmembers);
    roc.true_positive_rate.push_back(static_cast<double>(i) / n_members);
    roc.threshold.push_back(next);
  }
  return roc;
}

double roc_auc(const RocCurve& roc) {
  double area = 0.0;
  for (std::size_t k = 1; k < roc.false_positive_rate.size(); ++k)
    area += (roc.false_positive_rate[k] - roc.false_positive_rate[k - 1]) *
            (roc.true_positive_rate[k] + roc.true_positive_rate[k - 1]) / 2.0;
  return area;
}

double tpr_at_fpr(const RocCurve& roc, double target, RocReading reading) {
  if (!(target >= 0.0 && target <= 1.0))
    throw InputError(fmt::format("ROC: a false positive rate of {} is outside [0, 1]", target));
  if (roc.false_positive_rate.empty()) throw InputError("ROC: an empty curve");
  const auto& fpr = roc.false_positive_rate;
  const auto& tpr = roc.true_positive_rate;
  // The last point with FPR <= target (FPR and TPR are non-decreasing along the curve).
  std::size_t last = 0;
  while (last + 1 < fpr.size() && fpr[last + 1] <= target) ++last;
  if (reading == RocReading::threshold || last + 1 == fpr.size() || fpr[last] == target)
    return tpr[last];
  const double weight = (target - fpr[last]) / (fpr[last + 1] - fpr[last]);
  return tpr[last] + weight * (tpr[last + 1] - tpr[last]);
}

RocSummary summarize_roc(std::span<const double> member_scores,
                         std::span<const double> nonmember_scores) {
  RocSummary summary;
  summary.roc = roc_curve(member_scores, nonmember_scores);
  summary.auc = roc_auc(summary.roc);
  summary.tpr_at_fpr_0_001 = tpr_at_fpr(summary.roc, 0.001);
  summary.tpr_at_fpr_0_01 = tpr_at_fpr(summary.roc, 0.01);
  return summary;
}

std::vector<double> loss_threshold_scores(std::span<const double> losses) {
  std::vector<double> scores(losses.size());
  std::transform(losses.begin(), losses.end(), scores.begin(), [](double l) { return -l; });
  return scores;
}

double scaled_confidence(double true_class_probability) {
  const double p = true_class_probability;
  if (!(p >= 0.0 && p <= 1.0))
    throw InputError(fmt::format("LiRA: a probability of {} is outside [0, 1]", p));
  return std::log(p) - std::log1p(-p);
}

double scaled_confidence_from_logits(std::span<const double> logits, std::size_t label) {
  if (logits.size() < 2 || label >= logits.size())
    throw InputError(fmt::format("LiRA: label {} of a model with {} logits", label, logits.size()));
  // log p_y - log(1 - p_y) = z_y - log sum_{j != y} e^{z_j}: the softmax's normalizer cancels.
  double largest = -kInf;
  for (std::size_t j = 0; j < logits.size(); ++j)
    if (j != label) largest = std::max(largest, logits[j]);
  double sum = 0.0;
  for (std::size_t j = 0; j < logits.size(); ++j)
    if (j != label) sum += std::exp(logits[j] - largest);
  return logits[label] - (largest + std::log(sum));
}

std::vector<double> lira_scores(std::span<const double> target, std::span<const double> shadow,
                                std::span<const std::uint8_t> shadow_in, LiraOptions options) {
  const std::size_t examples = target.size();
  if (examples == 0 || shadow.size() % examples != 0 || shadow.size() != shadow_in.size())
    throw InputError(
        fmt::format("LiRA: {} shadow values and {} inclusion flags are not whole "
                    "rows of {} examples",
                    shadow.size(), shadow_in.size(), examples));
  const std::size_t shadows = shadow.size() / examples;
  for (const double v : shadow)
    if (!std::isfinite(v))
      throw InputError(
          "LiRA: a shadow confidence is not finite (use scaled_confidence_from_logits)");
  for (const double v : target)
    if (std::isnan(v)) throw InputError("LiRA: a target confidence is NaN");

  // Per example and side: the count, the mean and the sum of squared deviations (two passes).
  struct Side {
    double count = 0.0, mean = 0.0, squares = 0.0;
  };
  std::vector<Side> in(examples), out(examples);
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t s = 0; s < shadows; ++s) {
      for (std::size_t e = 0; e < examples; ++e) {
        const double phi = shadow[s * examples + e];
        Side& side = shadow_in[s * examples + e] ? in[e] : out[e];
        if (pass == 0) {
          side.count += 1.0;
          side.mean += phi;
        } else {
          side.squares += (phi - side.mean) * (phi - side.mean);
        }
      }
    }
    if (pass == 0)
      for (std::size_t e = 0; e < examples; ++e) {
        if (in[e].count > 0) in[e].mean /= in[e].count;
        if (out[e].count > 0) out[e].mean /= out[e].count;
      }
  }
  // The standard deviation of one side: per example (n - 1 divisor) or pooled over the examples
  // (sum of squares over sum of n_e - 1).
  auto pooled_std = [&](const std::vector<Side>& sides) {
    double squares = 0.0, freedom = 0.0;
    for (const Side& s : sides) {
      squares += s.squares;
      freedom += std::max(0.0, s.count - 1.0);
    }
    return freedom > 0 ? std::sqrt(squares / freedom) : -1.0;
  };
  const double global_in = options.global_variance ? pooled_std(in) : 0.0;
  const double global_out = options.global_variance ? pooled_std(out) : 0.0;
  const double needed = options.global_variance ? 1.0 : 2.0;
  if (options.global_variance && (global_out < 0 || (!options.offline && global_in < 0)))
    throw InputError("LiRA: no example has two shadows on one side to pool a variance from");

  std::vector<double> scores(examples);
  for (std::size_t e = 0; e < examples; ++e) {
    if (out[e].count < needed || (!options.offline && in[e].count < needed))
      throw InputError(
          fmt::format("LiRA: example {} has {} IN and {} OUT shadow models ({} a "
                      "side needed)",
                      e, in[e].count, out[e].count, needed));
    const double sd_out = std::max(
        kStdFloor,
        options.global_variance ? global_out : std::sqrt(out[e].squares / (out[e].count - 1.0)));
    const double z_out = (target[e] - out[e].mean) / sd_out;
    if (options.offline) {
      scores[e] = z_out;
      continue;
    }
    const double sd_in = std::max(kStdFloor, options.global_variance
                                                 ? global_in
                                                 : std::sqrt(in[e].squares / (in[e].count - 1.0)));
    const double z_in = (target[e] - in[e].mean) / sd_in;
    // log N(phi; mu_in, sd_in^2) - log N(phi; mu_out, sd_out^2); the 2 pi terms cancel.
    scores[e] = -0.5 * z_in * z_in - std::log(sd_in) + 0.5 * z_out * z_out + std::log(sd_out);
  }
  return scores;
}

}  // namespace fluence
