#include "fluence/fl/client.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <span>

#include "fluence/core/lanes.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/core/signals.hpp"
#include "fluence/fl/purposes.hpp"

namespace fluence {

Client::Client(int id, std::vector<std::int64_t> rows,
               std::vector<std::int32_t> original_categorical,
               std::vector<std::int32_t> original_labels, std::vector<std::int32_t> categorical,
               std::vector<std::int32_t> labels, std::vector<double> features)
    : id_(id),
      rows_(std::move(rows)),
      original_categorical_(std::move(original_categorical)),
      original_labels_(std::move(original_labels)),
      categorical_(std::move(categorical)),
      labels_(std::move(labels)),
      features_(std::move(features)),
      order_(rows_.size()) {}

void Client::prefetch() const {
  constexpr std::size_t kLine = 64;
  const auto* begin = reinterpret_cast<const char*>(codes_.data());
  for (std::size_t offset = 0; offset < codes_.size(); offset += kLine)
    __builtin_prefetch(begin + offset, 0, 1);  // read, keep in the outer caches
}

int Client::local_steps(const LocalTrainingConfig& config) const {
  if (config.full_batch) return config.epochs;
  const auto batch = static_cast<std::size_t>(std::max(config.batch_size, 1));
  return config.epochs * static_cast<int>((size() + batch - 1) / batch);
}

void Client::train_round(const Model& model, const LocalTrainingConfig& config, std::uint64_t seed,
                         int round, double* theta, Workspace& work, const double* start,
                         const double* correction) {
  const std::size_t p = model.parameters();
  // FedProx's center: the model training starts from (kept aside when theta is trained in place).
  const double* center = nullptr;
  if (config.proximal_mu > 0.0) {
    if (start) {
      center = start;
    } else {
      center_.assign(theta, theta + p);
      center = center_.data();
    }
  }
  if (trains_single(model, config)) {
    // The model rounded to float, trained, and returned as start + the exact float change.
    if (!start) start = theta;
    std::vector<float>& start_single = work.single_start;
    start_single.assign(start, start + p);
    train_single(model, config, seed, round, work, start_single.data(), center, correction);
    for (std::size_t k = 0; k < p; ++k)
      theta[k] = start[k] +
                 (static_cast<double>(work.single_theta[k]) - static_cast<double>(start_single[k]));
    return;
  }
  const TrainingRows data = training_rows();
  const StepTerms terms{center, config.proximal_mu, correction};
  if (start && (config.full_batch || config.epochs == 0)) {
    std::copy(start, start + p, theta);
    start = nullptr;
  }
  for (int epoch = 0; epoch < config.epochs; ++epoch) {
    if (config.abandon_on_stop && stop_signal_received()) return;
    if (config.full_batch) {
      model.gradient_step(data, config.learning_rate, theta, work, terms);
      continue;
    }
    std::iota(order_.begin(), order_.end(), 0);
    Stream stream(seed, purpose::local_shuffle, static_cast<std::uint64_t>(id_),
                  static_cast<std::uint64_t>(round), static_cast<std::uint64_t>(epoch));
    stream.shuffle(std::span<std::int64_t>(order_));
    model.sgd_epoch(data, order_.data(), config.batch_size, config.learning_rate, theta, work,
                    terms, epoch == 0 ? start : nullptr);
  }
}

void Client::train_single(const Model& model, const LocalTrainingConfig& config, std::uint64_t seed,
                          int round, Workspace& work, const float* start_single,
                          const double* center, const double* correction) {
  work.single_theta.resize(model.parameters());
  const TrainingRows data = training_rows();
  const StepTerms terms{center, config.proximal_mu, correction};
  for (int epoch = 0; epoch < config.epochs; ++epoch) {
    if (config.abandon_on_stop && stop_signal_received()) return;
    std::iota(order_.begin(), order_.end(), 0);
    Stream stream(seed, purpose::local_shuffle, static_cast<std::uint64_t>(id_),
                  static_cast<std::uint64_t>(round), static_cast<std::uint64_t>(epoch));
    stream.shuffle(std::span<std::int64_t>(order_));
    model.sgd_epoch(data, order_.data(), config.batch_size, config.learning_rate,
                    work.single_theta.data(), work, terms, epoch == 0 ? start_single : nullptr);
  }
}

namespace {
using lanes::kLanes;
using lanes::Lanes;

// The differences d_i = value(i) written to update, with ||d||^2 and max |d_i|: eight lane sums
// over whole 8-blocks in ascending order, a fixed lane reduction, then the tail.
template <class Difference>
UpdateSize write_and_measure(double* update, std::size_t p, Difference&& difference) {
  Lanes square{}, largest{};
  std::size_t i = 0;
  for (; i + kLanes <= p; i += kLanes) {
    const Lanes d = difference.lanes(i);
    lanes::store(update + i, d);
    square += d * d;
    const Lanes magnitude = d < 0.0 ? -d : d;
    largest = magnitude > largest ? magnitude : largest;
  }
  UpdateSize size{lanes::lane_sum(square), 0.0};
  for (int l = 0; l < kLanes; ++l) size.max_abs = std::max(size.max_abs, largest[l]);
  for (; i < p; ++i) {
    update[i] = difference.one(i);
    size.squared_norm += update[i] * update[i];
    size.max_abs = std::max(size.max_abs, std::abs(update[i]));
  }
  // The lane maxima skip a NaN (every comparison with it is false), but the sum of squares carries
  // any NaN or infinity: a non-finite update then reports an infinite size, which the callers
  // treat as a diverged client (a NaN fed to the fixed-point sum would have been read as 0).
  if (!std::isfinite(size.squared_norm)) size.max_abs = std::numeric_limits<double>::infinity();
  return size;
}

struct DoubleDifference {  // trained (in update) - start
  const double *trained, *start;
  Lanes lanes(std::size_t i) const { return lanes::load(trained + i) - lanes::load(start + i); }
  double one(std::size_t i) const { return trained[i] - start[i]; }
};

struct FloatDifference {  // trained - start_single, both floats: exact in double
  const float *trained, *start;
  Lanes lanes(std::size_t i) const {
    using Float8 = float __attribute__((vector_size(32)));
    Float8 t, s;
    std::memcpy(&t, trained + i, sizeof t);
    std::memcpy(&s, start + i, sizeof s);
    return __builtin_convertvector(t, Lanes) - __builtin_convertvector(s, Lanes);
  }
  double one(std::size_t i) const {
    return static_cast<double>(trained[i]) - static_cast<double>(start[i]);
  }
};
}  // namespace

UpdateSize Client::train_update(const Model& model, const LocalTrainingConfig& config,
                                std::uint64_t seed, int round, double* update, Workspace& work,
                                const double* start, const float* start_single,
                                const double* correction) {
  const std::size_t p = model.parameters();
  if (start_single && trains_single(model, config)) {
    train_single(model, config, seed, round, work, start_single,
                 config.proximal_mu > 0.0 ? start : nullptr, correction);
    return write_and_measure(update, p, FloatDifference{work.single_theta.data(), start_single});
  }
  train_round(model, config, seed, round, update, work, start, correction);
  return write_and_measure(update, p, DoubleDifference{update, start});
}

void Client::train_personal(const Model& model, const LocalTrainingConfig& config,
                            std::uint64_t seed, int round, double* theta, const double* center,
                            double lambda, Workspace& work) {
  const TrainingRows data = training_rows();
  for (int epoch = 0; epoch < config.epochs; ++epoch) {
    std::iota(order_.begin(), order_.end(), 0);
    Stream stream(seed, purpose::personal_shuffle, static_cast<std::uint64_t>(id_),
                  static_cast<std::uint64_t>(round), static_cast<std::uint64_t>(epoch));
    stream.shuffle(std::span<std::int64_t>(order_));
    model.sgd_epoch(data, order_.data(), config.batch_size, config.learning_rate, theta, work,
                    {center, lambda});
  }
}

}  // namespace fluence
