#pragma once
// Eight double lanes in GCC/Clang vector extensions: one AVX-512 register, two AVX2 ones. Hot
// loops that reduce over a short axis keep one partial sum per lane and add the lanes in a fixed
// order at the end, so they vectorize without -ffast-math and give the same bits on every rank.
// The lane-wise multiply-adds contract to FMA where the target has it.
#include <cstddef>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

// Without AVX-512 (a build without FLUENCE_NATIVE) GCC notes that 64-byte vectors are passed
// differently; these helpers are internal and inlined, never an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace fluence::lanes {

using Lanes = double __attribute__((vector_size(64)));
constexpr int kLanes = 8;

inline Lanes load(const double* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store(double* p, const Lanes& v) {
  std::memcpy(p, &v, sizeof v);
}

// The first n < 8 values at p in the low lanes, zeros above (reads nothing past p + n).
inline Lanes load_first(const double* p, int n) {
#if defined(__AVX512F__)
  return reinterpret_cast<Lanes>(_mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << n) - 1), p));
#else
  double padded[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(padded, p, sizeof(double) * static_cast<std::size_t>(n));
  return load(padded);
#endif
}

// Stores the low n < 8 lanes at p (writes nothing past p + n).
inline void store_first(double* p, const Lanes& v, int n) {
#if defined(__AVX512F__)
  _mm512_mask_storeu_pd(p, static_cast<__mmask8>((1u << n) - 1), reinterpret_cast<__m512d>(v));
#else
  std::memcpy(p, &v, sizeof(double) * static_cast<std::size_t>(n));
#endif
}

// The lanes' sum as a fixed pairwise tree (the same bits for the same data, and three dependent
// adds instead of seven).
inline double lane_sum(const Lanes& v) {
  const double a = (v[0] + v[4]) + (v[2] + v[6]);
  const double b = (v[1] + v[5]) + (v[3] + v[7]);
  return a + b;
}

// 1 / d for positive normal d. With AVX-512: the 14-bit hardware estimate and two Newton steps
// (relative error below 2^-56, within one ulp of the division), four multiply-adds in place of a
// division whose throughput is 16 cycles per register; elsewhere the division.
inline Lanes reciprocal(const Lanes& d) {
#if defined(__AVX512F__)
  // The zero-masked form with an all-ones mask is the plain estimate; the unmasked intrinsic
  // trips -Wmaybe-uninitialized inside GCC 12's own header.
  Lanes x = reinterpret_cast<Lanes>(
      _mm512_maskz_rcp14_pd(static_cast<__mmask8>(0xFF), reinterpret_cast<__m512d>(d)));
  x = x * (2.0 - d * x);
  return x * (2.0 - d * x);
#else
  return 1.0 / d;
#endif
}

}  // namespace fluence::lanes
