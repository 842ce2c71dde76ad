// Accountant benchmarks (issue 38): PLD from scratch for 10^4 steps (q = 0.01, z = 1, delta =
// 1e-5), PLD's per-round epsilon() over a 1,000-round run (what a training run asks after every
// round), PRV and RDP on Opacus's case (z = 1.5, q = 0.04, 2249 steps, delta = 1e-5), and the
// per-client ledger of 10^6 clients: a round on every client, a round on half of them (which
// splits the class), and the per-client eps.
//   build/bench/bench_accountants
// Times are wall clock, best of three (the per-round run once).
#include <fmt/core.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "fluence/privacy/client_ledger.hpp"
#include "fluence/privacy/pld_accountant.hpp"
#include "fluence/privacy/prv_accountant.hpp"
#include "fluence/privacy/rdp_accountant.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <class Work>
double best_of_three(Work&& work) {
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    work();
    best = std::min(best, seconds_since(start));
  }
  return best;
}

}  // namespace

int main() {
  using namespace fluence;
  double eps = 0.0;
  double t = best_of_three([&] {
    PldAccountant pld;
    pld.add_steps(0.01, 1.0, 10000);
    eps = pld.epsilon(1e-5).epsilon;
  });
  fmt::print("pld  q=0.01 z=1 T=1e4 delta=1e-5: eps {:.6f}, {:.4f} s from scratch\n", eps, t);

  PldAccountant run;
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < 1000; ++round) {
    run.add_steps(0.01, 1.0, 10);
    eps = run.epsilon(1e-5).epsilon;
  }
  t = seconds_since(start);
  fmt::print(
      "pld  1000 rounds of 10 steps, eps after each: final eps {:.6f}, {:.3f} s total, "
      "{:.2f} ms per call\n",
      eps, t, 1e3 * t / 1000);

  EpsilonReport report;
  t = best_of_three([&] {
    PrvAccountant prv;
    prv.add_steps(0.04, 1.5, 2249);
    report = prv.epsilon(1e-5);
  });
  fmt::print("prv  Opacus case: eps [{:.6f}, {:.6f}, {:.6f}], {:.4f} s\n", report.lower,
             report.estimate, report.upper, t);
  t = best_of_three([&] {
    PldAccountant pld;
    pld.add_steps(0.04, 1.5, 2249);
    eps = pld.epsilon(1e-5).epsilon;
  });
  fmt::print("pld  Opacus case: eps {:.6f}, {:.4f} s\n", eps, t);
  t = best_of_three([&] { eps = dp_sgd_epsilon(0.04, 1.5, 2249, 1e-5).epsilon; });
  fmt::print("rdp  Opacus case: eps {:.6f}, {:.4f} s\n", eps, t);

  const std::int64_t clients = 1'000'000;
  ClientLedger ledger(clients, "pld");
  t = best_of_three([&] { ledger.add_steps({}, 0.01, 1.0, 1); });
  fmt::print("ledger 1e6 clients: a round on every client {:.2e} s\n", t);
  std::vector<std::int64_t> half;
  for (std::int64_t i = 0; i < clients; i += 2) half.push_back(i);
  auto start_half = std::chrono::steady_clock::now();
  ledger.add_steps(half, 0.01, 1.0, 1);
  fmt::print("ledger 1e6 clients: a round on half of them (splits the class) {:.4f} s\n",
             seconds_since(start_half));
  start_half = std::chrono::steady_clock::now();
  const std::vector<double> each = ledger.epsilon(1e-5);
  fmt::print("ledger 1e6 clients: every client's eps ({} classes) {:.4f} s\n", ledger.classes(),
             seconds_since(start_half));
  return 0;
}
