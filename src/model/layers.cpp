#include "fluence/model/layers.hpp"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace fluence {

namespace {
CBLAS_TRANSPOSE blas_transpose(bool transpose) {
  return transpose ? CblasTrans : CblasNoTrans;
}
}  // namespace

template <>
void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, blas_transpose(transpose_a), blas_transpose(transpose_b), m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}

template <>
void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, double alpha, const double* a,
          int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, blas_transpose(transpose_a), blas_transpose(transpose_b), m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}

namespace {
using Float16 = float __attribute__((vector_size(64)));

inline Float16 load16(const float* p) {
  Float16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store16(float* p, const Float16& v) {
  std::memcpy(p, &v, sizeof v);
}

template <int R>
void times(const float* d, int ldd, const float* w, int ldw, int n, int k, float* c, int ldc) {
  const int whole = k / 16 * 16;
  for (int j = 0; j < whole; j += 16) {
    Float16 sum[R] = {};
    for (int o = 0; o < n; ++o) {
      const Float16 weights = load16(w + static_cast<std::size_t>(o) * ldw + j);
      for (int r = 0; r < R; ++r) sum[r] += d[static_cast<std::size_t>(r) * ldd + o] * weights;
    }
    for (int r = 0; r < R; ++r) store16(c + static_cast<std::size_t>(r) * ldc + j, sum[r]);
  }
  for (int j = whole; j < k; ++j)
    for (int r = 0; r < R; ++r) {
      float total = 0.0f;
      for (int o = 0; o < n; ++o)
        total +=
            d[static_cast<std::size_t>(r) * ldd + o] * w[static_cast<std::size_t>(o) * ldw + j];
      c[static_cast<std::size_t>(r) * ldc + j] = total;
    }
}

using TimesKernel = void (*)(const float*, int, const float*, int, int, int, float*, int);
template <std::size_t... R>
constexpr std::array<TimesKernel, sizeof...(R)> times_kernels(std::index_sequence<R...>) {
  return {&times<static_cast<int>(R) + 1>...};
}
}  // namespace

void small_rows_times(const float* d, int ldd, int rows, const float* w, int ldw, int n, int k,
                      float* c, int ldc) {
  // One kernel per row count, so that its R accumulators live in registers.
  static constexpr auto kernels = times_kernels(std::make_index_sequence<kSmallRows>{});
  if (rows < 1 || rows > kSmallRows)
    throw std::invalid_argument("small-row kernels take 1 to 16 rows");
  kernels[static_cast<std::size_t>(rows - 1)](d, ldd, w, ldw, n, k, c, ldc);
}

// For output position (oy, ox) and kernel row ky, the kernel columns kx in [first, last) fall
// inside the image: they read one contiguous run of (last - first) C values (channels-last).
namespace {
struct PatchRow {
  int first, last;
};
inline PatchRow inside_columns(const ConvGeometry& g, int ox) {
  const int x0 = ox - g.pad;
  return {std::max(0, -x0), std::min(g.kernel, g.width - x0)};
}

// Runs of a few hundred bytes: 64-byte block moves the compiler inlines, instead of a library call
// per run (which cost as much as the copy itself in im2col).
template <class T>
inline void copy_run(T* __restrict out, const T* __restrict in, int n) {
  constexpr int kBlock = 64 / sizeof(T);
  int j = 0;
  for (; j + kBlock <= n; j += kBlock) std::memcpy(out + j, in + j, 64);
  for (; j < n; ++j) out[j] = in[j];
}
template <class T>
inline void zero_run(T* out, int n) {
  constexpr int kBlock = 64 / sizeof(T);
  const T zeros[kBlock] = {};
  int j = 0;
  for (; j + kBlock <= n; j += kBlock) std::memcpy(out + j, zeros, 64);
  for (; j < n; ++j) out[j] = T(0);
}
}  // namespace

template <class T>
void im2col(const T* x, int batch, const ConvGeometry& g, T* col) {
  const int C = g.channels, k = g.kernel, patch = g.patch();
  const int oh = g.out_height(), ow = g.out_width();
  const std::size_t image = g.input_size();
  for (int b = 0; b < batch; ++b) {
    const T* xb = x + b * image;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        T* row = col + ((std::size_t(b) * oh + oy) * ow + ox) * patch;
        const PatchRow inside = inside_columns(g, ox);
        for (int ky = 0; ky < k; ++ky) {
          T* out = row + ky * k * C;
          const int iy = oy + ky - g.pad;
          if (iy < 0 || iy >= g.height || inside.first >= inside.last) {
            zero_run(out, k * C);
            continue;
          }
          zero_run(out, inside.first * C);
          const T* source = xb + (std::size_t(iy) * g.width + (ox - g.pad + inside.first)) * C;
          copy_run(out + inside.first * C, source, (inside.last - inside.first) * C);
          zero_run(out + inside.last * C, (k - inside.last) * C);
        }
      }
  }
}

template <class T>
void col2im(const T* col, int batch, const ConvGeometry& g, T* dx) {
  const int C = g.channels, k = g.kernel, patch = g.patch();
  const int oh = g.out_height(), ow = g.out_width();
  const std::size_t image = g.input_size();
  std::fill(dx, dx + batch * image, T(0));
  for (int b = 0; b < batch; ++b) {
    T* db = dx + b * image;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        const T* row = col + ((std::size_t(b) * oh + oy) * ow + ox) * patch;
        const PatchRow inside = inside_columns(g, ox);
        for (int ky = 0; ky < k; ++ky) {
          const int iy = oy + ky - g.pad;
          if (iy < 0 || iy >= g.height) continue;
          const T* __restrict in = row + (ky * k + inside.first) * C;
          T* __restrict target = db + (std::size_t(iy) * g.width + (ox - g.pad + inside.first)) * C;
          const int n = (inside.last - inside.first) * C;
          for (int j = 0; j < n; ++j) target[j] += in[j];
        }
      }
  }
}

template <class T>
void max_pool(const T* x, int batch, int height, int width, int channels, T* y,
              std::int32_t* argmax) {
  const int oh = height / 2, ow = width / 2, C = channels;
  const std::size_t image = std::size_t(height) * width * C, pooled = std::size_t(oh) * ow * C;
  for (int b = 0; b < batch; ++b) {
    const T* xb = x + b * image;
    T* yb = y + b * pooled;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        const std::size_t c00 = (std::size_t(2 * oy) * width + 2 * ox) * C;
        const T* __restrict p00 = xb + c00;
        const T* __restrict p01 = p00 + C;
        const T* __restrict p10 = p00 + std::size_t(width) * C;
        const T* __restrict p11 = p10 + C;
        T* __restrict out = yb + (std::size_t(oy) * ow + ox) * C;
        if (!argmax) {  // evaluation: the maxima only, vectorized over the channels
          for (int c = 0; c < C; ++c) {
            const T top = p00[c] > p01[c] ? p00[c] : p01[c];
            const T bottom = p10[c] > p11[c] ? p10[c] : p11[c];
            out[c] = top > bottom ? top : bottom;
          }
          continue;
        }
        // The first maximal of (0,0), (0,1), (1,0), (1,1): a later corner wins only when larger.
        std::int32_t* __restrict index = argmax + b * pooled + (std::size_t(oy) * ow + ox) * C;
        const auto i00 = static_cast<std::int32_t>(c00);
        const auto i01 = static_cast<std::int32_t>(c00 + C);
        const auto i10 = static_cast<std::int32_t>(c00 + std::size_t(width) * C);
        const auto i11 = static_cast<std::int32_t>(i10 + C);
        for (int c = 0; c < C; ++c) {
          T best = p00[c];
          std::int32_t at = i00 + c;
          if (p01[c] > best) best = p01[c], at = i01 + c;
          if (p10[c] > best) best = p10[c], at = i10 + c;
          if (p11[c] > best) best = p11[c], at = i11 + c;
          out[c] = best;
          index[c] = at;
        }
      }
  }
}

template <class T>
void max_pool_adjoint(const T* dy, const std::int32_t* argmax, int batch, std::size_t output_size,
                      std::size_t input_size, T* dx) {
  std::fill(dx, dx + batch * input_size, T(0));
  for (int b = 0; b < batch; ++b) {
    const T* d = dy + b * output_size;
    const std::int32_t* index = argmax + b * output_size;
    T* target = dx + b * input_size;
    for (std::size_t j = 0; j < output_size; ++j) target[index[j]] += d[j];
  }
}

template <class T>
void add_bias(T* y, std::size_t rows, int n, const T* bias) {
  for (std::size_t r = 0; r < rows; ++r) {
    T* row = y + r * n;
    for (int j = 0; j < n; ++j) row[j] += bias[j];
  }
}

template <class T>
void add_column_sums(const T* d, std::size_t rows, int n, T alpha, T beta, T* out) {
  // Sums per column in row order, in blocks of columns kept in a small local array so that the
  // compiler vectorizes across columns (each column's additions keep their order).
  constexpr int kBlock = 64;
  for (int j0 = 0; j0 < n; j0 += kBlock) {
    const int width = std::min(kBlock, n - j0);
    T sum[kBlock] = {};
    for (std::size_t r = 0; r < rows; ++r) {
      const T* row = d + r * n + j0;
      for (int j = 0; j < width; ++j) sum[j] += row[j];
    }
    for (int j = 0; j < width; ++j)
      out[j0 + j] = (beta == T(0) ? T(0) : beta * out[j0 + j]) + alpha * sum[j];
  }
}

#define FLUENCE_LAYER_KERNELS(T)                                                               \
  template void im2col(const T*, int, const ConvGeometry&, T*);                                \
  template void col2im(const T*, int, const ConvGeometry&, T*);                                \
  template void max_pool(const T*, int, int, int, int, T*, std::int32_t*);                     \
  template void max_pool_adjoint(const T*, const std::int32_t*, int, std::size_t, std::size_t, \
                                 T*);                                                          \
  template void add_bias(T*, std::size_t, int, const T*);                                      \
  template void add_column_sums(const T*, std::size_t, int, T, T, T*);
FLUENCE_LAYER_KERNELS(float)
FLUENCE_LAYER_KERNELS(double)
#undef FLUENCE_LAYER_KERNELS

}  // namespace fluence
