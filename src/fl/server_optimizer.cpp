// Server optimizers over the round's aggregate step (docs/math.md §8.4, Reddi et al. 2021).
#include "fluence/fl/server_optimizer.hpp"

#include <fmt/format.h>

#include <cmath>

#include "fluence/core/error.hpp"
#include "fluence/core/registry.hpp"

namespace fluence {

namespace {

void require_state_size(const std::vector<double>& state, std::size_t size) {
  if (state.size() != size)
    throw InputError(
        fmt::format("checkpoint: the server optimizer's state has {} values, this "
                    "run's {} (another federation.server_optimizer?)",
                    state.size(), size));
}

class SgdStep final : public ServerOptimizer {
 public:
  explicit SgdStep(double learning_rate) : eta_(learning_rate) {}
  std::string_view name() const override { return "sgd"; }
  bool identity() const override { return eta_ == 1.0; }
  void step(const std::vector<double>& before, std::vector<double>& theta) override {
    if (identity()) return;
    for (std::size_t i = 0; i < theta.size(); ++i)
      theta[i] = before[i] + eta_ * (theta[i] - before[i]);
  }
  std::vector<double> state() const override { return {}; }
  void restore(const std::vector<double>&) override {}

 private:
  double eta_;
};

// Server momentum (FedAvgM, Hsu, Qi & Brown 2019): m = beta1 m + Delta, theta += eta m.
class MomentumStep final : public ServerOptimizer {
 public:
  MomentumStep(const ServerOptimizerConfig& config, std::size_t p)
      : eta_(config.learning_rate), beta_(config.beta1), m_(p, 0.0) {}
  std::string_view name() const override { return "momentum"; }
  void step(const std::vector<double>& before, std::vector<double>& theta) override {
    for (std::size_t i = 0; i < theta.size(); ++i) {
      m_[i] = beta_ * m_[i] + (theta[i] - before[i]);
      theta[i] = before[i] + eta_ * m_[i];
    }
  }
  std::vector<double> state() const override { return m_; }
  void restore(const std::vector<double>& state) override {
    require_state_size(state, m_.size());
    m_ = state;
  }

 private:
  double eta_, beta_;
  std::vector<double> m_;
};

// Reddi et al. 2021, Algorithm 2: one class, the second moment's update by `Rule`.
enum class SecondMoment { adagrad, adam, yogi };

template <SecondMoment Rule>
class AdaptiveStep final : public ServerOptimizer {
 public:
  AdaptiveStep(const ServerOptimizerConfig& config, std::size_t p)
      : config_(config), m_(p, 0.0), v_(p, config.tau * config.tau) {}
  std::string_view name() const override {
    return Rule == SecondMoment::adagrad ? "adagrad" : Rule == SecondMoment::adam ? "adam" : "yogi";
  }
  void step(const std::vector<double>& before, std::vector<double>& theta) override {
    const double b1 = config_.beta1, b2 = config_.beta2, eta = config_.learning_rate;
    for (std::size_t i = 0; i < theta.size(); ++i) {
      const double d = theta[i] - before[i], d2 = d * d;
      m_[i] = b1 * m_[i] + (1.0 - b1) * d;
      if constexpr (Rule == SecondMoment::adagrad) {
        v_[i] += d2;
      } else if constexpr (Rule == SecondMoment::adam) {
        v_[i] = b2 * v_[i] + (1.0 - b2) * d2;
      } else {
        const double gap = v_[i] - d2;
        v_[i] -= (1.0 - b2) * d2 * static_cast<double>((gap > 0.0) - (gap < 0.0));
      }
      theta[i] = before[i] + eta * m_[i] / (std::sqrt(v_[i]) + config_.tau);
    }
  }
  std::vector<double> state() const override {
    std::vector<double> state(m_);
    state.insert(state.end(), v_.begin(), v_.end());
    return state;
  }
  void restore(const std::vector<double>& state) override {  // [m | v]
    require_state_size(state, 2 * m_.size());
    const auto middle = state.begin() + static_cast<std::ptrdiff_t>(m_.size());
    m_.assign(state.begin(), middle);
    v_.assign(middle, state.end());
  }

 private:
  ServerOptimizerConfig config_;
  std::vector<double> m_, v_;
};

template <class Step>
ServerOptimizerSpec::Factory factory() {
  return [](const ServerOptimizerConfig& config, std::size_t p) {
    return std::unique_ptr<ServerOptimizer>(new Step(config, p));
  };
}

Registry<ServerOptimizerSpec>& registry() {
  // The built-ins, in a fixed order, registered on first use (a static library drops none).
  static Registry<ServerOptimizerSpec> instance(
      "a server optimizer",
      {{"sgd", "θ += η Δ (η = 1: the plain round)",
        [](const ServerOptimizerConfig& config, std::size_t) {
          return std::unique_ptr<ServerOptimizer>(new SgdStep(config.learning_rate));
        }},
       {"momentum", "server momentum m = β₁ m + Δ, θ += η m (FedAvgM)", factory<MomentumStep>()},
       {"adagrad", "FedAdagrad (Reddi et al. 2021)",
        factory<AdaptiveStep<SecondMoment::adagrad>>()},
       {"adam", "FedAdam (Reddi et al. 2021)", factory<AdaptiveStep<SecondMoment::adam>>()},
       {"yogi", "FedYogi (Reddi et al. 2021)", factory<AdaptiveStep<SecondMoment::yogi>>()}});
  return instance;
}

}  // namespace

void register_server_optimizer(ServerOptimizerSpec spec) {
  registry().add(std::move(spec));
}

std::vector<ServerOptimizerSpec> registered_server_optimizers() {
  return registry().specs();
}

std::vector<std::string> server_optimizer_names() {
  return registry().names();
}

std::unique_ptr<ServerOptimizer> make_server_optimizer(const ServerOptimizerConfig& config,
                                                       std::size_t p) {
  return registry().find(config.name, "federation.server_optimizer").create(config, p);
}

}  // namespace fluence
