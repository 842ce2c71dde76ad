// The federated block Hessian product and block CG (docs/math.md §3.3) at 1-4 ranks: the block
// product against a client-order sum written here from the whole data (so the same bits for any
// rank count), block CG against dense solves, and `fluence influence`'s vectors by block CG
// against the one-CG-per-client ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/influence/block_cg.hpp"
#include "fluence/influence/client_influence.hpp"
#include "fluence/influence/hessian_operator.hpp"
#include "fluence/model/block_products.hpp"
#include "support/dense_reference.hpp"
#include "support/synthetic_deck.hpp"
#include "support/whole_data.hpp"

namespace fluence {
namespace {

const std::string kDeck =
    testing::synthetic_deck({.seed = 9,
                             .rows = 1500,
                             .numeric = 4,
                             .categorical = {3, 4},
                             .classes = 3,
                             .clients = 7,
                             .partition = "scheme = \"dirichlet\"\nalpha = 0.5\n"}) +
    testing::polished_model(0.01, 0, 1e-11);

std::vector<double> smooth_block(std::size_t size, double scale, double phase) {
  std::vector<double> v(size);
  for (std::size_t k = 0; k < size; ++k)
    v[k] = scale * std::sin(phase + 0.37 * static_cast<double>(k) + 0.011 * k * k / (1.0 + k));
  return v;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// The federated Hessian as the definition states it, on every rank alone: each client's block
// product from its rows of the whole training table, summed in client order ((0 + c_0) + c_1) +
// ..., then scaled and shifted. No federation, no MPI.
class ClientOrderHessian final : public HessianOperator {
 public:
  ClientOrderHessian(const FederatedProblem& problem, const std::vector<double>& theta)
      : model_(*problem.model->linear()), theta_(theta) {
    const Table train =
        testing::whole_training_table(Deck::from_string(kDeck, "test", deck_schema()));
    std::vector<double> all(train.rows * problem.encoding.width());
    problem.encoding.encode_all(train, all.data());
    const auto width = static_cast<std::size_t>(problem.encoding.width());
    for (const auto& rows : problem.client_rows) {
      std::vector<double> x;
      for (auto row : rows)
        x.insert(x.end(), all.begin() + row * width, all.begin() + (row + 1) * width);
      std::vector<double> probabilities(rows.size() * model_.classes());
      model_.probabilities(x.data(), rows.size(), theta.data(), probabilities.data());
      n_ += rows.size();
      clients_.push_back({std::move(x), std::move(probabilities), rows.size()});
    }
  }
  std::size_t parameters() const override { return model_.parameters(); }
  bool collective() const override { return false; }
  void apply(const double* v, double* out) override { apply_block(v, out, 1); }
  void apply_block(const double* V, double* out, int k) override {
    const std::size_t p = parameters(), size = static_cast<std::size_t>(k) * p;
    std::vector<double> one(size), scratch;
    std::fill(out, out + size, 0.0);
    for (const auto& client : clients_) {
      softmax_hessian_vector_block_at(model_, client.x.data(), client.rows,
                                      client.probabilities.data(), V, k, one.data(), scratch);
      for (std::size_t i = 0; i < size; ++i) out[i] += one[i];
    }
    const double scale = 1.0 / static_cast<double>(n_), shift = model_.l2() + damping_;
    for (std::size_t i = 0; i < size; ++i) out[i] = out[i] * scale + shift * V[i];
  }
  void apply_sampled(const double*, double*, int, std::uint64_t, std::uint64_t) override {}
  void diagonal(std::vector<double>&) override {}
  void dense(std::vector<double>&) override {}

 private:
  struct Rows {
    std::vector<double> x, probabilities;
    std::size_t rows;
  };
  const SoftmaxRegression& model_;
  const std::vector<double>& theta_;
  std::vector<Rows> clients_;
  std::size_t n_ = 0;
};

class BlockMpi : public ::testing::Test {
 protected:
  BlockMpi()
      : problem(build_problem(Deck::from_string(kDeck, "test", deck_schema()))),
        federation(problem),
        theta(smooth_block(federation.parameters(), 0.3, 1.0)) {}
  FederatedProblem problem;
  Federation federation;
  std::vector<double> theta;
};

TEST_F(BlockMpi, FederatedBlockProductIsTheClientOrderSumBitwise) {
  auto hessian = make_federated_hessian(federation, theta);
  hessian->set_damping(0.05);
  ClientOrderHessian reference(problem, theta);
  reference.set_damping(0.05);
  const std::size_t p = hessian->parameters();
  const int k = 9;
  const auto V = smooth_block(k * p, 1.0, 0.5);
  std::vector<double> block(k * p), expected(k * p), single(p);
  hessian->apply_block(V.data(), block.data(), k);
  reference.apply_block(V.data(), expected.data(), k);
  EXPECT_TRUE(same_bits(block, expected));
  // And the single products, to rounding: the same row terms, summed by other kernels (~1e-16
  // relative measured; 1e-13 of the largest entry bounds 1,500 rows' rounding).
  for (int j = 0; j < k; ++j) {
    hessian->apply(V.data() + j * p, single.data());
    double largest = 0.0;
    for (double value : single) largest = std::max(largest, std::abs(value));
    for (std::size_t i = 0; i < p; ++i)
      EXPECT_NEAR(block[j * p + i], single[i], 1e-13 * largest) << j << " " << i;
  }
}

TEST_F(BlockMpi, BlockCgOnTheFederatedHessianIsBitwiseRankIndependentAndSolves) {
  auto hessian = make_federated_hessian(federation, theta);
  ClientOrderHessian reference(problem, theta);
  const std::size_t p = hessian->parameters();
  const int k = 5;
  const auto B = smooth_block(k * p, 1.0, 2.0);
  std::vector<double> X(k * p, 0.0), Y(k * p, 0.0);
  BlockCgSettings settings;
  settings.rtol = 1e-10;
  const auto outcome = block_cg(*hessian, B.data(), X.data(), k, settings);
  const auto expected = block_cg(reference, B.data(), Y.data(), k, settings);
  EXPECT_TRUE(outcome.converged);
  EXPECT_TRUE(same_bits(X, Y));
  EXPECT_EQ(outcome.block_iterations, expected.block_iterations);
  // Against the dense solve: ||x - x*|| / ||x*|| <= cond(H) rtol.
  std::vector<double> dense;
  hessian->dense(dense);
  const auto eigenvalues = testing::symmetric_eigenvalues(dense);
  const double condition = eigenvalues.back() / eigenvalues.front();
  for (int j = 0; j < k; ++j) {
    const std::vector<double> b(B.begin() + j * p, B.begin() + (j + 1) * p);
    const auto exact = testing::dense_solve(dense, b);
    double error = 0.0, size = 0.0;
    for (std::size_t i = 0; i < p; ++i) {
      error += (X[j * p + i] - exact[i]) * (X[j * p + i] - exact[i]);
      size += exact[i] * exact[i];
    }
    EXPECT_LE(std::sqrt(error / size), condition * (settings.rtol + 1e-14)) << j;
    EXPECT_LE(outcome.columns[j].relative_residual, settings.rtol) << j;
  }
}

TEST_F(BlockMpi, InfluenceVectorsByBlockCgMatchOneSolvePerClient) {
  const Deck deck = Deck::from_string(kDeck, "test", deck_schema(),
                                      {"influence.spectrum=false", "influence.rtol=1e-10"});
  const FederationConfig training = FederationConfig::from_deck(deck);
  const auto trained = federation.train(training);
  InfluenceConfig config = InfluenceConfig::from_deck(deck);
  config.vectors = true;
  config.block_size = 1;
  const auto single = client_removal_influence(federation, trained.theta, config, training, false);
  for (int block_size : {0, 3}) {
    config.block_size = block_size;
    const auto block = client_removal_influence(federation, trained.theta, config, training, false);
    // s_test and the estimates come from the same single solve.
    EXPECT_TRUE(same_bits(block.estimate, single.estimate));
    ASSERT_EQ(block.local_vectors.size(), single.local_vectors.size());
    ASSERT_EQ(block.relative_residual.size(), single.relative_residual.size());
    for (double residual : block.relative_residual) EXPECT_LE(residual, 1e-10);
    // Both solve the same systems to rtol 1e-10 on the true residual: the vectors agree within
    // cond(H) * 2e-10 of their size; cond(H) = l2-regularized softmax Hessian, below 1e3 here.
    const std::size_t p = federation.parameters();
    for (int c = 0; c < single.local_clients; ++c) {
      double error = 0.0, size = 0.0;
      for (std::size_t i = 0; i < p; ++i) {
        const double a = block.local_vectors[c * p + i], b = single.local_vectors[c * p + i];
        error += (a - b) * (a - b);
        size += b * b;
      }
      EXPECT_LE(std::sqrt(error), 2e-7 * std::sqrt(size)) << "client " << c;
    }
  }
}

}  // namespace
}  // namespace fluence
