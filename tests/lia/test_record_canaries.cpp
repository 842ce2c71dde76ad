// Record-level canaries in LIA's DP-SGD (lia/record_canaries.hpp): the scores against a
// brute-force recomputation from the run's recorded steps, the audit sound on the correct mechanism
// (its lower bounds stay under the accountant's eps over many seeds) and catching a planted fault
// (DP-SGD run without its noise while accounted with it).
#include "fluence/lia/record_canaries.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/lia/dp_sgd.hpp"
#include "fluence/privacy/rdp_accountant.hpp"

namespace fluence {
namespace {

struct Data {
  std::vector<double> x, theta;
  std::vector<std::int32_t> y;
};

Data random_data(std::uint64_t seed, int rows, int features, int classes) {
  Stream stream(seed, purpose::synthetic_rows);
  Data d;
  d.x.resize(static_cast<std::size_t>(rows) * features);
  d.y.resize(static_cast<std::size_t>(rows));
  d.theta.resize(static_cast<std::size_t>(classes) * features);
  for (auto& v : d.x) v = stream.normal();
  for (auto& v : d.y) v = static_cast<std::int32_t>(stream.below(classes));
  for (auto& v : d.theta) v = 0.1 * stream.normal();
  return d;
}

// Forwards to the audit's canaries and records, per step, the gradient sum before and after they
// are added, the sampled canaries and the noisy sum.
class Recorder final : public lia::DpSgdCanaries {
 public:
  Recorder(RecordCanaries& canaries, std::size_t p) : canaries_(canaries), p_(p) {}
  void add(long step, double clip, double rate, double* gradient) override {
    before.emplace_back(gradient, gradient + p_);
    canaries_.add(step, clip, rate, gradient);
    after.emplace_back(gradient, gradient + p_);
    sampled.emplace_back(canaries_.sampled().begin(), canaries_.sampled().end());
  }
  void observe(long step, const double* noisy) override {
    noisy_sums.emplace_back(noisy, noisy + p_);
    canaries_.observe(step, noisy);
  }
  std::vector<std::vector<double>> before, after, noisy_sums;
  std::vector<std::vector<std::uint8_t>> sampled;

 private:
  RecordCanaries& canaries_;
  std::size_t p_;
};

// Every score recomputed in plain loops from the recorded steps: a sampled canary adds S s_c /
// sqrt(p) to the step's sum (and only an inserted one is ever sampled); the white-box score is
// sum_t log(1 - q + q exp((x_t - 1/2) / sigma^2)) with x_t = <s_c, g_t> / (sqrt(p) S), written
// directly (the audit's form is the numerically stable one); the final score the cosine of s_c
// with theta_0 - theta_T (a step moves against the gradient). Tolerance 1e-12 on sums of p = 60
// terms of size ~1 and the difference of the stable and the direct logarithm (a few ulps each of 6
// steps).
TEST(RecordCanaries, ScoresMatchABruteForceRecomputation) {
  const int rows = 30, D = 20, C = 3;
  const std::size_t p = static_cast<std::size_t>(D) * C;
  const long m = 50;
  const Data d = random_data(11, rows, D, C);
  lia::DpSgdConfig config;
  config.epochs = 2;
  config.batch_size = 10;
  config.learning_rate = 0.1;
  config.clip = 0.8;
  config.noise_multiplier = 1.3;
  config.l2 = 0.01;
  const double q = lia::dp_sgd_rate(rows, config);
  RecordCanaries canaries(5, m, p, config.noise_multiplier);
  Recorder recorder(canaries, p);
  std::vector<double> theta = d.theta;
  Stream stream(5, purpose::synthetic_rows, 99);
  lia::DpSgdWorkspace work;
  lia::dp_sgd(d.x.data(), d.y.data(), rows, D, C, config, stream, theta.data(), work, &recorder);
  const CanaryAuditResult result = canaries.finish(d.theta.data(), theta.data(), 1e-5, 0.95);
  const std::size_t steps = recorder.noisy_sums.size();
  ASSERT_EQ(steps, static_cast<std::size_t>(lia::dp_sgd_steps(rows, config)));
  const double root_p = std::sqrt(static_cast<double>(p));
  long sampled_total = 0;
  for (std::size_t t = 0; t < steps; ++t) {
    std::vector<double> added(p, 0.0);
    for (long c = 0; c < m; ++c) {
      if (!recorder.sampled[t][static_cast<std::size_t>(c)]) continue;
      ASSERT_TRUE(result.inserted[static_cast<std::size_t>(c)]) << c;
      ++sampled_total;
      for (std::size_t i = 0; i < p; ++i) added[i] += config.clip * canaries.sign(c, i) / root_p;
    }
    for (std::size_t i = 0; i < p; ++i)
      EXPECT_NEAR(recorder.after[t][i] - recorder.before[t][i], added[i], 1e-12) << t << " " << i;
  }
  EXPECT_GT(sampled_total, 0);
  double change_norm = 0.0;
  for (std::size_t i = 0; i < p; ++i)
    change_norm += (theta[i] - d.theta[i]) * (theta[i] - d.theta[i]);
  change_norm = std::sqrt(change_norm);
  const double variance = config.noise_multiplier * config.noise_multiplier;
  for (long c = 0; c < m; ++c) {
    double white = 0.0;
    for (std::size_t t = 0; t < steps; ++t) {
      double dot = 0.0;
      for (std::size_t i = 0; i < p; ++i) dot += canaries.sign(c, i) * recorder.noisy_sums[t][i];
      const double x = dot / (root_p * config.clip);
      white += std::log(1.0 - q + q * std::exp((x - 0.5) / variance));
    }
    double dot = 0.0;
    for (std::size_t i = 0; i < p; ++i) dot += canaries.sign(c, i) * (d.theta[i] - theta[i]);
    const auto k = static_cast<std::size_t>(c);
    EXPECT_NEAR(result.score_all_iterates[k], white, 1e-12 * std::max(1.0, std::abs(white))) << c;
    EXPECT_NEAR(result.score_final[k], dot / (root_p * change_norm), 1e-12) << c;
  }
}

// The audited run as audit_dp_sgd_records runs it, against the accountant's eps of its steps.
struct Audited {
  CanaryAuditResult audit;
  double epsilon = 0.0;
};

Audited audited(std::uint64_t seed, int rows, int D, int C, const lia::DpSgdConfig& run,
                double accounted_noise, long m, double delta) {
  const Data d = random_data(seed, rows, D, C);
  CanaryAuditConfig audit;
  audit.canaries = m;
  audit.confidence = 0.95;
  Audited out;
  out.audit = audit_dp_sgd_records(d.x.data(), d.y.data(), rows, D, C, run, d.theta.data(), seed,
                                   audit, delta);
  out.epsilon = dp_sgd_epsilon(lia::dp_sgd_rate(rows, run), accounted_noise,
                               lia::dp_sgd_steps(rows, run), delta)
                    .epsilon;
  return out;
}

// Sound: over 100 seeds of a fast configuration (q = 1/2, 4 steps, sigma = 1, 400 canaries over
// p = 200), neither bound exceeds the accountant's eps more often than its 95% confidence allows:
// at most 5 + 3 standard deviations (sqrt(100 x 0.05 x 0.95) = 2.2) of 100, i.e. 11.
TEST(RecordCanaries, CorrectDpSgdStaysUnderTheAccountant) {
  lia::DpSgdConfig config;
  config.epochs = 2;
  config.batch_size = 10;
  config.learning_rate = 0.1;
  config.clip = 1.0;
  config.noise_multiplier = 1.0;
  int exceeded = 0;
  double largest = 0.0;
  for (int seed = 1; seed <= 100; ++seed) {
    const Audited run =
        audited(static_cast<std::uint64_t>(seed), 20, 100, 2, config, 1.0, 400, 1e-5);
    const double bound =
        std::max(run.audit.epsilon_lower_all_iterates, run.audit.epsilon_lower_final);
    exceeded += bound > run.epsilon;
    largest = std::max(largest, bound / run.epsilon);
  }
  EXPECT_LE(exceeded, 11) << "largest bound / eps " << largest;
}

// The planted fault: DP-SGD without its noise while accounted at sigma = 2 (one full-batch step:
// eps about 2.3 at delta 1e-5). 1,000 canaries over p = 10,000 (their directions' cosines ~ 0.01):
// an inserted canary's per-step dot is 1 +- 0.22 (the others' crosstalk), a held-out one's 0 +-
// 0.22, so hundreds of guesses are all right and both bounds exceed the accountant's eps.
TEST(RecordCanaries, NoiseSkippedIsCaught) {
  lia::DpSgdConfig config;
  config.epochs = 1;
  config.batch_size = 10;  // q = 1
  config.learning_rate = 0.1;
  config.clip = 1.0;
  config.noise_multiplier = 0.0;  // the fault: accounted at 2 below
  const Audited run = audited(3, 10, 5000, 2, config, 2.0, 1000, 1e-5);
  EXPECT_GT(run.audit.epsilon_lower_all_iterates, run.epsilon);
  EXPECT_GT(run.audit.epsilon_lower_final, run.epsilon);
}

}  // namespace
}  // namespace fluence
