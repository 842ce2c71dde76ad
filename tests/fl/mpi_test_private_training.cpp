// DP-FedAvg and FeO2 at 1-4 ranks: the server noise has the stated standard deviation, client
// sampling is Bernoulli(q), and FeO2 without private clients is plain federated averaging.
#include <gtest/gtest.h>
#include <mpi.h>

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/fl/aggregators.hpp"
#include "fluence/fl/private_training.hpp"
#include "fluence/fl/purposes.hpp"
#include "fluence/fl/round.hpp"
#include "fluence/privacy/rdp_accountant.hpp"
#include "support/default_deck.hpp"
#include "support/synthetic_deck.hpp"

namespace fluence {
namespace {

std::string deck_text(const std::string& privacy, const std::string& partition = "",
                      const std::string& federation = "") {
  return testing::synthetic_deck({.seed = 12,
                                  .rows = 2500,
                                  .numeric = 3,
                                  .categorical = {3},
                                  .classes = 2,
                                  .clients = 40,
                                  .partition = partition}) +
         R"([model]
l2 = 1e-3
[federation]
rounds = 1
local_epochs = 1
batch_size = 10
learning_rate = 0.1
)" + federation +
         "[privacy]\n" + privacy;
}

// One private round as Federation::train runs it (the round with the privatizer's parts, then its
// finish).
void private_round(Federation& federation, PrivateTraining& training, int round,
                   std::vector<double>& theta, const LocalTrainingConfig& local) {
  federation.round(round, theta, local, training.sampler(), training);
  training.finish_round(round, theta);
}

// With local steps of size ~0 every update is 0, so theta moves by the server noise alone:
// N(0, (z S / (q N))^2) per coordinate (adaptive clipping off: the updates get all of z). 400
// rounds x p coordinates give the sample standard deviation to ~1% (its relative standard error
// is 1/sqrt(2 x draws)); the bound is 5%.
TEST(PrivateTraining, ServerNoiseHasTheStatedStandardDeviation) {
  const Deck deck = Deck::from_string(deck_text(R"(
mode = "dp-fedavg"
sampling_rate = 0.25
noise_multiplier = 1.3
clip = 0.7
adaptive_clip = false
)"),
                                      "test", deck_schema());
  FederatedProblem problem = build_problem(deck);
  Federation federation(problem);
  const PrivacyConfig config = PrivacyConfig::from_deck(deck, 40, 400);
  PrivateTraining training(federation, config);
  LocalTrainingConfig local = FederationConfig::from_deck(default_deck()).local;
  local.learning_rate = 1e-300;
  std::vector<double> theta(federation.parameters(), 0.0);
  double sum = 0.0, square = 0.0, draws = 0.0;
  for (int round = 1; round <= 400; ++round) {
    std::vector<double> before = theta;
    private_round(federation, training, round, theta, local);
    for (std::size_t k = 0; k < theta.size(); ++k) {
      const double step = theta[k] - before[k];
      sum += step;
      square += step * step;
      draws += 1.0;
    }
  }
  const double sigma = 1.3 * 0.7 / (0.25 * 40);
  const double mean = sum / draws, sd = std::sqrt(square / draws - mean * mean);
  EXPECT_NEAR(sd, sigma, 0.05 * sigma);
  EXPECT_NEAR(mean, 0.0, 5.0 * sigma / std::sqrt(draws));
  // The accountant composed 400 rounds at (q, z).
  EXPECT_NEAR(training.history().epsilon.back(), dp_sgd_epsilon(0.25, 1.3, 400, 1e-5).epsilon,
              1e-12);
}

// Sampled counts per round are Binomial(N, q): over 400 rounds the mean is within 4 standard
// errors of q N and every client's inclusion frequency within 5 standard errors of q.
TEST(PrivateTraining, ClientsAreSampledWithRateQ) {
  const Deck deck = Deck::from_string(
      deck_text("mode = \"dp-fedavg\"\nsampling_rate = 0.2\nadaptive_clip = false\n"), "test",
      deck_schema());
  FederatedProblem problem = build_problem(deck);
  Federation federation(problem);
  PrivateTraining training(federation, PrivacyConfig::from_deck(deck, 40, 400));
  std::vector<double> frequency(40, 0.0);
  double total = 0.0;
  for (int round = 1; round <= 400; ++round)
    for (int id = 0; id < 40; ++id)
      if (training.sampled(round, id)) {
        frequency[id] += 1.0 / 400;
        total += 1.0;
      }
  EXPECT_NEAR(total / 400, 8.0, 4.0 * std::sqrt(40 * 0.2 * 0.8 / 400));
  for (double f : frequency) EXPECT_NEAR(f, 0.2, 5.0 * std::sqrt(0.2 * 0.8 / 400));
}

// FeO2 with every client opted out, r = 1, q = 1 and a clip no update reaches is the plain average
// of the client updates: with equal client sizes, exactly FedAvg's size-weighted average (up to
// rounding: the two sum in different orders).
TEST(PrivateTraining, Feo2WithoutPrivateClientsIsFedAvg) {
  const Deck deck = Deck::from_string(deck_text(R"(
mode = "feo2"
sampling_rate = 1.0
opt_out_fraction = 1.0
ratio = 1.0
clip = 1e6
adaptive_clip = false
)"),
                                      "test", deck_schema());
  FederatedProblem problem = build_problem(deck);
  for (const auto& rows : problem.client_rows)
    ASSERT_EQ(rows.size(), problem.client_rows[0].size());
  Federation federation(problem);
  PrivateTraining training(federation, PrivacyConfig::from_deck(deck, 40, 3));
  const FederationConfig fedavg = FederationConfig::from_deck(deck);
  std::vector<double> feo2(federation.parameters(), 0.0), plain = feo2;
  WeightedMeanReduction mean(federation.parameters(), 40, false);
  const std::unique_ptr<Sampler> everyone = make_sampler({}, problem.seed, 40);
  for (int round = 1; round <= 3; ++round) {
    private_round(federation, training, round, feo2, fedavg.local);
    federation.round(round, plain, fedavg.local, *everyone, mean);
  }
  for (std::size_t k = 0; k < plain.size(); ++k) EXPECT_NEAR(feo2[k], plain[k], 1e-12);
  EXPECT_EQ(training.history().opt_out_clients.size(), 40u);
}

// The skewed variant (seed 004 §5.1): with one label per client, the opt-out clients are all
// holders of the given label, round(rho N) of them, and the same on every rank.
TEST(PrivateTraining, SkewedOptOutDrawsAmongHoldersOfTheLabel) {
  const Deck deck =
      Deck::from_string(deck_text("mode = \"feo2\"\nopt_out_fraction = 0.2\nopt_out_label = 1\n",
                                  "scheme = \"label_shards\"\nshards_per_client = 1\n"),
                        "test", deck_schema());
  FederatedProblem problem = build_problem(deck);
  const std::vector<int> chosen = choose_opt_out_clients(problem, 0.2, 1);
  ASSERT_EQ(chosen.size(), 8u);
  int holders = 0;
  for (int id = 0; id < 40; ++id) {
    bool holds = false;
    for (auto row : problem.client_rows[id]) holds |= problem.data.train.label[row] == 1;
    holders += holds;
    if (std::find(chosen.begin(), chosen.end(), id) != chosen.end()) {
      EXPECT_TRUE(holds) << id;
    }
  }
  EXPECT_LT(holders, 40);  // the restriction is not vacuous
  EXPECT_THROW(choose_opt_out_clients(problem, 0.9, 1), InputError);
}

// The local test split holds out round(fraction x rows) of every client's rows, disjoint from
// its training rows; and the non-private Ditto run's Acc_g,np is the mean over clients of the
// global model's accuracy on their local test data, recomputed here directly.
TEST(PrivateTraining, LocalTestMetricsMatchDirectEvaluation) {
  const Deck deck =
      Deck::from_string(deck_text("mode = \"none\"\n", "local_test_fraction = 0.25\n") +
                            "[personalization]\nmethod = \"ditto\"\n",
                        "test", deck_schema());
  FederatedProblem problem = build_problem(deck);
  std::int64_t held = 0;
  for (std::size_t id = 0; id < problem.client_rows.size(); ++id) {
    const auto& train = problem.client_rows[id];
    const auto& test = problem.client_test_rows[id];
    EXPECT_EQ(test.size(),
              static_cast<std::size_t>(std::llround(0.25 * (train.size() + test.size()))));
    for (auto row : test) EXPECT_FALSE(std::binary_search(train.begin(), train.end(), row));
    held += static_cast<std::int64_t>(test.size());
  }
  EXPECT_EQ(problem.total_train_rows + held, static_cast<std::int64_t>(problem.data.train.rows));
  Federation federation(problem);
  FederationConfig training = FederationConfig::from_deck(deck);
  training.rounds = 2;
  const PersonalizationConfig personalization = PersonalizationConfig::from_deck(deck, training);
  PrivateTraining run(federation, PrivacyConfig::from_deck(deck, 40, 2), personalization);
  std::vector<double> theta(federation.parameters(), 0.0);
  private_round(federation, run, 1, theta, training.local);
  private_round(federation, run, 2, theta, training.local);
  double local[2] = {0.0, 0.0};  // sum of client accuracies, clients
  Workspace work;
  for (const auto& client : problem.clients) {
    const auto r = problem.model->loss_sum(client.local_test_features(), client.local_test_labels(),
                                           client.local_test_size(), theta.data(), work);
    local[0] += static_cast<double>(r.correct) / static_cast<double>(client.local_test_size());
    local[1] += 1.0;
  }
  MPI_Allreduce(MPI_IN_PLACE, local, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_NEAR(run.metrics().acc_g_np[1], local[0] / local[1], 1e-12);
  EXPECT_TRUE(std::isnan(run.metrics().acc_g_p[1]));  // no private clients in the baseline
  EXPECT_GT(run.metrics().acc_l_np[1], 0.0);
}

// A fraction that rounds to all of a client's rows (0.999 of the ~50 rows of each client here)
// holds out all but one: a client keeps a training row. It used to hold out none, as if the
// fraction were 0 (issue 41; a fraction of 1 is refused by the schema).
TEST(PrivateTraining, LocalTestSplitKeepsOneTrainingRow) {
  const Deck deck = Deck::from_string(
      deck_text("mode = \"none\"\n", "local_test_fraction = 0.999\n"), "test", deck_schema());
  FederatedProblem problem = build_problem(deck);
  for (std::size_t id = 0; id < problem.client_rows.size(); ++id) {
    const std::size_t rows = problem.client_rows[id].size() + problem.client_test_rows[id].size();
    ASSERT_LT(rows, 500u);  // so that 0.999 x rows rounds to rows
    EXPECT_EQ(problem.client_rows[id].size(), 1u) << "client " << id;
    EXPECT_EQ(problem.client_test_rows[id].size(), rows - 1) << "client " << id;
  }
  EXPECT_EQ(problem.total_train_rows, static_cast<std::int64_t>(problem.client_rows.size()));
  EXPECT_THROW(Deck::from_string("[partition]\nlocal_test_fraction = 1.0\n", "test", deck_schema()),
               InputError);
}

// One noise-free DP-FedAvg round with every client sampled is theta + sum_k Clip(d_k, S) / (q N),
// recomputed here: each client's update d_k from the same local training, clipped and summed in
// long double, the ranks' partial sums added by MPI. The fixed-point sum quantizes with the bound
// S before any client trains (docs/math.md §8.3), two limbs deep, so its rounding is far below an
// ulp; what remains is fl(scale d_i) (2^-53 S per term, 2^-53 S after the division by N = 40) and
// the final additions (2^-53 |theta|): 2^-50 (S + |theta|) bounds it with room to spare. The clip
// is chosen so that some updates are clipped and some are not.
// DP-FedAvg with every client sampled, no server noise and a fixed clip norm.
Deck noise_free_deck(double clip) {
  return Deck::from_string(deck_text("mode = \"dp-fedavg\"\nsampling_rate = 1.0\n"
                                     "noise_multiplier = 0.0\nadaptive_clip = false\nclip = " +
                                     std::to_string(clip) + "\n"),
                           "test", deck_schema());
}

TEST(PrivateTraining, ClippedUpdatesAreSummedToRounding) {
  const double S = 0.15;
  const Deck deck = noise_free_deck(S);
  FederatedProblem problem = build_problem(deck);
  Federation federation(problem);
  PrivateTraining training(federation, PrivacyConfig::from_deck(deck, 40, 1));
  const FederationConfig fedavg = FederationConfig::from_deck(deck);
  const std::size_t p = federation.parameters();
  std::vector<double> theta(p);
  for (std::size_t k = 0; k < p; ++k) theta[k] = 0.01 * std::sin(static_cast<double>(k));
  const std::vector<double> start = theta;
  private_round(federation, training, 1, theta, fedavg.local);

  std::vector<long double> sum(p, 0.0L);
  std::vector<double> update(p);
  Workspace work;
  long clipped[2] = {0, 0};  // clipped, not clipped
  for (auto& client : problem.clients) {
    client.train_round(*problem.model, fedavg.local, problem.seed, 1, update.data(), work,
                       start.data());
    long double squares = 0.0L;
    for (std::size_t k = 0; k < p; ++k) {
      const long double d = static_cast<long double>(update[k]) - start[k];
      squares += d * d;
    }
    const long double norm = std::sqrt(squares);
    const long double scale = norm > S ? S / norm : 1.0L;
    ++clipped[norm > S ? 0 : 1];
    for (std::size_t k = 0; k < p; ++k)
      sum[k] += scale * (static_cast<long double>(update[k]) - start[k]);
  }
  MPI_Allreduce(MPI_IN_PLACE, sum.data(), static_cast<int>(p), MPI_LONG_DOUBLE, MPI_SUM,
                MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, clipped, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_GT(clipped[0], 0);
  EXPECT_GT(clipped[1], 0);
  for (std::size_t k = 0; k < p; ++k) {
    const double expected = static_cast<double>(start[k] + sum[k] / 40.0L);
    EXPECT_NEAR(theta[k], expected, 0x1p-50 * (S + std::abs(expected))) << "coordinate " << k;
  }
}

// A client whose local training diverges (a learning rate of 1e300 overflows) has a non-finite
// update: the round leaves theta NaN on every rank (train() then names the client).
TEST(PrivateTraining, DivergedClientMakesTheRoundNaN) {
  const Deck deck = noise_free_deck(0.5);
  FederatedProblem problem = build_problem(deck);
  Federation federation(problem);
  PrivateTraining training(federation, PrivacyConfig::from_deck(deck, 40, 1));
  LocalTrainingConfig local = FederationConfig::from_deck(deck).local;
  local.learning_rate = 1e300;
  std::vector<double> theta(federation.parameters(), 0.0);
  private_round(federation, training, 1, theta, local);
  for (double value : theta) ASSERT_TRUE(std::isnan(value));
}

// DP with a robust rule (docs/math.md §8.5): one round at 1, 2, 3 and 4 ranks equals the brute
// force: every sampled client trained alone from theta, its update clipped to S, the rule applied
// to the rows in client order (fl/aggregators' free functions), plus z Delta times the server's
// normals, Delta the rule's sensitivity derived here (KRUM and multi-KRUM 2 S, the median
// 2 sqrt(2) S, the trimmed mean 2 sqrt(2f + 1) S). The same arithmetic on the same rows but for
// the clipping scale's rounding: 1e-12 of the step.
TEST(PrivateTraining, RobustRulesWithDpEqualTheBruteForce) {
  const double S = 0.05, z = 0.7, q = 0.6;
  struct Case {
    const char* name;
    double sensitivity;
    std::function<void(const double*, int, std::size_t, double*)> rule;
  };
  const Case cases[] = {
      {"median", 2.0 * std::sqrt(2.0) * S,
       [](const double* u, int n, std::size_t p, double* out) { coordinate_median(u, n, p, out); }},
      {"trimmed_mean", 2.0 * std::sqrt(3.0) * S,
       [](const double* u, int n, std::size_t p, double* out) { trimmed_mean(u, n, p, 1, out); }},
      {"krum", 2.0 * S,
       [](const double* u, int n, std::size_t p, double* out) { krum(u, n, p, 1, out); }},
      {"multi_krum", 2.0 * S,
       [](const double* u, int n, std::size_t p, double* out) { multi_krum(u, n, p, 1, 3, out); }},
  };
  for (const Case& rule : cases) {
    const Deck deck = Deck::from_string(
        deck_text(
            fmt::format("mode = \"dp-fedavg\"\nsampling_rate = {}\nnoise_multiplier = {}\n"
                        "adaptive_clip = false\nclip = {}\n",
                        q, z, S),
            "", fmt::format("aggregator = \"{}\"\nbyzantine = 1\nkrum_selected = 3\n", rule.name)),
        "test", deck_schema());
    FederatedProblem problem = build_problem(deck);
    Federation federation(problem);
    const FederationConfig fedavg = FederationConfig::from_deck(deck);
    PrivateTraining training(federation, PrivacyConfig::from_deck(deck, 40, 1), {},
                             fedavg.aggregator);
    const std::size_t p = federation.parameters();
    std::vector<double> theta(p);
    for (std::size_t k = 0; k < p; ++k) theta[k] = 0.01 * std::cos(static_cast<double>(k));
    const std::vector<double> start = theta;
    private_round(federation, training, 1, theta, fedavg.local);

    // Each rank's sampled clients' clipped updates (a flag column: -1 = not sampled), gathered.
    const std::size_t local = problem.clients.size();
    std::vector<double> rows(local * (p + 1), -1.0), update(p);
    Workspace work;
    for (std::size_t k = 0; k < local; ++k) {
      auto& client = problem.clients[k];
      if (!poisson_sampled(problem.seed, q, 1, client.id())) continue;
      client.train_round(*problem.model, fedavg.local, problem.seed, 1, update.data(), work,
                         start.data());
      double squares = 0.0;
      for (std::size_t i = 0; i < p; ++i)
        squares += (update[i] - start[i]) * (update[i] - start[i]);
      const double scale = S / std::max(std::sqrt(squares), S);
      for (std::size_t i = 0; i < p; ++i) rows[k * (p + 1) + i] = scale * (update[i] - start[i]);
      rows[k * (p + 1) + p] = 1.0;
    }
    const auto all = ordered_allgather(rows, static_cast<int>(local), static_cast<int>(p + 1));
    std::vector<double> cohort;
    for (std::size_t c = 0; c * (p + 1) < all.size(); ++c)
      if (all[c * (p + 1) + p] > 0.0)
        cohort.insert(cohort.end(), all.begin() + c * (p + 1), all.begin() + c * (p + 1) + p);
    const int n = static_cast<int>(cohort.size() / p);
    ASSERT_GE(n, 6) << rule.name;  // KRUM needs n > 2f + 2
    std::vector<double> step(p);
    rule.rule(cohort.data(), n, p, step.data());
    Stream server(problem.seed, purpose::server_noise, 1);
    for (std::size_t i = 0; i < p; ++i) {
      const double expected = start[i] + step[i] + z * rule.sensitivity * server.normal();
      EXPECT_NEAR(theta[i], expected, 1e-12 * (1.0 + std::abs(expected))) << rule.name << " " << i;
    }
    EXPECT_EQ(training.history().sampled_private.back(), n) << rule.name;
  }
}

// Centered clipping carries its center across rounds: no sensitivity to calibrate noise to, so
// private training refuses it, naming the key; FeO2 refuses every robust rule.
TEST(PrivateTraining, RobustRulesWithoutASensitivityAreRefused) {
  const std::string privacy = "mode = \"dp-fedavg\"\nsampling_rate = 0.5\n";
  const Deck deck = Deck::from_string(
      deck_text(privacy, "", "aggregator = \"centered_clipping\"\n"), "test", deck_schema());
  FederatedProblem problem = build_problem(deck);
  Federation federation(problem);
  const FederationConfig fedavg = FederationConfig::from_deck(deck);
  try {
    PrivateTraining training(federation, PrivacyConfig::from_deck(deck, 40, 1), {},
                             fedavg.aggregator);
    FAIL() << "centered clipping with privacy was accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("federation.aggregator = \"centered_clipping\""),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(
      FederationConfig::from_deck(Deck::from_string(
          deck_text("mode = \"feo2\"\nopt_out_fraction = 0.2\n", "", "aggregator = \"krum\"\n"),
          "test", deck_schema())),
      InputError);
}

}  // namespace
}  // namespace fluence
