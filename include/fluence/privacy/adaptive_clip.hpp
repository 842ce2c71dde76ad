#pragma once
// Adaptive clipping of Andrew, Thakkar, McMahan & Ramaswamy 2019 ("Differentially private learning
// with adaptive clipping"), as DP-FedAvg and FeO2 use it (seed 004 §2.1, Algorithm 1): each
// sampled client reports b = 1[||update|| <= S]; the server estimates the unclipped fraction from
// the noisy sum of the b's and moves S geometrically toward the target quantile kappa:
//   S <- S exp(-eta_b (b_bar - kappa)).
// The b's are released too, so the privacy noise is split between the updates and the count such
// that the composition has the stated noise multiplier z (their Theorem 1):
//   z^-2 = z_update^-2 + (2 z_b)^-2.

namespace fluence {

/// The update noise multiplier that leaves z overall when the count gets noise z_b: z_update =
/// (z^-2 - (2 z_b)^-2)^(-1/2). InputError when 2 z_b <= z (the count alone would spend the budget).
double update_noise_multiplier(double z, double count_noise);

class AdaptiveClip {
 public:
  AdaptiveClip(double initial_clip, double target_quantile, double learning_rate)
      : clip_(initial_clip), target_(target_quantile), learning_rate_(learning_rate) {}
  double clip() const { return clip_; }
  void set_clip(double clip) { clip_ = clip; }  // restart
  /// One round: `unclipped_fraction` is the server's (noisy) estimate of the fraction of sampled
  /// clients whose update norm was at most clip().
  void update(double unclipped_fraction);

 private:
  double clip_, target_, learning_rate_;
};

}  // namespace fluence
