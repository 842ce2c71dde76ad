#pragma once
// Relevance-weighted votes (beyond seed 002; docs/math.md §9, "Relevance-weighted votes").
// Under non-IID data a validator says something about a contributor only when it holds the
// classes of the contributor's images; the other validators' votes add randomized-response noise
// and DP-noise-driven swings, so a plain sum of all votes drowns the few informative ones. Each
// participant therefore releases, once, a Laplace-noised histogram of M0's predicted classes over
// its images (its training batch as a contributor, its validation set as a validator). M0 is
// public and the histogram never reads a label, so a label-corrupted batch shows the classes of
// its images, not of its wrong labels. The center weights validator b's vote on contributor a by
// the overlap of the two histograms raised to a power and takes the weighted mean of the votes.
#include <cstdint>
#include <span>
#include <vector>

#include "fluence/core/rng.hpp"

namespace fluence::lia {

/// Counts of M0's predicted class (the first maximal logit of x theta^T; theta is C x D row-major)
/// over `rows` rows of x (rows x D): C values.
std::vector<double> predicted_class_histogram(const double* x, std::size_t rows, int D, int C,
                                              const double* theta);

/// Adds Laplace(1 / epsilon) noise to every count (epsilon-DP for add/remove of one row: one count
/// changes by 1, L1 sensitivity 1). epsilon = +inf adds nothing.
void add_laplace_noise(std::span<double> counts, double epsilon, Stream& stream);

/// One Laplace(scale) draw: the difference of two unit exponentials, from two uniforms on [0, 1).
double laplace(double scale, Stream& stream);

/// A histogram's shares f: negative (noisy) counts set to 0, normalized to sum 1 (uniform when
/// nothing is left). `histograms` holds `count` histograms of C values; returns count x C shares.
std::vector<double> relevance_shares(std::span<const double> histograms, int C);

/// The weight of a validator's vote on a contributor from their shares: (sum_c f_v(c)
/// f_a(c))^power, in [0, 1].
double relevance_weight(const double* validator_shares, const double* contributor_shares, int C,
                        double power);

/// A weight in [0, 1] as an integer multiple of 2^-40, so that weighted vote sums are exact
/// integer sums whatever the rank count (docs/math.md §9, "Relevance-weighted votes").
std::int64_t quantized_weight(double weight);
inline constexpr double kWeightQuantum = 0x1p-40;

}  // namespace fluence::lia
