// K-FAC and EK-FAC for networks (influence/kfac.hpp, docs/math.md §3.2) at 1-4 ranks: the factors
// against per-row gradients from the model's own backward pass, the preconditioner against a dense
// (G ⊗ A + shift I)^-1 built here, the same bits as a rank-free client-order sum, CG with it
// against CG without it, and EK-FAC against the dense Hessian of a one-layer network.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/influence/hessian_operator.hpp"
#include "fluence/influence/ihvp.hpp"
#include "fluence/influence/kfac.hpp"
#include "fluence/influence/lanczos.hpp"
#include "fluence/influence/spectrum.hpp"
#include "fluence/model/network.hpp"
#include "fluence/model/softmax_head.hpp"
#include "support/dense_reference.hpp"
#include "support/synthetic_deck.hpp"
#include "support/whole_data.hpp"

namespace fluence {
namespace {

std::string deck_text(const std::string& hidden) {
  return testing::synthetic_deck({.seed = 11,
                                  .rows = 600,
                                  .numeric = 4,
                                  .categorical = {3},
                                  .classes = 3,
                                  .clients = 5,
                                  .partition = "scheme = \"dirichlet\"\nalpha = 0.5\n",
                                  .synthetic = "signal = 1.5\n"}) +
         "[model]\ntype = \"mlp\"\nhidden = " + hidden +
         "\nactivation = \"tanh\"\nl2 = 0.01\n[federation]\nrounds = 3\nlocal_epochs = 1\n"
         "batch_size = 16\nlearning_rate = 0.2\n";
}

// Every client's rows, each client's block separately, in client order (all ranks hold all).
struct PooledClients {
  std::vector<std::vector<double>> x;
  std::vector<std::vector<std::int32_t>> y;
};

PooledClients pooled_clients(const Deck& deck, const FederatedProblem& problem) {
  const Table train = testing::whole_training_table(deck);
  const auto width = static_cast<std::size_t>(problem.encoding.width());
  std::vector<double> all(train.rows * width);
  problem.encoding.encode_all(train, all.data());
  PooledClients pooled;
  for (const auto& rows : problem.client_rows) {
    pooled.x.emplace_back();
    pooled.y.emplace_back();
    for (auto row : rows) {
      pooled.x.back().insert(pooled.x.back().end(), all.begin() + row * width,
                             all.begin() + (row + 1) * width);
      pooled.y.back().push_back(train.label[row]);
    }
  }
  return pooled;
}

// The loss v_c . z of one row, v_c = sqrt(p_c) (e_c - p): its parameter gradient is J^T v_c.
class DirectionLoss final : public LogitLoss {
 public:
  explicit DirectionLoss(int c) : c_(c) {}
  double gradient(std::size_t, std::size_t rows, int classes, const double* z, double* delta,
                  double loss) const override {
    std::vector<double> p(z, z + rows * classes);
    softmax_probabilities(p.data(), rows, classes);
    for (std::size_t r = 0; r < rows; ++r)
      for (int j = 0; j < classes; ++j)
        delta[r * classes + j] =
            std::sqrt(p[r * classes + c_]) * ((j == c_ ? 1.0 : 0.0) - p[r * classes + j]);
    return loss;
  }
  void hessian(std::size_t, std::size_t, int, const double*, const double*, double*,
               double*) const override {}

 private:
  int c_;
};

// G and A of every dense layer from per-row parameter gradients: the bias gradient of v_c . z is
// g_c, its weight gradient g_c ā^T (so ā from the row of the largest |g_o|).
KfacFactors reference_factors(const Network& network, const PooledClients& pooled,
                              const std::vector<double>& theta) {
  KfacFactors f = kfac_shapes(network, false);
  const int C = network.classes();
  const std::size_t D = network.features(), p = network.parameters();
  std::vector<double> gradient(p);
  Workspace work;
  double rows = 0.0;
  for (const auto& x : pooled.x)
    for (std::size_t r = 0; r < x.size() / D; ++r) {
      rows += 1.0;
      for (int c = 0; c < C; ++c) {
        network.loss_gradient_sum(x.data() + r * D, 1, DirectionLoss(c), theta.data(),
                                  gradient.data(), work);
        for (auto& layer : f.layers) {
          const int out = layer.outputs, in = layer.inputs, width = layer.width();
          const double* g = gradient.data() + layer.biases;
          for (int i = 0; i < out; ++i)
            for (int j = 0; j < out; ++j) layer.output_factor[i * out + j] += g[i] * g[j];
          if (c != 0) continue;
          // ā from the largest |g_o| over the directions of this row (c = 0 might be tiny).
          std::vector<double> best(p);
          double size = 0.0;
          int at = 0;
          for (int d = 0; d < C; ++d) {
            std::vector<double> other(p);
            network.loss_gradient_sum(x.data() + r * D, 1, DirectionLoss(d), theta.data(),
                                      other.data(), work);
            for (int o = 0; o < out; ++o)
              if (std::abs(other[layer.biases + o]) > size) {
                size = std::abs(other[layer.biases + o]);
                at = o;
                best = other;
              }
          }
          std::vector<double> a(width, 1.0);
          for (int i = 0; i < in; ++i)
            a[i] = best[layer.weights + static_cast<std::size_t>(at) * in + i] /
                   best[layer.biases + at];
          for (int i = 0; i < width; ++i)
            for (int j = 0; j < width; ++j) layer.input_factor[i * width + j] += a[i] * a[j];
        }
      }
    }
  for (auto& layer : f.layers)
    for (auto* part : {&layer.output_factor, &layer.input_factor})
      for (auto& value : *part) value /= rows;
  return f;
}

// theta's index of entry (o, i) of a layer's [W b] (i = inputs: the bias).
std::size_t theta_index(const KfacLayer& layer, int o, int i) {
  return i < layer.inputs ? layer.weights + static_cast<std::size_t>(o) * layer.inputs + i
                          : layer.biases + static_cast<std::size_t>(o);
}

std::vector<double> test_vector(std::size_t p) {
  std::vector<double> v(p);
  for (std::size_t k = 0; k < p; ++k) v[k] = std::sin(1.0 + 0.37 * static_cast<double>(k));
  return v;
}

double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0.0, s = 0.0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    d += (a[k] - b[k]) * (a[k] - b[k]);
    s += b[k] * b[k];
  }
  return std::sqrt(d / s);
}

bool same_on_every_rank(const std::vector<double>& v) {
  std::vector<double> root = v;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  int same = std::memcmp(root.data(), v.data(), v.size() * sizeof(double)) == 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return same == 1;
}

class Kfac : public ::testing::Test {
 protected:
  void build(const std::string& hidden, bool train = true) {
    deck = std::make_unique<Deck>(Deck::from_string(deck_text(hidden), "test", deck_schema()));
    problem = std::make_unique<FederatedProblem>(build_problem(*deck));
    federation = std::make_unique<Federation>(*problem);
    const Model& model = *problem->model;
    theta.assign(model.parameters(), 0.0);
    if (train) theta = federation->train(FederationConfig::from_deck(*deck)).theta;
    network = &kfac_network(model, "the test");
  }
  std::unique_ptr<Deck> deck;
  std::unique_ptr<FederatedProblem> problem;
  std::unique_ptr<Federation> federation;
  std::vector<double> theta;
  const Network* network = nullptr;
};

TEST_F(Kfac, PreconditionerIsTheDenseInverseOfThePerRowFactorsAndRankIndependent) {
  build("[6, 4]");
  const double damping = 0.3, shift = network->l2() + damping;
  auto hessian = make_federated_hessian(*federation, theta);
  hessian->set_damping(damping);
  const auto curvature = hessian->kfac(false);
  const std::size_t p = network->parameters();
  const auto r = test_vector(p);
  std::vector<double> z(p);
  curvature->apply_inverse(r.data(), z.data());

  // Dense (G ⊗ A + shift I)^-1 r per layer from the per-row reference factors. The factors agree
  // to rounding (sums of 600 rows of O(1) terms: ~1e-14 relative); M's condition number is at
  // most (max g a + shift) / shift < 1e2 here, so 1e-10 is rounding with a wide margin.
  const PooledClients pooled = pooled_clients(*deck, *problem);
  const KfacFactors reference = reference_factors(*network, pooled, theta);
  std::vector<double> expected(p, 0.0);
  for (const auto& layer : reference.layers) {
    const int out = layer.outputs, width = layer.width();
    const std::size_t m = static_cast<std::size_t>(out) * width;
    std::vector<double> dense(m * m), rhs(m);
    for (int o = 0; o < out; ++o)
      for (int i = 0; i < width; ++i) {
        rhs[o * width + i] = r[theta_index(layer, o, i)];
        for (int o2 = 0; o2 < out; ++o2)
          for (int i2 = 0; i2 < width; ++i2)
            dense[(o * width + i) * m + o2 * width + i2] =
                layer.output_factor[o * out + o2] * layer.input_factor[i * width + i2] +
                (o == o2 && i == i2 ? shift : 0.0);
      }
    const auto solved = testing::dense_solve(dense, rhs);
    for (int o = 0; o < out; ++o)
      for (int i = 0; i < width; ++i) expected[theta_index(layer, o, i)] = solved[o * width + i];
  }
  EXPECT_LE(relative_error(z, expected), 1e-10);

  // Bitwise: the clients' sums added in client order by this rank alone (no MPI) give the same
  // preconditioner bits as the federated collective, whatever the rank count.
  KfacFactors sums = kfac_shapes(*network, false);
  sums.shift = shift;
  Workspace work;
  double rows = 0.0;
  for (std::size_t k = 0; k < pooled.x.size(); ++k) {
    KfacFactors one = kfac_shapes(*network, false);
    const std::size_t n = pooled.y[k].size();
    rows += static_cast<double>(n);
    add_kfac_factor_sums(*network, pooled.x[k].data(), n, theta.data(), one, work);
    for (std::size_t l = 0; l < sums.layers.size(); ++l) {
      auto& to = sums.layers[l];
      const auto& from = one.layers[l];
      for (std::size_t i = 0; i < to.output_factor.size(); ++i)
        to.output_factor[i] += from.output_factor[i];
      for (std::size_t i = 0; i < to.input_factor.size(); ++i)
        to.input_factor[i] += from.input_factor[i];
    }
  }
  normalize_kfac_sums(sums, rows);
  std::vector<double> z_alone(p);
  KfacCurvature(sums).apply_inverse(r.data(), z_alone.data());
  EXPECT_EQ(std::memcmp(z_alone.data(), z.data(), p * sizeof(double)), 0);
  EXPECT_TRUE(same_on_every_rank(z));
}

TEST_F(Kfac, PreconditionedCgGivesTheUnpreconditionedScoresWithFewerIterations) {
  build("[6, 4]");
  auto hessian = make_federated_hessian(*federation, theta);
  // FedAvg's model after 3 rounds is no minimizer: damp so that H + delta I is PD with
  // lambda_min >= 0.05 (SLEPc to 1e-10).
  const HessianSpectrum spectrum = hessian_spectrum(*hessian, 1e-10);
  const double damping = std::max(0.0, 0.05 - spectrum.eigenvalue_min);
  hessian->set_damping(damping);
  const double lambda_min = spectrum.eigenvalue_min + damping;
  const std::size_t p = network->parameters();
  std::vector<double> b;
  federation->test_gradient(theta, b);
  IhvpConfig config = IhvpConfig::from_deck(*deck);
  config.rtol = 1e-10;
  config.warm_start = false;
  std::vector<double> x[2];
  SolveReport reports[2];
  for (int kind = 0; kind < 2; ++kind) {
    config.preconditioner = kind ? IhvpPreconditioner::kfac : IhvpPreconditioner::none;
    auto solver = make_ihvp_solver(config, *hessian);
    x[kind].resize(p);
    reports[kind] = solver->solve(b.data(), x[kind].data());
    EXPECT_LE(reports[kind].relative_residual, 1e-10) << kind;
    EXPECT_TRUE(same_on_every_rank(x[kind])) << kind;
  }
  // ||x1 - x2|| <= ||(H + delta)^-1|| (||r1|| + ||r2||) <= (res1 + res2) ||b|| / lambda_min: the
  // bound the solver tolerance gives (lambda_min from SLEPc at 1e-10; the factor 1.01 covers it).
  double bnorm = 0.0, dx = 0.0;
  for (std::size_t k = 0; k < p; ++k) {
    bnorm += b[k] * b[k];
    dx += (x[0][k] - x[1][k]) * (x[0][k] - x[1][k]);
  }
  const double bound = 1.01 * (reports[0].relative_residual + reports[1].relative_residual) *
                       std::sqrt(bnorm) / lambda_min;
  EXPECT_LE(std::sqrt(dx), bound);
  // Each client's score s_test . g_k differs by at most ||dx|| ||g_k|| (Cauchy-Schwarz).
  Workspace work;
  for (const Client& client : problem->clients) {
    std::vector<double> g(p);
    network->gradient_sum(client.features(), client.labels().data(), client.size(), theta.data(),
                          g.data(), work);
    double s0 = 0.0, s1 = 0.0, gn = 0.0;
    for (std::size_t k = 0; k < p; ++k) {
      s0 += x[0][k] * g[k];
      s1 += x[1][k] * g[k];
      gn += g[k] * g[k];
    }
    EXPECT_LE(std::abs(s0 - s1), bound * std::sqrt(gn) * (1 + 1e-12)) << client.id();
  }
  EXPECT_LT(reports[1].iterations, reports[0].iterations);
}

TEST_F(Kfac, ExactForOneLayerAtEqualProbabilitiesAndEkfacIsTheDenseDiagonal) {
  build("[]", false);  // softmax regression as a network, at theta = 0: every row's p = 1/C
  const double damping = 0.05, shift = network->l2() + damping;
  auto hessian = make_federated_hessian(*federation, theta);
  hessian->set_damping(damping);
  const std::size_t p = network->parameters();
  std::vector<double> dense;
  hessian->dense(dense);  // exact products, damping included
  // M = G ⊗ A + shift I = H exactly here (docs/math.md §3.2), so M^-1 H v = v to rounding
  // (cond(H) <= (lambda_max + shift) / shift ~ 1e2).
  const auto kfac = hessian->kfac(false);
  const auto v = test_vector(p);
  std::vector<double> hv(p, 0.0), back(p);
  for (std::size_t i = 0; i < p; ++i)
    for (std::size_t k = 0; k < p; ++k) hv[i] += dense[i * p + k] * v[k];
  kfac->apply_inverse(hv.data(), back.data());
  EXPECT_LE(relative_error(back, v), 1e-10);

  // EK-FAC at a trained model: λ_ij = (q_i ⊗ q_j)^T H_data (q_i ⊗ q_j), the dense Hessian's
  // diagonal in the Kronecker eigenbasis (the GGN is the Hessian for one layer).
  theta = federation->train(FederationConfig::from_deck(*deck)).theta;
  auto trained = make_federated_hessian(*federation, theta);
  trained->set_damping(damping);
  trained->dense(dense);
  const auto ekfac = trained->kfac(true);
  const KfacFactors shapes = kfac_shapes(*network, false);
  const KfacLayer& layer = shapes.layers.at(0);
  const int out = layer.outputs, width = layer.width();
  const auto& qg = ekfac->output_vectors(0);
  const auto& qa = ekfac->input_vectors(0);
  double worst = 0.0, largest = 0.0;
  std::vector<double> q(p);
  for (int i = 0; i < out; ++i)
    for (int j = 0; j < width; ++j) {
      std::fill(q.begin(), q.end(), 0.0);
      for (int o = 0; o < out; ++o)
        for (int k = 0; k < width; ++k)
          q[theta_index(layer, o, k)] = qg[i * out + o] * qa[j * width + k];
      double quadratic = 0.0;
      for (std::size_t a = 0; a < p; ++a)
        for (std::size_t c = 0; c < p; ++c) quadratic += q[a] * dense[a * p + c] * q[c];
      const double expected = quadratic - shift;  // the data term's
      const double got = ekfac->eigenvalues(0)[static_cast<std::size_t>(i) * width + j];
      worst = std::max(worst, std::abs(got - expected));
      largest = std::max(largest, std::abs(expected));
    }
  // Sums of 600 rows either way (products vs squared projections): rounding, 1e-12 of the largest.
  EXPECT_LE(worst, 1e-12 * largest);

  // The EK-FAC solver applies (Q (Λ + shift) Q^T)^-1: x = solver(v) satisfies
  // (q_i ⊗ q_j)^T x = (q_i ⊗ q_j)^T v / (λ_ij + shift) for every eigenvector pair (Q orthogonal).
  IhvpConfig config = IhvpConfig::from_deck(*deck);
  config.method = IhvpMethod::ekfac;
  auto solver = make_ihvp_solver(config, *trained);
  std::vector<double> x(p);
  const SolveReport report = solver->solve(v.data(), x.data());
  EXPECT_EQ(report.iterations, 0);
  EXPECT_GT(report.relative_residual, 0.0);  // an estimate, not the solve
  for (int i = 0; i < out; ++i)
    for (int j = 0; j < width; ++j) {
      double qx = 0.0, qb = 0.0;
      for (int o = 0; o < out; ++o)
        for (int k = 0; k < width; ++k) {
          const double weight = qg[i * out + o] * qa[j * width + k];
          qx += weight * x[theta_index(layer, o, k)];
          qb += weight * v[theta_index(layer, o, k)];
        }
      const double lambda = ekfac->eigenvalues(0)[static_cast<std::size_t>(i) * width + j];
      EXPECT_NEAR(qx, qb / (lambda + shift), 1e-12 * (std::abs(qb) / shift + 1.0)) << i << j;
    }
}

TEST_F(Kfac, LanczosFindsBothEndsOfTheDenseSpectrum) {
  build("[6, 4]");  // FedAvg's model, not a minimizer
  auto hessian = make_federated_hessian(*federation, theta);
  std::vector<double> dense;
  hessian->dense(dense);
  const auto exact = testing::symmetric_eigenvalues(dense);
  const HessianSpectrum spectrum = lanczos_spectrum(*hessian, 1e-8, 300);
  // Ritz residual r <= 1e-8 |theta| bounds each error by r (Weyl), and by r^2 / gap where the end
  // is separated: 1e-7 of lambda_max covers both.
  EXPECT_NEAR(spectrum.eigenvalue_min, exact.front(), 1e-7 * exact.back());
  EXPECT_NEAR(spectrum.eigenvalue_max, exact.back(), 1e-7 * exact.back());
  EXPECT_LE(spectrum.iterations, static_cast<int>(exact.size()));
  const std::vector<double> ends{spectrum.eigenvalue_min, spectrum.eigenvalue_max};
  EXPECT_TRUE(same_on_every_rank(ends));
}

}  // namespace
}  // namespace fluence
