#include "fluence/core/quantized_sum.hpp"

#include <mpi.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

#if defined(__AVX512DQ__)
#include <immintrin.h>
#endif

namespace fluence {

void QuantizedSum::reset(std::size_t width, std::size_t counts, double bound,
                         std::int64_t max_terms) {
  if (!(bound >= 0.0) || !std::isfinite(bound) || max_terms < 0)
    throw std::invalid_argument("QuantizedSum: the bound must be finite and >= 0");
  width_ = width;
  count_slots_ = counts;
  slots_.assign(width + counts, 0);
  // bound < 2^exponent; terms below 2^-900 may round to 0 rather than q leave the normal range.
  const int exponent = bound > 0.0 ? std::max(std::ilogb(bound) + 1, -900) : 0;
  const int term_bits = static_cast<int>(std::bit_width(static_cast<std::uint64_t>(max_terms)));
  quantum_ = std::ldexp(1.0, exponent + term_bits - 62);
  inverse_quantum_ = std::ldexp(1.0, 62 - exponent - term_bits);
}

void QuantizedSum::add(std::size_t offset, const double* values, double scale, std::size_t n) {
  std::int64_t* slot = slots_.data() + offset;
  // scale / q is exact (q a power of two), and fl(v * (scale / q)) = fl(v * scale) / q.
  const double factor = scale * inverse_quantum_;
  std::size_t i = 0;
#if defined(__AVX512DQ__)
  // Conversion in the current rounding mode (nearest-even), as std::llrint below.
  const __m512d f = _mm512_set1_pd(factor);
  for (; i + 8 <= n; i += 8) {
    const __m512i q = _mm512_cvtpd_epi64(_mm512_mul_pd(_mm512_loadu_pd(values + i), f));
    _mm512_storeu_si512(slot + i, _mm512_add_epi64(_mm512_loadu_si512(slot + i), q));
  }
#endif
  for (; i < n; ++i) slot[i] += std::llrint(values[i] * factor);
}

void QuantizedSum::allreduce(std::span<double> out) {
  MPI_Allreduce(MPI_IN_PLACE, slots_.data(), static_cast<int>(slots_.size()), MPI_INT64_T, MPI_SUM,
                MPI_COMM_WORLD);
  local_total(out);
}

void QuantizedSum::local_total(std::span<double> out) const {
  if (out.size() != width_) throw std::invalid_argument("QuantizedSum: output width mismatch");
  for (std::size_t i = 0; i < width_; ++i) out[i] = static_cast<double>(slots_[i]) * quantum_;
}

}  // namespace fluence
