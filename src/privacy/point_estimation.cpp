// Federated point estimation (seed 004 §4, Lemma 1; docs/math.md §8.1).
#include "fluence/privacy/point_estimation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "fluence/core/deck_keys.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/privacy/purposes.hpp"

namespace fluence {

void register_point_estimation_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      section("feo2_theory",
              "`fluence feo2-theory`: federated point estimation "
              "([FeO2](../docs/references.md#feo2) §4, Lemma 1)"),
      key("feo2_theory.clients", T::integer, "100", "N clients", 2),
      key("feo2_theory.opt_out_fraction", T::real, "0.1",
          "rho_np: the fraction of clients that opt out (both groups must be non-empty)", 0.0, 1.0),
      key("feo2_theory.samples", T::integer, "20", "n_s samples per client", 1),
      key("feo2_theory.tau2", T::real, "1.0",
          "tau^2: variance of the clients' points phi_j = phi + p_j (non-IID-ness)", 0.0),
      key("feo2_theory.beta2", T::real, "1.0", "beta^2: variance of a sample around phi_j", 0.0),
      key("feo2_theory.gamma2", T::real, "0.01",
          "gamma^2: the privacy noise variance at the server (a private client adds N(0, "
          "N_p gamma^2))",
          0.0),
      key("feo2_theory.ratios", T::real_array, "[0.0, 0.01, 0.1, 0.5, 0.9, 1.0]",
          "the ratios r simulated (r* is added)", 0.0),
      key("feo2_theory.trials", T::integer, "20000",
          "independent rounds simulated (the variance's relative standard error is sqrt(2 "
          "/ trials))",
          1),
  });
}

PointEstimationConfig PointEstimationConfig::from_deck(const Deck& deck) {
  PointEstimationConfig config;
  config.clients = static_cast<int>(deck.integer("feo2_theory.clients"));
  config.opt_out_fraction = deck.real("feo2_theory.opt_out_fraction");
  config.samples = static_cast<int>(deck.integer("feo2_theory.samples"));
  config.tau2 = deck.real("feo2_theory.tau2");
  config.beta2 = deck.real("feo2_theory.beta2");
  config.gamma2 = deck.real("feo2_theory.gamma2");
  config.ratios = deck.reals("feo2_theory.ratios");
  config.trials = deck.integer("feo2_theory.trials");
  config.seed = static_cast<std::uint64_t>(deck.integer("seed"));
  const int np = config.opt_out_clients();
  if (np == 0 || np == config.clients)
    throw InputError(fmt::format(
        "feo2_theory.opt_out_fraction = {} leaves {} opt-out and {} private clients of {}: both "
        "groups must be non-empty",
        config.opt_out_fraction, np, config.clients - np, config.clients));
  return config;
}

int PointEstimationConfig::opt_out_clients() const {
  return static_cast<int>(std::llround(opt_out_fraction * clients));
}

double server_variance(const PointEstimationConfig& config, double r) {
  const double nnp = config.opt_out_clients(), np = config.clients - nnp;
  const double sc = config.client_variance();
  const double total = nnp + r * np;
  return (nnp * sc + r * r * np * (sc + np * config.gamma2)) / (total * total);
}

double optimal_ratio(const PointEstimationConfig& config) {
  const double np = config.clients - config.opt_out_clients();
  const double sc = config.client_variance();
  return sc / (sc + np * config.gamma2);
}

PointEstimationResult simulate_point_estimation(const PointEstimationConfig& config) {
  PointEstimationResult result;
  result.r_star = optimal_ratio(config);
  result.ratios = config.ratios;
  result.ratios.push_back(result.r_star);
  const std::size_t R = result.ratios.size();
  const int nnp = config.opt_out_clients(), np = config.clients - nnp;
  const double tau = std::sqrt(config.tau2), beta = std::sqrt(config.beta2);
  const double privacy_sd = std::sqrt(np * config.gamma2);  // l_j ~ N(0, N_p gamma^2)
  // Fixed chunks of trials, a contiguous range of them per rank, reduced in chunk order.
  constexpr long kChunk = 1000;
  const long chunks = (config.trials + kChunk - 1) / kChunk;
  const long first = chunks * world_rank() / world_size();
  const long last = chunks * (world_rank() + 1) / world_size();
  std::vector<double> local(static_cast<std::size_t>(last - first) * R, 0.0);
  for (long c = first; c < last; ++c) {
    double* sums = local.data() + (c - first) * R;
    for (long t = c * kChunk; t < std::min(config.trials, (c + 1) * kChunk); ++t) {
      Stream stream(config.seed, purpose::point_estimation, static_cast<std::uint64_t>(t));
      double opt_out_sum = 0.0, private_sum = 0.0;  // phi = 0: theta is the estimation error
      for (int j = 0; j < config.clients; ++j) {
        const double local_point = tau * stream.normal();  // phi_j = phi + p_j
        double mean = 0.0;
        for (int i = 0; i < config.samples; ++i) mean += local_point + beta * stream.normal();
        mean /= config.samples;
        if (j < nnp)
          opt_out_sum += mean;
        else
          private_sum += mean + privacy_sd * stream.normal();
      }
      for (std::size_t k = 0; k < R; ++k) {
        const double r = result.ratios[k];
        const double theta = (opt_out_sum + r * private_sum) / (nnp + r * np);
        sums[k] += theta * theta;
      }
    }
  }
  std::vector<double> totals(R);
  ordered_sum(local, static_cast<int>(last - first), static_cast<int>(R), totals);
  for (std::size_t k = 0; k < R; ++k) {
    result.empirical_variance.push_back(totals[k] / static_cast<double>(config.trials));
    result.theoretical_variance.push_back(server_variance(config, result.ratios[k]));
  }
  return result;
}

}  // namespace fluence
