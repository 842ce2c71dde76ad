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
// q/2 <= M 2^(L-62): 2^-51 of the largest term for n = 2,000.
//
// With two limbs, what a term's rounding to q leaves (at most q/2) is itself counted in quanta of
// q 2^(L-62), in a second int64 slot: the error per term drops to M 2^(2L-124), so a bound M far
// above the actual terms (one known before the terms are, say) costs no precision that matters.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace fluence {

class QuantizedSum {
 public:
  /// Zeroes `width` quantized slots and `counts` exact integer slots, for at most `max_terms`
  /// terms per slot, each of magnitude at most `bound` (finite, >= 0; 0 when every term is 0).
  /// Every rank must pass the same bound and max_terms.
  /// `limbs` is 1 or 2 (the second halves the rounding error's exponent; twice the slots).
  /// `extra` raw int64 slots ride along in the same reduction (extra()).
  void reset(std::size_t width, std::size_t counts, double bound, std::int64_t max_terms,
             int limbs = 1, std::size_t extra = 0);
  /// slot[offset + i] += round_to_nearest_even(fl(scale * values[i]) / q) for i < n. Returns how
  /// many terms exceeded the bound (their slots may then be wrong: the caller must not use them).
  std::size_t add(std::size_t offset, const double* values, double scale, std::size_t n);
  /// slot[offset + i] += multiples[i] * round_to_nearest_even(fl(scale * value) / q) for i < n:
  /// the same integers as adding |multiples[i]| terms +-value (the rounding is symmetric). Returns
  /// n when the term exceeds the bound (nothing added), else 0.
  std::size_t add_multiples(std::size_t offset, const std::int64_t* multiples, double value,
                            double scale, std::size_t n);
  /// The exact integer slots (counts of clients, say), summed over ranks by allreduce too.
  std::span<std::int64_t> counts() { return {slots_.data() + width_, count_slots_}; }
  /// Raw slots summed over the ranks with the others: a value that exactly one rank writes (its
  /// bit pattern, say) arrives unchanged, since the other ranks add zeros.
  std::span<std::int64_t> extra() {
    return {slots_.data() + width_ * static_cast<std::size_t>(limbs_) + count_slots_, extra_slots_};
  }
  /// Collective: sums every slot over the ranks, then writes q * total to `out` (width values).
  void allreduce(std::span<double> out);
  /// The same conversion of this rank's slots alone, without communication.
  void local_total(std::span<double> out) const;
  /// The finest quantum: a term's rounding error is at most half of it.
  double quantum() const { return limbs_ == 2 ? std::ldexp(quantum_, -low_bits_) : quantum_; }

 private:
  std::size_t add_two_limbs(std::int64_t* high, std::int64_t* low, const double* values,
                            double factor, double limit, std::size_t n);

  std::vector<std::int64_t> slots_;  // width quantized, the counts, width low limbs, the extra
  std::size_t width_ = 0, count_slots_ = 0, extra_slots_ = 0;
  int limbs_ = 1, low_bits_ = 0;  // a low quantum is q 2^-low_bits
  double bound_ = 0.0, quantum_ = 1.0, inverse_quantum_ = 1.0;
};

/// Collective: out = the sum over all ranks' items of symmetric positive semidefinite p x p
/// matrices (dense Hessians), the same bits for any rank count. Every rank computes its items in
/// parallel: chain_sum would make each rank wait for the lower ranks' items before computing its
/// own. The bound comes from the diagonals (|M_ij| <= sqrt(M_ii M_jj) for PSD M), one cheap pass:
/// `diagonal_of(k, d)` writes item k's diagonal (p values), `matrix_of(k, m)` its p x p matrix;
/// either returns false when item k contributes nothing. If an item is not PSD after all (an entry
/// beyond the bound), the sum is recomputed with chain_sum (item order, also rank-independent).
void psd_matrix_sum(int local_items, std::size_t p, std::vector<double>& out,
                    const std::function<bool(int, double*)>& diagonal_of,
                    const std::function<bool(int, double*)>& matrix_of);

}  // namespace fluence
