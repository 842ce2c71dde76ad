#pragma once
// Counter-based random streams (docs/architecture.md, "Determinism"): every draw is a pure function
// of (run seed, purpose, up to three identifiers, draw index), computed with Random123's
// Philox4x64. A client's randomization therefore does not depend on which rank hosts it.
#include <cstdint>
#include <span>
#include <vector>

namespace fluence {

/// What a stream is for. Values are part of the reproducibility contract: never renumber.
enum class Purpose : std::uint64_t {
  synthetic_model = 1,
  synthetic_rows = 2,
  test_split = 3,
  partition = 4,
  randomized_response = 5,
  local_shuffle = 6,
  row_subsample = 7,
  lissa_sample = 8,
  spectrum_start = 9,
  fldp_rerandomization = 10,
  fldp_expectation_sample = 11,
  whatif_group_sample = 12,
  whatif_randomization = 13,
  whatif_test_sample = 14,
  client_sampling = 15,
  server_noise = 16,
  opt_out = 17,
  point_estimation = 18,
  personal_shuffle = 19,
  local_test_split = 20,
  lia_split = 21,
  lia_participant_data = 22,
  lia_corruption = 23,
  lia_dp_sgd = 24,
  lia_vote = 25,
  lia_validators = 26,
  // 27: retired (lia's FL comparison shuffled with its own purpose; it now runs the shared
  // federation's local_shuffle)
  lia_sign_check = 28,
  lia_minority = 29,
  lia_body = 30,
  lia_relevance = 31,
  model_init = 32,
  client_cohort = 33,
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
