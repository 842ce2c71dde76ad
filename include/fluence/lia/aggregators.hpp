#pragma once
// Server-side aggregators of client updates for the LIA baselines (seed 002 §IV, Fig. 3): the plain
// mean (FedAvg with equal weights) and three Byzantine-robust rules the seed compares against and
// combines with its filter: KRUM (Blanchard, El Mhamdi, Guerraoui & Stainer 2017), the
// coordinate-wise trimmed mean (Yin, Chen, Ramchandran & Bartlett 2018) and centered clipping
// (Karimireddy, He & Jaggi 2021).
//
// `updates` is an n x p row-major matrix, one row per client (theta_i - theta_t), rows in client-id
// order. Every function is deterministic: the same input gives bitwise the same output (fixed
// summation orders, no threads of its own). Rows must be finite; a NaN or infinity is reported as a
// RuntimeError (a diverged client) rather than left to corrupt the ordering-based rules.
#include <cstddef>

namespace fluence::lia {

/// out = (1/n) sum_i updates_i, summed in row order.
void mean_update(const double* updates, int n, std::size_t p, double* out);

/// KRUM scores (Blanchard et al. 2017, Def. 1): scores[i] = sum of the squared Euclidean distances
/// from row i to its n - f - 2 nearest other rows (f = `byzantine`). InputError unless
/// n > 2f + 2 and f >= 0.
void krum_scores(const double* updates, int n, std::size_t p, int byzantine, double* scores);

/// The KRUM choice: argmin of krum_scores(), the lowest index on ties.
int krum_select(const double* updates, int n, std::size_t p, int byzantine);

/// Copies the row chosen by krum_select() to `out` (p values).
void krum(const double* updates, int n, std::size_t p, int byzantine, double* out);

/// Coordinate-wise trimmed mean (Yin et al. 2018, Def. 2): for each coordinate, drops the `trim`
/// largest and `trim` smallest of the n values and averages the remaining n - 2 trim. InputError
/// unless 0 <= trim and 2 trim < n. With trim = 0 it equals mean_update() bitwise.
void trimmed_mean(const double* updates, int n, std::size_t p, int trim, double* out);

/// Centered clipping (Karimireddy, He & Jaggi 2021, Alg. 2): starting from `center` (in/out: the
/// previous round's aggregate, i.e. the server momentum, or zeros), `iterations` times
///   center += (1/n) sum_i (x_i - center) min(1, tau / ||x_i - center||).
/// A row equal to the center contributes nothing. InputError unless tau > 0 (infinity allowed: the
/// plain mean step) and iterations >= 0.
void centered_clipping(const double* updates, int n, std::size_t p, double tau, int iterations,
                       double* center);

}  // namespace fluence::lia
