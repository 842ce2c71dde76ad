#pragma once
// The validators' side of LIA (seed 002 §III-B, Eq. 1-3): loss differences of validation data
// under the current model and under every contributor's noisy last layer, as GEMMs over stacked
// weights; the randomized-response obfuscation of the votes; and the center's threshold.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fluence/core/rng.hpp"

namespace fluence::lia {

/// seed 002 Eq. 2's p for a vote privacy level eps. The vote is one +-1 symbol, kept with
/// probability 1 - p/2 and flipped with p/2, so the exact guarantee is eps = ln((1 - p/2)/(p/2))
/// and p = 2/(1 + e^eps). Seed 002 Eq. 3 writes eps = 2 ln(...) (RAPPOR's bound for a value that
/// changes two Bloom-filter bits), which states twice the true loss; `seed_accounting` keeps it:
/// p = 2/(1 + e^(eps/2)). eps = +inf gives p = 0.
double vote_flip_probability(double epsilon, bool seed_accounting);
/// The inverse: eps of a flip probability p in (0, 1].
double vote_epsilon(double flip_probability, bool seed_accounting);
/// seed 002 Eq. 2: with probability p report a fair coin (+1 or -1), otherwise the vote.
int obfuscate_vote(int vote, double flip_probability, Stream& stream);

/// A validator's vote baseline (docs/math.md §9): the element of rank floor(n q) (0-based) of its
/// n >= 1 loss differences (rank n - 1 for q = 1), q in (0, 1]; q = 1/2 is the median
/// ("median"). `values` is reordered.
double vote_quantile(std::vector<double>& values, double q);

/// The center's threshold (seed Fig. 2c): the two clusters of the vote sums by 1-D k-means, solved
/// exactly (in one dimension the optimal clusters are the two sides of a split of the sorted
/// values, so every split is tried instead of Lloyd iterations from a random start), and the
/// midpoint of their means. Ties between splits go to the first (lowest) split. With fewer than
/// two distinct values, that value.
double kmeans_threshold(std::vector<double> values);

/// A threshold from a two-component 1-D Gaussian mixture fitted by EM (started from the exact
/// 2-means split): the point between the two means where both components are equally likely a
/// posteriori. Unlike the k-means midpoint it follows clusters of unequal size and spread (many
/// honest contributors with widely spread sums, fewer corrupted ones). Falls back to the k-means
/// midpoint when a component collapses.
double mixture_threshold(std::vector<double> values);

/// out[i] = exp(x[i]) for x[i] <= 0 (values below -708 are taken as -708, whose exp is about
/// 3e-308), eight at a time with lanes::exp_nonpositive (core/lanes.hpp): x = k ln 2 + r with
/// |r| <= ln(2)/2, exp(r) from its Taylor polynomial of degree 13 (truncation below 1e-17
/// relative), 2^k built in the exponent bits. Within a few ulp of std::exp; the vote kernel's
/// softmax losses spend most of their time here.
void exp_nonpositive(const double* x, double* out, std::size_t n);

/// The loss L of seed 002 Eq. 1 a validator evaluates: the softmax layer's cross-entropy, or the
/// 0-1 loss (1 when the row's first maximal logit is not its label, else 0), so that L(z,
/// theta_base) - L(z, theta_a) summed over a validator's rows is how many more of them theta_a
/// classifies correctly than theta_base.
enum class VoteLoss { cross_entropy, zero_one };

/// Sums over each validator's rows of L(z, theta_base) - L(z, theta_a) for every contributor a,
/// with the cross-entropy or the 0-1 loss (VoteLoss) of a C-class softmax layer on D features. The
/// logits of all contributors come from GEMMs of the validators' rows (in blocks of
/// `kValidatorBlock` validators) against the stacked weights (in chunks of `kContributorChunk`
/// contributors). Block and chunk boundaries are fixed in global indices, so a validator's sums are
/// bitwise the same whichever rank computes them.
class VoteKernel {
 public:
  static constexpr int kValidatorBlock = 16;
  static constexpr int kContributorChunk = 128;

  VoteKernel(int features, int classes, VoteLoss loss = VoteLoss::cross_entropy);

  /// `x` holds the rows of `validators` consecutive validators (the first one a multiple of
  /// kValidatorBlock in the global numbering, except in tests), validator v owning rows
  /// [row_begin[v], row_begin[v + 1]); `y` their labels. `stacked` is contributors x C x D
  /// (row-major), `base` C x D. When `row_subset` and `pair_subset` are given, validator v's sum
  /// for contributor a covers only its rows r with row_subset[r] == pair_subset[v * contributors +
  /// a] (seed §III-B3: disjoint validation subsets). `differences` is validators x contributors.
  void loss_differences(const double* x, const std::int32_t* y,
                        const std::vector<std::size_t>& row_begin, const double* base,
                        const double* stacked, int contributors, double* differences,
                        const std::uint8_t* row_subset = nullptr,
                        const std::uint8_t* pair_subset = nullptr);

  /// Floating-point operations of the GEMMs in the last call.
  double last_gemm_flops() const { return flops_; }
  double last_gemm_seconds() const { return gemm_seconds_; }

 private:
  int features_, classes_;
  VoteLoss loss_;
  std::vector<double> logits_, base_logits_, base_loss_, shifted_, row_losses_;
  double flops_ = 0.0, gemm_seconds_ = 0.0;
};

}  // namespace fluence::lia
