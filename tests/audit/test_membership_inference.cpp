// Membership-inference metrics and scores: the ROC against counting by brute force (ties
// included), the AUC against pair counting (the Mann-Whitney statistic), TPR at low FPR under both
// readings, the logit scaling against the softmax, and LiRA against its formulas evaluated
// directly on a synthetic set of shadow models.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fluence/audit/membership_inference.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/fl/purposes.hpp"

namespace fluence {
namespace {

// Integer scores in [0, levels): many ties within and across the two sides.
std::vector<double> tied_scores(std::uint64_t seed, std::uint64_t side, int n, int levels,
                                int shift) {
  Stream stream(seed, purpose::server_noise, side);
  std::vector<double> scores;
  for (int i = 0; i < n; ++i)
    scores.push_back(static_cast<double>(stream.below(static_cast<std::uint64_t>(levels)) + shift));
  return scores;
}

// A hand-made curve: members {3, 2, 2, 1}, non-members {2, 1, 0}. The member-non-member tie at 2
// is one diagonal step from (0, 1/4) to (1/3, 3/4).
TEST(Roc, TiesMoveBothRatesTogether) {
  const std::vector<double> members = {2.0, 3.0, 1.0, 2.0}, nonmembers = {1.0, 0.0, 2.0};
  const RocCurve roc = roc_curve(members, nonmembers);
  const std::vector<double> fpr = {0.0, 0.0, 1.0 / 3, 2.0 / 3, 1.0};
  const std::vector<double> tpr = {0.0, 0.25, 0.75, 1.0, 1.0};
  const std::vector<double> threshold = {INFINITY, 3.0, 2.0, 1.0, 0.0};
  EXPECT_EQ(roc.false_positive_rate, fpr);
  EXPECT_EQ(roc.true_positive_rate, tpr);
  EXPECT_EQ(roc.threshold, threshold);
  // Pairs: 3 beats all 3; each 2 beats 2 and ties 1; 1 beats 1 and ties 1: (3 + 2 * 2.5 + 1.5)/12.
  EXPECT_DOUBLE_EQ(roc_auc(roc), 9.5 / 12.0);
}

// Every point is (fraction of non-members >= t, fraction of members >= t), and the AUC is the
// Mann-Whitney statistic counted pair by pair; exact up to rounding of the sums (1e-12).
TEST(Roc, PointsAndAucMatchBruteForceWithTies) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const auto members = tied_scores(seed, 1, 300, 40, 3),
               nonmembers = tied_scores(seed, 2, 250, 40, 0);
    const RocCurve roc = roc_curve(members, nonmembers);
    for (std::size_t k = 1; k < roc.threshold.size(); ++k) {
      const double t = roc.threshold[k];
      double m = 0, n = 0;
      for (double s : members) m += s >= t;
      for (double s : nonmembers) n += s >= t;
      EXPECT_EQ(roc.true_positive_rate[k], m / members.size());
      EXPECT_EQ(roc.false_positive_rate[k], n / nonmembers.size());
    }
    double wins = 0.0;
    for (double a : members)
      for (double b : nonmembers) wins += a > b ? 1.0 : (a == b ? 0.5 : 0.0);
    EXPECT_NEAR(roc_auc(roc), wins / (members.size() * nonmembers.size()), 1e-12);
  }
}

// Readings at a low FPR on a curve through (0, 0), (0, 0.1), (0.5, 0.5), (1, 1): the threshold
// reading stays at the last point at or below the target, the interpolating one moves along the
// segment.
TEST(Roc, TprAtLowFprReadings) {
  const std::vector<double> members = {5.0, 3.0, 3.0, 3.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0};
  const std::vector<double> nonmembers = {3.0, 1.0};
  const RocCurve roc = roc_curve(members, nonmembers);
  EXPECT_DOUBLE_EQ(tpr_at_fpr(roc, 0.01), 0.1);
  EXPECT_DOUBLE_EQ(tpr_at_fpr(roc, 0.25), 0.1);
  EXPECT_DOUBLE_EQ(tpr_at_fpr(roc, 0.25, RocReading::interpolate), 0.1 + 0.5 * 0.4);
  EXPECT_DOUBLE_EQ(tpr_at_fpr(roc, 0.5), 0.5);
  EXPECT_DOUBLE_EQ(tpr_at_fpr(roc, 0.5, RocReading::interpolate), 0.5);
  EXPECT_DOUBLE_EQ(tpr_at_fpr(roc, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(tpr_at_fpr(roc, 0.0), 0.1);  // a vertical first step: TPR with no FP
  EXPECT_THROW(tpr_at_fpr(roc, 1.5), InputError);
  EXPECT_THROW(roc_curve(std::vector<double>{}, nonmembers), InputError);
}

TEST(MembershipScores, LossThresholdAndLogitScaling) {
  EXPECT_EQ(loss_threshold_scores(std::vector<double>{0.1, 2.0}),
            (std::vector<double>{-0.1, -2.0}));
  // phi from logits = log(p / (1 - p)) from the softmax, where both are accurate.
  const std::vector<double> logits = {1.0, -0.5, 2.5, 0.3};
  double normalizer = 0.0;
  for (double z : logits) normalizer += std::exp(z);
  for (std::size_t y = 0; y < logits.size(); ++y) {
    const double p = std::exp(logits[y]) / normalizer;
    EXPECT_NEAR(scaled_confidence_from_logits(logits, y), std::log(p / (1 - p)), 1e-13);
    EXPECT_NEAR(scaled_confidence(p), std::log(p / (1 - p)), 1e-13);
  }
  // Where p_y rounds to 1 the logit form stays exact: z_y - log sum_{j != y} e^{z_j}.
  const std::vector<double> confident = {60.0, 0.0, 0.0};
  EXPECT_NEAR(scaled_confidence_from_logits(confident, 0), 60.0 - std::log(2.0), 1e-12);
  EXPECT_EQ(scaled_confidence(1.0), INFINITY);
  EXPECT_THROW(scaled_confidence_from_logits(confident, 3), InputError);
}

// LiRA on 64 shadow models of 50 examples, each shadow including each example with probability
// 1/2, phi ~ N(2 + example / 25, 0.5^2) IN and N(example / 25, 0.8^2) OUT: the scores equal the
// formulas evaluated here from scratch (means, n - 1 variances, Gaussian log densities with their
// 2 pi terms), to 1e-10; the offline score is the OUT z-score; members score higher (AUC > 0.9).
TEST(Lira, ScoresMatchTheFormulasAndSeparateMembers) {
  const std::size_t shadows = 64, examples = 50;
  std::vector<double> shadow(shadows * examples);
  std::vector<std::uint8_t> shadow_in(shadows * examples);
  Stream stream(9, purpose::server_noise);
  for (std::size_t s = 0; s < shadows; ++s)
    for (std::size_t e = 0; e < examples; ++e) {
      const bool in = stream.uniform() < 0.5;
      shadow_in[s * examples + e] = in;
      shadow[s * examples + e] =
          in ? 2.0 + e / 25.0 + 0.5 * stream.normal() : e / 25.0 + 0.8 * stream.normal();
    }
  std::vector<double> target(examples);
  std::vector<bool> target_member(examples);
  for (std::size_t e = 0; e < examples; ++e) {
    target_member[e] = e % 2 == 0;
    target[e] = target_member[e] ? 2.0 + e / 25.0 + 0.5 * stream.normal()
                                 : e / 25.0 + 0.8 * stream.normal();
  }
  const auto online = lira_scores(target, shadow, shadow_in);
  const auto offline = lira_scores(target, shadow, shadow_in, {.offline = true});
  const auto pooled = lira_scores(target, shadow, shadow_in, {.global_variance = true});
  auto log_density = [](double x, double m, double s) {
    return -0.5 * std::pow((x - m) / s, 2) - std::log(s) - 0.5 * std::log(2 * M_PI);
  };
  double pooled_squares[2] = {0, 0}, pooled_freedom[2] = {0, 0};
  std::vector<double> means[2] = {std::vector<double>(examples), std::vector<double>(examples)};
  for (std::size_t e = 0; e < examples; ++e) {
    std::vector<double> side[2];
    for (std::size_t s = 0; s < shadows; ++s)
      side[shadow_in[s * examples + e]].push_back(shadow[s * examples + e]);
    double mean[2], sd[2];
    for (int k = 0; k < 2; ++k) {
      double sum = 0;
      for (double v : side[k]) sum += v;
      mean[k] = sum / side[k].size();
      double sq = 0;
      for (double v : side[k]) sq += (v - mean[k]) * (v - mean[k]);
      sd[k] = std::sqrt(sq / (side[k].size() - 1));
      pooled_squares[k] += sq;
      pooled_freedom[k] += side[k].size() - 1;
      means[k][e] = mean[k];
    }
    EXPECT_NEAR(online[e],
                log_density(target[e], mean[1], sd[1]) - log_density(target[e], mean[0], sd[0]),
                1e-10);
    EXPECT_NEAR(offline[e], (target[e] - mean[0]) / sd[0], 1e-10);
  }
  const double sd_out = std::sqrt(pooled_squares[0] / pooled_freedom[0]);
  const double sd_in = std::sqrt(pooled_squares[1] / pooled_freedom[1]);
  for (std::size_t e = 0; e < examples; ++e)
    EXPECT_NEAR(
        pooled[e],
        log_density(target[e], means[1][e], sd_in) - log_density(target[e], means[0][e], sd_out),
        1e-10);
  std::vector<double> member_scores, nonmember_scores;
  for (std::size_t e = 0; e < examples; ++e)
    (target_member[e] ? member_scores : nonmember_scores).push_back(online[e]);
  EXPECT_GT(roc_auc(roc_curve(member_scores, nonmember_scores)), 0.9);
}

TEST(Lira, RefusesTooFewShadows) {
  const std::vector<double> target = {0.0, 0.0}, shadow = {1.0, 2.0, 3.0, 4.0};
  const std::vector<std::uint8_t> in = {1, 0, 0, 1};  // one IN and one OUT per example
  EXPECT_THROW(lira_scores(target, shadow, in), InputError);
  EXPECT_THROW(lira_scores(target, shadow, std::vector<std::uint8_t>{1, 0}), InputError);
  EXPECT_THROW(lira_scores(target, std::vector<double>{1.0, NAN, 3.0, 4.0}, in), InputError);
}

}  // namespace
}  // namespace fluence
