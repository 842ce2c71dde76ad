#pragma once
// Order-independent sums of doubles across ranks (docs/math.md §8.3). Every term is rounded to an
// integer multiple of a power-of-two quantum q and added as a 64-bit integer count of quanta.
// Integer addition is associative, so the total is the same bits for any order, any grouping and
// any rank count: one MPI_Allreduce replaces the rank-after-rank chain of chain_sum, and each rank
// adds its terms while they are still in cache.
//
// q is fixed by a bound M on the terms' magnitudes and the most terms a slot receives, n:
// q = 2^(e + L - 62) with 2^(e-1) <= M < 2^e and 2^(L-1) <= n < 2^L, so that every term is below
// 2^(62-L) quanta and no partial sum leaves the int64 range. A term's rounding error is at most
// q/2 <= M 2^(L-63), about the double rounding of the largest term times n.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace fluence {

class QuantizedSum {
 public:
  /// Zeroes `width` quantized slots and `counts` exact integer slots, for at most `max_terms`
  /// terms per slot, each of magnitude at most `bound` (finite, >= 0; 0 when every term is 0).
  /// Every rank must pass the same bound and max_terms.
  void reset(std::size_t width, std::size_t counts, double bound, std::int64_t max_terms);
  /// slot[offset + i] += round_to_nearest_even(fl(scale * values[i]) / q) for i < n.
  void add(std::size_t offset, const double* values, double scale, std::size_t n);
  /// The exact integer slots (counts of clients, say), summed over ranks by allreduce too.
  std::span<std::int64_t> counts() { return {slots_.data() + width_, count_slots_}; }
  /// Collective: sums every slot over the ranks, then writes q * total to `out` (width values).
  void allreduce(std::span<double> out);
  /// The same conversion of this rank's slots alone, without communication.
  void local_total(std::span<double> out) const;
  double quantum() const { return quantum_; }

 private:
  std::vector<std::int64_t> slots_;  // width quantized, then the counts
  std::size_t width_ = 0, count_slots_ = 0;
  double quantum_ = 1.0, inverse_quantum_ = 1.0;
};

}  // namespace fluence
