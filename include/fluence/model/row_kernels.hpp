#pragma once
// Register-blocked kernels for rows of 8-bit codes k whose model inputs are x = offset + step * k
// (data/dataset.hpp, ByteCoding), against a C x D weight matrix theta. They serve the two hot
// loops of private training on image data:
//  - an SGD mini-batch (16 rows of 785 codes, 12.5 KB: in L1): BLAS's call and packing overheads
//    exceed the arithmetic at this size, and the rows are read where they lie, through pointers;
//  - the server's test evaluation every round (C = 10 logits of 10,000 rows): dgemm would pack the
//    whole test matrix on every call, and the doubles (63 MB) are eight times the codes.
// Neither packs; the weights stay in L1/L2 and the codes are converted exactly in registers.
// theta x = bias + w k with w[c][j] = theta[c][j] step[j] and bias[c] = sum_j theta[c][j]
// offset[j].
//
// Determinism: every output is one fixed sequence of operations that depends on D and C only,
// never on how rows are grouped into blocks, so per-row results do not depend on the rank count.
#include <cstddef>
#include <cstdint>

namespace fluence {

// --- SGD on rows given by pointers (row-major codes, D per row) ----------------------------------

/// z[r * C + c] = bias[c] + sum_j (theta[c * D + j] step[j]) k_r[j] for `rows` rows (8-lane
/// partial sums over whole 8-column blocks in ascending order, a fixed lane reduction, then the
/// tail columns), computing bias (C values, as byte_bias) on the way.
void byte_logits(const std::uint8_t* const* rows_k, std::size_t rows, int D, const double* theta,
                 const double* step, const double* offset, int C, double* bias, double* z);

/// theta[c * D + j] <- shrink * theta[c * D + j] + offset[j] * s[c] + step[j] * u[c][j], with
/// u[c][j] = sum_b a[b * C + c] k_b[j] and s[c] = sum_b a[b * C + c] (both in ascending b): the
/// rank-`rows` update theta <- shrink theta + A^T X of an SGD step, for X = offset + step * K.
/// With `source`, the old theta is read from there (C x D) and theta is only written: the same
/// bits as copying source into theta first, without the copy.
void byte_rank_update(const std::uint8_t* const* rows_k, std::size_t rows, int D, const double* a,
                      int C, double shrink, const double* step, const double* offset, double* theta,
                      const double* source = nullptr);

/// byte_rank_update in float (federation.local_precision = "single"): sixteen lanes per vector,
/// the same structure, so the results do not depend on the rank count either. The float SGD's
/// logits come from block_logits_by_class below; with `folded` (C x D) and `bias` (C), the new
/// theta is also folded for them, with the bits of fold_classes on the result.
void byte_rank_update(const std::uint8_t* const* rows_k, std::size_t rows, int D, const float* a,
                      int C, float shrink, const float* step, const float* offset, float* theta,
                      const float* source = nullptr, float* folded = nullptr,
                      double* bias = nullptr);

// --- Evaluation of a fixed set of rows --------------------------------------------------------

/// bias[c] = sum_j theta[c * D + j] offset[j] (8-lane partial sums as byte_logits).
void byte_bias(const double* theta, int C, int D, const double* offset, double* bias);
/// The weights w transposed: wt[j * C + c] = theta[c * D + j] step[j].
void fold_transposed(const double* theta, int C, int D, const double* step, double* wt);
/// The same rounded to float, for the fast block_logits.
void fold_transposed(const double* theta, int C, int D, const double* step, float* wt);

/// Rows per block of the blocked layout.
constexpr int kCodeBlockRows = 16;

/// Codes of `rows` rows x D columns (row-major) in blocks of 16 rows, column-major within a block
/// (block b holds rows 16 b to 16 b + 15, the 16 codes of column j contiguous at offset 16 j; the
/// missing rows of the last block are zero): the evaluation kernel vectorizes over the rows and
/// streams the weights once per 16 rows.
void block_codes(const std::uint8_t* row_major, std::size_t rows, int D, std::uint8_t* blocked);

/// z[c * 16 + r] = bias[c] + sum_j wt[j * C + c] k_r[j] for the 16 rows of one block (wt is the
/// D x C transposed weight matrix), each row's sum taken in ascending j.
void block_logits(const std::uint8_t* block, int D, const double* wt, const double* bias, int C,
                  double* z);
/// block_logits with float weights (from the float fold_transposed) in float multiply-adds, about
/// twice as fast: each row's products are summed in float over runs of 64 columns and the runs in
/// double. With the weights rounded to 24 bits a logit is off by about 1e-7 of sum_j |w_j k_j|;
/// Fashion-MNIST's mean test loss comes out within about 2e-9 relative.
void block_logits(const std::uint8_t* block, int D, const float* wt, const double* bias, int C,
                  double* z);

/// block_logits with float weights in theta's class-major layout (w[c * D + j], as fold_classes
/// writes them): the same sums as the transposed form, without a transposition per batch.
void block_logits_by_class(const std::uint8_t* block, int D, const float* w, const double* bias,
                           int C, double* z);
/// folded[c * D + j] = theta[c * D + j] step[j] in float, and bias[c] = sum_j theta[c * D + j]
/// offset[j] (16-lane float partial sums, then a fixed tree).
void fold_classes(const float* theta, int C, int D, const float* step, const float* offset,
                  float* folded, double* bias);
/// One block of the blocked layout (block_codes) from up to 16 rows given by pointers (the rows
/// past `rows` zero): how a mini-batch, gathered in random order, reaches block_logits.
void block_rows(const std::uint8_t* const* rows_k, int rows, int D, std::uint8_t* block);

/// For one block's logits z (C x 16, as block_logits writes them) and the first `rows` rows'
/// labels: adds each row's cross-entropy log-sum-exp(z) - z_label to `loss_sum` in row order, and
/// counts the rows whose first maximal logit is the label. The exponentials are vectorized over
/// the rows (a polynomial within about an ulp of exp).
void block_loss(const double* z, int C, const std::int32_t* labels, int rows, double& loss_sum,
                long& correct);

}  // namespace fluence
