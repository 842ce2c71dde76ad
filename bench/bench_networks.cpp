// Network kernels on one rank (one BLAS thread), against the machine's single-core GEMM peak:
//  - the peak: a 2000^3 sgemm and dgemm;
//  - one client's local epoch (600 rows, batch 10, float) of McMahan et al.'s 2NN and CNN, the
//    work of a FedAvg round's client in inputs/fmnist_2nn.toml and inputs/fmnist_cnn.toml;
//  - the float evaluation of 10,000 rows (the per-round test accuracy);
//  - the 2NN's exact Hessian-vector product (R-operator, double) on 60,000 rows.
// The rows are random pixels: the arithmetic does not depend on their values. FLOP counts are the
// GEMMs' (2 m n k); elementwise work, im2col and pooling are time without FLOPs.
// Usage: bench_networks [--quick]
#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "fluence/model/network.hpp"

using namespace fluence;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <class Work>
double best_of(int repeats, Work&& work) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    work();
    best = std::min(best, seconds_since(start));
  }
  return best;
}

double gemm_peak(bool single) {
  const int n = 2000;
  std::vector<float> af(single ? n * n : 0, 0.5f), cf(single ? n * n : 0);
  std::vector<double> ad(single ? 0 : n * n, 0.5), cd(single ? 0 : n * n);
  const double t = best_of(3, [&] {
    if (single)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, af.data(), n, af.data(),
                  n, 0.0f, cf.data(), n);
    else
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, ad.data(), n, ad.data(),
                  n, 0.0, cd.data(), n);
  });
  return 2.0 * n * n * double(n) / t * 1e-9;
}

// Multiply-adds of one row's forward pass, and of the backward pass that SGD runs (every layer's
// weight gradient; the input gradient of every parametric layer but the first).
struct Flops {
  double forward = 0.0, backward = 0.0;
};
Flops network_flops(const Network& network) {
  Flops flops;
  bool first = true;
  for (const Layer& layer : network.layers()) {
    double macs = 0.0;
    if (layer.kind == LayerKind::dense) macs = double(layer.in.size()) * layer.out.size();
    if (layer.kind == LayerKind::conv2d)
      macs = double(layer.out.height) * layer.out.width * layer.out.channels * layer.kernel *
             layer.kernel * layer.in.channels;
    if (macs == 0.0) continue;
    flops.forward += 2.0 * macs;
    flops.backward += 2.0 * macs * (first ? 1.0 : 2.0);
    first = false;
  }
  return flops;
}

struct Case {
  const char* name;
  NetworkSpec spec;
};

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  openblas_set_num_threads(1);
  const double speak = gemm_peak(true), dpeak = gemm_peak(false);
  std::printf("# one core: sgemm 2000^3 %.1f GFLOP/s, dgemm 2000^3 %.1f GFLOP/s (OpenBLAS %s)\n",
              speak, dpeak, openblas_get_corename());
  const Case cases[] = {
      {"2NN", NetworkSpec::mlp(784, {200, 200}, Activation::relu, 10, true)},
      {"CNN", NetworkSpec::cnn({28, 28, 1}, {32, 64}, 5, Padding::same, true, {512},
                               Activation::relu, 10, true)},
  };
  std::mt19937_64 engine(1);
  const std::size_t client_rows = 600, test_rows = quick ? 1000 : 10000;
  std::vector<double> x(std::max(client_rows, test_rows) * 784);
  for (auto& v : x) v = double(engine() % 256) / 255.0;
  std::vector<std::int32_t> y(std::max(client_rows, test_rows));
  for (auto& label : y) label = static_cast<std::int32_t>(engine() % 10);
  for (const Case& c : cases) {
    const Network network(c.spec, 10, 0.0);
    const Flops flops = network_flops(network);
    std::vector<double> theta(network.parameters());
    network.initialize(1, theta.data());
    std::vector<float> single(theta.begin(), theta.end());
    Workspace work;
    std::vector<std::int64_t> order(client_rows);
    std::iota(order.begin(), order.end(), 0);
    const TrainingRows rows{x.data(), y.data(), client_rows};
    const double epoch = best_of(quick ? 1 : 3, [&] {
      network.sgd_epoch(rows, order.data(), 10, 0.01, single.data(), work);
    });
    const double train_flops = double(client_rows) * (flops.forward + flops.backward);
    std::printf(
        "%s: %zu parameters; one client's epoch (600 rows, batch 10, float): %.3f s, "
        "%.1f GFLOP/s (%.0f%% of the sgemm peak)\n",
        c.name, network.parameters(), epoch, train_flops / epoch * 1e-9,
        100.0 * train_flops / epoch * 1e-9 / speak);
    const double evaluation = best_of(quick ? 1 : 3, [&] {
      network.fast_loss_sum(x.data(), y.data(), test_rows, theta.data(), work);
    });
    const double eval_flops = double(test_rows) * flops.forward;
    std::printf(
        "%s: float evaluation of %zu rows: %.3f s, %.1f GFLOP/s (%.0f%% of the sgemm "
        "peak)\n",
        c.name, test_rows, evaluation, eval_flops / evaluation * 1e-9,
        100.0 * eval_flops / evaluation * 1e-9 / speak);
  }
  // The 2NN's exact Hessian-vector product on 60,000 rows (double).
  const Network two_nn(cases[0].spec, 10, 0.0);
  const std::size_t hvp_rows = quick ? 6000 : 60000;
  std::vector<double> big(hvp_rows * 784);
  for (auto& v : big) v = double(engine() % 256) / 255.0;
  std::vector<std::int32_t> labels(hvp_rows);
  for (auto& label : labels) label = static_cast<std::int32_t>(engine() % 10);
  std::vector<double> theta(two_nn.parameters()), v(two_nn.parameters()), out(v.size());
  two_nn.initialize(1, theta.data());
  two_nn.initialize(2, v.data());
  Workspace work;
  const double hvp = best_of(quick ? 1 : 2, [&] {
    two_nn.hessian_vector_sum(big.data(), labels.data(), hvp_rows, theta.data(), v.data(),
                              out.data(), work);
  });
  // FLOPs per row, with f the forward's and f1 the first layer's: forward f; R-forward: V a for
  // every layer, W R{a} for all but the first (2 f - f1); R-backward: delta W, R{delta} W and
  // delta V for all but the first (3 (f - f1)), R{delta}^T a for every layer and delta^T R{a} for
  // all but the first (2 f - f1). In all 8 f - 5 f1.
  const double f = network_flops(two_nn).forward;
  const double first = 2.0 * 784 * 200;
  const double hvp_flops = double(hvp_rows) * (8.0 * f - 5.0 * first);
  std::printf(
      "2NN: Hessian-vector product (R-operator, double) on %zu rows, p = %zu: %.3f s, "
      "%.1f GFLOP/s (%.0f%% of the dgemm peak)\n",
      hvp_rows, two_nn.parameters(), hvp, hvp_flops / hvp * 1e-9,
      100.0 * hvp_flops / hvp * 1e-9 / dpeak);
  return 0;
}
