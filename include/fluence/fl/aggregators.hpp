#pragma once
// Server-side aggregators of client updates (docs/math.md §8.5): the plain mean (FedAvg with equal
// weights) and the Byzantine-robust rules of seed 002's baselines (§IV, Fig. 3), which `fluence
// train` (federation.aggregator) and `fluence lia` share: KRUM and multi-KRUM (Blanchard, El
// Mhamdi, Guerraoui & Stainer 2017), the coordinate-wise median and trimmed mean (Yin, Chen,
// Ramchandran & Bartlett 2018) and centered clipping (Karimireddy, He & Jaggi 2021).
//
// `updates` is an n x p row-major matrix, one row per client (theta_i - theta_t), rows in client-id
// order. Every function is deterministic: the same input gives bitwise the same output (fixed
// summation orders, no threads of its own). Rows must be finite; a NaN or infinity is reported as a
// RuntimeError (a diverged client) rather than left to corrupt the ordering-based rules.
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fluence {

/// out = (1/n) sum_i updates_i, summed in row order.
void mean_update(const double* updates, int n, std::size_t p, double* out);

/// KRUM scores (Blanchard et al. 2017, Def. 1): scores[i] = sum of the squared Euclidean distances
/// from row i to its n - f - 2 nearest other rows (f = `byzantine`). InputError unless
/// n > 2f + 2 and f >= 0.
void krum_scores(const double* updates, int n, std::size_t p, int byzantine, double* scores);

/// The KRUM choice: argmin of krum_scores(), the lowest index on ties.
int krum_select(const double* updates, int n, std::size_t p, int byzantine);

/// Copies the row chosen by krum_select() to `out` (p values).
void krum(const double* updates, int n, std::size_t p, int byzantine, double* out);

/// Multi-KRUM (Blanchard et al. 2017, §5): the mean of the `selected` rows of lowest KRUM score
/// (ties to the lower index), summed in row order. selected = 1 is krum() bitwise. InputError
/// unless 1 <= selected <= n (and KRUM's n > 2f + 2).
void multi_krum(const double* updates, int n, std::size_t p, int byzantine, int selected,
                double* out);

/// Coordinate-wise median (Yin et al. 2018, Def. 1): for each coordinate the middle of the n
/// values, the mean of the two middle ones for even n.
void coordinate_median(const double* updates, int n, std::size_t p, double* out);

/// Coordinate-wise trimmed mean (Yin et al. 2018, Def. 2): for each coordinate, drops the `trim`
/// largest and `trim` smallest of the n values and averages the remaining n - 2 trim. InputError
/// unless 0 <= trim and 2 trim < n. With trim = 0 it equals mean_update() bitwise.
void trimmed_mean(const double* updates, int n, std::size_t p, int trim, double* out);

/// Centered clipping (Karimireddy, He & Jaggi 2021, Alg. 2): starting from `center` (in/out: the
/// previous round's aggregate, i.e. the server momentum, or zeros), `iterations` times
///   center += (1/n) sum_i (x_i - center) min(1, tau / ||x_i - center||).
/// A row equal to the center contributes nothing. InputError unless tau > 0 (infinity allowed: the
/// plain mean step) and iterations >= 0.
void centered_clipping(const double* updates, int n, std::size_t p, double tau, int iterations,
                       double* center);

/// The aggregation rule as a part of the round (docs/architecture.md "Extension points"), chosen
/// by name (federation.aggregator) from a registry; a new rule is one class and one
/// register_aggregator() call.
struct AggregatorConfig {
  std::string name = "mean";
  int byzantine = 0;   // f: KRUM's assumed Byzantine clients, the trimmed mean's trim count
  int selected = 1;    // multi-KRUM's m
  double tau = 1.0;    // centered clipping's radius
  int iterations = 1;  // centered clipping's iterations per round
};

class Aggregator {
 public:
  virtual ~Aggregator() = default;
  virtual std::string_view name() const = 0;
  /// True for FedAvg's weighted mean: `fluence train` then sums the updates, weighted by the
  /// clients' rows, in one exact reduction instead of gathering them (WeightedMeanReduction,
  /// fl/round.hpp); aggregate() is the equal-weight mean.
  virtual bool weighted_mean() const { return false; }
  /// step = rule(updates): n rows of p values in client-id order (every rank the same rows).
  virtual void aggregate(const double* updates, int n, std::size_t p, double* step) = 0;
  /// For private training (docs/math.md §8.5): an upper bound on ||A(U) - A(U')|| over multisets
  /// U, U' of updates of norm <= clip that differ by one update added or removed (the empty
  /// cohort's aggregate is 0), independent of the data; +inf when the rule has none (private
  /// training then refuses it).
  virtual double sensitivity(double /*clip*/) const {
    return std::numeric_limits<double>::infinity();
  }
  /// State carried from round to round (centered clipping's center), for checkpoints.
  virtual std::vector<double> state() const { return {}; }
  virtual void restore(const std::vector<double>& /*state*/) {}
};

struct AggregatorSpec {
  std::string name;
  std::string help;  // one line for inputs/README.md
  using Factory = std::function<std::unique_ptr<Aggregator>(const AggregatorConfig&)>;
  Factory create;
};

/// Adds a rule to the registry (a later spec of the same name replaces the earlier one).
void register_aggregator(AggregatorSpec spec);
/// The registered rules, built-ins first: mean, median, trimmed_mean, krum, multi_krum,
/// centered_clipping.
std::vector<AggregatorSpec> registered_aggregators();
std::vector<std::string> aggregator_names();
/// A new rule; InputError naming `what` (the key), the name and the registered names when there is
/// none of that name.
std::unique_ptr<Aggregator> make_aggregator(const AggregatorConfig& config,
                                            std::string_view what = "federation.aggregator");

}  // namespace fluence
