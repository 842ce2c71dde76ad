// The client update rules (federation.client_update, docs/math.md §8.6) against independent
// computations, at 1-4 ranks: FedProx with mu = 0 is plain SGD bit for bit; FedProx and SCAFFOLD
// (Karimireddy et al. 2020, option II) with full-batch local steps against a replay written here
// from the papers' equations on the pooled data, every client recomputed on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/fl/federation.hpp"
#include "support/synthetic_deck.hpp"
#include "support/whole_data.hpp"

namespace fluence {
namespace {

// Heterogeneous clients of unequal sizes (Dirichlet), full-batch local steps: the local training
// is deterministic and easy to replay.
const std::string kData = testing::synthetic_deck({.seed = 11,
                                                   .rows = 900,
                                                   .numeric = 3,
                                                   .categorical = {3, 4},
                                                   .classes = 3,
                                                   .clients = 5,
                                                   .partition = "scheme = \"dirichlet\"\n"
                                                                "alpha = 0.5\n"});

std::string logistic_gd(const std::string& federation) {
  return kData +
         "[model]\nl2 = 0.01\n[federation]\nrounds = 3\noptimizer = \"gd\"\nlocal_epochs = "
         "4\nlearning_rate = 0.5\n" +
         federation;
}

Deck deck_of(const std::string& text) {
  return Deck::from_string(text, "test", deck_schema());
}

std::vector<double> train_theta(const std::string& text) {
  const Deck deck = deck_of(text);
  FederatedProblem problem = build_problem(deck);
  Federation federation(problem);
  return federation.train(FederationConfig::from_deck(deck)).theta;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k)
    if (std::memcmp(&a[k], &b[k], sizeof(double)) != 0) return false;
  return true;
}

TEST(ClientUpdate, FedProxWithMuZeroIsSgdBitwise) {
  const std::string sgd = kData + "[model]\nl2 = 0.01\n[federation]\nrounds = 3\nbatch_size = 16\n";
  EXPECT_TRUE(same_bits(train_theta(sgd), train_theta(sgd + "client_update = \"fedprox\"\n"
                                                            "proximal_mu = 0.0\n")));
  // A network in float (local_precision = "single"), a fixed cohort.
  const std::string mlp = kData +
                          "[model]\ntype = \"mlp\"\nhidden = [6]\nl2 = 0.0\n[federation]\nrounds "
                          "= 3\nbatch_size = 16\nlocal_precision = \"single\"\nclient_sampling = "
                          "\"fixed\"\nsampling_rate = 0.6\n";
  EXPECT_TRUE(same_bits(train_theta(mlp), train_theta(mlp + "client_update = \"fedprox\"\n"
                                                            "proximal_mu = 0.0\n")));
}

// FedProx in float follows FedProx in double to float rounding, and both differ from plain SGD
// by far more: the proximal term is applied in the float kernels too.
TEST(ClientUpdate, FedProxInSinglePrecisionFollowsDouble) {
  const std::string mlp = kData +
                          "[model]\ntype = \"mlp\"\nhidden = [6]\nl2 = 0.0\n[federation]\nrounds "
                          "= 3\nbatch_size = 16\nlearning_rate = 0.2\n";
  const std::string prox = "client_update = \"fedprox\"\nproximal_mu = 2.0\n";
  const auto sgd = train_theta(mlp);
  const auto fedprox = train_theta(mlp + prox);
  const auto single = train_theta(mlp + prox + "local_precision = \"single\"\n");
  double scale = 0.0, float_error = 0.0, prox_change = 0.0;
  for (std::size_t k = 0; k < sgd.size(); ++k) {
    scale = std::max(scale, std::abs(fedprox[k]));
    float_error = std::max(float_error, std::abs(single[k] - fedprox[k]));
    prox_change = std::max(prox_change, std::abs(fedprox[k] - sgd[k]));
  }
  // Three rounds of about 20 float steps: the float model within 1e-5 of the largest parameter
  // (float's epsilon is 6e-8); mu = 2 with 20 steps of 0.2 moves it by percents.
  EXPECT_LE(float_error, 1e-5 * scale);
  EXPECT_GE(prox_change, 1e-3 * scale);
}

// Every client's pooled rows (encoded as the clients encode them), on every rank.
struct PooledClients {
  std::vector<std::vector<double>> x;
  std::vector<std::vector<std::int32_t>> y;
};

PooledClients pooled_clients(const Deck& deck, const FederatedProblem& problem) {
  const Table train = testing::whole_training_table(deck);
  const std::size_t D = problem.encoding.width();
  std::vector<double> x(train.rows * D);
  problem.encoding.encode_all(train, x.data());
  PooledClients pooled;
  for (const auto& rows : problem.client_rows) {
    pooled.x.emplace_back();
    pooled.y.emplace_back();
    for (std::int64_t row : rows) {
      const auto r = static_cast<std::size_t>(row);
      pooled.x.back().insert(pooled.x.back().end(), x.begin() + r * D, x.begin() + (r + 1) * D);
      pooled.y.back().push_back(train.label[r]);
    }
  }
  return pooled;
}

// K full-batch steps of client i from theta: y -= lr (grad F_i(y) + l2 y + mu (y - theta) + drift).
std::vector<double> local_steps(const Model& model, const PooledClients& pooled, std::size_t i,
                                const std::vector<double>& theta, int K, double lr, double mu,
                                const std::vector<double>* drift) {
  const std::size_t p = theta.size();
  const auto n = pooled.y[i].size();
  std::vector<double> y = theta, g(p);
  Workspace work;
  for (int step = 0; step < K; ++step) {
    model.gradient_sum(pooled.x[i].data(), pooled.y[i].data(), n, y.data(), g.data(), work);
    for (std::size_t k = 0; k < p; ++k) {
      double gradient = g[k] / static_cast<double>(n) + model.l2() * y[k] + mu * (y[k] - theta[k]);
      if (drift) gradient += (*drift)[k];
      y[k] -= lr * gradient;
    }
  }
  return y;
}

// FedProx (Li et al. 2020): each client minimizes F_i(y) + mu/2 ||y - theta_t||^2 by K gradient
// steps; theta_{t+1} = the rows-weighted mean of the y_i.
TEST(ClientUpdate, FedProxFullBatchMatchesReplay) {
  const double mu = 0.3, lr = 0.5;
  const int K = 4, rounds = 3;
  const std::string text = logistic_gd("client_update = \"fedprox\"\nproximal_mu = 0.3\n");
  const Deck deck = deck_of(text);
  FederatedProblem problem = build_problem(deck);
  Federation federation(problem);
  const auto trained = federation.train(FederationConfig::from_deck(deck)).theta;

  const PooledClients pooled = pooled_clients(deck, problem);
  const std::size_t p = trained.size();
  std::vector<double> theta(p, 0.0);  // the logistic model starts at zero
  for (int round = 1; round <= rounds; ++round) {
    std::vector<double> sum(p, 0.0);
    double rows = 0.0;
    for (std::size_t i = 0; i < pooled.y.size(); ++i) {
      const auto y = local_steps(*problem.model, pooled, i, theta, K, lr, mu, nullptr);
      const auto n = static_cast<double>(pooled.y[i].size());
      for (std::size_t k = 0; k < p; ++k) sum[k] += n * (y[k] - theta[k]);
      rows += n;
    }
    for (std::size_t k = 0; k < p; ++k) theta[k] += sum[k] / rows;
  }
  // The same arithmetic but for the order of the sums (the gradient's rows, the fixed-point
  // average's 2^-51 relative rounding): 1e-12 on parameters of order 1.
  for (std::size_t k = 0; k < p; ++k) EXPECT_NEAR(trained[k], theta[k], 1e-12) << k;
}

// SCAFFOLD option II (Karimireddy et al. 2020, Algorithm 1), partial participation (a fixed cohort
// of 3 of the 5 clients, so some c_i persist unsampled), written from the paper: 3 rounds, theta,
// c and every c_i compared.
void check_scaffold_against_replay(bool uniform) {
  const double lr = 0.5;
  const int K = 4, rounds = 3;
  const std::string text = logistic_gd(
      std::string("client_update = \"scaffold\"\nclient_sampling = \"fixed\"\nsampling_rate = "
                  "0.6\n") +
      (uniform ? "update_weights = \"uniform\"\n" : ""));
  const Deck deck = deck_of(text);
  FederatedProblem problem = build_problem(deck);
  Federation federation(problem);
  const FederationConfig config = FederationConfig::from_deck(deck);
  std::map<std::string, std::vector<double>> parts;
  const auto trained =
      federation
          .train(config, {}, {},
                 [&](int round, const std::vector<double>&, const std::vector<RoundMetrics>&) {
                   if (round == rounds) parts = federation.part_states();  // collective
                   return false;
                 })
          .theta;

  const PooledClients pooled = pooled_clients(deck, problem);
  const std::size_t p = trained.size(), N = pooled.y.size();
  const std::unique_ptr<Sampler> sampler =
      make_sampler(config.sampling, problem.seed, static_cast<std::int64_t>(N));
  std::vector<double> theta(p, 0.0), c(p, 0.0);
  std::vector<std::vector<double>> ci(N, std::vector<double>(p, 0.0));
  for (int round = 1; round <= rounds; ++round) {
    std::vector<double> dy(p, 0.0), dc(p, 0.0);
    double weight = 0.0;
    for (std::size_t i = 0; i < N; ++i) {
      if (!sampler->in_cohort(round, static_cast<int>(i))) continue;
      std::vector<double> drift(p);  // c - c_i
      for (std::size_t k = 0; k < p; ++k) drift[k] = c[k] - ci[i][k];
      const auto y = local_steps(*problem.model, pooled, i, theta, K, lr, 0.0, &drift);
      const double w = uniform ? 1.0 : static_cast<double>(pooled.y[i].size());
      for (std::size_t k = 0; k < p; ++k) {
        const double next = ci[i][k] - c[k] + (theta[k] - y[k]) / (K * lr);
        dc[k] += next - ci[i][k];
        ci[i][k] = next;
        dy[k] += w * (y[k] - theta[k]);
      }
      weight += w;
    }
    for (std::size_t k = 0; k < p; ++k) {
      theta[k] += dy[k] / weight;
      c[k] += dc[k] / static_cast<double>(N);
    }
  }
  // The same arithmetic but for the order of the sums: the gradient's rows, the fixed-point sums
  // (2^-51 of their largest term). The control variates divide the updates by K lr = 2 and feed
  // back into the next rounds' steps: 1e-11 on values of order 1 leaves a wide margin.
  for (std::size_t k = 0; k < p; ++k) EXPECT_NEAR(trained[k], theta[k], 1e-11) << k;
  const std::vector<double>& state = parts.at("client_update");
  ASSERT_EQ(state.size(), (N + 1) * p);
  for (std::size_t k = 0; k < p; ++k) EXPECT_NEAR(state[k], c[k], 1e-11) << "c " << k;
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t k = 0; k < p; ++k)
      EXPECT_NEAR(state[(i + 1) * p + k], ci[i][k], 1e-11) << "c_" << i << " " << k;
  double largest = 0.0;  // the control variates are not trivially zero
  for (std::size_t k = 0; k < p; ++k) largest = std::max(largest, std::abs(c[k]));
  EXPECT_GT(largest, 1e-3);
}

TEST(ClientUpdate, ScaffoldMatchesOptionTwoReplay) {
  check_scaffold_against_replay(false);
}

TEST(ClientUpdate, ScaffoldWithThePapersPlainMeanMatchesReplay) {
  check_scaffold_against_replay(true);
}

TEST(ClientUpdate, ScaffoldRefusesPrivacyDittoAndRobustAggregators) {
  const std::string base = logistic_gd("client_update = \"scaffold\"\n");
  for (const std::string extra :
       {"[privacy]\nmode = \"dp-fedavg\"\n", "[personalization]\nmethod = \"ditto\"\n"})
    EXPECT_THROW(FederationConfig::from_deck(deck_of(base + extra)), InputError) << extra;
  EXPECT_THROW(FederationConfig::from_deck(
                   deck_of(logistic_gd("client_update = \"scaffold\"\naggregator = \"median\"\n"))),
               InputError);
  // FedProx only changes the local training: accepted with privacy.
  EXPECT_NO_THROW(FederationConfig::from_deck(
      deck_of(logistic_gd("client_update = \"fedprox\"\n") + "[privacy]\nmode = \"dp-fedavg\"\n")));
}

}  // namespace
}  // namespace fluence
