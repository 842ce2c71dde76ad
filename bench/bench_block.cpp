// Block Hessian products and block CG (issue 40, docs/math.md §3.3): the machine's dgemm peak
// measured in the same run (a 2,000^3 dgemm on every rank at once), the federated block product's
// GFLOP/s against it, and the parameter-change vectors of every client (influence.vectors) by one
// CG per client against block CG. Run under mpirun:
//   scripts/mpirun.sh -n 2 build/bench/bench_block [--softmax-only | --network-only]
//                                                   [--network-columns m]
// (--network-columns 0: the 2NN's products only, no solves)
// Softmax regression: p = 10^4 and 10^5 (n = 20,000, C = 10, 20 clients). The 2NN:
// inputs/influence_2nn.toml's FedAvg model, damping 2.45 + 0.01 (what its spectrum adds, docs/
// performance.md; the spectrum itself is not rerun), rtol 1e-6 as in the deck; its block CG solves
// the first m clients' vectors (default 8) and is extrapolated to 100.
#include <cblas.h>
#include <fmt/core.h>

#include <cstring>
#include <string>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/blas_tuning.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/fl/federation.hpp"
#include "fluence/influence/block_cg.hpp"
#include "fluence/influence/ihvp.hpp"
#include "fluence/model/network.hpp"

namespace fluence {
namespace {

double seconds_of(const std::function<void()>& work) {
  MPI_Barrier(MPI_COMM_WORLD);
  Stopwatch clock;
  work();
  MPI_Barrier(MPI_COMM_WORLD);
  return clock.seconds();
}

double best_of(int repeats, const std::function<void()>& work) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) best = std::min(best, seconds_of(work));
  return best;
}

// GFLOP/s of one rank's 2,000^3 dgemm while every rank runs one, best of three, summed over ranks.
double dgemm_peak() {
  const int n = 2000;
  std::vector<double> a(n * n, 1.0 / 3), b(n * n, 0.5), c(n * n);
  const double t = best_of(3, [&] {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a.data(), n, b.data(), n,
                0.0, c.data(), n);
  });
  return 2.0 * n * n * n / t * world_size() / 1e9;
}

std::string softmax_deck(long rows, int features, int clients) {
  return fmt::format(R"(
seed = 3
[data]
test_fraction = 0.2
[data.synthetic]
rows = {}
numeric = {}
categorical = []
classes = 10
signal = 1.0
[partition]
clients = {}
[model]
l2 = 1e-3
[federation]
rounds = 2
optimizer = "gd"
learning_rate = 0.5
eval_train_loss = false
)",
                     static_cast<long>(rows / 0.8), features - 1, clients);
}

// Every client's removal gradient, in client order, on every rank.
std::vector<double> all_gradients(Federation& federation, const std::vector<double>& theta) {
  auto& problem = federation.problem();
  const std::size_t p = federation.parameters();
  std::vector<double> local(problem.clients.size() * p), one;
  Workspace work;
  for (std::size_t k = 0; k < problem.clients.size(); ++k) {
    const auto& client = problem.clients[k];
    problem.model->gradient_sum(client.features(), client.labels().data(), client.size(),
                                theta.data(), local.data() + k * p, work);
  }
  return ordered_allgather(local, static_cast<int>(problem.clients.size()), static_cast<int>(p));
}

// The block product's time per column for k = 1, 4, 16, 32 against the single product, and its
// rate in GFLOP/s of the two GEMMs (4 n D C k flops).
void softmax_products(HessianOperator& hessian, long rows, int D, double peak) {
  const std::size_t p = hessian.parameters();
  std::vector<double> V(32 * p), out(32 * p);
  for (std::size_t i = 0; i < V.size(); ++i) V[i] = std::sin(0.1 * static_cast<double>(i));
  const double single = best_of(3, [&] { hessian.apply(V.data(), out.data()); });
  log::info("  single product: {:.4f} s ({:.1f} GFLOP/s of 4 n D C)", single,
            4.0 * rows * D * 10 / single / 1e9);
  for (int k : {1, 4, 16, 32}) {
    const double t = best_of(3, [&] { hessian.apply_block(V.data(), out.data(), k); });
    const double rate = 4.0 * rows * D * 10 * k / t / 1e9;
    log::info(
        "  block k = {:>2}: {:.4f} s, {:.4f} s per column ({:.2f}x), {:.1f} GFLOP/s = {:.0f}% "
        "of the dgemm peak",
        k, t, t / k, single / (t / k), rate, 100.0 * rate / peak);
  }
}

// Every client's vector H^-1 g_k (the first `columns`, 0: all): one CG per client (warm-started,
// today's path) for the first `single_columns` of them, and one block CG over all of them.
void vectors(const Deck& deck, Federation& federation, HessianOperator& hessian,
             const std::vector<double>& theta, double rtol, int single_columns, int columns) {
  const std::size_t p = hessian.parameters();
  const auto gradients = all_gradients(federation, theta);
  const int clients = columns > 0 ? columns : static_cast<int>(gradients.size() / p);
  IhvpConfig config = IhvpConfig::from_deck(deck);
  config.rtol = rtol;
  config.preconditioner = IhvpPreconditioner::none;
  if (single_columns > 0) {
    long iterations = 0;
    std::vector<double> x(p);
    const double t = seconds_of([&] {
      auto solver = make_ihvp_solver(config, hessian);
      for (int k = 0; k < std::min(single_columns, clients); ++k)
        iterations += solver->solve(gradients.data() + k * p, x.data()).iterations;
    });
    log::info("  one CG per client (warm-started): the first {} clients, {} products, {:.2f} s",
              std::min(single_columns, clients), iterations, t);
  }
  std::vector<double> X(static_cast<std::size_t>(clients) * p);
  BlockCgOutcome outcome;
  const double t = seconds_of([&] {
    BlockIhvpSolver solver(config, hessian);
    outcome = solver.solve(gradients.data(), X.data(), clients);
  });
  double worst = 0.0;
  int most = 0;
  for (const auto& column : outcome.columns) {
    worst = std::max(worst, column.relative_residual);
    most = std::max(most, column.iterations);
  }
  log::info(
      "  block CG: {} columns, {} block iterations (a column at most {}), {} column "
      "products, worst true residual {:.1e}, {:.2f} s",
      clients, outcome.block_iterations, most, outcome.column_products, worst, t);
}

void softmax_case(int D, int single_columns, double peak) {
  const long rows = 20000;
  const Deck deck = Deck::from_string(softmax_deck(rows, D, 20), "bench", deck_schema());
  FederatedProblem problem = build_problem(deck);
  Federation federation(problem);
  const auto trained = federation.train(FederationConfig::from_deck(deck));
  auto hessian = make_federated_hessian(federation, trained.theta);
  log::info("# softmax regression: n = {}, D = {}, C = 10, p = {}, 20 clients", rows, D,
            hessian->parameters());
  softmax_products(*hessian, rows, D, peak);
  vectors(deck, federation, *hessian, trained.theta, 1e-8, single_columns, 0);
}

// GEMM flops of the R-operator per row: the forward pass once (2 in out per dense layer), then per
// direction R-forward (2 in out for the first layer, 4 for the others) and R-backward (weight
// gradients 2 or 4 in out, input deltas 6 in out above the first layer).
void network_case(int columns, double peak) {
  const Deck deck = Deck::from_file("inputs/influence_2nn.toml", deck_schema());
  FederatedProblem problem = build_problem(deck);
  Federation federation(problem);
  const auto trained = federation.train(FederationConfig::from_deck(deck));
  auto hessian = make_federated_hessian(federation, trained.theta);
  hessian->set_damping(2.45 + 0.01);
  const auto& network = dynamic_cast<const Network&>(*problem.model);
  double forward = 0.0, direction = 0.0;
  bool first = true;
  for (const auto& layer : network.layers()) {
    if (layer.kind != LayerKind::dense) continue;
    const double io = static_cast<double>(layer.in.size()) * layer.out.size();
    forward += 2 * io;
    direction += first ? 4 * io : 14 * io;
    first = false;
  }
  const double n = static_cast<double>(federation.train_rows());
  const std::size_t p = hessian->parameters();
  log::info("# 2NN (inputs/influence_2nn.toml after FedAvg): n = {}, p = {}", n, p);
  std::vector<double> V(8 * p), out(8 * p);
  for (std::size_t i = 0; i < V.size(); ++i) V[i] = 1e-2 * std::sin(0.1 * static_cast<double>(i));
  const double single = best_of(2, [&] { hessian->apply(V.data(), out.data()); });
  log::info("  single product: {:.3f} s ({:.1f} GFLOP/s = {:.0f}% of the dgemm peak)", single,
            n * (forward + direction) / single / 1e9,
            100.0 * n * (forward + direction) / single / 1e9 / peak);
  for (int k : {4, 8}) {
    const double t = best_of(1, [&] { hessian->apply_block(V.data(), out.data(), k); });
    const double rate = n * (forward + k * direction) / t / 1e9;
    log::info(
        "  block k = {}: {:.3f} s, {:.3f} s per column ({:.2f}x), {:.1f} GFLOP/s = {:.0f}% of "
        "the dgemm peak",
        k, t, t / k, single / (t / k), rate, 100.0 * rate / peak);
  }
  if (columns > 0) vectors(deck, federation, *hessian, trained.theta, 1e-6, 1, columns);
}

}  // namespace
}  // namespace fluence

int main(int argc, char** argv) {
  using namespace fluence;
  select_blas_core(argv);
  Environment environment(&argc, &argv);
  bool softmax = true, network = true;
  int columns = 8;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--softmax-only") == 0) network = false;
    if (std::strcmp(argv[a], "--network-only") == 0) softmax = false;
    if (std::strcmp(argv[a], "--network-columns") == 0 && a + 1 < argc)
      columns = std::atoi(argv[++a]);
  }
  const double peak = dgemm_peak();
  log::info("# dgemm peak (2000^3 on each of {} rank(s) at once, summed): {:.1f} GFLOP/s",
            world_size(), peak);
  if (softmax) {
    softmax_case(1000, 20, peak);
    softmax_case(10000, 2, peak);
  }
  if (network) network_case(columns, peak);
  return 0;
}
