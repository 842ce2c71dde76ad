#include "fluence/core/rng.hpp"

#include <Random123/philox.h>

#include <cmath>
#include <numbers>

namespace fluence {

Stream::Stream(std::uint64_t seed, Purpose purpose, std::uint64_t id0, std::uint64_t id1,
               std::uint64_t id2)
    : key_{seed, purpose.number}, counter_{id0, id1, id2, 0} {}

void Stream::refill() {
  r123::Philox4x64 generator;
  r123::Philox4x64::ctr_type counter = {{counter_[0], counter_[1], counter_[2], counter_[3]}};
  r123::Philox4x64::key_type key = {{key_[0], key_[1]}};
  auto out = generator(counter, key);
  for (int i = 0; i < 4; ++i) block_[i] = out.v[i];
  ++counter_[3];
  next_ = 0;
}

std::uint64_t Stream::next_u64() {
  if (next_ == 4) refill();
  return block_[next_++];
}

void Stream::skip(std::uint64_t values) {
  // Outputs taken so far: every block generated, less what is left of the current one.
  const std::uint64_t taken = counter_[3] * 4 - static_cast<std::uint64_t>(4 - next_);
  const std::uint64_t target = taken + values;
  counter_[3] = target / 4;
  next_ = 4;
  if (target % 4 != 0) {
    refill();
    next_ = static_cast<int>(target % 4);
  }
}

double Stream::uniform() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

std::uint64_t Stream::below(std::uint64_t n) {
  // Lemire-style rejection on the top of the range keeps the draw unbiased.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  std::uint64_t value;
  do {
    value = next_u64();
  } while (value >= limit);
  return value % n;
}

double Stream::normal() {
  const double u1 = 1.0 - uniform();  // in (0, 1]
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

void Stream::fill_normal(std::span<double> out) {
  std::size_t i = 0;
  for (; i + 1 < out.size(); i += 2) {
    const double radius = std::sqrt(-2.0 * std::log(1.0 - uniform()));
    const double angle = 2.0 * std::numbers::pi * uniform();
    out[i] = radius * std::cos(angle);
    out[i + 1] = radius * std::sin(angle);
  }
  if (i < out.size()) out[i] = normal();
}

double Stream::gamma(double shape) {
  if (shape < 1.0) {
    // Gamma(a) = Gamma(a + 1) * U^(1/a)
    const double boosted = gamma(shape + 1.0);
    return boosted * std::pow(1.0 - uniform(), 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

std::vector<double> Stream::dirichlet(double alpha, std::size_t dimension) {
  std::vector<double> draw(dimension);
  double total = 0.0;
  for (auto& value : draw) total += (value = gamma(alpha));
  if (total <= 0.0) {
    // Every gamma underflowed (tiny alpha): the limit is a point mass on one coordinate.
    draw.assign(dimension, 0.0);
    draw[below(dimension)] = 1.0;
    return draw;
  }
  for (auto& value : draw) value /= total;
  return draw;
}

std::vector<std::int64_t> random_permutation(Stream& stream, std::int64_t n) {
  std::vector<std::int64_t> order(n);
  for (std::int64_t i = 0; i < n; ++i) order[i] = i;
  stream.shuffle(std::span<std::int64_t>(order));
  return order;
}

}  // namespace fluence
