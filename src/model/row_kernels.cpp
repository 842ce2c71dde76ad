// Arithmetic in GCC/Clang vector extensions (fluence/core/lanes.hpp); only the byte-to-double
// conversion needs intrinsics, since the generic conversion is scalarized.
#include "fluence/model/row_kernels.hpp"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "fluence/core/lanes.hpp"

namespace fluence {

namespace {

using lanes::exp_nonpositive;
using lanes::Int64Lanes;
using lanes::kLanes;
using lanes::Lanes;
using lanes::load;
using lanes::store;

// byte_logits keeps R x G accumulators in registers (4 x 5 = 20 of the 32 AVX-512 registers, the
// rest for the converted rows and a weight vector): a weight vector serves 4 rows, a converted
// row 5 classes.
constexpr int kLogitRows = 4;
constexpr int kLogitClasses = 5;
// Columns per pass of byte_logits: 5 classes x 256 columns of weights (10 KB) stay in L1 while
// every row of the batch passes, instead of the whole C x D matrix streaming from L2 per 4 rows.
constexpr int kSliceColumns = 256;
// Rows whose accumulators byte_logits parks between column slices (16 x 5 x 64 B = 5 KB).
constexpr int kParkedRows = 16;
// Classes byte_rank_update and block_logits hold at once (one or two registers each).
constexpr int kUpdateClasses = 10;
constexpr int kBlockClasses = 10;

// Eight codes as doubles (exact). The widening goes through 32-bit lanes in intrinsics: the
// compilers scalarize a direct byte-to-double conversion, or split it into 256-bit halves.
inline Lanes load_codes(const std::uint8_t* p) {
#if defined(__AVX512F__)
  const __m256i wide = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  // The zero-masked form with an all-ones mask is the plain conversion; the unmasked intrinsic
  // trips -Wmaybe-uninitialized inside GCC 12's own header.
  return reinterpret_cast<Lanes>(_mm512_maskz_cvtepi32_pd(static_cast<__mmask8>(0xFF), wide));
#elif defined(__AVX2__)
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m256d low = _mm256_cvtepi32_pd(_mm_cvtepu8_epi32(bytes));
  const __m256d high = _mm256_cvtepi32_pd(_mm_cvtepu8_epi32(_mm_srli_si128(bytes, 4)));
  Lanes v;
  std::memcpy(&v, &low, sizeof low);
  std::memcpy(reinterpret_cast<char*>(&v) + sizeof low, &high, sizeof high);
  return v;
#else
  Lanes v;
  for (int l = 0; l < kLanes; ++l) v[l] = p[l];
  return v;
#endif
}

// The same association for every row.
inline double lane_sum(const Lanes& v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

using FloatLanes = float __attribute__((vector_size(64)));
constexpr int kFloatLanes = 16;

// Sixteen codes as floats (exact).
inline FloatLanes load_codes_float(const std::uint8_t* p) {
#if defined(__AVX512F__)
  return reinterpret_cast<FloatLanes>(_mm512_maskz_cvtepi32_ps(
      static_cast<__mmask16>(0xFFFF),
      _mm512_maskz_cvtepu8_epi32(static_cast<__mmask16>(0xFFFF),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))));
#else
  FloatLanes v;
  for (int l = 0; l < kFloatLanes; ++l) v[l] = p[l];
  return v;
#endif
}

// The SGD kernels below are written once for double (the default) and float (local_precision =
// "single"): one 64-byte vector of W values, codes converted exactly, and a fixed lane reduction.
template <class T>
struct Simd;

template <>
struct Simd<double> {
  using V = Lanes;
  static constexpr int W = kLanes;
  static V codes(const std::uint8_t* p) { return load_codes(p); }
  static V load(const double* p) { return lanes::load(p); }
  static void store(double* p, const V& v) { lanes::store(p, v); }
  static double sum(const V& v) { return lane_sum(v); }
};

template <>
struct Simd<float> {
  using V = FloatLanes;
  static constexpr int W = kFloatLanes;
  static V codes(const std::uint8_t* p) { return load_codes_float(p); }
  static V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(float* p, const V& v) { std::memcpy(p, &v, sizeof v); }
  static float sum(const V& v) {
    const V h =
        v + __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    return ((h[0] + h[4]) + (h[1] + h[5])) + ((h[2] + h[6]) + (h[3] + h[7]));
  }
};

// Columns [begin, end) (whole 8-column blocks) of R rows x G classes, continuing the parked
// accumulators (R x G, row-major) unless `first`; w holds the slice's weights, class g at
// w + g * kSliceColumns.
template <class T, int R, int G>
void logits_slice(const std::uint8_t* const* x, int begin, int end, const T* w,
                  typename Simd<T>::V* parked, bool first) {
  using S = Simd<T>;
  using V = typename S::V;
  V acc[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = first ? V{} : parked[r * G + g];
  for (int j = begin; j < end; j += S::W) {
    V xv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) xv[r] = S::codes(x[r] + j);
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const V wv = S::load(w + g * kSliceColumns + (j - begin));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][g] += xv[r] * wv;
    }
  }
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) parked[r * G + g] = acc[r][g];
}

template <class T, int G>
void logits_slice_rows(const std::uint8_t* const* x, int rows, int begin, int end, const T* w,
                       typename Simd<T>::V* parked, bool first) {
  int r = 0;
  for (; r + kLogitRows <= rows; r += kLogitRows)
    logits_slice<T, kLogitRows, G>(x + r, begin, end, w, parked + r * G, first);
  switch (rows - r) {
    case 1:
      logits_slice<T, 1, G>(x + r, begin, end, w, parked + r * G, first);
      break;
    case 2:
      logits_slice<T, 2, G>(x + r, begin, end, w, parked + r * G, first);
      break;
    case 3:
      logits_slice<T, 3, G>(x + r, begin, end, w, parked + r * G, first);
      break;
    default:
      break;
  }
}

// Up to kParkedRows rows x G classes (theta, bias and z offset to the group's first class). Each
// slice of the weights theta * step is formed just before use, in L1: the whole C x D product,
// written once per batch, would cost about as much as a tenth of the batch's arithmetic in
// write-backs to L2. With `find_bias`, the same pass over theta computes the bias as byte_bias
// does (same association); otherwise `bias` holds it.
template <class T, int G>
void logits_group(const std::uint8_t* const* x, int rows, int D, const T* theta, const T* step,
                  const T* offset, bool find_bias, T* bias, int C, T* z) {
  using S = Simd<T>;
  using V = typename S::V;
  V parked[kParkedRows * G];
  V partial[G] = {};
  alignas(64) T slice[G * kSliceColumns];
  const int whole = D / S::W * S::W;
  for (int begin = 0; begin < whole; begin += kSliceColumns) {
    const int end = std::min(whole, begin + kSliceColumns);
    for (int g = 0; g < G; ++g) {
      const T* tg = theta + static_cast<std::ptrdiff_t>(g) * D;
      for (int j = begin; j < end; j += S::W) {
        const V t = S::load(tg + j);
        S::store(slice + g * kSliceColumns + (j - begin), t * S::load(step + j));
        if (find_bias) partial[g] += t * S::load(offset + j);
      }
    }
    logits_slice_rows<T, G>(x, rows, begin, end, slice, parked, begin == 0);
  }
  if (whole == 0) std::fill(parked, parked + rows * G, V{});
  if (find_bias)
    for (int g = 0; g < G; ++g) {
      const T* tg = theta + static_cast<std::ptrdiff_t>(g) * D;
      T sum = S::sum(partial[g]);
      for (int j = whole; j < D; ++j) sum += tg[j] * offset[j];
      bias[g] = sum;
    }
  for (int r = 0; r < rows; ++r)
    for (int g = 0; g < G; ++g) {
      const T* tg = theta + static_cast<std::ptrdiff_t>(g) * D;
      T sum = S::sum(parked[r * G + g]);
      for (int j = whole; j < D; ++j) sum += static_cast<T>(x[r][j]) * (tg[j] * step[j]);
      z[static_cast<std::ptrdiff_t>(r) * C + g] = bias[g] + sum;
    }
}

// G classes of theta (offset to the group) over all rows: the G running sums of one 8-column
// block stay in registers while the rows stream past, each converted row used G times. With
// `folded`, the new theta is also folded as fold_classes does (the same products and partial
// sums in the same order, so the same bits), while it is in registers: the next batch's logits
// need no pass of their own over theta.
template <class T, int G>
void update_group(const std::uint8_t* const* x, std::size_t rows, int D, const T* a, int C,
                  T shrink, const T* step, const T* offset, const T* sums, const T* source,
                  T* theta, T* folded, double* bias) {
  using S = Simd<T>;
  using V = typename S::V;
  const int whole = D / S::W * S::W;
  V partial[G] = {};
  for (int j = 0; j < whole; j += S::W) {
    V t[G] = {};
    for (std::size_t b = 0; b < rows; ++b) {
      const V xv = S::codes(x[b] + j);
      const T* ab = a + b * C;
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) t[g] += ab[g] * xv;
    }
    const V sv = S::load(step + j), ov = S::load(offset + j);
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(g) * D + j;
      T* target = theta + at;
      V v = shrink * S::load(source + at);
      v += ov * sums[g];
      v += sv * t[g];
      S::store(target, v);
      if (folded) {
        S::store(folded + at, v * sv);
        partial[g] += v * ov;
      }
    }
  }
  for (int j = whole; j < D; ++j)
    for (int g = 0; g < G; ++g) {
      T t = 0;
      for (std::size_t b = 0; b < rows; ++b) t += a[b * C + g] * static_cast<T>(x[b][j]);
      T& target = theta[static_cast<std::ptrdiff_t>(g) * D + j];
      T v = shrink * source[static_cast<std::ptrdiff_t>(g) * D + j];
      v += offset[j] * sums[g];
      v += step[j] * t;
      target = v;
    }
  if (!folded) return;
  for (int g = 0; g < G; ++g) {
    T sum = S::sum(partial[g]);
    for (int j = whole; j < D; ++j) {
      const T v = theta[static_cast<std::ptrdiff_t>(g) * D + j];
      folded[static_cast<std::ptrdiff_t>(g) * D + j] = v * step[j];
      sum += v * offset[j];
    }
    bias[g] = sum;
  }
}

// The 16 rows (two lane vectors) x G classes of one block, wt/bias/z offset to the group: each
// row's sum one chain over ascending j.
template <int G>
void block_group(const std::uint8_t* block, int D, const double* wt, const double* bias, int C,
                 double* z) {
  Lanes acc[G][2] = {};
  for (int j = 0; j < D; ++j) {
    const Lanes x0 = load_codes(block + j * kCodeBlockRows);
    const Lanes x1 = load_codes(block + j * kCodeBlockRows + kLanes);
    const double* w = wt + static_cast<std::ptrdiff_t>(j) * C;
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      acc[g][0] += w[g] * x0;
      acc[g][1] += w[g] * x1;
    }
  }
  for (int g = 0; g < G; ++g) {
    store(z + g * kCodeBlockRows, bias[g] + acc[g][0]);
    store(z + g * kCodeBlockRows + kLanes, bias[g] + acc[g][1]);
  }
}

// Columns a float partial sum runs over before it is added to the double sums.
constexpr int kFloatColumns = 64;

// The 16 lanes of a float vector added to two 8-lane double vectors.
inline void add_widened(const FloatLanes& v, Lanes& low, Lanes& high) {
#if defined(__AVX512DQ__)
  // Whole-register conversions (the generic form below is split into 256-bit pieces); the masked
  // forms with all-ones masks avoid -Wmaybe-uninitialized inside GCC 12's own header.
  const __m256 first =
      reinterpret_cast<__m256>(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7));
  const __m256 second =
      _mm512_maskz_extractf32x8_ps(static_cast<__mmask8>(0xFF), reinterpret_cast<__m512>(v), 1);
  low += reinterpret_cast<Lanes>(_mm512_maskz_cvtps_pd(static_cast<__mmask8>(0xFF), first));
  high += reinterpret_cast<Lanes>(_mm512_maskz_cvtps_pd(static_cast<__mmask8>(0xFF), second));
#else
  using Float8 = float __attribute__((vector_size(32)));
  const Float8 first = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
  const Float8 second = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  low += __builtin_convertvector(first, Lanes);
  high += __builtin_convertvector(second, Lanes);
#endif
}

// block_group with float weights: one 16-lane float vector per class, added to the double sums
// after every kFloatColumns columns. The weight of class g and column j is
// w[j * column_stride + g * class_stride]: (C, 1) for the transposed fold_transposed layout,
// (1, D) for theta's own class-major layout (fold_classes).
template <int G>
void block_group_float(const std::uint8_t* block, int D, const float* w,
                       std::ptrdiff_t column_stride, std::ptrdiff_t class_stride,
                       const double* bias, double* z) {
  Lanes sum[G][2] = {};
  for (int begin = 0; begin < D; begin += kFloatColumns) {
    const int end = std::min(D, begin + kFloatColumns);
    FloatLanes acc[G] = {};
    for (int j = begin; j < end; ++j) {
      const FloatLanes x = load_codes_float(block + j * kCodeBlockRows);
      const float* wj = w + j * column_stride;
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) acc[g] += wj[g * class_stride] * x;
    }
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) add_widened(acc[g], sum[g][0], sum[g][1]);
  }
  for (int g = 0; g < G; ++g) {
    store(z + g * kCodeBlockRows, bias[g] + sum[g][0]);
    store(z + g * kCodeBlockRows + kLanes, bias[g] + sum[g][1]);
  }
}

// Calls body.template operator()<G>() for the compile-time G equal to g (1 <= g <= N).
template <class Body, int... G>
void with_group(int g, Body&& body, std::integer_sequence<int, G...>) {
  ((g == G + 1 ? body.template operator()<G + 1>() : void()), ...);
}

}  // namespace

void block_loss(const double* z, int C, const std::int32_t* labels, int rows, double& loss_sum,
                long& correct) {
  alignas(64) double row_loss[kCodeBlockRows];
  alignas(64) std::int64_t best[kCodeBlockRows];
  for (int h = 0; h < 2; ++h) {
    const double* zh = z + h * kLanes;
    Lanes top = load(zh);
    for (int c = 1; c < C; ++c) {
      const Lanes v = load(zh + c * kCodeBlockRows);
      top = v > top ? v : top;
    }
    Lanes total{};
    for (int c = 0; c < C; ++c) total += exp_nonpositive(load(zh + c * kCodeBlockRows) - top);
    // The first maximal logit, as std::max_element: scanning down, the lowest equal class stays
    // (a NaN row matches none and keeps the last class, as the scalar search did).
    Int64Lanes first = Int64Lanes{} + (C - 1);
    for (int c = C - 2; c >= 0; --c)
      first = load(zh + c * kCodeBlockRows) == top ? Int64Lanes{} + c : first;
    Lanes label_logit;
    for (int l = 0; l < kLanes; ++l) {
      const int r = h * kLanes + l;
      label_logit[l] = zh[(r < rows ? labels[r] : 0) * kCodeBlockRows + l];
    }
    // total >= 1 (the top class adds e^0); a row's loss is (top + ln total) - z_label.
    store(row_loss + h * kLanes, (top + lanes::log_positive(total)) - label_logit);
    std::memcpy(best + h * kLanes, &first, sizeof first);
  }
  double sum = loss_sum;  // in row order
  long count = correct;
  for (int r = 0; r < rows; ++r) {
    sum += row_loss[r];
    count += best[r] == labels[r];
  }
  loss_sum = sum;
  correct = count;
}

void byte_bias(const double* theta, int C, int D, const double* offset, double* bias) {
  const int whole = D / kLanes * kLanes;
  for (int c0 = 0; c0 < C; c0 += kUpdateClasses) {
    const int n = std::min(kUpdateClasses, C - c0);
    // Eight partial sums per class, the classes interleaved: one running sum per class would be a
    // chain of D dependent additions.
    Lanes partial[kUpdateClasses] = {};
    for (int j = 0; j < whole; j += kLanes) {
      const Lanes ov = load(offset + j);
      for (int g = 0; g < n; ++g)
        partial[g] += load(theta + static_cast<std::ptrdiff_t>(c0 + g) * D + j) * ov;
    }
    for (int g = 0; g < n; ++g) {
      const double* tc = theta + static_cast<std::ptrdiff_t>(c0 + g) * D;
      double sum = lane_sum(partial[g]);
      for (int j = whole; j < D; ++j) sum += tc[j] * offset[j];
      bias[c0 + g] = sum;
    }
  }
}

void fold_transposed(const double* theta, int C, int D, const double* step, double* wt) {
  for (int c = 0; c < C; ++c)
    for (int j = 0; j < D; ++j)
      wt[static_cast<std::ptrdiff_t>(j) * C + c] =
          theta[static_cast<std::ptrdiff_t>(c) * D + j] * step[j];
}

void fold_transposed(const double* theta, int C, int D, const double* step, float* wt) {
  for (int c = 0; c < C; ++c)
    for (int j = 0; j < D; ++j)
      wt[static_cast<std::ptrdiff_t>(j) * C + c] =
          static_cast<float>(theta[static_cast<std::ptrdiff_t>(c) * D + j] * step[j]);
}

namespace {

template <class T>
void byte_logits_of(const std::uint8_t* const* rows_k, std::size_t rows, int D, const T* theta,
                    const T* step, const T* offset, int C, T* bias, T* z) {
  for (std::size_t r = 0; r < rows; r += kParkedRows) {
    const int n = static_cast<int>(std::min<std::size_t>(kParkedRows, rows - r));
    for (int c = 0; c < C; c += kLogitClasses) {
      const T* tc = theta + static_cast<std::ptrdiff_t>(c) * D;
      T* zc = z + r * C + c;
      with_group(
          std::min(kLogitClasses, C - c),
          [&]<int G>() {
            logits_group<T, G>(rows_k + r, n, D, tc, step, offset, r == 0, bias + c, C, zc);
          },
          std::make_integer_sequence<int, kLogitClasses>());
    }
  }
}

template <class T>
void byte_rank_update_of(const std::uint8_t* const* rows_k, std::size_t rows, int D, const T* a,
                         int C, T shrink, const T* step, const T* offset, T* theta, const T* source,
                         T* folded = nullptr, double* bias = nullptr) {
  if (!source) source = theta;
  T sums[kUpdateClasses];
  for (int c = 0; c < C; c += kUpdateClasses) {
    const int n = std::min(kUpdateClasses, C - c);
    for (int g = 0; g < n; ++g) {
      sums[g] = 0;
      for (std::size_t b = 0; b < rows; ++b) sums[g] += a[b * C + c + g];
    }
    with_group(
        n,
        [&]<int G>() {
          update_group<T, G>(rows_k, rows, D, a + c, C, shrink, step, offset, sums,
                             source + static_cast<std::ptrdiff_t>(c) * D,
                             theta + static_cast<std::ptrdiff_t>(c) * D,
                             folded ? folded + static_cast<std::ptrdiff_t>(c) * D : nullptr,
                             bias ? bias + c : nullptr);
        },
        std::make_integer_sequence<int, kUpdateClasses>());
  }
}

}  // namespace

void byte_logits(const std::uint8_t* const* rows_k, std::size_t rows, int D, const double* theta,
                 const double* step, const double* offset, int C, double* bias, double* z) {
  byte_logits_of(rows_k, rows, D, theta, step, offset, C, bias, z);
}

void byte_rank_update(const std::uint8_t* const* rows_k, std::size_t rows, int D, const double* a,
                      int C, double shrink, const double* step, const double* offset, double* theta,
                      const double* source) {
  byte_rank_update_of(rows_k, rows, D, a, C, shrink, step, offset, theta, source);
}

void byte_rank_update(const std::uint8_t* const* rows_k, std::size_t rows, int D, const float* a,
                      int C, float shrink, const float* step, const float* offset, float* theta,
                      const float* source, float* folded, double* bias) {
  byte_rank_update_of(rows_k, rows, D, a, C, shrink, step, offset, theta, source, folded, bias);
}

void block_codes(const std::uint8_t* row_major, std::size_t rows, int D, std::uint8_t* blocked) {
  const std::size_t blocks = (rows + kCodeBlockRows - 1) / kCodeBlockRows;
  std::fill(blocked, blocked + blocks * kCodeBlockRows * D, 0);
  for (std::size_t r = 0; r < rows; ++r) {
    std::uint8_t* block = blocked + r / kCodeBlockRows * kCodeBlockRows * D;
    for (int j = 0; j < D; ++j)
      block[static_cast<std::size_t>(j) * kCodeBlockRows + r % kCodeBlockRows] =
          row_major[r * D + j];
  }
}

void block_logits(const std::uint8_t* block, int D, const double* wt, const double* bias, int C,
                  double* z) {
  for (int c = 0; c < C; c += kBlockClasses)
    with_group(
        std::min(kBlockClasses, C - c),
        [&]<int G>() { block_group<G>(block, D, wt + c, bias + c, C, z + c * kCodeBlockRows); },
        std::make_integer_sequence<int, kBlockClasses>());
}

void block_logits(const std::uint8_t* block, int D, const float* wt, const double* bias, int C,
                  double* z) {
  for (int c = 0; c < C; c += kBlockClasses)
    with_group(
        std::min(kBlockClasses, C - c),
        [&]<int G>() {
          block_group_float<G>(block, D, wt + c, C, 1, bias + c, z + c * kCodeBlockRows);
        },
        std::make_integer_sequence<int, kBlockClasses>());
}

void block_logits_by_class(const std::uint8_t* block, int D, const float* w, const double* bias,
                           int C, double* z) {
  for (int c = 0; c < C; c += kBlockClasses)
    with_group(
        std::min(kBlockClasses, C - c),
        [&]<int G>() {
          block_group_float<G>(block, D, w + static_cast<std::ptrdiff_t>(c) * D, 1, D, bias + c,
                               z + c * kCodeBlockRows);
        },
        std::make_integer_sequence<int, kBlockClasses>());
}

void fold_classes(const float* theta, int C, int D, const float* step, const float* offset,
                  float* folded, double* bias) {
  using S = Simd<float>;
  using V = S::V;
  const int whole = D / S::W * S::W;
  for (int c = 0; c < C; ++c) {
    const float* tc = theta + static_cast<std::ptrdiff_t>(c) * D;
    float* fc = folded + static_cast<std::ptrdiff_t>(c) * D;
    V partial{};
    for (int j = 0; j < whole; j += S::W) {
      const V t = S::load(tc + j);
      S::store(fc + j, t * S::load(step + j));
      partial += t * S::load(offset + j);
    }
    float sum = S::sum(partial);
    for (int j = whole; j < D; ++j) {
      fc[j] = tc[j] * step[j];
      sum += tc[j] * offset[j];
    }
    bias[c] = sum;
  }
}

void block_rows(const std::uint8_t* const* rows_k, int rows, int D, std::uint8_t* block) {
#if defined(__AVX512VBMI__)
  // Sixteen columns at a time: the 16 rows' 16-byte pieces, four rows to a register (row r at
  // byte 16 (r % 4) of register r / 4), are permuted into four registers of four columns each
  // (column i's 16 rows at byte 16 i). Output byte 16 i + r of register m takes byte
  // 16 (r % 8) + 4 m + i of the register pair holding rows 0-7 (r < 8) or rows 8-15 (r >= 8).
  alignas(64) static const auto indices = [] {
    std::array<std::array<std::uint8_t, 64>, 4> index{};
    for (int m = 0; m < 4; ++m)
      for (int i = 0; i < 4; ++i)
        for (int r = 0; r < 16; ++r)
          index[m][16 * i + r] = static_cast<std::uint8_t>(16 * (r % 8) + 4 * m + i);
    return index;
  }();
  const __mmask64 upper_rows = 0xFF00FF00FF00FF00ULL;
  for (int j = 0; j < D; j += 16) {
    const int n = std::min(16, D - j);
    const auto columns = static_cast<__mmask16>(n == 16 ? 0xFFFF : (1u << n) - 1);
    auto piece = [&](int r) {
      return r < rows ? _mm_maskz_loadu_epi8(columns, rows_k[r] + j) : _mm_setzero_si128();
    };
    __m512i quads[4];
    for (int q = 0; q < 4; ++q)
      quads[q] = _mm512_inserti32x4(
          _mm512_inserti32x4(
              _mm512_inserti32x4(_mm512_castsi128_si512(piece(4 * q)), piece(4 * q + 1), 1),
              piece(4 * q + 2), 2),
          piece(4 * q + 3), 3);
    for (int m = 0; 4 * m < n; ++m) {
      const __m512i index = _mm512_load_si512(indices[m].data());
      const __m512i low = _mm512_permutex2var_epi8(quads[0], index, quads[1]);
      const __m512i high = _mm512_permutex2var_epi8(quads[2], index, quads[3]);
      const __m512i out = _mm512_mask_blend_epi8(upper_rows, low, high);
      const int bytes = std::min(4, n - 4 * m) * kCodeBlockRows;
      _mm512_mask_storeu_epi8(block + (j + 4 * m) * kCodeBlockRows,
                              bytes == 64 ? ~__mmask64{0} : (__mmask64{1} << bytes) - 1, out);
    }
  }
#else
  for (int j = 0; j < D; ++j)
    for (int r = 0; r < kCodeBlockRows; ++r)
      block[j * kCodeBlockRows + r] = r < rows ? rows_k[r][j] : std::uint8_t{0};
#endif
}

}  // namespace fluence
