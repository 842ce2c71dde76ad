// Kernel micro-benchmarks (Google Benchmark): SGD epochs at the shapes and the full-data
// gradient, reported as GFLOP/s to compare with the machine's dgemm figure (HINTS.md), and the
// FLDP estimate's expected-gradient pass.
#include <benchmark/benchmark.h>

#include <numeric>
#include <vector>

#include "fluence/app/deck_schema.hpp"
#include "fluence/core/blas_tuning.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/data/source.hpp"
#include "fluence/fldp/expected_loss.hpp"
#include "fluence/model/row_kernels.hpp"
#include "fluence/model/softmax_regression.hpp"
#include "fluence/privacy/purposes.hpp"
#include "fluence/privacy/randomized_response.hpp"

namespace {

struct Data {
  std::vector<double> x, theta;
  std::vector<std::int32_t> y;
  std::vector<std::int64_t> order;
};

Data make_data(int rows, int features, int classes) {
  Data d;
  fluence::Stream stream(1, fluence::purpose::synthetic_rows);
  d.x.resize(static_cast<std::size_t>(rows) * features);
  for (auto& v : d.x) v = stream.normal();
  d.theta.assign(static_cast<std::size_t>(classes) * features, 0.0);
  for (int r = 0; r < rows; ++r) d.y.push_back(static_cast<std::int32_t>(stream.below(classes)));
  d.order.resize(rows);
  std::iota(d.order.begin(), d.order.end(), 0);
  stream.shuffle(std::span<std::int64_t>(d.order));
  return d;
}

// GFLOP/s of a forward-and-backward pass (2 multiply-adds per row, class and feature) and, with
// `per_row`, ns per row.
void report_rate(benchmark::State& state, int rows, int features, int classes,
                 bool per_row = true) {
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * rows * features * classes,
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
  if (per_row)
    state.counters["ns/row"] = benchmark::Counter(
        rows, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
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
  report_rate(state, rows, features, classes);
}
BENCHMARK(BM_SgdEpoch)
    ->Args({1200, 60, 2, 1})
    ->Args({10000, 64, 2, 64})
    ->Args({10000, 785, 10, 16})
    ->Args({240, 785, 10, 16});

void BM_GradientSum(benchmark::State& state) {
  const int rows = state.range(0), features = state.range(1), classes = state.range(2);
  auto d = make_data(rows, features, classes);
  fluence::SoftmaxRegression model(features, classes, 1e-3);
  fluence::Workspace work;
  std::vector<double> gradient(model.parameters());
  for (auto _ : state)
    model.gradient_sum(d.x.data(), d.y.data(), rows, d.theta.data(), gradient.data(), work);
  report_rate(state, rows, features, classes, false);
}
BENCHMARK(BM_GradientSum)->Args({100000, 64, 2})->Args({22000, 88, 2})->Args({60000, 785, 10});

// The Newton-CG inner product at fixed probabilities (one rank's share of a retrain's Hessian):
// args rows, features, classes.
void BM_HessianVector(benchmark::State& state) {
  const int rows = state.range(0), features = state.range(1), classes = state.range(2);
  auto d = make_data(rows, features, classes);
  fluence::SoftmaxRegression model(features, classes, 1e-3);
  fluence::Workspace work;
  std::vector<double> probabilities(static_cast<std::size_t>(rows) * classes),
      v(model.parameters()), out(model.parameters());
  for (auto& value : d.theta) value = 0.01;
  for (std::size_t j = 0; j < v.size(); ++j) v[j] = 1.0 / (1.0 + j);
  model.probabilities(d.x.data(), rows, d.theta.data(), probabilities.data());
  for (auto _ : state)
    model.hessian_vector_sum_at(d.x.data(), rows, probabilities.data(), v.data(), out.data(), work);
  report_rate(state, rows, features, classes);
}
BENCHMARK(BM_HessianVector)
    ->Args({12000, 789, 4})
    ->Args({30000, 785, 10})
    ->Args({22000, 88, 2})
    ->Unit(benchmark::kMillisecond);

// Image-like rows as 8-bit codes (as Fashion-MNIST's: about half the pixels zero) with a
// standardizing byte coding and a bias column.
struct ByteData {
  std::vector<std::uint8_t> codes;
  fluence::ByteCoding coding;
  std::vector<double> theta;
  std::vector<std::int32_t> y;
  std::vector<std::int64_t> order;
};

ByteData make_byte_data(int rows, int features, int classes) {
  ByteData d;
  fluence::Stream stream(2, fluence::purpose::synthetic_rows);
  d.codes.resize(static_cast<std::size_t>(rows) * features);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < features; ++j)
      d.codes[static_cast<std::size_t>(r) * features + j] =
          j + 1 == features
              ? 1
              : static_cast<std::uint8_t>(stream.uniform() < 0.5 ? 0 : stream.below(256));
  d.coding.offset.assign(features, -0.8);
  d.coding.step.assign(features, 3.0 / 255.0);
  d.coding.offset.back() = 0.0;
  d.coding.step.back() = 1.0;
  d.theta.resize(static_cast<std::size_t>(classes) * features);
  for (auto& v : d.theta) v = 0.01 * stream.normal();
  for (int r = 0; r < rows; ++r) d.y.push_back(static_cast<std::int32_t>(stream.below(classes)));
  d.order.resize(rows);
  std::iota(d.order.begin(), d.order.end(), 0);
  stream.shuffle(std::span<std::int64_t>(d.order));
  return d;
}

// args: rows, features, classes, batch. 1,500 rows are one rank's sampled clients of a round of
// inputs/bench_feo2.toml (their 1.2 MB of codes stay in L2; the doubles would be 9.4 MB).
void BM_SgdEpochBytes(benchmark::State& state) {
  const int rows = state.range(0), features = state.range(1), classes = state.range(2),
            batch = state.range(3);
  auto d = make_byte_data(rows, features, classes);
  fluence::SoftmaxRegression model(features, classes, 0.0);
  fluence::Workspace work;
  for (auto _ : state)
    model.sgd_epoch(d.codes.data(), d.coding, d.y.data(), d.order.data(), rows, batch, 1e-4,
                    d.theta.data(), work);
  report_rate(state, rows, features, classes);
}
BENCHMARK(BM_SgdEpochBytes)->Args({1500, 785, 10, 16})->Args({10000, 785, 10, 16});

// The same epoch in float (federation.local_precision = "single").
void BM_SgdEpochBytesSingle(benchmark::State& state) {
  const int rows = state.range(0), features = state.range(1), classes = state.range(2),
            batch = state.range(3);
  auto d = make_byte_data(rows, features, classes);
  d.coding.with_single();
  std::vector<float> theta(d.theta.begin(), d.theta.end());
  fluence::SoftmaxRegression model(features, classes, 0.0);
  fluence::Workspace work;
  for (auto _ : state)
    model.sgd_epoch(d.codes.data(), d.coding, d.y.data(), d.order.data(), rows, batch, 1e-4,
                    theta.data(), work);
  report_rate(state, rows, features, classes);
}
BENCHMARK(BM_SgdEpochBytesSingle)->Args({1500, 785, 10, 16});

// The server's test loss and accuracy (one rank's 5,000 rows of the 10,000): the doubles through
// loss_sum (a dgemm per 2,048 rows), against blocked byte codes (double and fast float logits).
void BM_TestLoss(benchmark::State& state) {
  const int rows = state.range(0), features = state.range(1), classes = state.range(2);
  const int mode = static_cast<int>(state.range(3));  // 0 doubles, 1 codes, 2 codes, fast
  auto d = make_byte_data(rows, features, classes);
  std::vector<std::uint8_t> blocked((rows + fluence::kCodeBlockRows - 1) / fluence::kCodeBlockRows *
                                    fluence::kCodeBlockRows * features);
  fluence::block_codes(d.codes.data(), rows, features, blocked.data());
  std::vector<double> x(d.codes.size());
  for (std::size_t k = 0; k < x.size(); ++k)
    x[k] = d.coding.offset[k % features] + d.coding.step[k % features] * d.codes[k];
  fluence::SoftmaxRegression model(features, classes, 0.0);
  fluence::Workspace work;
  for (auto _ : state) {
    const auto result = mode == 2 ? model.loss_sum_blocked(blocked.data(), d.coding, rows,
                                                           d.y.data(), d.theta.data(), work, true)
                        : mode == 1
                            ? model.loss_sum_blocked(blocked.data(), d.coding, rows, d.y.data(),
                                                     d.theta.data(), work)
                            : model.loss_sum(x.data(), d.y.data(), rows, d.theta.data(), work);
    benchmark::DoNotOptimize(result);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * features * classes,
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(BM_TestLoss)
    ->Args({5120, 785, 10, 0})
    ->Args({5120, 785, 10, 1})
    ->Args({5120, 785, 10, 2});

// Seed 000 Eq. 14's bracket for one FLDP client (inputs/bench_fldp.toml's shape): 10,000 rows,
// 27 encoded columns, two classes; cat0 (9 values), cat1 (2) and the label randomized at eps 3,
// changed to eps' = 1: 18 feature combinations per row, the label as a soft target.
void BM_ExpectedChangeGradient(benchmark::State& state) {
  // The declared defaults ([data.synthetic], [fldp]) but for the sizes set here.
  const fluence::Deck defaults =
      fluence::Deck::from_string("", "bench_kernels", fluence::deck_schema());
  fluence::SyntheticConfig config = fluence::DataConfig::from_deck(defaults).synthetic;
  config.rows = 10000;
  config.numeric = 6;
  config.categorical = {9, 2, 5, 4};
  config.classes = 2;
  const fluence::Table table = fluence::generate_synthetic(config, 2);
  const fluence::Encoding encoding(table, true, true);
  std::vector<std::int64_t> rows(table.rows);
  std::iota(rows.begin(), rows.end(), 0);
  auto categorical = table.categorical;
  auto labels = table.label;
  const std::size_t nc = config.categorical.size();
  for (std::size_t r = 0; r < table.rows; ++r) {
    fluence::Stream stream(7, fluence::purpose::randomized_response, r);
    categorical[r * nc] = fluence::randomize_value(table.categorical[r * nc], 9, 3.0, stream);
    categorical[r * nc + 1] =
        fluence::randomize_value(table.categorical[r * nc + 1], 2, 3.0, stream);
    labels[r] = fluence::randomize_value(table.label[r], 2, 3.0, stream);
  }
  std::vector<double> features(table.rows * encoding.width());
  encoding.encode(table, rows, categorical.data(), features.data());
  const fluence::Client client(0, rows, table.categorical, table.label, categorical, labels,
                               features);
  const fluence::SoftmaxRegression model(encoding.width(), 2, 1e-4);
  const std::vector<fluence::ChangedAttribute> changed{{0, 9, encoding.categorical_offset(0), 1.0},
                                                       {1, 2, encoding.categorical_offset(1), 1.0},
                                                       {-1, 2, 0, 1.0}};
  fluence::ExpectedLoss expected(model, client, changed,
                                 fluence::ExpectationConfig::from_deck(defaults), 2, 0);
  std::vector<double> theta(model.parameters()), gradient(model.parameters());
  fluence::Stream stream(9, fluence::purpose::synthetic_model);
  for (auto& value : theta) value = 0.5 * stream.normal();
  for (auto _ : state) {
    expected.change_gradient_sum(theta.data(), -1, gradient.data());
    benchmark::DoNotOptimize(gradient.data());
  }
  state.counters["ns/row"] = benchmark::Counter(
      static_cast<double>(table.rows),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ExpectedChangeGradient)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  fluence::select_blas_core(argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
