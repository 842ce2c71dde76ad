#pragma once
// Register-tiled kernels for the full-data passes of a model with few classes (C <= 16: the binary,
// 4-class and 10-class problems of the seeds) on double rows. With C this small a GEMM is too
// skinny for BLAS (its packing costs more than the C multiply-adds per element), and plain per-row
// dot
// products are bound by the multiply-add latency. These keep a tile of rows x classes partial sums
// in registers, so each element of x is loaded once per pass, and they are fast enough that the
// passes become bound by reading x: callers run both passes of a gradient or a Hessian-vector
// product over one cache-sized block of rows before the next (kDenseBlockRows), reading x from
// memory once.
//
// Determinism: each logit is the same fixed sequence of operations whatever the tile or block
// (8-lane partial sums over 8-column groups in ascending order, the last group zero-padded, and a
// fixed lane reduction), and each accumulated output element adds its rows in ascending order,
// so per-row results and sums do not depend on how rows are split across ranks or blocks.
#include <cstddef>

namespace fluence {

/// The most classes the tiled kernels take; larger models use BLAS.
constexpr int kDenseMaxClasses = 16;
/// Products of at least this many multiply-adds go to BLAS; below, its call overhead dominates.
constexpr std::size_t kBlasWork = 16384;
/// Rows per block of a two-pass computation: 32 rows of Fashion-MNIST's 789 columns are 200 KB,
/// which stay in L2 between the passes.
constexpr std::size_t kDenseBlockRows = 32;

/// z[r * C + c] = sum_j x[r * D + j] theta[c * D + j] for `rows` rows, 2 <= C <= kDenseMaxClasses.
void dense_logits(const double* x, std::size_t rows, int D, int C, const double* theta, double* z);

/// out[c * D + j] += sum_r w[r * C + c] x[r * D + j] (rows in ascending order),
/// 2 <= C <= kDenseMaxClasses.
void dense_outer_update(const double* w, const double* x, std::size_t rows, int D, int C,
                        double* out);

/// sum_j a[j] b[j] as eight partial sums over 8-element groups (the last one zero-padded) and a
/// fixed reduction: vectorized without -ffast-math, the same bits on every rank (and as
/// dense_logits' logits).
double lanes_dot(const double* a, const double* b, int n);

/// dense_logits for any C: the tiled kernel where it applies, else dgemm (or, for one class or a
/// product too small for a BLAS call, plain dot products).
void row_logits(const double* x, std::size_t rows, int D, int C, const double* theta, double* z);

/// dense_outer_update for any C: the tiled kernel where it applies, else dgemm.
void add_outer(const double* w, const double* x, std::size_t rows, int D, int C, double* out);

}  // namespace fluence
