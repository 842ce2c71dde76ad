#pragma once
// Counter-based random streams (docs/architecture.md, "Determinism"): every draw is a pure function
// of (run seed, purpose, up to three identifiers, draw index), computed with Random123's
// Philox4x64. A client's randomization therefore does not depend on which rank hosts it.
#include <cstdint>
#include <span>
#include <vector>

namespace fluence {

/// What a stream is for: a number that keys the stream together with the run seed. Each module
/// declares its own in fluence/<module>/purposes.hpp (namespace fluence::purpose); the numbers are
/// part of the reproducibility contract: never renumber or reuse one. Retired, never to be reused:
/// 7 (a row subsample that no code draws any more) and 27 (lia's FL comparison shuffled with its
/// own purpose; it now runs the shared federation's local_shuffle).
struct Purpose {
  std::uint64_t number;
};

class Stream {
 public:
  Stream(std::uint64_t seed, Purpose purpose, std::uint64_t id0 = 0, std::uint64_t id1 = 0,
         std::uint64_t id2 = 0);

  std::uint64_t next_u64();
  /// Skips the next `values` outputs of next_u64() (uniform() and normal() take one and two): a
  /// rank can draw its share of a long sequence without drawing the shares before it.
  void skip(std::uint64_t values);
  /// Uniform on [0, 1) with 53 random bits.
  double uniform();
  /// Uniform integer on [0, n), unbiased (rejection).
  std::uint64_t below(std::uint64_t n);
  /// Standard normal (Box-Muller on two uniforms).
  double normal();
  /// Fills `out` with standard normals, both Box-Muller outputs of each pair of uniforms used (half
  /// the transcendental work of normal() per value; a different sequence than repeated normal()).
  void fill_normal(std::span<double> out);
  /// Gamma(shape, 1) by Marsaglia-Tsang (shape < 1 boosted).
  double gamma(double shape);
  /// Fisher-Yates shuffle.
  template <class T>
  void shuffle(std::span<T> items) {
    for (std::size_t i = items.size(); i > 1; --i) {
      std::size_t j = below(i);
      std::swap(items[i - 1], items[j]);
    }
  }
  /// Dirichlet(alpha, ..., alpha) of the given dimension.
  std::vector<double> dirichlet(double alpha, std::size_t dimension);

 private:
  void refill();
  std::uint64_t key_[2];
  std::uint64_t counter_[4];
  std::uint64_t block_[4];
  int next_ = 4;
};

/// A random permutation of 0..n-1 from the given stream.
std::vector<std::int64_t> random_permutation(Stream& stream, std::int64_t n);

}  // namespace fluence
