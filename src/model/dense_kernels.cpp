#include "fluence/model/dense_kernels.hpp"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "fluence/core/error.hpp"
#include "fluence/core/lanes.hpp"

namespace fluence {

namespace {

using lanes::Lanes;
using lanes::load;
using lanes::store;

using lanes::lane_sum;  // a dot product's eight partial sums, reduced (the tail columns are a
                        // zero-padded last group, added lane-wise like the others)

using Index = long long __attribute__((vector_size(64)));

// lane_sum of eight vectors at once, out[i] = lane_sum(s[i]) bit for bit: the same tree of adds,
// ((0+4) + (2+6)) + ((1+5) + (3+7)), each level adding the same pairs (floating-point addition is
// commutative), done lane-parallel with shuffles: 7 vector adds instead of 56 scalar ones and the
// extracts.
inline void lane_sum8(const Lanes* s, double* out) {
  // Level 1, lanes i and i + 4 of each vector: u[k] = [a04, a15, a26, a37, b04, b15, b26, b37] for
  // (a, b) = (s[2k], s[2k + 1]).
  Lanes u[4];
  for (int k = 0; k < 4; ++k)
    u[k] = __builtin_shuffle(s[2 * k], s[2 * k + 1], Index{0, 1, 2, 3, 8, 9, 10, 11}) +
           __builtin_shuffle(s[2 * k], s[2 * k + 1], Index{4, 5, 6, 7, 12, 13, 14, 15});
  // Level 2, a04 + a26 and a15 + a37: w[m] = [a0426, a1537, c0426, c1537, b0426, b1537, d0426,
  // d1537] for the four vectors (a, b, c, d) = s[4m .. 4m + 3].
  Lanes w[2];
  for (int m = 0; m < 2; ++m)
    w[m] = __builtin_shuffle(u[2 * m], u[2 * m + 1], Index{0, 1, 8, 9, 4, 5, 12, 13}) +
           __builtin_shuffle(u[2 * m], u[2 * m + 1], Index{2, 3, 10, 11, 6, 7, 14, 15});
  // Level 3, the two halves: sums of s[0], s[2], s[1], s[3], s[4], s[6], s[5], s[7].
  const Lanes total = __builtin_shuffle(w[0], w[1], Index{0, 2, 4, 6, 8, 10, 12, 14}) +
                      __builtin_shuffle(w[0], w[1], Index{1, 3, 5, 7, 9, 11, 13, 15});
  store(out, __builtin_shuffle(total, Index{0, 2, 1, 3, 4, 6, 5, 7}));
}

// R rows x C classes of logits: R * C partial-sum registers, one load of each x element.
template <int C, int R>
void logits_tile(const double* x, int D, const double* theta, double* z) {
  Lanes acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = Lanes{};
  const int whole = D - D % lanes::kLanes, tail = D - whole;
  for (int j = 0; j < whole; j += lanes::kLanes) {
    Lanes t[C];
    for (int c = 0; c < C; ++c) t[c] = load(theta + c * D + j);
    for (int r = 0; r < R; ++r) {
      const Lanes xv = load(x + r * D + j);
      for (int c = 0; c < C; ++c) acc[r][c] += xv * t[c];
    }
  }
  if (tail > 0) {
    Lanes t[C];
    for (int c = 0; c < C; ++c) t[c] = lanes::load_first(theta + c * D + whole, tail);
    for (int r = 0; r < R; ++r) {
      const Lanes xv = lanes::load_first(x + r * D + whole, tail);
      for (int c = 0; c < C; ++c) acc[r][c] += xv * t[c];
    }
  }
  // The logits of the tile are contiguous in z, in the accumulators' order.
  const Lanes* sums = &acc[0][0];
  int k = 0;
  for (; k + lanes::kLanes <= R * C; k += lanes::kLanes) lane_sum8(sums + k, z + k);
  for (; k < R * C; ++k) z[k] = lane_sum(sums[k]);
}

// Rows per tile: at most 20 accumulators, preferably a multiple of 8 for lane_sum8.
constexpr int tile_rows(int C) {
  const int most = std::max(1, std::min(8, 20 / C));
  for (int R = most; R > 1; --R)
    if (R * C % lanes::kLanes == 0) return R;
  return most;
}

// Tiles of R rows (R * C <= 20 of the 32 vector registers hold partial sums), then single rows.
template <int C>
void logits_rows(const double* x, std::size_t rows, int D, const double* theta, double* z) {
  constexpr int R = tile_rows(C);
  std::size_t r = 0;
  for (; r + R <= rows; r += R) logits_tile<C, R>(x + r * D, D, theta, z + r * C);
  for (; r < rows; ++r) logits_tile<C, 1>(x + r * D, D, theta, z + r * C);
}

// out[c][j .. j + 8 J) += sum_r w[r][c] x[r][j .. j + 8 J): C x J registers of accumulators
// updated by every row in ascending order (one multiply-add per element and row, as an axpy).
template <int C, int J>
void outer_strip(const double* w, const double* x, std::size_t rows, int D, int j, double* out) {
  Lanes acc[C][J];
  for (int c = 0; c < C; ++c)
    for (int q = 0; q < J; ++q) acc[c][q] = load(out + c * D + j + q * lanes::kLanes);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* xr = x + r * D + j;
    Lanes xv[J];
    for (int q = 0; q < J; ++q) xv[q] = load(xr + q * lanes::kLanes);
    for (int c = 0; c < C; ++c) {
      const double weight = w[r * C + c];
      for (int q = 0; q < J; ++q) acc[c][q] += weight * xv[q];
    }
  }
  for (int c = 0; c < C; ++c)
    for (int q = 0; q < J; ++q) store(out + c * D + j + q * lanes::kLanes, acc[c][q]);
}

// outer_strip for the last n < 8 columns from j, in masked lanes.
template <int C>
void outer_tail(const double* w, const double* x, std::size_t rows, int D, int j, int n,
                double* out) {
  Lanes acc[C];
  for (int c = 0; c < C; ++c) acc[c] = lanes::load_first(out + c * D + j, n);
  for (std::size_t r = 0; r < rows; ++r) {
    const Lanes xv = lanes::load_first(x + r * D + j, n);
    for (int c = 0; c < C; ++c) acc[c] += w[r * C + c] * xv;
  }
  for (int c = 0; c < C; ++c) lanes::store_first(out + c * D + j, acc[c], n);
}

template <int C>
void outer_update(const double* w, const double* x, std::size_t rows, int D, double* out) {
  constexpr int kStrip = std::max(1, std::min(4, 20 / C));  // C * kStrip <= 20 accumulators
  int j = 0;
  for (; j + kStrip * lanes::kLanes <= D; j += kStrip * lanes::kLanes)
    outer_strip<C, kStrip>(w, x, rows, D, j, out);
  for (; j + lanes::kLanes <= D; j += lanes::kLanes) outer_strip<C, 1>(w, x, rows, D, j, out);
  if (j < D) outer_tail<C>(w, x, rows, D, j, D - j, out);
}

// Calls kernel.template operator()<C>() for the runtime C, instantiated for 2..kDenseMaxClasses.
template <class Kernel, int... K>
void with_classes(int C, Kernel&& kernel, std::integer_sequence<int, K...>) {
  const bool found = ((C == K + 2 ? (kernel.template operator()<K + 2>(), true) : false) || ...);
  if (!found)
    throw RuntimeError(
        fmt::format("dense kernels: {} classes, outside 2..{}", C, kDenseMaxClasses));
}

constexpr auto kClassRange = std::make_integer_sequence<int, kDenseMaxClasses - 1>{};

}  // namespace

void dense_logits(const double* x, std::size_t rows, int D, int C, const double* theta, double* z) {
  with_classes(
      C, [&]<int K>() { logits_rows<K>(x, rows, D, theta, z); }, kClassRange);
}

void dense_outer_update(const double* w, const double* x, std::size_t rows, int D, int C,
                        double* out) {
  with_classes(
      C, [&]<int K>() { outer_update<K>(w, x, rows, D, out); }, kClassRange);
}

double lanes_dot(const double* a, const double* b, int n) {
  Lanes s{};
  const int whole = n - n % lanes::kLanes;
  for (int j = 0; j < whole; j += lanes::kLanes) s += load(a + j) * load(b + j);
  if (whole < n)
    s += lanes::load_first(a + whole, n - whole) * lanes::load_first(b + whole, n - whole);
  return lane_sum(s);
}

void row_logits(const double* x, std::size_t rows, int D, int C, const double* theta, double* z) {
  if (C >= 2 && C <= kDenseMaxClasses) return dense_logits(x, rows, D, C, theta, z);
  if (C > 1 && rows * C * static_cast<std::size_t>(D) >= kBlasWork) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), C, D, 1.0, x, D,
                theta, D, 0.0, z, C);
    return;
  }
  for (std::size_t r = 0; r < rows; ++r)
    for (int c = 0; c < C; ++c) z[r * C + c] = lanes_dot(x + r * D, theta + c * D, D);
}

void add_outer(const double* w, const double* x, std::size_t rows, int D, int C, double* out) {
  if (C >= 2 && C <= kDenseMaxClasses) return dense_outer_update(w, x, rows, D, C, out);
  if (rows == 0) return;
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, D, static_cast<int>(rows), 1.0, w, C, x,
              D, 1.0, out, D);
}

}  // namespace fluence
