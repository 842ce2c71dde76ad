// Canary clients in private training (audit/canary_clients.hpp): the audit is sound on the correct
// privatizer (its lower bound stays under the accountant's eps over many seeds) and catches each
// planted fault (its lower bound exceeds the accountant's eps), with the same bits on any rank
// count.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "fluence/app/deck_schema.hpp"
#include "fluence/audit/canary_clients.hpp"
#include "fluence/core/config.hpp"
#include "fluence/fl/federation.hpp"
#include "fluence/fl/private_training.hpp"
#include "support/synthetic_deck.hpp"

namespace fluence {
namespace {

struct AuditedRun {
  CanaryAuditResult audit;
  double epsilon = 0.0;  // the accountant's (RDP) after the last round
};

// A private run whose clients' own updates are ~0 (local steps of 1e-300), so that the model moves
// by the canaries and the server's noise alone: the audit sees the privatizer and nothing else.
// p = 4,001 parameters (a logistic model on 4,000 features) keeps the canaries' directions nearly
// orthogonal (|cos| ~ 1/sqrt(p) = 0.016).
// Without `white_box`, no round is scored (the final-model audit alone, much cheaper).
AuditedRun audited_run(int seed, const std::string& privacy, int rounds, long canaries,
                       PlantedFault fault, bool white_box = true, int features = 4000) {
  const int clients = 20;
  const Deck deck = Deck::from_string(
      testing::synthetic_deck({.seed = seed,
                               .rows = 60,
                               .numeric = features,
                               .categorical = {},
                               .classes = 2,
                               .clients = clients}) +
          "[model]\nl2 = 0.0\n[federation]\nlocal_epochs = 1\nbatch_size = 3\nrounds = " +
          std::to_string(rounds) +
          "\n[privacy]\nmode = \"dp-fedavg\"\nadaptive_clip = false\ndelta = 1e-8\n" + privacy,
      "test", deck_schema());
  FederatedProblem problem = build_problem(deck);
  FederationConfig config = FederationConfig::from_deck(deck);
  config.local.learning_rate = 1e-300;
  config.evaluate_rounds = false;
  config.newton_polish = false;
  Federation federation(problem);
  const PrivacyConfig privacy_config = PrivacyConfig::from_deck(deck, clients, rounds);
  PrivateTraining training(federation, privacy_config);
  training.plant_fault_for_testing(fault);
  std::vector<double> start(federation.parameters());
  problem.model->initialize(problem.seed, start.data());
  CanaryAudit audit(problem.seed, canaries, federation.parameters(), clients, start);
  audit.set_likelihood_model(privacy_config.sampling_rate,
                             training.history().update_noise_multiplier);
  training.insert_canaries(&audit);
  const TrainingResult result = federation.train(
      config, {}, &training,
      [&](int round, const std::vector<double>& theta, const std::vector<RoundMetrics>&) {
        if (white_box) audit.observe(round, theta);
        return false;
      });
  AuditedRun run{audit.finish(result.theta, privacy_config.delta, 0.95),
                 training.history().epsilon.back()};
  return run;
}

// The scores against a brute force: each hosted inserted canary's direction (its update at clip
// 0.1, of length 1 = 10 clips) dotted with the model's change in a plain loop, divided by the
// norms; p = 1,003 leaves a partial block of signs. One observed round: both scores are that
// cosine. Tolerance 1e-12: two summation orders of 1,003 terms of size ~1/sqrt(p).
TEST(CanaryAudit, ScoresAreTheCosinesOfTheDirections) {
  const std::size_t p = 1003;
  std::vector<double> start(p), after(p);
  for (std::size_t i = 0; i < p; ++i) {
    start[i] = std::sin(0.1 * static_cast<double>(i));
    after[i] = start[i] + std::cos(0.37 * static_cast<double>(i) + 1.0);
  }
  CanaryAudit audit(17, 64, p, 10, start);
  audit.observe(1, after);
  const CanaryAuditResult result = audit.finish(after, 1e-6, 0.95);
  ASSERT_EQ(result.score_final.size(), 64u);
  double delta_norm = 0.0;
  for (std::size_t i = 0; i < p; ++i) delta_norm += (after[i] - start[i]) * (after[i] - start[i]);
  delta_norm = std::sqrt(delta_norm);
  std::vector<double> direction(p);
  for (const long c : audit.inserted_here()) {
    audit.update(c, 0.1, direction.data());
    double dot = 0.0, length = 0.0;
    for (std::size_t i = 0; i < p; ++i) {
      dot += direction[i] * (after[i] - start[i]);
      length += direction[i] * direction[i];
    }
    EXPECT_NEAR(std::sqrt(length), 1.0, 1e-12);
    const double cosine = dot / (std::sqrt(length) * delta_norm);
    EXPECT_NEAR(result.score_final[static_cast<std::size_t>(c)], cosine, 1e-12) << c;
    EXPECT_NEAR(result.score_all_iterates[static_cast<std::size_t>(c)], cosine, 1e-12) << c;
  }
}

// The likelihood statistic against a brute force: three observed rounds, each round's cosine of
// every hosted canary's direction with the model's change in a plain loop, and the sum of
// log(1 - q + q exp(mu sqrt(p) cos - mu^2/2)) written out. Tolerance 1e-10: sqrt(p) cos is O(1)
// (the cosines agree to ~1e-14, times sqrt(p) = 32 and mu), three terms. A canary whose direction
// the model moves along gets a large score, which the overflow-safe form must keep finite.
TEST(CanaryAudit, LikelihoodScoresSumTheRoundsLogRatios) {
  const std::size_t p = 1003;
  const double q = 0.3, z = 0.8, mu = 1.0 / z;
  std::vector<std::vector<double>> thetas(4, std::vector<double>(p));
  for (std::size_t i = 0; i < p; ++i)
    for (std::size_t t = 0; t < thetas.size(); ++t)
      thetas[t][i] = std::sin(0.1 * static_cast<double>(i) + static_cast<double>(t)) +
                     static_cast<double>(t) * std::cos(0.37 * static_cast<double>(i));
  CanaryAudit audit(17, 64, p, 10, thetas[0]);
  audit.set_likelihood_model(q, z);
  std::vector<double> direction(p);
  if (!audit.inserted_here().empty()) {  // the last round moves along a canary: a huge score
    audit.update(audit.inserted_here().front(), 0.1, direction.data());  // unit length
    for (std::size_t i = 0; i < p; ++i) thetas[3][i] = thetas[2][i] + 50.0 * direction[i];
  }
  for (int t = 1; t < 4; ++t) audit.observe(t, thetas[static_cast<std::size_t>(t)]);
  const CanaryAuditResult result = audit.finish(thetas[3], 1e-6, 0.95);
  ASSERT_EQ(result.score_likelihood.size(), 64u);
  for (const long c : audit.inserted_here()) {
    audit.update(c, 0.1, direction.data());
    double expected = 0.0;
    for (std::size_t t = 1; t < 4; ++t) {
      double dot = 0.0, norm = 0.0;
      for (std::size_t i = 0; i < p; ++i) {
        const double change = thetas[t][i] - thetas[t - 1][i];
        dot += direction[i] * change;
        norm += change * change;
      }
      const double x = mu * std::sqrt(static_cast<double>(p)) * dot / std::sqrt(norm) - mu * mu / 2;
      expected += x > 30.0 ? x + std::log(q) : std::log(1.0 - q + q * std::exp(x));
    }
    const double score = result.score_likelihood[static_cast<std::size_t>(c)];
    ASSERT_TRUE(std::isfinite(score)) << c;
    EXPECT_NEAR(score, expected, 1e-10 * std::max(1.0, std::abs(expected))) << c;
  }
  // One canary on several ranks: the ranks that host none still take part in gathering the sums
  // (a hang here is the failure: the multi-run audit's one-canary runs deadlocked once).
  CanaryAudit single(17, 1, p, 10, thetas[0]);
  single.set_likelihood_model(q, z);
  single.observe(1, thetas[1]);
  EXPECT_EQ(single.state().size(), 3u);
  EXPECT_EQ(single.finish(thetas[1], 1e-6, 0.95).score_likelihood.size(), 1u);
}

// Rounds are scored eight at a time (CanaryAudit::kRounds): 19 rounds cross two batches and end in
// a partial one. Against a brute force (each round's cosine of every hosted canary's direction with
// the model's change in a plain loop, the maximum and the likelihood sum written out; tolerance
// 1e-10 as above), and a stop after round 11 (state() in mid-batch, restored into a fresh audit
// that observes rounds 12-19) against the uninterrupted audit, bit for bit.
TEST(CanaryAudit, RoundsScoredInBatchesMatchABruteForceAndAResume) {
  const std::size_t p = 517, rounds = 19;
  const double q = 0.3, z = 0.8, mu = 1.0 / z;
  std::vector<std::vector<double>> thetas(rounds + 1, std::vector<double>(p));
  for (std::size_t t = 0; t <= rounds; ++t)
    for (std::size_t i = 0; i < p; ++i)
      thetas[t][i] = std::sin(0.1 * static_cast<double>(i * (t + 1)) + static_cast<double>(t)) +
                     0.3 * static_cast<double>(t) * std::cos(0.37 * static_cast<double>(i));
  thetas[5] = thetas[4];  // a round that does not move the model scores 0
  auto audit_of = [&] {
    CanaryAudit audit(23, 40, p, 10, thetas[0]);
    audit.set_likelihood_model(q, z);
    return audit;
  };
  CanaryAudit whole = audit_of();
  for (std::size_t t = 1; t <= rounds; ++t) whole.observe(static_cast<int>(t), thetas[t]);
  const CanaryAuditResult expected = whole.finish(thetas[rounds], 1e-6, 0.95);

  CanaryAudit first = audit_of();
  for (std::size_t t = 1; t <= 11; ++t) first.observe(static_cast<int>(t), thetas[t]);
  const std::vector<double> saved = first.state();
  CanaryAudit resumed = audit_of();
  resumed.restore(saved, thetas[11]);
  for (std::size_t t = 11; t <= rounds; ++t)  // round 11 again: seen already, not scored twice
    resumed.observe(static_cast<int>(t), thetas[t]);
  const CanaryAuditResult result = resumed.finish(thetas[rounds], 1e-6, 0.95);
  for (std::size_t c = 0; c < 40; ++c) {
    EXPECT_EQ(result.score_all_iterates[c], expected.score_all_iterates[c]) << c;
    EXPECT_EQ(result.score_likelihood[c], expected.score_likelihood[c]) << c;
    EXPECT_EQ(result.score_final[c], expected.score_final[c]) << c;
  }

  std::vector<double> direction(p);
  for (const long c : whole.inserted_here()) {
    whole.update(c, 0.1, direction.data());
    double best = -std::numeric_limits<double>::infinity(), likelihood = 0.0;
    for (std::size_t t = 1; t <= rounds; ++t) {
      double dot = 0.0, norm = 0.0;
      for (std::size_t i = 0; i < p; ++i) {
        const double change = thetas[t][i] - thetas[t - 1][i];
        dot += direction[i] * change;
        norm += change * change;
      }
      const double cosine = norm > 0.0 ? dot / std::sqrt(norm) : 0.0;
      best = std::max(best, cosine);
      const double x = mu * std::sqrt(static_cast<double>(p)) * cosine - mu * mu / 2;
      likelihood += std::log(1.0 - q + q * std::exp(x));
    }
    const auto k = static_cast<std::size_t>(c);
    EXPECT_NEAR(expected.score_all_iterates[k], best, 1e-12) << c;
    EXPECT_NEAR(expected.score_likelihood[k], likelihood,
                1e-10 * std::max(1.0, std::abs(likelihood)))
        << c;
  }
}

// One round with every client at z = sqrt(2) (RDP eps 4.16 at delta 1e-8): faults that change it
// by a factor of 4 (the noise) or 10 (the canary's unclipped length) are far above, and the 4,000
// canaries over 40,001 parameters (cosines between directions ~ 0.005) let the one-run bound see
// it. delta = 1e-8 keeps m delta far below the confidence's beta (the theorem's delta term).
const char* kModest = "sampling_rate = 1.0\nnoise_multiplier = 1.41421356\nclip = 1.0\n";

TEST(CanaryAudit, QuarterNoiseIsCaught) {
  const AuditedRun run =
      audited_run(3, kModest, 1, 4000, PlantedFault::quarter_noise, false, 40000);
  EXPECT_GT(run.audit.epsilon_lower_final, run.epsilon);
}

TEST(CanaryAudit, SkippedClippingIsCaught) {
  const AuditedRun run = audited_run(4, kModest, 1, 1000, PlantedFault::clipping_skipped);
  EXPECT_GT(run.audit.epsilon_lower_final, run.epsilon);
  EXPECT_GT(run.audit.epsilon_lower_all_iterates, run.epsilon);
  EXPECT_GT(run.audit.epsilon_lower_likelihood, run.epsilon);
}

// Poisson sampling with q = 0.02 over 100 rounds at z = 1.25 (RDP eps 1.09). The planted fault
// trains the first round's cohort every round: the ~80 inserted canaries in it are in all 100
// rounds (their final scores ~5 standard deviations out), while the accountant composes q. Only a
// fraction q of the canaries can show it, hence the 8,000 of them (final model only: cheap).
TEST(CanaryAudit, FixedCohortAccountedAsPoissonIsCaught) {
  const char* rare = "sampling_rate = 0.02\nnoise_multiplier = 1.25\nclip = 1.0\n";
  const AuditedRun run =
      audited_run(5, rare, 100, 8000, PlantedFault::fixed_cohort_as_poisson, false);
  EXPECT_GT(run.audit.epsilon_lower_final, run.epsilon);
}

// Sound: over 100 seeds of two fast configurations (one round at q = 1; three at q = 0.5), 400
// canaries each (1,001 parameters), none of the three bounds (final, all-iterates maximum,
// likelihood) exceeds the accountant's eps more often than its
// 95% confidence allows: at most 5 + 3 standard deviations (sqrt(100 x 0.05 x 0.95) = 2.2) of 100,
// i.e. 11. (The accountant's eps is an upper bound and the one-run bound is loose: in practice none
// does.) The same bits on every rank count: the bounds agree across ranks.
TEST(CanaryAudit, CorrectPrivatizerStaysUnderTheAccountant) {
  int exceeded = 0;
  double largest_ratio = 0.0;
  for (int seed = 100; seed < 200; ++seed) {
    const bool every = seed % 2 == 0;
    const AuditedRun run = audited_run(
        seed, every ? kModest : "sampling_rate = 0.5\nnoise_multiplier = 1.0\nclip = 1.0\n",
        every ? 1 : 3, 400, PlantedFault::none, true, 1000);
    const double bound =
        std::max({run.audit.epsilon_lower_final, run.audit.epsilon_lower_all_iterates,
                  run.audit.epsilon_lower_likelihood});
    exceeded += bound > run.epsilon;
    largest_ratio = std::max(largest_ratio, bound / run.epsilon);
    double agreed[2] = {bound, -bound};
    MPI_Allreduce(MPI_IN_PLACE, agreed, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    ASSERT_EQ(agreed[0], -agreed[1]) << "seed " << seed;
  }
  EXPECT_LE(exceeded, 11);
  RecordProperty("largest_bound_over_epsilon", std::to_string(largest_ratio));
}

}  // namespace
}  // namespace fluence
