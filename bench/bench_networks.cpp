// Network kernels on one rank (one BLAS thread), against the machine's single-core GEMM peak:
//  - the peak: a 2000^3 sgemm and dgemm;
//  - one client's local epoch (600 rows, batch 10, float) of McMahan et al.'s 2NN and CNN, the
//    work of a FedAvg round's client in inputs/fmnist_2nn.toml and inputs/fmnist_cnn.toml;
//  - the float evaluation of 10,000 rows (the per-round test accuracy);
//  - the 2NN's exact Hessian-vector product (R-operator, double) on 60,000 rows.
// The rows are random pixels: the arithmetic does not depend on their values. FLOP counts are the
// GEMMs' (2 m n k) of the direct convolution, also for the CNN's Winograd convolutions (which do
// fewer multiplications: the rate shown is the direct-equivalent rate); elementwise work, im2col,
// the Winograd transforms and pooling are time without FLOPs. "CNN (im2col)" is the same network
// with every convolution through im2col + GEMM (model.conv_algorithm = "im2col").
//  - the CNN's second convolution (14 x 14 x 32 -> 64, 5 x 5, same) alone, each pass by Winograd
//    and by im2col + GEMM, with the rate of the multiplications each performs.
// Usage: bench_networks [--quick] [--only NAME] (NAME: 2NN, CNN, "CNN (im2col)", conv or HVP)
#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "fluence/core/blas_tuning.hpp"
#include "fluence/model/layers.hpp"
#include "fluence/model/network.hpp"
#include "fluence/model/winograd.hpp"

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

// The CNN's second convolution on `batch` images: each pass by Winograd and by im2col + GEMM, its
// time per image, the direct convolution's FLOPs per second ("direct-equivalent") and the rate of
// the multiplications it performs (Winograd: 36 per 2 x 2 tile and channel pair; im2col: the
// GEMM's), against the sgemm peak.
void convolution_rates(int batch, bool quick, double peak) {
  const ConvGeometry g{14, 14, 32, 5, 2, 64};
  std::mt19937_64 engine(7);
  std::normal_distribution<float> normal;
  const auto random = [&](std::size_t n) {
    std::vector<float> v(n);
    for (auto& e : v) e = normal(engine);
    return v;
  };
  const std::size_t out_size = std::size_t(g.positions()) * g.filters;
  const auto x = random(batch * g.input_size()), w = random(std::size_t(g.filters) * g.patch()),
             dy = random(batch * out_size);
  std::vector<float> y(batch * out_size), dx(x.size()), dw(w.size());
  std::vector<float> col(std::size_t(batch) * g.positions() * g.patch());
  WinogradScratch<float> scratch;
  const int calls = (quick ? 600 : 6000) / batch;  // a client's epoch, or ten
  const double direct = 2.0 * batch * double(g.positions()) * g.filters * g.patch();
  const double tiles = double(batch) * 49.0;  // 7 x 7 tiles of 2 x 2 outputs per image
  const double winograd_flops = 2.0 * 36.0 * tiles * g.channels * g.filters;
  const int M = batch * g.positions(), K = g.patch(), F = g.filters;
  struct Pass {
    const char* name;
    std::function<void()> winograd, im2col;
  };
  const Pass passes[] = {
      {"forward", [&] { winograd_convolution(x.data(), batch, g, w.data(), y.data(), scratch); },
       [&] {
         im2col(x.data(), batch, g, col.data());
         gemm<float>(false, true, M, F, K, 1.0f, col.data(), K, w.data(), K, 0.0f, y.data(), F);
       }},
      {"input gradient",
       [&] { winograd_convolution_adjoint(dy.data(), batch, g, w.data(), dx.data(), scratch); },
       [&] {
         gemm<float>(false, false, M, K, F, 1.0f, dy.data(), F, w.data(), K, 0.0f, col.data(), K);
         col2im(col.data(), batch, g, dx.data());
       }},
      {"filter gradient",
       [&] {
         winograd_filter_gradient(x.data(), dy.data(), batch, g, 1.0f, 0.0f, dw.data(), scratch);
       },
       [&] {
         im2col(x.data(), batch, g, col.data());
         gemm<float>(true, false, F, K, M, 1.0f, dy.data(), F, col.data(), K, 0.0f, dw.data(), K);
       }},
  };
  for (const Pass& pass : passes)
    for (int method = 0; method < 2; ++method) {
      const auto& work = method == 0 ? pass.winograd : pass.im2col;
      const double t = best_of(3,
                               [&] {
                                 for (int c = 0; c < calls; ++c) work();
                               }) /
                       calls;
      const double performed = method == 0 ? winograd_flops : direct;
      std::printf(
          "conv 14x14x32->64 5x5 same, batch %d, %-15s by %-8s: %6.1f us per image, "
          "direct-equivalent %6.1f GFLOP/s, performed %6.1f GFLOP/s (%.0f%% of the sgemm peak)\n",
          batch, pass.name, method == 0 ? "winograd" : "im2col", t / batch * 1e6, direct / t * 1e-9,
          performed / t * 1e-9, 100.0 * performed / t * 1e-9 / peak);
    }
}

struct Case {
  const char* name;
  NetworkSpec spec;
};

}  // namespace

int main(int argc, char** argv) {
  select_blas_core(argv);
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
  }
  const auto wanted = [&](const std::string& name) { return only.empty() || only == name; };
  openblas_set_num_threads(1);
  const double speak = gemm_peak(true), dpeak = gemm_peak(false);
  std::printf("# one core: sgemm 2000^3 %.1f GFLOP/s, dgemm 2000^3 %.1f GFLOP/s (OpenBLAS %s)\n",
              speak, dpeak, openblas_get_corename());
  const NetworkSpec cnn = NetworkSpec::cnn({28, 28, 1}, {32, 64}, 5, Padding::same, true, {512},
                                           Activation::relu, 10, true);
  NetworkSpec cnn_im2col = cnn;
  cnn_im2col.convolution = ConvolutionMethod::im2col;
  const Case cases[] = {
      {"2NN", NetworkSpec::mlp(784, {200, 200}, Activation::relu, 10, true)},
      {"CNN", cnn},
      {"CNN (im2col)", cnn_im2col},
  };
  std::mt19937_64 engine(1);
  const std::size_t client_rows = 600, test_rows = quick ? 1000 : 10000;
  std::vector<double> x(std::max(client_rows, test_rows) * 784);
  for (auto& v : x) v = double(engine() % 256) / 255.0;
  std::vector<std::int32_t> y(std::max(client_rows, test_rows));
  for (auto& label : y) label = static_cast<std::int32_t>(engine() % 10);
  for (const Case& c : cases) {
    if (!wanted(c.name)) continue;
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
  if (wanted("conv")) convolution_rates(10, quick, speak);  // a training mini-batch
  // The 2NN's exact Hessian-vector product on 60,000 rows (double).
  if (!wanted("HVP")) return 0;
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
