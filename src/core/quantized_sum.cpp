#include "fluence/core/quantized_sum.hpp"

#include <mpi.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

#include "fluence/core/mpi.hpp"

#if defined(__AVX512DQ__)
#include <immintrin.h>
#endif

namespace fluence {

void QuantizedSum::reset(std::size_t width, std::size_t counts, double bound,
                         std::int64_t max_terms, int limbs, std::size_t extra) {
  if (!(bound >= 0.0) || !std::isfinite(bound) || max_terms < 0)
    throw std::invalid_argument("QuantizedSum: the bound must be finite and >= 0");
  if (limbs != 1 && limbs != 2) throw std::invalid_argument("QuantizedSum: limbs must be 1 or 2");
  width_ = width;
  count_slots_ = counts;
  limbs_ = limbs;
  extra_slots_ = extra;
  slots_.assign(width * limbs + counts + extra, 0);
  // bound < 2^exponent; terms below 2^-900 may round to 0 rather than q leave the normal range.
  const int exponent = bound > 0.0 ? std::max(std::ilogb(bound) + 1, -900) : 0;
  const int term_bits = static_cast<int>(std::bit_width(static_cast<std::uint64_t>(max_terms)));
  bound_ = bound;
  quantum_ = std::ldexp(1.0, exponent + term_bits - 62);
  inverse_quantum_ = std::ldexp(1.0, 62 - exponent - term_bits);
  // A remainder is at most half a quantum: 2^(61 - L) low quanta, n of them below 2^61.
  low_bits_ = 62 - term_bits;
}

std::size_t QuantizedSum::add(std::size_t offset, const double* values, double scale,
                              std::size_t n) {
  std::int64_t* slot = slots_.data() + offset;
  // scale / q is exact (q a power of two), and fl(v * (scale / q)) = fl(v * scale) / q.
  const double factor = scale * inverse_quantum_;
  const double limit = bound_ * inverse_quantum_;  // the bound in quanta (exact)
  std::size_t beyond = 0, i = 0;
  if (limbs_ == 2)
    return add_two_limbs(slot, slots_.data() + width_ + count_slots_ + offset, values, factor,
                         limit, n);
#if defined(__AVX512DQ__)
  // Conversion in the current rounding mode (nearest-even), as std::llrint below.
  const __m512d f = _mm512_set1_pd(factor), top = _mm512_set1_pd(limit);
  for (; i + 8 <= n; i += 8) {
    const __m512d t = _mm512_mul_pd(_mm512_loadu_pd(values + i), f);
    // Not within [-limit, limit] (NaN included): the ordered-quiet comparison is false for NaN.
    const __mmask8 inside = _mm512_cmp_pd_mask(_mm512_abs_pd(t), top, _CMP_LE_OQ);
    beyond += static_cast<std::size_t>(std::popcount(static_cast<unsigned>(~inside & 0xFFu)));
    const __m512i q = _mm512_maskz_cvtpd_epi64(inside, t);
    _mm512_storeu_si512(slot + i, _mm512_add_epi64(_mm512_loadu_si512(slot + i), q));
  }
#endif
  for (; i < n; ++i) {
    const double t = values[i] * factor;
    if (std::abs(t) <= limit)
      slot[i] += std::llrint(t);
    else
      ++beyond;
  }
  return beyond;
}

std::size_t QuantizedSum::add_multiples(std::size_t offset, const std::int64_t* multiples,
                                        double value, double scale, std::size_t n) {
  // As add's scalar loop for one term t, negated with the sign: llrint(-t) = -llrint(t), and the
  // remainder t - round(t) (exact) changes sign with it.
  const double t = value * (scale * inverse_quantum_);
  if (!(std::abs(t) <= bound_ * inverse_quantum_)) return n;
  std::int64_t* slot = slots_.data() + offset;
  const std::int64_t h = std::llrint(t);
  for (std::size_t i = 0; i < n; ++i) slot[i] += multiples[i] * h;
  if (limbs_ == 2) {
    const std::int64_t l = std::llrint((t - static_cast<double>(h)) * std::ldexp(1.0, low_bits_));
    std::int64_t* low = slots_.data() + width_ + count_slots_ + offset;
    for (std::size_t i = 0; i < n; ++i) low[i] += multiples[i] * l;
  }
  return 0;
}

std::size_t QuantizedSum::add_two_limbs(std::int64_t* high, std::int64_t* low, const double* values,
                                        double factor, double limit, std::size_t n) {
  // t = fl(v scale) / q; its high limb round(t) and the remainder t - round(t) (exact: |t| < 2^61,
  // and when |t| >= 2^52 t is an integer and the remainder 0), counted in low quanta.
  const double low_factor = std::ldexp(1.0, low_bits_);
  std::size_t beyond = 0, i = 0;
#if defined(__AVX512DQ__)
  const __m512d f = _mm512_set1_pd(factor), top = _mm512_set1_pd(limit),
                g = _mm512_set1_pd(low_factor);
  for (; i + 8 <= n; i += 8) {
    const __m512d t = _mm512_mul_pd(_mm512_loadu_pd(values + i), f);
    const __mmask8 inside = _mm512_cmp_pd_mask(_mm512_abs_pd(t), top, _CMP_LE_OQ);
    beyond += static_cast<std::size_t>(std::popcount(static_cast<unsigned>(~inside & 0xFFu)));
    const __m512i h = _mm512_maskz_cvtpd_epi64(inside, t);
    const __m512d r = _mm512_sub_pd(t, _mm512_maskz_cvtepi64_pd(inside, h));
    const __m512i l = _mm512_maskz_cvtpd_epi64(inside, _mm512_mul_pd(r, g));
    _mm512_storeu_si512(high + i, _mm512_add_epi64(_mm512_loadu_si512(high + i), h));
    _mm512_storeu_si512(low + i, _mm512_add_epi64(_mm512_loadu_si512(low + i), l));
  }
#endif
  for (; i < n; ++i) {
    const double t = values[i] * factor;
    if (!(std::abs(t) <= limit)) {
      ++beyond;
      continue;
    }
    const std::int64_t h = std::llrint(t);
    high[i] += h;
    low[i] += std::llrint((t - static_cast<double>(h)) * low_factor);
  }
  return beyond;
}

void QuantizedSum::allreduce(std::span<double> out) {
  // In pieces: MPI counts are int, and a dense Hessian of p > 46,340 has more slots than that.
  constexpr std::size_t kPiece = std::size_t{1} << 27;
  for (std::size_t first = 0; first < slots_.size(); first += kPiece)
    MPI_Allreduce(MPI_IN_PLACE, slots_.data() + first,
                  static_cast<int>(std::min(kPiece, slots_.size() - first)), MPI_INT64_T, MPI_SUM,
                  MPI_COMM_WORLD);
  local_total(out);
}

void QuantizedSum::local_total(std::span<double> out) const {
  if (out.size() != width_) throw std::invalid_argument("QuantizedSum: output width mismatch");
  if (limbs_ == 2) {
    // The total high 2^low_bits + low, rounded once to a double, times the low quantum. The carry
    // of low into high leaves low in [0, 2^low_bits); when both parts then fit in 53 bits the two
    // scaled terms are exact doubles and their sum rounds once. Otherwise the total (below 2^123)
    // is formed exactly in 128 bits and converted, which rounds the same way.
    const std::int64_t* low = slots_.data() + width_ + count_slots_;
    const double low_quantum = quantum();
    const std::int64_t exact = std::int64_t{1} << 53;
    for (std::size_t i = 0; i < width_; ++i) {
      const std::int64_t carry = low[i] >> low_bits_;  // floor(low / 2^low_bits)
      const std::int64_t rest = low[i] - carry * (std::int64_t{1} << low_bits_);
      const std::int64_t high = slots_[i] + carry;
      if (high > -exact && high < exact && rest < exact) {
        out[i] = static_cast<double>(high) * quantum_ + static_cast<double>(rest) * low_quantum;
      } else {
        const __int128 total =
            static_cast<__int128>(high) * (static_cast<__int128>(1) << low_bits_) + rest;
        out[i] = static_cast<double>(total) * low_quantum;
      }
    }
    return;
  }
  for (std::size_t i = 0; i < width_; ++i) out[i] = static_cast<double>(slots_[i]) * quantum_;
}

void psd_matrix_sum(int local_items, std::size_t p, std::vector<double>& out,
                    const std::function<bool(int, double*)>& diagonal_of,
                    const std::function<bool(int, double*)>& matrix_of) {
  const std::size_t width = p * p;
  double largest = 0.0;
  std::int64_t items = local_items;
  {
    std::vector<double> diagonal(p);
    for (int k = 0; k < local_items; ++k)
      if (diagonal_of(k, diagonal.data()))
        for (double d : diagonal) largest = std::max(largest, std::abs(d));
  }
  MPI_Allreduce(MPI_IN_PLACE, &largest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &items, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  // The computed entries carry their own rounding: twice the diagonal bound leaves room for it.
  const double bound = 2.0 * largest;
  std::int64_t beyond = !std::isfinite(bound) ? 1 : 0;
  QuantizedSum sum;
  if (beyond == 0) {
    sum.reset(width, 0, bound, items);
    std::vector<double> matrix(width);
    for (int k = 0; k < local_items; ++k)
      if (matrix_of(k, matrix.data()))
        beyond += static_cast<std::int64_t>(sum.add(0, matrix.data(), 1.0, width));
  }
  // The item buffer is gone before `out` grows: the peak is two p x p arrays, as with chain_sum.
  MPI_Allreduce(MPI_IN_PLACE, &beyond, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  out.resize(width);
  if (beyond == 0) {
    sum.allreduce(out);
    return;
  }
  sum = QuantizedSum();  // not PSD: the chain in item order instead
  std::vector<double> matrix(width);
  chain_sum(local_items, out, [&](int k, std::span<double> total) {
    if (matrix_of(k, matrix.data()))
      for (std::size_t j = 0; j < width; ++j) total[j] += matrix[j];
  });
}

}  // namespace fluence
