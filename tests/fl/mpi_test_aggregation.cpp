// federation.aggregator in `fluence train`'s rounds against a brute force, at 1-4 ranks: every
// client's update is recomputed here, gathered by explicit MPI_Allgather of (id, update) records,
// and the rule is applied from its definition (full sorts, explicit pairwise distances, a plain
// loop of centered clipping). Private training and Ditto refuse a rule other than the mean.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/error.hpp"
#include "fluence/fl/federation.hpp"
#include "support/synthetic_deck.hpp"

namespace fluence {
namespace {

const std::string kFederation =
    testing::synthetic_deck({.seed = 11,
                             .rows = 1400,
                             .numeric = 3,
                             .categorical = {3},
                             .classes = 3,
                             .clients = 9,
                             .partition = "scheme = \"dirichlet\"\nalpha = 0.7\n"}) +
    "[model]\nl2 = 0.01\n[federation]\nrounds = 3\nlocal_epochs = 1\nbatch_size = 16\n"
    "learning_rate = 0.2\neval_train_loss = false\n";

Deck deck_with(const std::string& federation_lines) {
  return Deck::from_string(kFederation + federation_lines, "test", deck_schema());
}

// Every client's update from theta in client-id order (n x p), gathered the long way.
std::vector<double> all_updates(FederatedProblem& problem, const FederationConfig& config,
                                int round, const std::vector<double>& theta) {
  const std::size_t p = problem.model->parameters();
  const int clients = static_cast<int>(problem.client_rows.size());
  std::vector<double> mine(static_cast<std::size_t>(clients) * (p + 1), 0.0);
  Workspace work;
  for (auto& client : problem.clients) {
    double* record = mine.data() + static_cast<std::size_t>(client.id()) * (p + 1);
    record[0] = 1.0;  // this rank holds the client
    client.train_update(*problem.model, config.local, problem.seed, round, record + 1, work,
                        theta.data());
  }
  // Exactly one rank holds each client: the sum over ranks is that rank's record.
  MPI_Allreduce(MPI_IN_PLACE, mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_SUM,
                MPI_COMM_WORLD);
  std::vector<double> updates(static_cast<std::size_t>(clients) * p);
  for (int i = 0; i < clients; ++i) {
    EXPECT_EQ(mine[static_cast<std::size_t>(i) * (p + 1)], 1.0) << "client " << i;
    std::copy_n(mine.begin() + static_cast<std::ptrdiff_t>(i * (p + 1) + 1), p,
                updates.begin() + static_cast<std::ptrdiff_t>(i * p));
  }
  return updates;
}

std::vector<double> column(const std::vector<double>& u, int n, std::size_t p, std::size_t j) {
  std::vector<double> values(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) values[i] = u[i * p + j];
  std::sort(values.begin(), values.end());
  return values;
}

std::vector<double> krum_scores(const std::vector<double>& u, int n, std::size_t p, int f) {
  std::vector<double> scores(n);
  for (int i = 0; i < n; ++i) {
    std::vector<double> d;
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      double s = 0.0;
      for (std::size_t k = 0; k < p; ++k)
        s += (u[i * p + k] - u[j * p + k]) * (u[i * p + k] - u[j * p + k]);
      d.push_back(s);
    }
    std::sort(d.begin(), d.end());
    scores[i] = std::accumulate(d.begin(), d.begin() + (n - f - 2), 0.0);
  }
  return scores;
}

// The rule from its definition; `center` is centered clipping's state across rounds.
std::vector<double> brute_force_step(const AggregatorConfig& rule, const std::vector<double>& u,
                                     int n, std::size_t p, std::vector<double>& center) {
  std::vector<double> step(p, 0.0);
  if (rule.name == "median" || rule.name == "trimmed_mean") {
    for (std::size_t j = 0; j < p; ++j) {
      const auto v = column(u, n, p, j);
      if (rule.name == "median")
        step[j] = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
      else
        step[j] = std::accumulate(v.begin() + rule.byzantine, v.end() - rule.byzantine, 0.0) /
                  (n - 2 * rule.byzantine);
    }
  } else if (rule.name == "krum" || rule.name == "multi_krum") {
    const auto scores = krum_scores(u, n, p, rule.byzantine);
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return scores[a] < scores[b]; });
    const int m = rule.name == "krum" ? 1 : rule.selected;
    for (int k = 0; k < m; ++k)
      for (std::size_t j = 0; j < p; ++j) step[j] += u[order[k] * p + j] / m;
  } else if (rule.name == "centered_clipping") {
    for (int it = 0; it < rule.iterations; ++it) {
      std::vector<double> move(p, 0.0);
      for (int i = 0; i < n; ++i) {
        double norm = 0.0;
        for (std::size_t j = 0; j < p; ++j) norm += std::pow(u[i * p + j] - center[j], 2);
        norm = std::sqrt(norm);
        const double scale = norm > 0.0 ? std::min(1.0, rule.tau / norm) : 0.0;
        for (std::size_t j = 0; j < p; ++j) move[j] += scale * (u[i * p + j] - center[j]) / n;
      }
      for (std::size_t j = 0; j < p; ++j) center[j] += move[j];
    }
    step = center;
  }
  return step;
}

TEST(Aggregation, RobustRulesInTrainMatchABruteForceOnAnyRankCount) {
  const char* rules[][2] = {{"median", ""},
                            {"trimmed_mean", "byzantine = 2\n"},
                            {"krum", "byzantine = 2\n"},
                            {"multi_krum", "byzantine = 2\nkrum_selected = 3\n"},
                            {"centered_clipping", "cc_tau = 0.05\ncc_iterations = 2\n"}};
  for (const auto& [name, lines] : rules) {
    const Deck deck = deck_with(std::string("aggregator = \"") + name + "\"\n" + lines);
    FederatedProblem problem = build_problem(deck);
    const FederationConfig config = FederationConfig::from_deck(deck);
    Federation federation(problem);
    const TrainingResult trained = federation.train(config);

    const std::size_t p = federation.parameters();
    const int n = static_cast<int>(problem.client_rows.size());
    std::vector<double> theta(p), center(p, 0.0);
    problem.model->initialize(problem.seed, theta.data());
    for (int round = 1; round <= config.rounds; ++round) {
      const auto updates = all_updates(problem, config, round, theta);
      const auto step = brute_force_step(config.aggregator, updates, n, p, center);
      for (std::size_t j = 0; j < p; ++j) theta[j] += step[j];
    }
    // KRUM and the median select values (and halve a sum of two): the same bits. The trimmed mean,
    // multi-KRUM and centered clipping sum in another order than the brute force: updates are
    // O(1e-1), so a few ulps of a sum over 9 clients, times 3 rounds, stay below 1e-14.
    const bool selects = std::string(name) == "krum" || std::string(name) == "median";
    for (std::size_t j = 0; j < p; ++j) {
      if (selects)
        EXPECT_EQ(trained.theta[j], theta[j]) << name << " coordinate " << j;
      else
        EXPECT_NEAR(trained.theta[j], theta[j], 1e-14) << name << " coordinate " << j;
    }
  }
}

// A robust rule runs in plain FedAvg and in DP-FedAvg (noise by the rule's sensitivity,
// tests/fl/mpi_test_private_training.cpp); FeO2's opt-out combination and the non-private Ditto
// baseline are means, so a deck with a rule there is refused.
TEST(Aggregation, FeO2AndDittoRefuseARuleOtherThanTheMean) {
  EXPECT_NO_THROW(FederationConfig::from_deck(
      deck_with("aggregator = \"krum\"\n[privacy]\nmode = \"dp-fedavg\"\n")));
  EXPECT_THROW(FederationConfig::from_deck(deck_with(
                   "aggregator = \"krum\"\n[privacy]\nmode = \"feo2\"\nopt_out_fraction = 0.2\n")),
               InputError);
  EXPECT_THROW(FederationConfig::from_deck(
                   deck_with("aggregator = \"median\"\n[personalization]\nmethod = \"ditto\"\n")),
               InputError);
  EXPECT_NO_THROW(FederationConfig::from_deck(deck_with("[privacy]\nmode = \"dp-fedavg\"\n")));
}

}  // namespace
}  // namespace fluence
