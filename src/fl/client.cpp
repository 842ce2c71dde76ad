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
  if (config.single_precision && coding_ && !config.full_batch && config.epochs > 0) {
    train_round_single(model, config, seed, round, theta, work, start ? start : theta);
    return;
  }
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

void Client::train_round_single(const SoftmaxRegression& model, const LocalTrainingConfig& config,
                                std::uint64_t seed, int round, double* theta, Workspace& work,
                                const double* start) {
  const std::size_t p = model.parameters();
  std::vector<float>& trained = work.single_theta;
  trained.resize(p);
  for (std::size_t k = 0; k < p; ++k) trained[k] = static_cast<float>(start[k]);
  for (int epoch = 0; epoch < config.epochs; ++epoch) {
    std::iota(order_.begin(), order_.end(), 0);
    Stream stream(seed, Purpose::local_shuffle, static_cast<std::uint64_t>(id_),
                  static_cast<std::uint64_t>(round), static_cast<std::uint64_t>(epoch));
    stream.shuffle(std::span<std::int64_t>(order_));
    model.sgd_epoch(codes_.data(), *coding_, labels_.data(), order_.data(), size(),
                    config.batch_size, config.learning_rate, trained.data(), work);
  }
  // The update trained - rounded start is exact in double (both are floats); added to start, the
  // model the server sent, so that an update of zero leaves theta = start bit for bit.
  for (std::size_t k = 0; k < p; ++k)
    theta[k] = start[k] + (static_cast<double>(trained[k]) -
                           static_cast<double>(static_cast<float>(start[k])));
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
