#pragma once
// Eight double lanes in GCC/Clang vector extensions: one AVX-512 register, two AVX2 ones. Hot
// loops that reduce over a short axis keep one partial sum per lane and add the lanes in a fixed
// order at the end, so they vectorize without -ffast-math and give the same bits on every rank.
// The lane-wise multiply-adds contract to FMA where the target has it.
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

// Without AVX-512 (a build without FLUENCE_NATIVE) GCC notes that 64-byte vectors are passed
// differently; these helpers are internal and inlined, never an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace fluence::lanes {

using Lanes = double __attribute__((vector_size(64)));
// The same lanes as 64-bit integers: bit patterns, and the -1/0 masks that comparisons give.
using Int64Lanes = std::int64_t __attribute__((vector_size(64)));
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

// e^x for x <= 0, to about an ulp: x = n ln 2 + r with |r| <= ln 2 / 2, e^r by its Taylor series to
// r^13 (the first omitted term is below 5e-18), times 2^n built in the exponent bits. Below -708
// the argument is clamped (e^-708 = 3e-308): a softmax denominator of at least 1 cannot see it.
inline Lanes exp_nonpositive(const Lanes& argument) {
  const Lanes lowest = Lanes{} - 708.0;
  const Lanes x = argument < lowest ? lowest : argument;
  const double shifter = 0x1.8p52;  // adding it rounds to an integer, kept in the low bits
  const Lanes shifted = x * 1.4426950408889634 + shifter;
  const Lanes n = shifted - shifter;
  const Lanes r = (x - n * 0x1.62e42fefa3800p-1) - n * 0x1.ef35793c7673p-45;  // ln 2, hi + lo
  Lanes p = Lanes{} + 1.0 / 6227020800.0;
  const double inverse_factorial[] = {1.0 / 479001600.0,
                                      1.0 / 39916800.0,
                                      1.0 / 3628800.0,
                                      1.0 / 362880.0,
                                      1.0 / 40320.0,
                                      1.0 / 5040.0,
                                      1.0 / 720.0,
                                      1.0 / 120.0,
                                      1.0 / 24.0,
                                      1.0 / 6.0,
                                      0.5,
                                      1.0,
                                      1.0};
  for (double coefficient : inverse_factorial) p = p * r + coefficient;
  Int64Lanes bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  // shifted = shifter + n exactly, with shifter's exponent: n is the difference of the bit
  // patterns; 2^n has the exponent field n + 1023.
  const Int64Lanes scale_bits = (bits - 0x4338000000000000 + 1023) << 52;
  Lanes scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return p * scale;
}

// ln x for positive normal x, within about two ulps: x = 2^e m with m in [sqrt(1/2), sqrt(2)), and
// ln m = 2 atanh(s) = 2 (s + s^3/3 + ... + s^21/21) for s = (m - 1)/(m + 1), |s| <= 0.1716 (the
// first omitted term, 2 s^23/23, is below 2^-60 of ln m), plus e ln 2 in two parts. m - 1 is exact
// and s has the error of the reciprocal (lanes::reciprocal) and one product. NaN (or infinite) x
// gives NaN, so that a diverged loss stays NaN.
inline Lanes log_positive(const Lanes& x) {
  Int64Lanes bits;
  std::memcpy(&bits, &x, sizeof bits);
  const Int64Lanes mantissa_bits = (bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000;
  Lanes m;
  std::memcpy(&m, &mantissa_bits, sizeof m);
  const Int64Lanes above = m > 1.4142135623730951;  // -1 where m > sqrt(2): halve m, raise e
  m = above ? m * 0.5 : m;
  const Lanes e = __builtin_convertvector((bits >> 52) - 1023 - above, Lanes);
  const Lanes s = (m - 1.0) * reciprocal(m + 1.0);
  const Lanes z = s * s;
  Lanes p = Lanes{} + 1.0 / 21.0;
  for (double coefficient : {1.0 / 19.0, 1.0 / 17.0, 1.0 / 15.0, 1.0 / 13.0, 1.0 / 11.0, 1.0 / 9.0,
                             1.0 / 7.0, 1.0 / 5.0, 1.0 / 3.0})
    p = p * z + coefficient;
  const Lanes twice_s = s + s;
  return e * 0x1.62e42fefa3800p-1 + (e * 0x1.ef35793c7673p-45 + (twice_s + twice_s * z * p)) +
         (x - x);
}

// out[i] = exp_nonpositive(x[i]) for n values, eight at a time, the last partial group masked
// (out may be x).
inline void exp_nonpositive(const double* x, double* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(out + i, exp_nonpositive(load(x + i)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    store_first(out + i, exp_nonpositive(load_first(x + i, rest)), rest);
  }
}

}  // namespace fluence::lanes
