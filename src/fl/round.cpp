// The round's samplers and its non-private reductions (fl/round.hpp; docs/math.md §8).
#include "fluence/fl/round.hpp"

#include <algorithm>
#include <cmath>

#include "fluence/core/mpi.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/fl/purposes.hpp"

namespace fluence {

bool poisson_sampled(std::uint64_t seed, double rate, int round, int id) {
  if (rate >= 1.0) return true;
  Stream stream(seed, purpose::client_sampling, static_cast<std::uint64_t>(round),
                static_cast<std::uint64_t>(id));
  return stream.uniform() < rate;
}

namespace {

class EveryClient final : public Sampler {
 public:
  bool in_cohort(int, int) override { return true; }
  SamplingEvent event() const override { return {}; }
};

class PoissonSampler final : public Sampler {
 public:
  PoissonSampler(std::uint64_t seed, double rate) : seed_(seed), rate_(rate) {}
  bool in_cohort(int round, int id) override { return poisson_sampled(seed_, rate_, round, id); }
  SamplingEvent event() const override { return {SamplingEvent::Kind::poisson, rate_, 0}; }

 private:
  std::uint64_t seed_;
  double rate_;
};

// McMahan et al.'s C: the first round(q N) (at least one) of a permutation keyed by the round.
class FixedSizeSampler final : public Sampler {
 public:
  FixedSizeSampler(std::uint64_t seed, double rate, std::int64_t clients)
      : seed_(seed),
        clients_(clients),
        size_(std::clamp<std::int64_t>(std::llround(rate * static_cast<double>(clients)), 1,
                                       std::max<std::int64_t>(clients, 1))) {}
  bool in_cohort(int round, int id) override {
    if (round_ != round) {
      Stream stream(seed_, purpose::client_cohort, static_cast<std::uint64_t>(round));
      const std::vector<std::int64_t> order = random_permutation(stream, clients_);
      members_.assign(static_cast<std::size_t>(clients_), 0);
      for (std::int64_t k = 0; k < size_; ++k) members_[static_cast<std::size_t>(order[k])] = 1;
      round_ = round;
    }
    return members_[static_cast<std::size_t>(id)] != 0;
  }
  SamplingEvent event() const override {
    return {SamplingEvent::Kind::fixed_size,
            static_cast<double>(size_) / static_cast<double>(clients_), size_};
  }

 private:
  std::uint64_t seed_;
  std::int64_t clients_, size_;
  std::vector<char> members_;  // the cohort of round_, per client id
  int round_ = -1;
};

}  // namespace

std::unique_ptr<Sampler> make_sampler(const ClientSampling& sampling, std::uint64_t seed,
                                      std::int64_t clients) {
  switch (sampling.kind) {
    case ClientSampling::Kind::poisson:
      return std::make_unique<PoissonSampler>(seed, sampling.rate);
    case ClientSampling::Kind::fixed:
      return std::make_unique<FixedSizeSampler>(seed, sampling.rate, clients);
    case ClientSampling::Kind::all:
      break;
  }
  return std::make_unique<EveryClient>();
}

WeightedMeanReduction::WeightedMeanReduction(std::size_t parameters, std::int64_t clients,
                                             bool uniform_weights)
    : parameters_(parameters), clients_(clients), uniform_weights_(uniform_weights) {}

void WeightedMeanReduction::begin(int, std::size_t count) {
  count_ = count;
  updates_.resize(count * parameters_);
  weights_.assign(count, 0.0);
  bound_ = 0.0;
}

void WeightedMeanReduction::take(std::size_t j, const Client& client, const UpdateSize& size) {
  weights_[j] = weight_of(client);
  bound_ = std::max(bound_, weights_[j] * size.max_abs);
}

std::optional<double> WeightedMeanReduction::reduce(int, double bound, std::vector<double>& step) {
  // Each client's message is its update d_i = theta_i - theta, weighted by n_i (seed 000 Eq. 2),
  // summed in fixed point with a bound every rank agrees on (the exact max over all ranks), so the
  // sum has the same bits for any rank count.
  const std::size_t p = parameters_;
  sum_.reset(p, 1, bound, clients_);
  std::int64_t weight = 0;
  for (std::size_t j = 0; j < count_; ++j) {
    sum_.add(0, updates_.data() + j * p, weights_[j], p);
    weight += static_cast<std::int64_t>(weights_[j]);
  }
  sum_.counts()[0] = weight;
  step.resize(p);
  sum_.allreduce(step);
  const std::int64_t total = sum_.counts()[0];
  if (total == 0) return std::nullopt;  // an empty cohort leaves theta as it is
  return 1.0 / static_cast<double>(total);
}

GatheredReduction::GatheredReduction(std::size_t parameters, Aggregator& aggregator)
    : parameters_(parameters), aggregator_(aggregator) {}

void GatheredReduction::begin(int, std::size_t count) {
  count_ = count;
  updates_.resize(count * parameters_);
}

std::optional<double> GatheredReduction::reduce(int, double, std::vector<double>& step) {
  // Every rank holds every update, in client-id order (clients live on ranks in ascending id
  // ranges), so every rank applies the rule to the same rows and gets the same step.
  const std::size_t p = parameters_;
  const auto updates = ordered_allgather(std::span<const double>(updates_.data(), count_ * p),
                                         static_cast<int>(count_), static_cast<int>(p));
  const int n = static_cast<int>(updates.size() / p);
  if (n == 0) return std::nullopt;  // an empty cohort leaves theta as it is
  step.assign(p, 0.0);
  aggregator_.aggregate(updates.data(), n, p, step.data());
  return 1.0;
}

}  // namespace fluence
