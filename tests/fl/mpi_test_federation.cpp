// Federated training against independent computations, at 1-4 ranks: with eps = inf and a Newton
// polish, FedAvg's theta equals the minimizer of the same objective on the pooled data found by a
// dense Newton solve (explicit Hessian, LAPACK Cholesky).
#include <gtest/gtest.h>

#include <cmath>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/fl/federation.hpp"
#include "support/dense_reference.hpp"
#include "support/synthetic_deck.hpp"
#include "support/whole_data.hpp"

namespace fluence {
namespace {

const std::string kDeck =
    testing::synthetic_deck({.seed = 5,
                             .rows = 3000,
                             .numeric = 4,
                             .categorical = {3, 4},
                             .classes = 3,
                             .clients = 7,
                             .partition = "scheme = \"dirichlet\"\nalpha = 0.5\n"}) +
    testing::polished_model(0.01, 5, 1e-11,
                            "local_epochs = 2\nbatch_size = 16\nlearning_rate = 0.1\n");

TEST(Federation, PolishedFedAvgEqualsCentralMinimizerOnPooledData) {
  FederatedProblem problem = build_problem(Deck::from_string(kDeck, "test", deck_schema()));
  Federation federation(problem);
  FederationConfig config =
      FederationConfig::from_deck(Deck::from_string(kDeck, "test", deck_schema()));
  const auto result = federation.train(config);
  EXPECT_LE(result.gradient_norm, 1e-11);

  const Table train =
      testing::whole_training_table(Deck::from_string(kDeck, "test", deck_schema()));
  std::vector<double> x(train.rows * problem.encoding.width());
  problem.encoding.encode_all(train, x.data());
  const auto central =
      testing::dense_minimizer(*problem.model->linear(), x.data(), train.label.data(), train.rows);
  // Both solve the same strongly convex problem (l2 = 0.01) to |grad| <= 1e-11, so the parameter
  // error is at most |grad| / l2 = 1e-9 each; 1e-8 is the bound.
  for (std::size_t k = 0; k < central.size(); ++k)
    EXPECT_NEAR(result.theta[k], central[k], 1e-8) << k;
}

TEST(Federation, ObjectiveAndGradientMatchPooledComputation) {
  FederatedProblem problem = build_problem(Deck::from_string(kDeck, "test", deck_schema()));
  Federation federation(problem);
  std::vector<double> theta(federation.parameters());
  for (std::size_t k = 0; k < theta.size(); ++k)
    theta[k] = 0.01 * static_cast<double>(k % 7) - 0.02;
  std::vector<double> gradient;
  federation.gradient(theta, gradient);
  const Table train =
      testing::whole_training_table(Deck::from_string(kDeck, "test", deck_schema()));
  std::vector<double> x(train.rows * problem.encoding.width()), expected(theta.size());
  problem.encoding.encode_all(train, x.data());
  Workspace work;
  const double loss = problem.model->gradient_sum(x.data(), train.label.data(), train.rows,
                                                  theta.data(), expected.data(), work);
  double square = 0.0;
  for (double t : theta) square += t * t;
  // Same sums in a different order (per client vs pooled): agreement to 1e-12.
  EXPECT_NEAR(federation.objective(theta), loss / train.rows + 0.005 * square, 1e-12);
  for (std::size_t k = 0; k < theta.size(); ++k)
    EXPECT_NEAR(gradient[k], expected[k] / train.rows + 0.01 * theta[k], 1e-12) << k;
}

// The Hessian-vector product against the explicit Hessian (its own SYRK-based assembly), with and
// without the probability cache a CG solve keeps; the cache must give the uncached bits, and a
// cleared cache must follow theta.
TEST(Federation, HessianVectorMatchesExplicitHessianWithAndWithoutCache) {
  FederatedProblem problem = build_problem(Deck::from_string(kDeck, "test", deck_schema()));
  Federation federation(problem);
  const std::size_t p = federation.parameters();
  std::vector<double> theta(p), v(p), w(p);
  for (std::size_t k = 0; k < p; ++k) {
    theta[k] = 0.05 * static_cast<double>(k % 5) - 0.1;
    v[k] = std::sin(1.0 + static_cast<double>(k));
    w[k] = std::cos(2.0 * static_cast<double>(k));
  }
  Federation::HessianCache cache;
  for (int moved = 0; moved < 2; ++moved) {
    if (moved) {
      for (auto& t : theta) t = -0.5 * t + 0.03;
      cache.clear();
    }
    std::vector<double> dense;
    federation.explicit_hessian(theta, dense);
    for (const auto* direction : {&v, &w}) {
      std::vector<double> plain(p), cached(p);
      federation.hessian_vector(theta, direction->data(), plain.data());
      federation.hessian_vector(theta, direction->data(), cached.data(), &cache);
      EXPECT_TRUE(cache.filled);
      for (std::size_t i = 0; i < p; ++i) {
        EXPECT_EQ(plain[i], cached[i]) << i;
        double expected = 0.0;
        for (std::size_t j = 0; j < p; ++j) expected += dense[i * p + j] * (*direction)[j];
        // The same sums in another order over O(1) terms: agreement to 1e-12.
        EXPECT_NEAR(cached[i], expected, 1e-12) << i;
      }
    }
  }
}

TEST(Federation, NewtonDirectionWithANearbyPreconditionerSolvesTheDenseSystem) {
  FederatedProblem problem = build_problem(Deck::from_string(kDeck, "test", deck_schema()));
  Federation federation(problem);
  const std::size_t p = federation.parameters();
  std::vector<double> near(p), theta(p), gradient(p);
  for (std::size_t k = 0; k < p; ++k) {
    near[k] = 0.05 * static_cast<double>(k % 5) - 0.1;
    theta[k] = near[k] + 0.02 * std::cos(static_cast<double>(k));
    gradient[k] = std::sin(1.0 + static_cast<double>(k));
  }
  // The preconditioner: the exact inverse of the Hessian at a nearby point (dense, LAPACK).
  std::vector<double> near_hessian, hessian;
  federation.explicit_hessian(near, near_hessian);
  federation.explicit_hessian(theta, hessian);
  const NewtonPreconditioner nearby = [&](const double* r, double* z) {
    const auto solved = testing::dense_solve(near_hessian, std::vector<double>(r, r + p));
    std::copy(solved.begin(), solved.end(), z);
  };
  const auto reference = testing::dense_solve(hessian, gradient);
  std::vector<double> jacobi_direction, preconditioned_direction;
  const double rtol = 1e-11;
  const int jacobi = newton_direction(federation, theta, gradient, jacobi_direction, rtol);
  const int preconditioned =
      newton_direction(federation, theta, gradient, preconditioned_direction, rtol, nearby);
  // ||x - x*|| <= ||H^{-1}|| ||r|| <= rtol ||g|| / l2, l2 = 0.01 (||g|| ~ sqrt(p / 2)).
  const double bound = rtol * norm2(gradient) / 0.01;
  for (std::size_t j = 0; j < p; ++j) {
    EXPECT_NEAR(jacobi_direction[j], reference[j], bound) << j;
    EXPECT_NEAR(preconditioned_direction[j], reference[j], bound) << j;
  }
  // M^{-1} H is I plus a small perturbation: CG converges in a fraction of Jacobi's iterations.
  EXPECT_LT(2 * preconditioned, jacobi) << preconditioned << " vs " << jacobi;
  // Capped at two iterations: CG's iterate, still a descent direction (g . d > 0).
  std::vector<double> capped;
  EXPECT_EQ(newton_direction(federation, theta, gradient, capped, 1e-14, {}, 2), 2);
  double slope = 0.0;
  for (std::size_t j = 0; j < p; ++j) slope += gradient[j] * capped[j];
  EXPECT_GT(slope, 0.0);
}

TEST(Federation, NewtonPolishWithAPreconditionerReachesTheSameMinimizer) {
  FederatedProblem problem = build_problem(Deck::from_string(kDeck, "test", deck_schema()));
  Federation federation(problem);
  const std::size_t p = federation.parameters();
  std::vector<double> start(p);
  for (std::size_t k = 0; k < p; ++k) start[k] = 0.1 * std::sin(static_cast<double>(k));
  std::vector<double> start_hessian;
  federation.explicit_hessian(start, start_hessian);
  long applications = 0;
  const NewtonPreconditioner at_start = [&](const double* r, double* z) {
    ++applications;
    const auto solved = testing::dense_solve(start_hessian, std::vector<double>(r, r + p));
    std::copy(solved.begin(), solved.end(), z);
  };
  std::vector<double> jacobi = start, preconditioned = start;
  newton_polish(federation, jacobi, 1e-12, 100, false);
  newton_polish(federation, preconditioned, 1e-12, 100, false, at_start);
  EXPECT_GT(applications, 0);  // the preconditioner was used
  // Both stop at ||grad h|| <= 1e-12 of an l2 = 0.01 strongly convex h: within 2e-12 / 0.01.
  for (std::size_t j = 0; j < p; ++j) EXPECT_NEAR(preconditioned[j], jacobi[j], 2e-10) << j;
}

// Client sampling in plain FedAvg: a fixed cohort has exactly round(q N) clients every round, the
// Poisson cohort samples each client at rate q (a bound a wrong rate fails), both the same on every
// rank; a round equals the size-weighted mean update of its cohort, summed here in client order by
// ordered_sum (an independent reduction).
TEST(Federation, ClientSamplingDrawsTheCohortsAndFedAvgAveragesThem) {
  FederatedProblem problem = build_problem(Deck::from_string(kDeck, "test", deck_schema()));
  Federation federation(problem);
  const int N = 7;
  const std::unique_ptr<Sampler> fixed =
      make_sampler({ClientSampling::Kind::fixed, 0.3}, problem.seed, N);
  const std::unique_ptr<Sampler> poisson =
      make_sampler({ClientSampling::Kind::poisson, 0.3}, problem.seed, N);
  // Each sampler says which accountant event its cohort is.
  EXPECT_EQ(fixed->event().kind, SamplingEvent::Kind::fixed_size);
  EXPECT_EQ(fixed->event().size, 2);
  EXPECT_EQ(poisson->event().kind, SamplingEvent::Kind::poisson);
  EXPECT_EQ(poisson->event().rate, 0.3);
  EXPECT_EQ(make_sampler({}, problem.seed, N)->event().kind, SamplingEvent::Kind::every_client);
  for (int round = 1; round <= 20; ++round) {
    int members = 0;
    for (int id = 0; id < N; ++id) members += fixed->in_cohort(round, id);
    EXPECT_EQ(members, 2) << round;  // round(0.3 * 7)
  }
  // 14,000 Bernoulli(0.3) draws: standard deviation sqrt(0.21 / 14000) = 0.0039; 5 of them.
  long drawn = 0;
  for (int round = 1; round <= 2000; ++round)
    for (int id = 0; id < N; ++id) drawn += poisson->in_cohort(round, id);
  EXPECT_NEAR(static_cast<double>(drawn) / 14000.0, 0.3, 5 * 0.0039);
  // Every rank draws the same cohorts: the member ids summed with their round agree everywhere.
  long signature = 0;
  for (int round = 1; round <= 50; ++round)
    for (int id = 0; id < N; ++id)
      signature +=
          (round * 31 + id) * (fixed->in_cohort(round, id) + 2 * poisson->in_cohort(round, id));
  long lowest = signature, highest = signature;
  MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &highest, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lowest, highest);

  const FederationConfig config =
      FederationConfig::from_deck(Deck::from_string(kDeck, "test", deck_schema()));
  const std::size_t p = federation.parameters();
  std::vector<double> theta(p);
  for (std::size_t k = 0; k < p; ++k) theta[k] = 0.02 * std::cos(static_cast<double>(k));
  const int round = 3;
  // The expected update: each cohort client's n_i (theta_i - theta), in client order.
  const std::size_t local = problem.clients.size();
  std::vector<double> weighted(local * (p + 1), 0.0), totals(p + 1);
  Workspace work;
  std::vector<double> trained(p);
  for (std::size_t k = 0; k < local; ++k) {
    auto& client = problem.clients[k];
    if (!fixed->in_cohort(round, client.id())) continue;
    client.train_round(*problem.model, config.local, problem.seed, round, trained.data(), work,
                       theta.data());
    const double n = static_cast<double>(client.size());
    for (std::size_t j = 0; j < p; ++j) weighted[k * (p + 1) + j] = n * (trained[j] - theta[j]);
    weighted[k * (p + 1) + p] = n;
  }
  ordered_sum(weighted, static_cast<int>(local), static_cast<int>(p + 1), totals);
  std::vector<double> averaged = theta;
  WeightedMeanReduction mean(p, N, false);
  federation.round(round, averaged, config.local, *fixed, mean);
  // Two exact-to-rounding sums of the same terms: the fixed-point sum's error is 2^-55 of the
  // largest term, the ordered one a few ulps of the total.
  for (std::size_t j = 0; j < p; ++j)
    EXPECT_NEAR(averaged[j], theta[j] + totals[j] / totals[p], 1e-14) << j;
}

TEST(Federation, GatheredRoundGivesTheRuleEveryCohortUpdateInClientOrder) {
  FederatedProblem problem = build_problem(Deck::from_string(kDeck, "test", deck_schema()));
  Federation federation(problem);
  const FederationConfig config =
      FederationConfig::from_deck(Deck::from_string(kDeck, "test", deck_schema()));
  const std::size_t p = federation.parameters();
  std::vector<double> theta(p);
  for (std::size_t k = 0; k < p; ++k) theta[k] = 0.03 * std::sin(static_cast<double>(k) + 1.0);
  const int round = 4;
  // Client 2 left out, a cohort of half the rest: the rule must see exactly the remaining cohort
  // members' updates, each trained by the client alone (independently here), in id order.
  federation.exclude_clients({2});
  const std::unique_ptr<Sampler> half =
      make_sampler({ClientSampling::Kind::poisson, 0.5}, problem.seed, 7);
  const std::size_t local = problem.clients.size();
  std::vector<double> expected_local(local * (p + 1), 0.0), trained(p);
  Workspace work;
  for (std::size_t k = 0; k < local; ++k) {
    auto& client = problem.clients[k];
    expected_local[k * (p + 1) + p] = client.id();
    if (client.id() == 2 || !half->in_cohort(round, client.id())) {
      expected_local[k * (p + 1) + p] = -1.0;  // not in the round
      continue;
    }
    client.train_round(*problem.model, config.local, problem.seed, round, trained.data(), work,
                       theta.data());
    for (std::size_t j = 0; j < p; ++j) expected_local[k * (p + 1) + j] = trained[j] - theta[j];
  }
  const auto all =
      ordered_allgather(expected_local, static_cast<int>(local), static_cast<int>(p + 1));
  std::vector<double> expected;
  for (std::size_t c = 0; c * (p + 1) < all.size(); ++c)
    if (all[c * (p + 1) + p] >= 0.0)
      expected.insert(expected.end(), all.begin() + c * (p + 1), all.begin() + c * (p + 1) + p);
  const int members = static_cast<int>(expected.size() / p);
  ASSERT_GE(members, 1);  // the deck's seed gives a non-empty cohort

  // A rule that checks its rows and steps by the last member's update, halved.
  struct LastHalved final : Aggregator {
    const std::vector<double>& expected;
    int members, seen = -1;
    LastHalved(const std::vector<double>& rows, int count) : expected(rows), members(count) {}
    std::string_view name() const override { return "last_halved"; }
    void aggregate(const double* updates, int n, std::size_t p, double* step) override {
      seen = n;
      ASSERT_EQ(n, members);
      // The same arithmetic on the same rows: bitwise.
      for (std::size_t j = 0; j < static_cast<std::size_t>(n) * p; ++j)
        ASSERT_EQ(updates[j], expected[j]) << j;
      for (std::size_t j = 0; j < p; ++j) step[j] = 0.5 * updates[(n - 1) * p + j];
    }
  } rule(expected, members);
  GatheredReduction gathered(p, rule);
  std::vector<double> stepped = theta;
  federation.round(round, stepped, config.local, *half, gathered);
  const int seen = rule.seen;
  EXPECT_EQ(seen, members);
  for (std::size_t j = 0; j < p; ++j)
    EXPECT_EQ(stepped[j], theta[j] + 0.5 * expected[(members - 1) * p + j]) << j;
}

TEST(ClientLayout, ContiguousAndBalancedBySize) {
  const std::vector<std::int64_t> sizes = {100, 100, 100, 100, 400, 100, 100};
  for (int ranks = 1; ranks <= 4; ++ranks) {
    ClientLayout layout(sizes, ranks);
    EXPECT_EQ(layout.first_client(0), 0);
    EXPECT_EQ(layout.end_client(ranks - 1), 7);
    for (int r = 0; r < ranks; ++r) {
      std::int64_t load = 0;
      for (int c = layout.first_client(r); c < layout.end_client(r); ++c) {
        EXPECT_EQ(layout.owner(c), r);
        load += sizes[c];
      }
      // Contiguous cuts can miss the ideal share by at most the largest client.
      EXPECT_LE(load, 1000 / ranks + 400) << ranks << " ranks, rank " << r;
    }
  }
}

}  // namespace
}  // namespace fluence
