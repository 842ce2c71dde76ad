// Winograd convolutions F(4 x 4, 3 x 3) and F(2 x 2, 5 x 5) (winograd.hpp; docs/math.md §10).
//
// Layout. Tiles are numbered over the batch (image, tile row, tile column) and processed in blocks
// of a few dozen, so that a block's transformed inputs and products stay in the core's cache:
//   input[ξ][t][c]     B^T X B of tile t, channel c (ξ < 36 the transformed position),
//   filters[ξ][c][f]   G W G^T, one matrix per ξ (channels x padded filters),
//   products[ξ][t][f]  sum_c input[ξ][t][c] filters[ξ][c][f]: 36 matrix products,
// after which A^T (.) A of each tile's 36 products gives its m x m outputs. Channels and filters
// are padded to whole vectors (padding zero), so every transform runs on vectors of channels.
#include "fluence/model/winograd.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <utility>

namespace fluence {

namespace {

constexpr int kTile = 6;     // the input tile's side: m + r - 1
constexpr int kPoints = 36;  // transformed values per tile and channel

// Native vectors: their width and how many registers the kernels may keep accumulators in.
#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
constexpr int kRegisters = 32;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
constexpr int kRegisters = 16;
#else
constexpr int kVectorBytes = 16;
constexpr int kRegisters = 16;
#endif

template <class T>
struct NativeVector {
  typedef T type __attribute__((vector_size(kVectorBytes)));
};
template <class T>
using Vec = typename NativeVector<T>::type;
template <class T>
constexpr int kLanes = kVectorBytes / static_cast<int>(sizeof(T));

template <class T>
inline Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
inline void store(T* p, const Vec<T>& v) {
  std::memcpy(p, &v, sizeof v);
}
// The first n values (n <= lanes; the others 0), and its store.
template <class T>
inline Vec<T> load_first(const T* p, int n) {
  Vec<T> v{};
  std::memcpy(&v, p, std::size_t(n) * sizeof(T));
  return v;
}
template <class T>
inline void store_first(T* p, const Vec<T>& v, int n) {
  std::memcpy(p, &v, std::size_t(n) * sizeof(T));
}

int round_up(int n, int multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// ---- The transforms --------------------------------------------------------------------------

// B^T for the points 0, 1, -1, 2, -2, ∞ (Lavin & Gray 2016, F(4, 3)): the interpolation that maps
// the 6 products back to the coefficients of a 6-term linear convolution, transposed, with the
// diagonal scaling moved into G. It depends on the points only, so F(2, 5) uses it too.
constexpr int kInputTransform[6][6] = {
    {4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
    {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1},
};
// A^T: row i holds the points' i-th powers (the ∞ point contributes to the last row only).
constexpr int kOutputTransform4[4][6] = {
    {1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
constexpr int kOutputTransform2[2][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 1}};

template <std::size_t R, std::size_t C>
constexpr std::array<std::array<int, R>, C> transposed(const int (&m)[R][C]) {
  std::array<std::array<int, R>, C> t{};
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) t[j][i] = m[i][j];
  return t;
}
// A, for the filter gradient's transform of an m x m tile of output gradients.
constexpr auto kGradientTransform4 = transposed(kOutputTransform4);
constexpr auto kGradientTransform2 = transposed(kOutputTransform2);

// G (6 x r, row-major): the points' powers scaled by diag(1/4, -1/6, -1/6, 1/24, 1/24, 1), the
// factors that make B^T integral; the ∞ row picks the kernel's last coefficient.
std::array<double, kTile * 5> filter_transform(int r) {
  constexpr double points[5] = {0.0, 1.0, -1.0, 2.0, -2.0};
  constexpr double scale[5] = {1.0 / 4.0, -1.0 / 6.0, -1.0 / 6.0, 1.0 / 24.0, 1.0 / 24.0};
  std::array<double, kTile * 5> g{};
  for (int i = 0; i < 5; ++i) {
    double power = 1.0;
    for (int k = 0; k < r; ++k, power *= points[i]) g[i * r + k] = scale[i] * power;
  }
  g[5 * r + r - 1] = 1.0;
  return g;
}

// out[i] = sum_k M[i][k] in[k * stride] for a constant integer matrix M, term by term at compile
// time: zero coefficients vanish and ±1 become additions and subtractions.
template <int Coefficient, bool First, class T>
[[gnu::always_inline]] inline void add_term(Vec<T>& sum, const Vec<T>& x) {
  if constexpr (Coefficient == 0) {
    return;
  } else if constexpr (First) {
    if constexpr (Coefficient == 1)
      sum = x;
    else if constexpr (Coefficient == -1)
      sum = -x;
    else
      sum = x * static_cast<T>(Coefficient);
  } else if constexpr (Coefficient == 1) {
    sum += x;
  } else if constexpr (Coefficient == -1) {
    sum -= x;
  } else {
    sum += x * static_cast<T>(Coefficient);
  }
}

template <const auto& M, std::size_t I>
constexpr std::size_t first_nonzero() {
  std::size_t k = 0;
  while (M[I][k] == 0) ++k;
  return k;
}

template <const auto& M, std::size_t I, class T, std::size_t... K>
[[gnu::always_inline]] inline Vec<T> combine(const Vec<T>* in, std::size_t stride,
                                             std::index_sequence<K...>) {
  constexpr std::size_t first = first_nonzero<M, I>();
  Vec<T> sum;
  (add_term<M[I][K], K == first, T>(sum, in[K * stride]), ...);
  return sum;
}

template <const auto& M, class T, std::size_t... I>
[[gnu::always_inline]] inline void apply(const Vec<T>* in, std::size_t in_stride, Vec<T>* out,
                                         std::size_t out_stride, std::index_sequence<I...>) {
  constexpr std::size_t columns = std::size(M[0]);
  ((out[I * out_stride] = combine<M, I, T>(in, in_stride, std::make_index_sequence<columns>{})),
   ...);
}

// out (rows x rows) = M X M^T for X (columns x columns), M a constant rows x columns matrix.
template <const auto& M, class T>
[[gnu::always_inline]] inline void transform(const Vec<T>* x, Vec<T>* out) {
  constexpr std::size_t rows = std::size(M), columns = std::size(M[0]);
  Vec<T> half[rows * columns];
  for (std::size_t j = 0; j < columns; ++j)
    apply<M, T>(x + j, columns, half + j, columns, std::make_index_sequence<rows>{});
  for (std::size_t i = 0; i < rows; ++i)
    apply<M, T>(half + i * columns, 1, out + i * rows, 1, std::make_index_sequence<rows>{});
}

// The same for a matrix known at run time (the filters' transforms, once per call).
template <class T>
void transform(const double* m, int rows, int columns, const Vec<T>* x, Vec<T>* out) {
  Vec<T> half[kTile * kTile];
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < columns; ++j) {
      Vec<T> sum{};
      for (int k = 0; k < columns; ++k)
        sum += x[k * columns + j] * static_cast<T>(m[i * columns + k]);
      half[i * columns + j] = sum;
    }
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < rows; ++j) {
      Vec<T> sum{};
      for (int k = 0; k < columns; ++k)
        sum += half[i * columns + k] * static_cast<T>(m[j * columns + k]);
      out[i * rows + j] = sum;
    }
}

// ---- The products ----------------------------------------------------------------------------

// c (rows x columns) = [c +] a b with a(r, k) = a[r * a_row + k * a_step], b (k x columns)
// row-major, columns a whole number of vectors: an R x NV block of accumulators in registers,
// one broadcast of a and NV loads of b per R x NV multiply-adds.
constexpr int kRowBlock = 6;
constexpr int kVectorBlock = kRegisters >= 32 ? 4 : 2;

template <int R, int NV, class T>
void multiply_block(int k, const T* a, std::ptrdiff_t a_row, std::ptrdiff_t a_step, const T* b,
                    std::ptrdiff_t ldb, T* c, std::ptrdiff_t ldc, bool accumulate) {
  constexpr int L = kLanes<T>;
  Vec<T> sum[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) sum[r][j] = accumulate ? load(c + r * ldc + j * L) : Vec<T>{};
  for (int kk = 0; kk < k; ++kk) {
    Vec<T> row[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) row[j] = load(b + kk * ldb + j * L);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const T s = a[r * a_row + kk * a_step];
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) sum[r][j] += s * row[j];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) store(c + r * ldc + j * L, sum[r][j]);
}

template <class T>
using BlockKernel = void (*)(int, const T*, std::ptrdiff_t, std::ptrdiff_t, const T*,
                             std::ptrdiff_t, T*, std::ptrdiff_t, bool);

template <class T, int R, std::size_t... NV>
constexpr std::array<BlockKernel<T>, sizeof...(NV)> kernel_row(std::index_sequence<NV...>) {
  return {&multiply_block<R, static_cast<int>(NV) + 1, T>...};
}
template <class T, std::size_t... R>
constexpr auto kernel_table(std::index_sequence<R...>) {
  return std::array<std::array<BlockKernel<T>, kVectorBlock>, sizeof...(R)>{
      kernel_row<T, static_cast<int>(R) + 1>(std::make_index_sequence<kVectorBlock>{})...};
}

template <class T>
void multiply(int rows, int columns, int k, const T* a, std::ptrdiff_t a_row, std::ptrdiff_t a_step,
              const T* b, std::ptrdiff_t ldb, T* c, std::ptrdiff_t ldc, bool accumulate) {
  static constexpr auto kernels = kernel_table<T>(std::make_index_sequence<kRowBlock>{});
  constexpr int L = kLanes<T>;
  const int vectors = columns / L;
  for (int j0 = 0; j0 < vectors; j0 += kVectorBlock) {
    const int nv = std::min(kVectorBlock, vectors - j0);
    for (int r0 = 0; r0 < rows; r0 += kRowBlock) {
      const int nr = std::min(kRowBlock, rows - r0);
      kernels[nr - 1][nv - 1](k, a + r0 * a_row, a_row, a_step, b + j0 * L, ldb,
                              c + r0 * ldc + j0 * L, ldc, accumulate);
    }
  }
}

// ---- Tiles -----------------------------------------------------------------------------------

struct Tiling {
  int m = 0;  // output tile side
  int tiles_y = 0, tiles_x = 0, per_image = 0;
  int channels = 0, filters = 0;  // padded to whole vectors
  int block = 0;                  // tiles per block
  long total = 0;                 // tiles in the batch

  Tiling(const ConvGeometry& g, int batch, int lanes, std::size_t scalar) {
    m = kTile - g.kernel + 1;
    tiles_y = (g.out_height() + m - 1) / m;
    tiles_x = (g.out_width() + m - 1) / m;
    per_image = tiles_y * tiles_x;
    channels = round_up(g.channels, lanes);
    filters = round_up(g.filters, lanes);
    total = long(batch) * per_image;
    // About 256 KB of transformed inputs and products per block: they stay in the core's L2
    // cache between the transforms and the products.
    const std::size_t per_tile = kPoints * std::size_t(channels + filters) * scalar;
    const long fit = std::max<long>(kRowBlock, long((std::size_t(1) << 18) / per_tile));
    block = static_cast<int>(std::min<long>(fit / kRowBlock * kRowBlock, total));
  }
  std::size_t input_plane() const { return std::size_t(block) * channels; }
  std::size_t product_plane() const { return std::size_t(block) * filters; }

  struct Place {
    int image, y, x;  // the tile's image and its first output row and column
  };
  Place place(long t) const {
    const int image = static_cast<int>(t / per_image), within = static_cast<int>(t % per_image);
    return {image, within / tiles_x * m, within % tiles_x * m};
  }
};

template <class T>
void grow(std::vector<T>& buffer, std::size_t size) {
  if (buffer.size() < size) buffer.resize(size);
}

// input[ξ][i][c] = (B^T X B)[ξ] of tiles [t0, t0 + count): the 6 x 6 input patch of each (zero
// outside the image), a vector of channels at a time.
template <class T>
void transform_inputs(const T* x, const ConvGeometry& g, const Tiling& tiling, long t0, int count,
                      T* input) {
  constexpr int L = kLanes<T>;
  const std::size_t plane = tiling.input_plane();
  Vec<T> patch[kPoints], out[kPoints];
  for (int i = 0; i < count; ++i) {
    const Tiling::Place at = tiling.place(t0 + i);
    const T* image = x + at.image * g.input_size();
    const int y0 = at.y - g.pad, x0 = at.x - g.pad;
    for (int c0 = 0; c0 < g.channels; c0 += L) {
      const int n = std::min(L, g.channels - c0);
      for (int dy = 0; dy < kTile; ++dy)
        for (int dx = 0; dx < kTile; ++dx) {
          const int iy = y0 + dy, ix = x0 + dx;
          Vec<T>& value = patch[dy * kTile + dx];
          if (iy < 0 || iy >= g.height || ix < 0 || ix >= g.width) {
            value = Vec<T>{};
            continue;
          }
          const T* source = image + (std::size_t(iy) * g.width + ix) * g.channels + c0;
          value = n == L ? load(source) : load_first(source, n);
        }
      transform<kInputTransform, T>(patch, out);
      T* target = input + std::size_t(i) * tiling.channels + c0;
      for (int k = 0; k < kPoints; ++k) store(target + k * plane, out[k]);
    }
  }
}

// y's m x m outputs of tiles [t0, t0 + count) from their products: A^T (.) A, a vector of filters
// at a time; outputs past the last row or column are dropped.
template <const auto& AT, class T>
void transform_outputs(const T* products, const ConvGeometry& g, const Tiling& tiling, long t0,
                       int count, T* y) {
  constexpr int L = kLanes<T>, m = static_cast<int>(std::size(AT));
  const std::size_t plane = tiling.product_plane();
  const int oh = g.out_height(), ow = g.out_width(), F = g.filters;
  Vec<T> values[kPoints], out[m * m];
  for (int i = 0; i < count; ++i) {
    const Tiling::Place at = tiling.place(t0 + i);
    T* image = y + std::size_t(at.image) * oh * ow * F;
    for (int f0 = 0; f0 < F; f0 += L) {
      const int n = std::min(L, F - f0);
      const T* source = products + std::size_t(i) * tiling.filters + f0;
      for (int k = 0; k < kPoints; ++k) values[k] = load(source + k * plane);
      transform<AT, T>(values, out);
      for (int a = 0; a < m && at.y + a < oh; ++a)
        for (int b = 0; b < m && at.x + b < ow; ++b) {
          T* target = image + (std::size_t(at.y + a) * ow + at.x + b) * F + f0;
          if (n == L)
            store(target, out[a * m + b]);
          else
            store_first(target, out[a * m + b], n);
        }
    }
  }
}

// gradient[ξ][i][f] = (A dY A^T)[ξ] of the m x m output gradients of tiles [t0, t0 + count) (zero
// past the last row or column).
template <const auto& A, class T>
void transform_output_gradients(const T* dy, const ConvGeometry& g, const Tiling& tiling, long t0,
                                int count, T* gradient) {
  constexpr int L = kLanes<T>, m = static_cast<int>(std::size(A[0]));
  const std::size_t plane = tiling.product_plane();
  const int oh = g.out_height(), ow = g.out_width(), F = g.filters;
  Vec<T> values[m * m], out[kPoints];
  for (int i = 0; i < count; ++i) {
    const Tiling::Place at = tiling.place(t0 + i);
    const T* image = dy + std::size_t(at.image) * oh * ow * F;
    for (int f0 = 0; f0 < F; f0 += L) {
      const int n = std::min(L, F - f0);
      for (int a = 0; a < m; ++a)
        for (int b = 0; b < m; ++b) {
          Vec<T>& value = values[a * m + b];
          if (at.y + a >= oh || at.x + b >= ow) {
            value = Vec<T>{};
            continue;
          }
          const T* source = image + (std::size_t(at.y + a) * ow + at.x + b) * F + f0;
          value = n == L ? load(source) : load_first(source, n);
        }
      transform<A, T>(values, out);
      T* target = gradient + std::size_t(i) * tiling.filters + f0;
      for (int k = 0; k < kPoints; ++k) store(target + k * plane, out[k]);
    }
  }
}

// filters[ξ][c][f] = (G W_fc G^T)[ξ] (padded filters zero). `rotated`: the kernels of the adjoint
// convolution, W'_cf[ky][kx] = W_fc[r-1-ky][r-1-kx], as filters[ξ][f][c] (padded channels zero).
template <class T>
void transform_filters(const T* w, const ConvGeometry& g, bool rotated, std::vector<T>& out) {
  constexpr int L = kLanes<T>;
  const int r = g.kernel, C = g.channels, F = g.filters;
  const int rows = rotated ? F : C, used = rotated ? C : F, columns = round_up(used, L);
  grow(out, std::size_t(kPoints) * rows * columns);
  if (used < columns)  // the padding columns (every other entry is written below)
    for (std::size_t row = 0; row < std::size_t(kPoints) * rows; ++row)
      std::fill_n(out.data() + row * columns + used, columns - used, T(0));
  const auto G = filter_transform(r);
  Vec<T> kernel[25], transformed[kPoints];
  T lanes[L];
  for (int f = 0; f < F; ++f)
    for (int c0 = 0; c0 < C; c0 += L) {
      const int n = std::min(L, C - c0);
      for (int ky = 0; ky < r; ++ky)
        for (int kx = 0; kx < r; ++kx) {
          const int sy = rotated ? r - 1 - ky : ky, sx = rotated ? r - 1 - kx : kx;
          const T* source = w + ((std::size_t(f) * r + sy) * r + sx) * C + c0;
          kernel[ky * r + kx] = n == L ? load(source) : load_first(source, n);
        }
      transform<T>(G.data(), kTile, r, kernel, transformed);
      for (int k = 0; k < kPoints; ++k) {
        if (rotated) {  // a vector of channels is a row's run
          store(out.data() + (std::size_t(k) * rows + f) * columns + c0, transformed[k]);
          continue;
        }
        store(lanes, transformed[k]);
        for (int j = 0; j < n; ++j) out[(std::size_t(k) * rows + c0 + j) * columns + f] = lanes[j];
      }
    }
}

// y = the convolution of x by the transformed filters (36 x channels x padded filters), block by
// block of tiles: transform the inputs, 36 products, transform the outputs.
template <class T>
void convolve(const T* x, int batch, const ConvGeometry& g, const T* filters,
              WinogradScratch<T>& scratch, T* y) {
  const Tiling tiling(g, batch, kLanes<T>, sizeof(T));
  grow(scratch.input, kPoints * tiling.input_plane());
  grow(scratch.products, kPoints * tiling.product_plane());
  T* input = scratch.input.data();
  T* products = scratch.products.data();
  for (long t0 = 0; t0 < tiling.total; t0 += tiling.block) {
    const int count = static_cast<int>(std::min<long>(tiling.block, tiling.total - t0));
    transform_inputs(x, g, tiling, t0, count, input);
    for (int k = 0; k < kPoints; ++k)
      multiply(count, tiling.filters, g.channels, input + k * tiling.input_plane(), tiling.channels,
               1, filters + std::size_t(k) * g.channels * tiling.filters, tiling.filters,
               products + k * tiling.product_plane(), tiling.filters, false);
    if (g.kernel == 3)
      transform_outputs<kOutputTransform4>(products, g, tiling, t0, count, y);
    else
      transform_outputs<kOutputTransform2>(products, g, tiling, t0, count, y);
  }
}

}  // namespace

bool winograd_applies(const ConvGeometry& g) {
  return (g.kernel == 3 || g.kernel == 5) && g.pad >= 0 && g.pad < g.kernel && g.channels >= 8 &&
         g.filters >= 8 && g.out_height() >= 1 && g.out_width() >= 1;
}

template <class T>
void winograd_convolution(const T* x, int batch, const ConvGeometry& g, const T* w, T* y,
                          WinogradScratch<T>& scratch) {
  if (!winograd_applies(g))
    throw std::invalid_argument("no Winograd algorithm for this convolution");
  transform_filters(w, g, false, scratch.filters);
  convolve(x, batch, g, scratch.filters.data(), scratch, y);
}

template <class T>
void winograd_convolution_adjoint(const T* dy, int batch, const ConvGeometry& g, const T* w, T* dx,
                                  WinogradScratch<T>& scratch) {
  if (!winograd_applies(g))
    throw std::invalid_argument("no Winograd algorithm for this convolution");
  // The adjoint of a stride-1 correlation with padding p is the correlation of the output
  // gradient with the rotated kernels, channels swapped, padding r - 1 - p: its output is H x W.
  const ConvGeometry adjoint{g.out_height(), g.out_width(),        g.filters,
                             g.kernel,       g.kernel - 1 - g.pad, g.channels};
  transform_filters(w, g, true, scratch.filters);
  convolve(dy, batch, adjoint, scratch.filters.data(), scratch, dx);
}

template <class T>
void winograd_filter_gradient(const T* x, const T* dy, int batch, const ConvGeometry& g, T alpha,
                              T beta, T* target, WinogradScratch<T>& scratch) {
  if (!winograd_applies(g))
    throw std::invalid_argument("no Winograd algorithm for this convolution");
  constexpr int L = kLanes<T>;
  const Tiling tiling(g, batch, L, sizeof(T));
  const int C = g.channels, F = g.filters, r = g.kernel;
  const std::size_t sums = std::size_t(kPoints) * C * tiling.filters;
  grow(scratch.input, kPoints * tiling.input_plane());
  grow(scratch.products, kPoints * tiling.product_plane());
  grow(scratch.gradient, sums);
  T* input = scratch.input.data();
  T* output = scratch.products.data();
  T* gradient = scratch.gradient.data();
  // gradient[ξ][c][f] = sum over the tiles of input[ξ][t][c] output[ξ][t][f].
  for (long t0 = 0; t0 < tiling.total; t0 += tiling.block) {
    const int count = static_cast<int>(std::min<long>(tiling.block, tiling.total - t0));
    transform_inputs(x, g, tiling, t0, count, input);
    if (r == 3)
      transform_output_gradients<kGradientTransform4>(dy, g, tiling, t0, count, output);
    else
      transform_output_gradients<kGradientTransform2>(dy, g, tiling, t0, count, output);
    for (int k = 0; k < kPoints; ++k)
      multiply(C, tiling.filters, count, input + k * tiling.input_plane(), 1, tiling.channels,
               output + k * tiling.product_plane(), tiling.filters,
               gradient + std::size_t(k) * C * tiling.filters, tiling.filters, t0 > 0);
  }
  // dW_fc = G^T S_fc G, a vector of filters at a time, into the filters x (ky, kx, c) layout.
  const auto G = filter_transform(r);
  std::array<double, kTile * 5> GT{};
  for (int i = 0; i < kTile; ++i)
    for (int k = 0; k < r; ++k) GT[k * kTile + i] = G[i * r + k];
  Vec<T> sums_f[kPoints], kernel[25];
  T lanes[L];
  for (int c = 0; c < C; ++c)
    for (int f0 = 0; f0 < F; f0 += L) {
      const int n = std::min(L, F - f0);
      for (int k = 0; k < kPoints; ++k)
        sums_f[k] = load(gradient + (std::size_t(k) * C + c) * tiling.filters + f0);
      transform<T>(GT.data(), r, kTile, sums_f, kernel);
      for (int k = 0; k < r * r; ++k) {
        store(lanes, kernel[k]);
        for (int j = 0; j < n; ++j) {
          T& entry = target[(std::size_t(f0 + j) * r * r + k) * C + c];
          entry = (beta == T(0) ? T(0) : beta * entry) + alpha * lanes[j];
        }
      }
    }
}

#define FLUENCE_WINOGRAD(T)                                                                      \
  template void winograd_convolution(const T*, int, const ConvGeometry&, const T*, T*,           \
                                     WinogradScratch<T>&);                                       \
  template void winograd_convolution_adjoint(const T*, int, const ConvGeometry&, const T*, T*,   \
                                             WinogradScratch<T>&);                               \
  template void winograd_filter_gradient(const T*, const T*, int, const ConvGeometry&, T, T, T*, \
                                         WinogradScratch<T>&);
FLUENCE_WINOGRAD(float)
FLUENCE_WINOGRAD(double)
#undef FLUENCE_WINOGRAD

}  // namespace fluence
