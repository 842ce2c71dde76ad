// Block Hessian products and block CG (docs/math.md §3.3) against k single products and dense
// solves (LAPACK), on the pooled-data Hessian of the IHVP tests and on small networks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/influence/block_cg.hpp"
#include "fluence/influence/client_influence.hpp"
#include "fluence/model/block_products.hpp"
#include "fluence/model/network.hpp"
#include "pooled_hessian.hpp"
#include "support/default_deck.hpp"

namespace fluence {
namespace {

using testing::PooledData;
using testing::PooledHessian;
using testing::relative_error;

std::vector<double> normal_block(std::size_t size, std::uint64_t seed) {
  Stream stream(seed, purpose::synthetic_model, 7);
  std::vector<double> v(size);
  for (auto& value : v) value = stream.normal();
  return v;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

struct Fixture {
  PooledData data;
  SoftmaxRegression model;
  std::vector<double> theta, dense;
  double condition = 0.0;

  explicit Fixture(std::uint64_t seed, int classes = 3, int features = 6)
      : data(testing::planted_data(1500, features, classes, seed)), model(features, classes, 1e-3) {
    theta = testing::dense_minimizer(model, data.x.data(), data.y.data(), data.rows());
    dense = testing::dense_objective_hessian(model, data.x.data(), data.rows(), theta.data());
    const auto eigenvalues = testing::symmetric_eigenvalues(dense);
    condition = eigenvalues.back() / eigenvalues.front();
  }
  PooledHessian hessian() { return PooledHessian(model, data.x, data.rows(), theta); }
  std::vector<double> exact(const std::vector<double>& b) const {
    return testing::dense_solve(dense, b);
  }
};

TEST(BlockProducts, SoftmaxBlockEqualsSingleProductsToRounding) {
  // 10 classes and 40 features: BLAS's GEMMs, not the skinny tiled kernels of the single product.
  Fixture f(3, 10, 40);
  const std::size_t p = f.model.parameters(), rows = f.data.rows();
  const int k = 7;
  const auto V = normal_block(k * p, 11);
  std::vector<double> probabilities(rows * 10), block(k * p), single(p), scratch;
  f.model.probabilities(f.data.x.data(), rows, f.theta.data(), probabilities.data());
  softmax_hessian_vector_block_at(f.model, f.data.x.data(), rows, probabilities.data(), V.data(), k,
                                  block.data(), scratch);
  Workspace work;
  for (int j = 0; j < k; ++j) {
    f.model.hessian_vector_sum_at(f.data.x.data(), rows, probabilities.data(), V.data() + j * p,
                                  single.data(), work);
    // Both sum the same 1,500 row terms per entry, blocked differently: each entry within
    // 1,500 eps of the sum of its terms' magnitudes, which is at most 1,500 times the largest
    // entry here; measured differences are ~1e-15 relative. 1e-13 of the vector's largest entry
    // leaves room and fails any wrong term (a missed row moves entries by ~1e-3 relative).
    double largest = 0.0;
    for (std::size_t i = 0; i < p; ++i) largest = std::max(largest, std::abs(single[i]));
    for (std::size_t i = 0; i < p; ++i)
      ASSERT_NEAR(block[j * p + i], single[i], 1e-13 * largest) << "vector " << j << " entry " << i;
  }
}

TEST(BlockProducts, NetworkBlockIsBitwiseTheSingleProducts) {
  // The forward pass is shared; each direction's R passes are the single product's, in the same
  // order: the same bits. Both activations (tanh's R-backward reads its own R-forward).
  for (const auto activation : {Activation::relu, Activation::tanh}) {
    const Network network(NetworkSpec::mlp(9, {7, 5}, activation, 4, true), 4, 0.0);
    const std::size_t p = network.parameters();
    const std::size_t rows = 3 * network.block_rows() / 2 + 5;  // a partial second block
    const auto x = normal_block(rows * 9, 21);
    std::vector<std::int32_t> y(rows);
    for (std::size_t r = 0; r < rows; ++r) y[r] = static_cast<std::int32_t>(r % 4);
    std::vector<double> theta(p);
    network.initialize(5, theta.data());
    const int k = 5;
    const auto V = normal_block(k * p, 22);
    std::vector<double> block(k * p), single(k * p);
    Workspace work, other;
    network_hessian_vector_block_sum(network, x.data(), y.data(), rows, theta.data(), V.data(), k,
                                     block.data(), work);
    for (int j = 0; j < k; ++j)
      network.hessian_vector_sum(x.data(), y.data(), rows, theta.data(), V.data() + j * p,
                                 single.data() + j * p, other);
    EXPECT_TRUE(same_bits(block, single));
  }
}

TEST(BlockProducts, DefaultApplyBlockIsTheSingleProducts) {
  Fixture f(4);
  auto hessian = f.hessian();
  const std::size_t p = hessian.parameters();
  const auto V = normal_block(3 * p, 31);
  std::vector<double> block(3 * p), single(3 * p);
  hessian.apply_block(V.data(), block.data(), 3);
  for (int j = 0; j < 3; ++j) hessian.apply(V.data() + j * p, single.data() + j * p);
  EXPECT_TRUE(same_bits(block, single));
}

// Every column at rtol on its true residual (recomputed here with the dense Hessian), and within
// cond(H) * rtol of the dense solve (||x - x*|| / ||x*|| <= cond(H) ||r|| / ||b||).
void expect_solved(const Fixture& f, const std::vector<double>& B, const std::vector<double>& X,
                   int k, double rtol) {
  const std::size_t p = f.model.parameters();
  for (int j = 0; j < k; ++j) {
    const std::vector<double> b(B.begin() + j * p, B.begin() + (j + 1) * p);
    const std::vector<double> x(X.begin() + j * p, X.begin() + (j + 1) * p);
    double bb = 0.0;
    for (double value : b) bb += value * value;
    if (bb == 0.0) {
      for (double value : x) EXPECT_EQ(value, 0.0);
      continue;
    }
    double rr = 0.0;
    for (std::size_t i = 0; i < p; ++i) {
      double hx = 0.0;
      for (std::size_t l = 0; l < p; ++l) hx += f.dense[i * p + l] * x[l];
      rr += (hx - b[i]) * (hx - b[i]);
    }
    // The operator's products and the dense matrix differ by rounding (~1e-15 relative).
    EXPECT_LE(std::sqrt(rr / bb), rtol * 1.01 + 1e-14) << "column " << j;
    EXPECT_LE(relative_error(x, f.exact(b)), f.condition * (rtol + 1e-14)) << "column " << j;
  }
}

TEST(BlockCg, MatchesDenseSolvesForEveryColumn) {
  Fixture f(5);
  auto hessian = f.hessian();
  const std::size_t p = hessian.parameters();
  const int k = 6;
  const auto B = normal_block(k * p, 41);
  std::vector<double> X(k * p, 0.0);
  BlockCgSettings settings;
  settings.rtol = 1e-10;
  const BlockCgOutcome outcome = block_cg(hessian, B.data(), X.data(), k, settings);
  EXPECT_TRUE(outcome.converged);
  EXPECT_FALSE(outcome.indefinite);
  expect_solved(f, B, X, k, settings.rtol);
  for (const auto& column : outcome.columns) {
    EXPECT_LE(column.relative_residual, settings.rtol);
    EXPECT_GT(column.iterations, 0);
  }
  // A block of k columns spans k directions per iteration: at most ceil(p / k) + a few block
  // iterations in exact arithmetic (p = 18 here), far fewer than single CG's p.
  EXPECT_LE(outcome.block_iterations, static_cast<int>(p));
}

TEST(BlockCg, StoppedAndContinuedIsBitwiseTheUninterruptedSolve) {
  // Stops inside a unit (docs/operations.md): the poll ends the solve after block iteration
  // `stop`, and a solve continued from the saved state ends with the same bits as the solve that
  // was never stopped, with the same counts; it also takes exactly the products that remain
  // (a continuation that started over would take the first `stop` block products again). A
  // rank-deficient block (a repeated column) makes the continuation carry a deflated block.
  Fixture f(7);
  auto hessian = f.hessian();
  const std::size_t p = hessian.parameters();
  const int k = 3;  // two distinct columns: ~p / 2 block iterations (p = 18)
  auto B = normal_block(k * p, 61);
  std::copy_n(B.begin(), p, B.begin() + 2 * p);  // column 2 repeats column 0
  BlockCgSettings settings;
  settings.rtol = 1e-12;
  std::vector<double> reference(k * p, 0.0);
  const BlockCgOutcome whole = block_cg(hessian, B.data(), reference.data(), k, settings);
  ASSERT_GT(whole.block_iterations, 6);
  for (int stop : {1, 3, whole.block_iterations / 2}) {
    int polls = 0;
    BlockCgSettings stopping = settings;
    stopping.stop_poll = [&] { return ++polls == stop; };
    std::vector<double> X(k * p, 0.0);
    BlockCgOutcome first = block_cg(hessian, B.data(), X.data(), k, stopping);
    ASSERT_TRUE(first.interrupted) << "stop " << stop;
    EXPECT_EQ(BlockIhvpSolver::interrupted_iterations(first.state), stop);
    BlockCgSettings continuing = settings;
    continuing.resume = &first.state;
    std::vector<double> continued(k * p, std::nan(""));  // the state's X, not this, is read
    const BlockCgOutcome rest = block_cg(hessian, B.data(), continued.data(), k, continuing);
    EXPECT_FALSE(rest.interrupted);
    EXPECT_TRUE(same_bits(continued, reference)) << "stop " << stop;
    EXPECT_EQ(rest.block_iterations, whole.block_iterations);
    EXPECT_EQ(rest.column_products, whole.column_products);
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(rest.columns[j].iterations, whole.columns[j].iterations);
      EXPECT_EQ(rest.columns[j].relative_residual, whole.columns[j].relative_residual);
    }
  }
}

TEST(BlockCg, RankDeficientBlockIsDeflated) {
  // A repeated column, a combination of two others and a zero column: the search block loses
  // those directions (dropped from the Gram matrix), every column is still solved.
  Fixture f(6);
  auto hessian = f.hessian();
  const std::size_t p = hessian.parameters();
  const int k = 5;
  auto B = normal_block(k * p, 51);
  for (std::size_t i = 0; i < p; ++i) {
    B[1 * p + i] = B[0 * p + i];
    B[3 * p + i] = 2.0 * B[0 * p + i] - 0.5 * B[2 * p + i];
    B[4 * p + i] = 0.0;
  }
  std::vector<double> X(k * p, 1.0);  // a nonzero start, ignored for the zero column
  BlockCgSettings settings;
  settings.rtol = 1e-10;
  const BlockCgOutcome outcome = block_cg(hessian, B.data(), X.data(), k, settings);
  EXPECT_TRUE(outcome.converged);
  expect_solved(f, B, X, k, settings.rtol);
}

TEST(BlockCg, PreconditionerCallbackIsUsedAndSolvesTheSameSystems) {
  Fixture f(7);
  auto hessian = f.hessian();
  const std::size_t p = hessian.parameters();
  const int k = 4;
  const auto B = normal_block(k * p, 61);
  std::vector<double> diagonal;
  hessian.diagonal(diagonal);
  int calls = 0;
  BlockCgSettings settings;
  settings.rtol = 1e-10;
  settings.preconditioner = [&](const double* R, double* Z, int m) {
    ++calls;
    for (int j = 0; j < m; ++j)
      for (std::size_t i = 0; i < p; ++i) Z[j * p + i] = R[j * p + i] / diagonal[i];
  };
  std::vector<double> X(k * p, 0.0);
  const BlockCgOutcome outcome = block_cg(hessian, B.data(), X.data(), k, settings);
  EXPECT_TRUE(outcome.converged);
  EXPECT_GT(calls, 0);
  expect_solved(f, B, X, k, settings.rtol);
}

TEST(BlockCg, SolverWarmStartsFromKnownSolutions) {
  // A known solution x1 = H^-1 b1: a block whose columns are b1 and 3 b1 starts at the answer.
  Fixture f(8);
  auto hessian = f.hessian();
  const std::size_t p = hessian.parameters();
  IhvpConfig config = IhvpConfig::from_deck(default_deck());
  config.rtol = 1e-10;
  config.preconditioner = IhvpPreconditioner::none;
  BlockIhvpSolver solver(config, hessian);
  const auto b1 = normal_block(p, 71);
  const auto x1 = f.exact(b1);
  solver.add_solution(x1.data(), b1.data());
  std::vector<double> B(2 * p), X(2 * p);
  for (std::size_t i = 0; i < p; ++i) {
    B[i] = b1[i];
    B[p + i] = 3.0 * b1[i];
  }
  const BlockCgOutcome outcome = solver.solve(B.data(), X.data(), 2);
  EXPECT_TRUE(outcome.converged);
  EXPECT_EQ(outcome.block_iterations, 0);  // the projection already meets rtol
  expect_solved(f, B, X, 2, config.rtol);
}

TEST(BlockCg, BlockSizeNeedsFederatedCg) {
  // Block CG solves the federated systems only: other solvers and the client scope are refused
  // with the key named, the default (1) and the federated CG accepted.
  auto config = [](std::vector<std::string> overrides) {
    return InfluenceConfig::from_deck(
        Deck::from_string("", "test", deck_schema(), std::move(overrides)));
  };
  EXPECT_EQ(config({}).block_size, 1);
  EXPECT_EQ(config({"influence.block_size=0"}).block_size, 0);
  EXPECT_EQ(config({"influence.block_size=8"}).block_size, 8);
  for (const auto& refused : std::vector<std::vector<std::string>>{
           {"influence.block_size=0", "influence.solver=\"lissa\""},
           {"influence.block_size=4", "influence.hessian=\"client\""}}) {
    try {
      config(refused);
      ADD_FAILURE() << refused[1] << " accepted";
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find("influence.block_size"), std::string::npos);
    }
  }
  EXPECT_THROW(config({"influence.block_size=-1"}), InputError);
}

}  // namespace
}  // namespace fluence
