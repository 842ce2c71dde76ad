#pragma once
// The kernels a network's layers are made of (network.hpp), for float and double. Activations are
// row-major [batch x features]; an image is channels-last (H x W x C, NHWC for a batch), so that a
// convolution is one GEMM of its im2col matrix with the filters and writes NHWC directly.
//
// Determinism: every kernel is a fixed sequence of operations for given shapes, and BLAS runs one
// thread per rank, so a client's results do not depend on the rank hosting it.
#include <cstddef>
#include <cstdint>

namespace fluence {

/// c = alpha op(a) op(b) + beta c, row-major (cblas_sgemm or cblas_dgemm).
template <class T>
void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, T alpha, const T* a, int lda,
          const T* b, int ldb, T beta, T* c, int ldc);

/// Most rows the small-row kernels below take.
constexpr int kSmallRows = 16;

/// c[r * ldc + j] = sum_o d[r * ldd + o] w[o * ldw + j] for r < rows <= kSmallRows, j < k,
/// o < n (ascending o for each output): a dense layer's input gradient on a mini-batch. It reads
/// each weight once, 16 columns at a time, where sgemm packs the whole weight matrix on every
/// call: about twice as fast for the CNN's 512 x 3136 layer on a batch of 10 (bench_networks).
void small_rows_times(const float* d, int ldd, int rows, const float* w, int ldw, int n, int k,
                      float* c, int ldc);

/// A stride-1 square convolution of an H x W x C input with `filters` outputs: "same" padding
/// pads (k - 1) / 2 zeros on each side (odd k), "valid" none.
struct ConvGeometry {
  int height = 0, width = 0, channels = 0;
  int kernel = 0, pad = 0, filters = 0;
  int out_height() const { return height + 2 * pad - kernel + 1; }
  int out_width() const { return width + 2 * pad - kernel + 1; }
  int positions() const { return out_height() * out_width(); }
  /// Columns of the im2col matrix: one (ky, kx, c) patch.
  int patch() const { return kernel * kernel * channels; }
  std::size_t input_size() const { return std::size_t(height) * width * channels; }
};

/// col[(b, oy, ox), (ky, kx, c)] = x[b, oy + ky - pad, ox + kx - pad, c] (0 outside the image):
/// batch x positions() rows of patch() values.
template <class T>
void im2col(const T* x, int batch, const ConvGeometry& g, T* col);

/// The adjoint of im2col: dx[b, y, x, c] = the sum of the col entries that im2col copied from
/// there, added in ascending (oy, ox, ky, kx) order; dx is overwritten.
template <class T>
void col2im(const T* col, int batch, const ConvGeometry& g, T* dx);

/// 2 x 2 max-pooling with stride 2 of H x W x C images (floor: an odd last row or column is
/// dropped): y is (H/2) x (W/2) x C per image, `argmax` (unless null) the index within its image
/// of the input each output took (the first maximal of (0,0), (0,1), (1,0), (1,1)).
template <class T>
void max_pool(const T* x, int batch, int height, int width, int channels, T* y,
              std::int32_t* argmax);

/// The adjoint: dx (batch x input_size, overwritten) holds dy at the inputs argmax names, 0
/// elsewhere.
template <class T>
void max_pool_adjoint(const T* dy, const std::int32_t* argmax, int batch, std::size_t output_size,
                      std::size_t input_size, T* dx);

/// y[r, j] += bias[j] for `rows` rows of n.
template <class T>
void add_bias(T* y, std::size_t rows, int n, const T* bias);

/// out[j] = beta out[j] + alpha sum_r d[r, j] (rows in ascending order; beta = 0 ignores out).
template <class T>
void add_column_sums(const T* d, std::size_t rows, int n, T alpha, T beta, T* out);

}  // namespace fluence
