#pragma once
// Standard normal test inputs from a fixed seed (std::mt19937_64): the same values on every run.
#include <random>
#include <vector>

namespace fluence::testing {

inline std::vector<double> random_values(std::size_t n, unsigned seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<double> normal;
  std::vector<double> values(n);
  for (auto& v : values) v = normal(engine);
  return values;
}

}  // namespace fluence::testing
