#include "fluence/fl/client.hpp"

#include <algorithm>
#include <numeric>
#include <span>

#include "fluence/core/rng.hpp"

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

void Client::train_round(const SoftmaxRegression& model, const LocalTrainingConfig& config,
                         std::uint64_t seed, int round, double* theta, Workspace& work,
                         const double* start) {
  if (start && !(coding_ && !config.full_batch && config.epochs > 0)) {
    std::copy(start, start + model.parameters(), theta);
    start = nullptr;
  }
  for (int epoch = 0; epoch < config.epochs; ++epoch) {
    if (config.full_batch) {
      model.gradient_step(features(), labels_.data(), size(), config.learning_rate, theta, work);
      continue;
    }
    std::iota(order_.begin(), order_.end(), 0);
    Stream stream(seed, Purpose::local_shuffle, static_cast<std::uint64_t>(id_),
                  static_cast<std::uint64_t>(round), static_cast<std::uint64_t>(epoch));
    stream.shuffle(std::span<std::int64_t>(order_));
    if (coding_)
      model.sgd_epoch(codes_.data(), *coding_, labels_.data(), order_.data(), size(),
                      config.batch_size, config.learning_rate, theta, work, nullptr, 0.0,
                      epoch == 0 ? start : nullptr);
    else
      model.sgd_epoch(features(), labels_.data(), order_.data(), size(), config.batch_size,
                      config.learning_rate, theta, work);
  }
}

void Client::train_personal(const SoftmaxRegression& model, const LocalTrainingConfig& config,
                            std::uint64_t seed, int round, double* theta, const double* center,
                            double lambda, Workspace& work) {
  for (int epoch = 0; epoch < config.epochs; ++epoch) {
    std::iota(order_.begin(), order_.end(), 0);
    Stream stream(seed, Purpose::personal_shuffle, static_cast<std::uint64_t>(id_),
                  static_cast<std::uint64_t>(round), static_cast<std::uint64_t>(epoch));
    stream.shuffle(std::span<std::int64_t>(order_));
    if (coding_)
      model.sgd_epoch(codes_.data(), *coding_, labels_.data(), order_.data(), size(),
                      config.batch_size, config.learning_rate, theta, work, center, lambda);
    else
      model.sgd_epoch(features(), labels_.data(), order_.data(), size(), config.batch_size,
                      config.learning_rate, theta, work, center, lambda);
  }
}

}  // namespace fluence
