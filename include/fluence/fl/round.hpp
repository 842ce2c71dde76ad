#pragma once
// The parts of a federated round (docs/architecture.md "Extension points"). There is one round
// loop, Federation::round: the Sampler picks the cohort, each client of the cohort trains on its
// rank by the client update rule (fl/client_update.hpp) into a slot of the UpdateReduction, the
// ranks agree on the reduction's bound and on a stop signal, and the reduction turns the updates
// into the server's step; train() then applies the server optimizer (fl/server_optimizer.hpp).
// The reductions are FedAvg's exact weighted mean, any aggregator over the gathered updates
// (fl/aggregators.hpp), or a Privatizer (clipping, noise and accounting: fl/private_training.hpp).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "fluence/core/quantized_sum.hpp"
#include "fluence/fl/aggregators.hpp"
#include "fluence/fl/client.hpp"
#include "fluence/fl/problem.hpp"

namespace fluence {

/// What an accountant must compose for one round's cohort (privacy/accountant.hpp's steps): every
/// client (q = 1), each client independently with probability q (Poisson: the subsampled Gaussian
/// of Mironov et al.'s RDP, PLD and PRV), or a fixed number drawn without replacement (no
/// accountant of ours composes it under add/remove adjacency: private training refuses it).
struct SamplingEvent {
  enum class Kind { every_client, poisson, fixed_size };
  Kind kind = Kind::every_client;
  double rate = 1.0;      // q (poisson), size / clients (fixed_size)
  std::int64_t size = 0;  // fixed_size: the cohort's size
};

/// The clients that train in a round. in_cohort must give the same answer on every rank for any
/// rank count (a stream keyed by the round, and by the client where each is drawn alone).
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual bool in_cohort(int round, int id) = 0;
  virtual SamplingEvent event() const = 0;
};

/// Poisson sampling's draw for one client: the stream (seed, client_sampling, round, id), shared by
/// FedAvg's "poisson" sampling and private training's, so that both draw the same clients.
bool poisson_sampled(std::uint64_t seed, double rate, int round, int id);

/// federation.client_sampling: every client, Poisson with rate q, or a cohort of round(q N) clients
/// (at least one) drawn without replacement by a permutation keyed by the round.
std::unique_ptr<Sampler> make_sampler(const ClientSampling& sampling, std::uint64_t seed,
                                      std::int64_t clients);

/// How the cohort's updates, trained on their ranks, become the server's step. Federation::round
/// calls begin, then slot and take for each local update j in client-id order, then agrees with
/// the other ranks on the max of local_bound() (and on a stop), then the collective agreed() and
/// reduce(). The step must be the same bits on every rank and for any rank count.
class UpdateReduction {
 public:
  virtual ~UpdateReduction() = default;
  /// This rank trains `count` clients of the round's cohort.
  virtual void begin(int round, std::size_t count) = 0;
  /// Where the j-th local update d_j = theta_j - theta (j < count) is trained into: p values.
  virtual double* slot(std::size_t j) = 0;
  /// The j-th local update is trained; `size` its norms (finite: a non-finite update ends the round
  /// before reduce as a divergence).
  virtual void take(std::size_t j, const Client& client, const UpdateSize& size) = 0;
  /// This rank's part of the bound the ranks agree on (their max) before reduce(); 0 when unused.
  virtual double local_bound() const { return 0.0; }
  /// Collective, once the ranks agreed to keep the round: `chosen` the cohort's local indices,
  /// theta the model the round started from (Ditto's personal steps).
  virtual void agreed(int /*round*/, std::span<const std::size_t> /*chosen*/,
                      const std::vector<double>& /*theta*/) {}
  /// Collective: the server's step from the updates taken, `bound` the agreed max of local_bound():
  /// theta += factor * step (p values), the factor returned (FedAvg's 1 / sum w_i, kept apart so
  /// that the update of a coordinate is one multiply-add, as it always was), or nothing to leave
  /// theta as it is (an empty cohort).
  virtual std::optional<double> reduce(int round, double bound, std::vector<double>& step) = 0;
};

/// FedAvg's rule (seed 000 Eq. 2): step = sum_S w_i d_i / sum_S w_i with w_i the client's rows (or
/// 1 with uniform weights), summed exactly in fixed point with the agreed bound max_i w_i max|d_i|,
/// so that the step has the same bits for any rank count.
class WeightedMeanReduction final : public UpdateReduction {
 public:
  WeightedMeanReduction(std::size_t parameters, std::int64_t clients, bool uniform_weights);
  void begin(int round, std::size_t count) override;
  double* slot(std::size_t j) override { return updates_.data() + j * parameters_; }
  void take(std::size_t j, const Client& client, const UpdateSize& size) override;
  double local_bound() const override { return bound_; }
  std::optional<double> reduce(int round, double bound, std::vector<double>& step) override;

 private:
  double weight_of(const Client& client) const {
    return uniform_weights_ ? 1.0 : static_cast<double>(client.size());
  }
  std::size_t parameters_;
  std::int64_t clients_;
  bool uniform_weights_;
  std::vector<double> updates_, weights_;
  std::size_t count_ = 0;
  double bound_ = 0.0;
  QuantizedSum sum_;
};

/// Any other server rule (the robust aggregators): every rank gathers the cohort's n updates in
/// client-id order (n p doubles on every rank, which rules that compare updates need) and applies
/// step = aggregator(updates).
class GatheredReduction final : public UpdateReduction {
 public:
  GatheredReduction(std::size_t parameters, Aggregator& aggregator);
  void begin(int round, std::size_t count) override;
  double* slot(std::size_t j) override { return updates_.data() + j * parameters_; }
  void take(std::size_t, const Client&, const UpdateSize&) override {}
  std::optional<double> reduce(int round, double bound, std::vector<double>& step) override;

 private:
  std::size_t parameters_;
  Aggregator& aggregator_;
  std::vector<double> updates_;
  std::size_t count_ = 0;
};

/// A reduction that makes the round private (DP-FedAvg, FeO2: fl/private_training.hpp). It brings
/// its own sampler (the accountant's sampling event) and finishes each round after the server's
/// step (its metrics of the round's model).
class Privatizer : public UpdateReduction {
 public:
  virtual Sampler& sampler() = 0;
  /// After the server's step: theta is the round's model.
  virtual void finish_round(int round, const std::vector<double>& theta) = 0;
};

}  // namespace fluence
