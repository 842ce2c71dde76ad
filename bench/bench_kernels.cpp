// Kernel micro-benchmarks (Google Benchmark): SGD epochs at the shapes and the full-data
// gradient, reported as GFLOP/s to compare with the machine's dgemm figure (HINTS.md).
#include <benchmark/benchmark.h>

#include <numeric>
#include <vector>

#include "fluence/core/blas_tuning.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/model/softmax_regression.hpp"

namespace {

struct Data {
  std::vector<double> x, theta;
  std::vector<std::int32_t> y;
  std::vector<std::int64_t> order;
};

Data make_data(int rows, int features, int classes) {
  Data d;
  fluence::Stream stream(1, fluence::Purpose::synthetic_rows);
  d.x.resize(static_cast<std::size_t>(rows) * features);
  for (auto& v : d.x) v = stream.normal();
  d.theta.assign(static_cast<std::size_t>(classes) * features, 0.0);
  for (int r = 0; r < rows; ++r) d.y.push_back(static_cast<std::int32_t>(stream.below(classes)));
  d.order.resize(rows);
  std::iota(d.order.begin(), d.order.end(), 0);
  stream.shuffle(std::span<std::int64_t>(d.order));
  return d;
}

// args: rows, features, classes, batch
void BM_SgdEpoch(benchmark::State& state) {
  const int rows = state.range(0), features = state.range(1), classes = state.range(2),
            batch = state.range(3);
  auto d = make_data(rows, features, classes);
  fluence::SoftmaxRegression model(features, classes, 1e-3);
  fluence::Workspace work;
  for (auto _ : state)
    model.sgd_epoch(d.x.data(), d.y.data(), d.order.data(), rows, batch, 0.01, d.theta.data(),
                    work);
  // Forward and backward: 2 multiply-adds per (row, class, feature).
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * rows * features * classes,
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
  state.counters["ns/row"] = benchmark::Counter(
      rows, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_SgdEpoch)
    ->Args({1200, 60, 2, 1})
    ->Args({10000, 64, 2, 64})
    ->Args({10000, 785, 10, 16});

void BM_GradientSum(benchmark::State& state) {
  const int rows = state.range(0), features = state.range(1), classes = state.range(2);
  auto d = make_data(rows, features, classes);
  fluence::SoftmaxRegression model(features, classes, 1e-3);
  fluence::Workspace work;
  std::vector<double> gradient(model.parameters());
  for (auto _ : state)
    model.gradient_sum(d.x.data(), d.y.data(), rows, d.theta.data(), gradient.data(), work);
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * rows * features * classes,
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(BM_GradientSum)->Args({100000, 64, 2})->Args({22000, 88, 2})->Args({60000, 785, 10});

}  // namespace

int main(int argc, char** argv) {
  fluence::select_blas_core(argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
