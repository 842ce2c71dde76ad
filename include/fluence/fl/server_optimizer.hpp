#pragma once
// The server optimizer, the last part of a federated round (docs/architecture.md "Extension
// points", docs/math.md §8.4): the round's aggregate step Delta_t = theta_after - theta_before
// (what FedAvg, DP-FedAvg, FeO2 or a robust aggregator would add to the model) is treated as a
// pseudo-gradient, and the optimizer decides the step actually taken (Reddi et al. 2021, "Adaptive
// Federated Optimization", Algorithm 2; Hsu, Qi & Brown 2019 for server momentum):
//   sgd:      theta += eta Delta
//   momentum: m = beta1 m + Delta;                       theta += eta m
//   adagrad:  m = beta1 m + (1 - beta1) Delta;  v += Delta^2;                   theta += eta m /
//   (sqrt v + tau) adam:     m as adagrad;  v = beta2 v + (1 - beta2) Delta^2; theta += eta m /
//   (sqrt v + tau) yogi:     m as adagrad;  v -= (1 - beta2) Delta^2 sign(v - Delta^2); theta +=
//   eta m / (sqrt v + tau)
// with m = 0 and v = tau^2 before the first round (Reddi et al.'s v_{-1} >= tau^2), no bias
// correction (as their Algorithm 2). "sgd" with eta = 1 is the plain round, bit for bit.
// Optimizers are registered by name (federation.server_optimizer); a new one is one class and one
// register_server_optimizer() call. Every operation is elementwise, so every rank computes the same
// bits from the same Delta.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fluence {

struct ServerOptimizerConfig {
  std::string name = "sgd";
  double learning_rate = 1.0;  // eta
  double beta1 = 0.9;          // momentum of m
  double beta2 = 0.99;         // adam, yogi: decay of v
  double tau = 1e-3;           // adaptivity: v starts at tau^2 and tau is added to sqrt(v)
};

class ServerOptimizer {
 public:
  virtual ~ServerOptimizer() = default;
  virtual std::string_view name() const = 0;
  /// True when step() leaves theta as it is (sgd at eta = 1): the round need not keep theta_before.
  virtual bool identity() const { return false; }
  /// `theta` holds the round's result theta_before + Delta on entry; on return theta_before + the
  /// optimizer's step. Both vectors hold p values.
  virtual void step(const std::vector<double>& theta_before, std::vector<double>& theta) = 0;
  /// The state a checkpoint keeps (moments), and its restoration (bitwise).
  virtual std::vector<double> state() const = 0;
  virtual void restore(const std::vector<double>& state) = 0;
};

struct ServerOptimizerSpec {
  std::string name;
  std::string help;  // one line for inputs/README.md
  using Factory =
      std::function<std::unique_ptr<ServerOptimizer>(const ServerOptimizerConfig&, std::size_t p)>;
  Factory create;
};

/// Adds an optimizer to the registry (a later spec of the same name replaces the earlier one).
void register_server_optimizer(ServerOptimizerSpec spec);
/// The registered optimizers, built-ins first: sgd, momentum, adagrad, adam, yogi.
std::vector<ServerOptimizerSpec> registered_server_optimizers();
std::vector<std::string> server_optimizer_names();
/// A new optimizer for p parameters; InputError naming the key and the registered names when
/// there is none of that name.
std::unique_ptr<ServerOptimizer> make_server_optimizer(const ServerOptimizerConfig& config,
                                                       std::size_t p);

}  // namespace fluence
