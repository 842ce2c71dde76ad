// K-FAC and EK-FAC for networks (influence/kfac.hpp, docs/math.md §3.2) at 1-4 ranks: the factors
// against per-row gradients from the model's own backward pass, the preconditioner against a dense
// (G ⊗ A + shift I)^-1 built here, the same bits as a rank-free client-order sum, CG with it
// against CG without it, and EK-FAC against the dense Hessian of a one-layer network. For a cnn
// (KFC, docs/math.md §3.2.1): the factors and EK-FAC's eigenvalues against a forward and backward
// pass written out here with explicit loops over the rows and the output positions, the
// preconditioner against the dense solve, CG with it against CG without it, and the EK-FAC
// estimator's error reported by the influence sweep.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/influence/client_influence.hpp"
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

std::string mlp_deck(const std::string& hidden) {
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

// 1 convolution (2 filters, 3 x 3, "same") on 6 x 6 x 2 images, tanh, 2 x 2 max-pooling to
// 3 x 3 x 2, then the dense layer of the 3 logits: 95 parameters, 36 output positions.
std::string cnn_deck() {
  return testing::synthetic_deck({.seed = 11,
                                  .rows = 400,
                                  .numeric = 72,
                                  .categorical = {},
                                  .classes = 3,
                                  .clients = 5,
                                  .partition = "scheme = \"dirichlet\"\nalpha = 0.5\n",
                                  .synthetic = "signal = 1.5\n"}) +
         "[model]\ntype = \"cnn\"\ninput_shape = [6, 6, 2]\nconv_filters = [2]\nconv_kernel = 3\n"
         "conv_padding = \"same\"\nconv_pool = true\nhidden = []\nactivation = \"tanh\"\nl2 = "
         "0.01\n"
         "[federation]\nrounds = 3\nlocal_epochs = 1\nbatch_size = 16\nlearning_rate = 0.2\n";
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

// Dense (G ⊗ A + shift I)^-1 r, layer by layer, from `factors` (a dense solve of each block).
std::vector<double> dense_kfac_inverse(const KfacFactors& factors, double shift,
                                       const std::vector<double>& r) {
  std::vector<double> expected(r.size(), 0.0);
  for (const auto& layer : factors.layers) {
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
  return expected;
}

// The factors from the clients' sums added in client order by this rank alone (no MPI).
KfacFactors client_order_factors(const Network& network, const PooledClients& pooled,
                                 const std::vector<double>& theta, double shift) {
  KfacFactors sums = kfac_shapes(network, false);
  sums.shift = shift;
  Workspace work;
  double rows = 0.0;
  for (std::size_t k = 0; k < pooled.x.size(); ++k) {
    KfacFactors one = kfac_shapes(network, false);
    const std::size_t n = pooled.y[k].size();
    rows += static_cast<double>(n);
    add_kfac_factor_sums(network, pooled.x[k].data(), n, theta.data(), one, work);
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
  return sums;
}

class Kfac : public ::testing::Test {
 protected:
  void build(const std::string& text, bool train = true) {
    deck = std::make_unique<Deck>(Deck::from_string(text, "test", deck_schema()));
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
  build(mlp_deck("[6, 4]"));
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
  EXPECT_LE(relative_error(z, dense_kfac_inverse(reference, shift, r)), 1e-10);

  // Bitwise: the clients' sums added in client order by this rank alone (no MPI) give the same
  // preconditioner bits as the federated collective, whatever the rank count.
  std::vector<double> z_alone(p);
  KfacCurvature(client_order_factors(*network, pooled, theta, shift))
      .apply_inverse(r.data(), z_alone.data());
  EXPECT_EQ(std::memcmp(z_alone.data(), z.data(), p * sizeof(double)), 0);
  EXPECT_TRUE(same_on_every_rank(z));
}

// CG with K-FAC against CG without it on FedAvg's model: both to rtol 1e-10, and every client's
// score within the bound the tolerance gives. Returns the iterations without and with K-FAC.
std::pair<int, int> compare_preconditioned_cg(Federation& federation, const Network& network,
                                              const Deck& deck, const std::vector<double>& theta);

TEST_F(Kfac, PreconditionedCgGivesTheUnpreconditionedScoresWithFewerIterations) {
  build(mlp_deck("[6, 4]"));
  const auto [plain, preconditioned] =
      compare_preconditioned_cg(*federation, *network, *deck, theta);
  EXPECT_LT(preconditioned, plain);
}

std::pair<int, int> compare_preconditioned_cg(Federation& federation, const Network& network,
                                              const Deck& deck, const std::vector<double>& theta) {
  auto hessian = make_federated_hessian(federation, theta);
  // FedAvg's model after 3 rounds is no minimizer: damp so that H + delta I is PD with
  // lambda_min >= 0.05 (SLEPc to 1e-10).
  const HessianSpectrum spectrum = hessian_spectrum(*hessian, 1e-10);
  const double damping = std::max(0.0, 0.05 - spectrum.eigenvalue_min);
  hessian->set_damping(damping);
  const double lambda_min = spectrum.eigenvalue_min + damping;
  const std::size_t p = network.parameters();
  std::vector<double> b;
  federation.test_gradient(theta, b);
  IhvpConfig config = IhvpConfig::from_deck(deck);
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
  for (const Client& client : federation.problem().clients) {
    std::vector<double> g(p);
    network.gradient_sum(client.features(), client.labels().data(), client.size(), theta.data(),
                         g.data(), work);
    double s0 = 0.0, s1 = 0.0, gn = 0.0;
    for (std::size_t k = 0; k < p; ++k) {
      s0 += x[0][k] * g[k];
      s1 += x[1][k] * g[k];
      gn += g[k] * g[k];
    }
    EXPECT_LE(std::abs(s0 - s1), bound * std::sqrt(gn) * (1 + 1e-12)) << client.id();
  }
  return {reports[0].iterations, reports[1].iterations};
}

TEST_F(Kfac, ExactForOneLayerAtEqualProbabilitiesAndEkfacIsTheDenseDiagonal) {
  build(mlp_deck("[]"),
        false);  // softmax regression as a network, at theta = 0: every row's p = 1/C
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
  build(mlp_deck("[6, 4]"));  // FedAvg's model, not a minimizer
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

// ---- Convolutions (KFC, docs/math.md §3.2.1) --------------------------------------------------

// cnn_deck()'s network written out with explicit loops over the rows and the output positions:
// conv (k x k, zero padding) -> tanh -> 2 x 2 max-pooling -> flatten -> dense logits. For each
// row r and direction c (v_rc = sqrt(p_rc) (e_c - p_r)): the conv layer's patches ā_rt and output
// gradients g_rct = d(v_rc . z_r)/du_rt at every position t, the dense layer's input h̄_r and
// output gradient v_rc; the factors by their definitions (3.2.5) and §3.2, and each layer's
// gradient Γ_rc of v_rc . z_r in [W b] (3.2.2) for EK-FAC.
struct BruteForceCnn {
  KfacFactors factors;                                  // kfac_shapes' order: conv, dense
  std::vector<std::vector<std::vector<double>>> gamma;  // [layer][(r, c)]: out x width
  double rows = 0.0;
  double logit_error = 0.0;  // the loops' logits against the model's, max |difference|
};

BruteForceCnn brute_force_cnn(const Network& network, const PooledClients& pooled,
                              const std::vector<double>& theta) {
  const auto& layers = network.layers();
  const Layer& conv = layers.front();
  const Layer& dense = layers.back();
  const int Hi = conv.in.height, Wi = conv.in.width, Ci = conv.in.channels, k = conv.kernel,
            pad = conv.pad, F = conv.out.channels, Ho = conv.out.height, Wo = conv.out.width;
  const int T = Ho * Wo, K = k * k * Ci, Hp = Ho / 2, Wp = Wo / 2, hidden = Hp * Wp * F;
  const int C = network.classes();
  const std::size_t D = network.features();
  const double* Wc = theta.data() + conv.weights;
  const double* bc = theta.data() + conv.biases;
  const double* Wd = theta.data() + dense.weights;
  const double* bd = theta.data() + dense.biases;
  BruteForceCnn b;
  b.factors = kfac_shapes(network, false);
  b.gamma.resize(2);
  KfacLayer& fc = b.factors.layers.at(0);
  KfacLayer& fd = b.factors.layers.at(1);
  Workspace work;
  std::vector<double> model_logits(C);
  for (const auto& xs : pooled.x)
    for (std::size_t r = 0; r < xs.size() / D; ++r) {
      const double* x = xs.data() + r * D;
      b.rows += 1.0;
      // ā_rt: the (ky, kx, c) patch under output position t = (oy, ox), zeros outside, and the 1.
      std::vector<double> patch(static_cast<std::size_t>(T) * (K + 1), 0.0);
      for (int oy = 0; oy < Ho; ++oy)
        for (int ox = 0; ox < Wo; ++ox) {
          double* a = patch.data() + static_cast<std::size_t>(oy * Wo + ox) * (K + 1);
          for (int ky = 0; ky < k; ++ky)
            for (int kx = 0; kx < k; ++kx)
              for (int c = 0; c < Ci; ++c) {
                const int iy = oy + ky - pad, ix = ox + kx - pad;
                if (iy >= 0 && iy < Hi && ix >= 0 && ix < Wi)
                  a[(ky * k + kx) * Ci + c] = x[(iy * Wi + ix) * Ci + c];
              }
          a[K] = 1.0;
        }
      std::vector<double> y(static_cast<std::size_t>(T) * F);
      for (int t = 0; t < T; ++t)
        for (int f = 0; f < F; ++f) {
          double u = bc[f];
          for (int j = 0; j < K; ++j) u += Wc[f * K + j] * patch[t * (K + 1) + j];
          y[t * F + f] = std::tanh(u);
        }
      // Max-pooling: the first maximal of (0, 0), (0, 1), (1, 0), (1, 1) in each 2 x 2 window.
      std::vector<double> h(hidden + 1, 1.0);
      std::vector<int> from(hidden);
      for (int py = 0; py < Hp; ++py)
        for (int px = 0; px < Wp; ++px)
          for (int f = 0; f < F; ++f) {
            const int j = (py * Wp + px) * F + f;
            for (int dy = 0; dy < 2; ++dy)
              for (int dx = 0; dx < 2; ++dx) {
                const int t = (2 * py + dy) * Wo + 2 * px + dx;
                if ((dy == 0 && dx == 0) || y[t * F + f] > h[j]) {
                  h[j] = y[t * F + f];
                  from[j] = t;
                }
              }
          }
      std::vector<double> z(C);
      for (int o = 0; o < C; ++o) {
        z[o] = bd[o];
        for (int j = 0; j < hidden; ++j) z[o] += Wd[o * hidden + j] * h[j];
      }
      network.logits(x, 1, theta.data(), model_logits.data(), work);
      for (int o = 0; o < C; ++o)
        b.logit_error = std::max(b.logit_error, std::abs(model_logits[o] - z[o]));
      std::vector<double> p = z;
      softmax_probabilities(p.data(), 1, C);
      // A: the conv layer's sum over positions, the dense layer's one input (once per row).
      for (int t = 0; t < T; ++t)
        for (int i = 0; i <= K; ++i)
          for (int j = 0; j <= K; ++j)
            fc.input_factor[i * (K + 1) + j] += patch[t * (K + 1) + i] * patch[t * (K + 1) + j];
      for (int i = 0; i <= hidden; ++i)
        for (int j = 0; j <= hidden; ++j) fd.input_factor[i * (hidden + 1) + j] += h[i] * h[j];
      for (int c = 0; c < C; ++c) {
        std::vector<double> v(C);
        for (int o = 0; o < C; ++o) v[o] = std::sqrt(p[c]) * ((o == c ? 1.0 : 0.0) - p[o]);
        std::vector<double> gd(static_cast<std::size_t>(C) * (hidden + 1));
        for (int o = 0; o < C; ++o) {
          for (int o2 = 0; o2 < C; ++o2) fd.output_factor[o * C + o2] += v[o] * v[o2];
          for (int j = 0; j <= hidden; ++j) gd[o * (hidden + 1) + j] = v[o] * h[j];
        }
        b.gamma[1].push_back(gd);
        // Back through the dense layer, the pooling (to the maximal input) and tanh.
        std::vector<double> g(static_cast<std::size_t>(T) * F, 0.0);
        for (int j = 0; j < hidden; ++j) {
          double dh = 0.0;
          for (int o = 0; o < C; ++o) dh += Wd[o * hidden + j] * v[o];
          const int t = from[j], f = j % F;
          g[t * F + f] = dh * (1.0 - y[t * F + f] * y[t * F + f]);
        }
        std::vector<double> gc(static_cast<std::size_t>(F) * (K + 1), 0.0);
        for (int t = 0; t < T; ++t)
          for (int f = 0; f < F; ++f) {
            for (int f2 = 0; f2 < F; ++f2)
              fc.output_factor[f * F + f2] += g[t * F + f] * g[t * F + f2];
            for (int j = 0; j <= K; ++j)
              gc[f * (K + 1) + j] += g[t * F + f] * patch[t * (K + 1) + j];
          }
        b.gamma[0].push_back(gc);
      }
    }
  for (auto& value : fc.input_factor) value /= b.rows;
  for (auto& value : fc.output_factor) value /= b.rows * T;  // the mean over positions
  for (auto& value : fd.input_factor) value /= b.rows;
  for (auto& value : fd.output_factor) value /= b.rows;
  return b;
}

double largest_magnitude(const std::vector<double>& v) {
  double largest = 0.0;
  for (double value : v) largest = std::max(largest, std::abs(value));
  return largest;
}

double largest_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double largest = 0.0;
  for (std::size_t k = 0; k < a.size(); ++k) largest = std::max(largest, std::abs(a[k] - b[k]));
  return largest;
}

TEST_F(Kfac, ConvolutionFactorsAreTheirDefinitionsAndThePreconditionerTheDenseInverse) {
  build(cnn_deck());
  const auto& layers = network->layers();
  ASSERT_EQ(layers.size(), 5u);
  ASSERT_EQ(layers[0].kind, LayerKind::conv2d);
  ASSERT_EQ(layers[2].kind, LayerKind::max_pool);
  ASSERT_EQ(layers[4].kind, LayerKind::dense);
  const PooledClients pooled = pooled_clients(*deck, *problem);
  const BruteForceCnn brute = brute_force_cnn(*network, pooled, theta);
  // The loops compute the model's own logits (sums of 19 and 19 terms in another order).
  EXPECT_LE(brute.logit_error, 1e-12);

  const double damping = 0.1, shift = network->l2() + damping;
  const KfacFactors computed = client_order_factors(*network, pooled, theta, shift);
  ASSERT_EQ(computed.layers.size(), 2u);
  EXPECT_TRUE(computed.layers[0].convolution);
  EXPECT_EQ(computed.layers[0].positions, 36);
  EXPECT_EQ(computed.layers[0].outputs, 2);
  EXPECT_EQ(computed.layers[0].width(), 19);
  EXPECT_FALSE(computed.layers[1].convolution);
  // Each entry is a sum of 320 x 36 products of O(1) terms, added in another order here (loops
  // against SYRKs): rounding, ~1e-14 relative to the factor's largest entry; 1e-12 has room.
  for (std::size_t l = 0; l < 2; ++l) {
    const auto& got = computed.layers[l];
    const auto& want = brute.factors.layers[l];
    EXPECT_LE(largest_difference(got.input_factor, want.input_factor),
              1e-12 * largest_magnitude(want.input_factor))
        << l;
    EXPECT_LE(largest_difference(got.output_factor, want.output_factor),
              1e-12 * largest_magnitude(want.output_factor))
        << l;
  }

  // The federated preconditioner applies (G ⊗ A + shift I)^-1 of the definitions: a dense solve
  // per block (38 and 57 unknowns). M's condition number is at most (max g a + shift) / shift,
  // about 1e2 here, so 1e-10 is rounding with a wide margin.
  auto hessian = make_federated_hessian(*federation, theta);
  hessian->set_damping(damping);
  const auto curvature = hessian->kfac(false);
  const std::size_t p = network->parameters();
  const auto r = test_vector(p);
  std::vector<double> z(p);
  curvature->apply_inverse(r.data(), z.data());
  EXPECT_LE(relative_error(z, dense_kfac_inverse(brute.factors, shift, r)), 1e-10);
  // The same bits as the client-order sum of this rank alone, for any rank count.
  std::vector<double> z_alone(p);
  KfacCurvature(computed).apply_inverse(r.data(), z_alone.data());
  EXPECT_EQ(std::memcmp(z_alone.data(), z.data(), p * sizeof(double)), 0);
  EXPECT_TRUE(same_on_every_rank(z));
}

TEST_F(Kfac, ConvolutionEkfacIsTheGgnDiagonalInTheKfcEigenbasis) {
  build(cnn_deck());
  auto hessian = make_federated_hessian(*federation, theta);
  hessian->set_damping(0.1);
  const auto ekfac = hessian->kfac(true);
  const BruteForceCnn brute = brute_force_cnn(*network, pooled_clients(*deck, *problem), theta);
  // (3.2.7): λ_ij = (1/n) Σ_r Σ_c (q_G,i^T Γ_rc q_A,j)^2 with each row's Γ_rc from the loops.
  for (std::size_t l = 0; l < 2; ++l) {
    const KfacLayer& layer = brute.factors.layers[l];
    const int out = layer.outputs, width = layer.width();
    const auto& qg = ekfac->output_vectors(l);
    const auto& qa = ekfac->input_vectors(l);
    std::vector<double> expected(static_cast<std::size_t>(out) * width, 0.0);
    for (const auto& gamma : brute.gamma[l])
      for (int i = 0; i < out; ++i)
        for (int j = 0; j < width; ++j) {
          double projection = 0.0;
          for (int o = 0; o < out; ++o)
            for (int m = 0; m < width; ++m)
              projection += qg[i * out + o] * gamma[o * width + m] * qa[j * width + m];
          expected[i * width + j] += projection * projection / brute.rows;
        }
    // Sums of 320 x 3 squares either way, the projections in another order: rounding.
    EXPECT_LE(largest_difference(ekfac->eigenvalues(l), expected),
              1e-12 * largest_magnitude(expected))
        << l;
    EXPECT_TRUE(same_on_every_rank(ekfac->eigenvalues(l))) << l;
  }
}

TEST_F(Kfac, ConvolutionPreconditionedCgGivesTheUnpreconditionedScores) {
  build(cnn_deck());
  const auto [plain, preconditioned] =
      compare_preconditioned_cg(*federation, *network, *deck, theta);
  RecordProperty("cg_iterations", plain);
  RecordProperty("kfac_cg_iterations", preconditioned);
  EXPECT_LT(preconditioned, plain);
}

// `fluence influence` with influence.solver = "ekfac" on a cnn: the estimator's scores and its
// error against exact CG (/influence/estimator/*, docs/outputs.md), whose scores are a CG run's.
TEST(KfacCnn, EkfacEstimatorErrorIsReportedAgainstTheCgRun) {
  // FedAvg's model has lambda_min = -0.16 (SLEPc): a fixed damping of 0.3 makes H + 0.3 I PD
  // with lambda_min >= 0.13, so that CG reaches rtol on the true residual.
  const std::string influence =
      "[influence]\nvectors = false\nretrain = false\nrtol = 1e-10\npreconditioner = \"kfac\"\n"
      "spectrum = false\ndamping = 0.3\n";
  auto run = [&](const char* solver) {
    const Deck deck = Deck::from_string(cnn_deck() + influence, "test", deck_schema(),
                                        {std::string("influence.solver=") + solver});
    FederatedProblem problem = build_problem(deck);
    Federation federation(problem);
    const FederationConfig training = FederationConfig::from_deck(deck);
    const auto trained = federation.train(training);
    return client_removal_influence(federation, trained.theta, InfluenceConfig::from_deck(deck),
                                    training, false);
  };
  const ClientInfluence estimated = run("ekfac"), exact = run("cg");
  ASSERT_TRUE(estimated.estimator_error.has_value());
  EXPECT_FALSE(exact.estimator_error.has_value());
  const auto& error = *estimated.estimator_error;
  ASSERT_EQ(error.exact_estimate.size(), 5u);
  ASSERT_EQ(estimated.estimate.size(), 5u);
  EXPECT_EQ(estimated.iterations.at(0), 0);  // the estimator does not iterate
  // The exact side is the CG run's s_test (the same solver, right-hand side and damping): its
  // scores are that run's bits.
  EXPECT_EQ(error.exact_iterations, exact.iterations.at(0));
  EXPECT_GT(error.exact_iterations, 0);
  EXPECT_LE(exact.relative_residual.at(0), 1e-10);
  EXPECT_EQ(std::memcmp(error.exact_estimate.data(), exact.estimate.data(), 5 * sizeof(double)), 0);
  // The reported difference is the scores' relative 2-norm difference; EK-FAC is an estimate.
  EXPECT_NEAR(error.score_relative_difference, relative_error(estimated.estimate, exact.estimate),
              1e-14);
  EXPECT_GT(error.score_relative_difference, 0.0);
  EXPECT_GT(error.solution_relative_difference, 0.0);
  EXPECT_TRUE(std::isfinite(error.solution_relative_difference));
  EXPECT_GE(error.spearman, -1.0);
  EXPECT_LE(error.spearman, 1.0);
  EXPECT_TRUE(same_on_every_rank(estimated.estimate));
}

}  // namespace
}  // namespace fluence
