#pragma once
// Membership-inference metrics and attack scores (docs/math.md §11.5), as functions of arrays: the
// training of target and shadow models is the caller's. Every score is "higher: member likelier".
//  - the ROC of a score on members against non-members, exact (one point per distinct score, ties
//    moving TPR and FPR together), its AUC, and TPR at a fixed low FPR;
//  - the loss-threshold attack (score = -loss);
//  - LiRA (Carlini et al. 2022, "Membership inference attacks from first principles"): per example,
//    the logit-scaled confidence phi = log(p_y / (1 - p_y)) of shadow models trained with (IN) and
//    without (OUT) it, a Gaussian fitted to each, and the likelihood ratio of the target model's
//    phi (online), or its standing in the OUT Gaussian alone (offline).
#include <cstdint>
#include <span>
#include <vector>

namespace fluence {

/// The ROC of the tests "score >= t" for t from +inf down through every distinct score: points
/// (FPR, TPR) from (0, 0) to (1, 1), `threshold[i]` the t of point i (+inf for the first).
struct RocCurve {
  std::vector<double> false_positive_rate;
  std::vector<double> true_positive_rate;
  std::vector<double> threshold;
};

/// InputError for an empty side or a NaN score.
RocCurve roc_curve(std::span<const double> member_scores, std::span<const double> nonmember_scores);

/// The area under the curve's straight segments (trapezoids). A tie of a member with a non-member
/// is one diagonal segment, which counts it as one half: the AUC equals the Mann-Whitney statistic
/// P(S_member > S_nonmember) + P(S_member = S_nonmember) / 2.
double roc_auc(const RocCurve& roc);

/// How TPR at a target FPR is read off the curve.
enum class RocReading {
  /// The largest TPR among the points with FPR <= target: a deterministic threshold that meets the
  /// FPR (Carlini et al.'s convention; conservative between points).
  threshold,
  /// Linear interpolation along the segment that spans the target: the randomized test mixing the
  /// two neighbouring thresholds, which achieves exactly that point.
  interpolate,
};

/// TPR at FPR `target` in [0, 1] (e.g. 0.001 and 0.01).
double tpr_at_fpr(const RocCurve& roc, double target, RocReading reading = RocReading::threshold);

/// What is reported of an attack: its ROC, the AUC and TPR at FPR 0.1% and 1% (the threshold
/// reading: a test that meets the FPR).
struct RocSummary {
  RocCurve roc;
  double auc = 0.0;
  double tpr_at_fpr_0_001 = 0.0;
  double tpr_at_fpr_0_01 = 0.0;
};

/// roc_curve, roc_auc and tpr_at_fpr of the scores (same InputErrors as roc_curve).
RocSummary summarize_roc(std::span<const double> member_scores,
                         std::span<const double> nonmember_scores);

/// The loss-threshold attack's scores (Yeom et al. 2018): -loss, a lower loss is likelier a member.
std::vector<double> loss_threshold_scores(std::span<const double> losses);

/// LiRA's logit scaling of the true-class probability, phi = log(p / (1 - p)), formed as
/// log p - log1p(-p) (no cancellation near 0 or 1); +-inf at p = 1 or 0.
double scaled_confidence(double true_class_probability);

/// The same from a model's logits, phi = z_y - log sum_{j != y} e^{z_j} (log-sum-exp), exact where
/// p_y rounds to 1 in double. InputError for a label outside the logits or fewer than 2 classes.
double scaled_confidence_from_logits(std::span<const double> logits, std::size_t label);

struct LiraOptions {
  /// Offline: only OUT shadows are used; the score is (phi - mu_out) / sigma_out, which ranks
  /// examples exactly as Carlini et al.'s one-sided test P[Z < phi], Z ~ N(mu_out, sigma_out^2),
  /// and cannot saturate at 1.
  bool offline = false;
  /// One standard deviation per side pooled over all examples instead of per example (Carlini et
  /// al.'s choice with few shadow models).
  bool global_variance = false;
};

/// LiRA's score of every example: `target` = phi of the target model [examples], `shadow` = phi of
/// each shadow model row-major [shadows][examples], `shadow_in` = whether that shadow trained on
/// that example (same layout). Online: log N(phi; mu_in, sigma_in^2) - log N(phi; mu_out,
/// sigma_out^2). Per-example fits need >= 2 IN (online) and >= 2 OUT shadows of every example;
/// InputError otherwise, or for sizes that disagree. A zero standard deviation is floored at
/// 1e-30 (Carlini et al. add the same) so that a score stays finite.
std::vector<double> lira_scores(std::span<const double> target, std::span<const double> shadow,
                                std::span<const std::uint8_t> shadow_in, LiraOptions options = {});

}  // namespace fluence
