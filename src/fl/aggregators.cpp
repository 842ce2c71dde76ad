#include "fluence/fl/aggregators.hpp"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/core/registry.hpp"

namespace fluence {

namespace {

// Coordinates per block in the trimmed mean: the transposed block (n x kBlockColumns doubles) stays
// in cache for a few hundred clients while each row is still read in 512-byte runs.
constexpr std::size_t kBlockColumns = 64;

void require_shape(int n, std::size_t p, const char* who) {
  if (n < 1) throw InputError(std::string(who) + ": needs at least one client update");
  if (p < 1) throw InputError(std::string(who) + ": updates have no coordinates");
}

// Ordering-based rules (KRUM, trimmed mean) are undefined on NaN, and centered clipping turns an
// infinite row into NaN; a non-finite update means a client diverged, so say which one.
void require_finite(const double* updates, int n, std::size_t p, const char* who) {
  for (int i = 0; i < n; ++i) {
    const double* row = updates + static_cast<std::size_t>(i) * p;
    for (std::size_t j = 0; j < p; ++j)
      if (!std::isfinite(row[j]))
        throw RuntimeError(std::string(who) + ": the update of row " + std::to_string(i) +
                           " is not finite at coordinate " + std::to_string(j));
  }
}

void require_krum_clients(int n, int byzantine) {
  if (byzantine < 0)
    throw InputError("KRUM: the number of Byzantine clients f must be >= 0, got " +
                     std::to_string(byzantine));
  // n - f - 2 >= 1 neighbours alone would not do: Blanchard et al.'s guarantee (and the count of
  // honest neighbours of the chosen row) needs n > 2f + 2.
  if (static_cast<long>(n) <= 2L * byzantine + 2)
    throw InputError("KRUM needs n > 2f+2 clients: n = " + std::to_string(n) +
                     ", f = " + std::to_string(byzantine));
}

}  // namespace

void mean_update(const double* updates, int n, std::size_t p, double* out) {
  require_shape(n, p, "mean_update");
  std::copy(updates, updates + p, out);
  for (int i = 1; i < n; ++i) {
    const double* row = updates + static_cast<std::size_t>(i) * p;
    for (std::size_t j = 0; j < p; ++j) out[j] += row[j];
  }
  const double count = static_cast<double>(n);
  for (std::size_t j = 0; j < p; ++j) out[j] /= count;
}

void krum_scores(const double* updates, int n, std::size_t p, int byzantine, double* scores) {
  require_shape(n, p, "KRUM");
  require_krum_clients(n, byzantine);
  if (p > static_cast<std::size_t>(INT_MAX))
    throw InputError("KRUM: updates with more than INT_MAX coordinates exceed the BLAS interface");
  require_finite(updates, n, p, "KRUM");

  // All pairwise distances from one Gram matrix G = U U^T (a single dsyrk, O(n^2 p) at BLAS speed
  // instead of n^2/2 separate passes over the rows): ||a - b||^2 = G_aa + G_bb - 2 G_ab. The
  // expansion cancels when rows are close relative to their norms (absolute error about
  // eps (||a||^2 + ||b||^2)); clamping at 0 keeps tiny negative values from rounding out.
  const std::size_t count = static_cast<std::size_t>(n);
  std::vector<double> gram(count * count);
  cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, n, static_cast<int>(p), 1.0, updates,
              static_cast<int>(p), 0.0, gram.data(), n);

  const int neighbours = n - byzantine - 2;
  std::vector<double> distances(count - 1);
  for (int i = 0; i < n; ++i) {
    int k = 0;
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      const int lo = std::min(i, j), hi = std::max(i, j);
      const double squared =
          gram[count * i + i] + gram[count * j + j] - 2.0 * gram[count * lo + hi];
      distances[k++] = std::max(squared, 0.0);
    }
    // Summing the nearest ones in ascending order makes the score a function of the set of
    // distances only, independent of how a selection algorithm arranged them.
    std::partial_sort(distances.begin(), distances.begin() + neighbours, distances.end());
    double score = 0.0;
    for (int m = 0; m < neighbours; ++m) score += distances[m];
    scores[i] = score;
  }
}

int krum_select(const double* updates, int n, std::size_t p, int byzantine) {
  std::vector<double> scores(n > 0 ? n : 0);
  krum_scores(updates, n, p, byzantine, scores.data());
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (scores[i] < scores[best]) best = i;  // strict: the lowest index wins ties
  return best;
}

void krum(const double* updates, int n, std::size_t p, int byzantine, double* out) {
  const int chosen = krum_select(updates, n, p, byzantine);
  const double* row = updates + static_cast<std::size_t>(chosen) * p;
  std::copy(row, row + p, out);
}

void multi_krum(const double* updates, int n, std::size_t p, int byzantine, int selected,
                double* out) {
  if (selected < 1 || selected > n)
    throw InputError("multi-KRUM selects 1 to n rows: selected = " + std::to_string(selected) +
                     ", n = " + std::to_string(n));
  std::vector<double> scores(static_cast<std::size_t>(std::max(n, 0)));
  krum_scores(updates, n, p, byzantine, scores.data());
  std::vector<int> order(scores.size());
  for (int i = 0; i < n; ++i) order[i] = i;
  // Lowest scores first, the lower index on ties (as krum_select), then the chosen rows in row
  // order so that the sum does not depend on how their scores compare.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] < scores[b]; });
  std::sort(order.begin(), order.begin() + selected);
  const double* first = updates + static_cast<std::size_t>(order[0]) * p;
  std::copy(first, first + p, out);
  for (int k = 1; k < selected; ++k) {
    const double* row = updates + static_cast<std::size_t>(order[k]) * p;
    for (std::size_t j = 0; j < p; ++j) out[j] += row[j];
  }
  if (selected > 1)
    for (std::size_t j = 0; j < p; ++j) out[j] /= static_cast<double>(selected);
}

namespace {

// Visits each coordinate's n values, contiguous: a block of columns is copied transposed, so the
// reads of `updates` stay row-contiguous.
template <class Visit>
void for_each_column(const double* updates, int n, std::size_t p, Visit&& visit) {
  const std::size_t count = static_cast<std::size_t>(n);
  std::vector<double> block(count * std::min(kBlockColumns, p));
  for (std::size_t j0 = 0; j0 < p; j0 += kBlockColumns) {
    const std::size_t width = std::min(kBlockColumns, p - j0);
    for (std::size_t i = 0; i < count; ++i) {
      const double* row = updates + i * p + j0;
      for (std::size_t c = 0; c < width; ++c) block[c * count + i] = row[c];
    }
    for (std::size_t c = 0; c < width; ++c) visit(j0 + c, block.data() + c * count);
  }
}

}  // namespace

void coordinate_median(const double* updates, int n, std::size_t p, double* out) {
  require_shape(n, p, "median");
  require_finite(updates, n, p, "median");
  const std::size_t count = static_cast<std::size_t>(n), middle = count / 2;
  for_each_column(updates, n, p, [&](std::size_t j, double* values) {
    std::nth_element(values, values + middle, values + count);
    double median = values[middle];
    // Even n: the upper middle is in place, the lower middle is the largest value before it.
    if (count % 2 == 0) median = 0.5 * (*std::max_element(values, values + middle) + median);
    out[j] = median;
  });
}

void trimmed_mean(const double* updates, int n, std::size_t p, int trim, double* out) {
  require_shape(n, p, "trimmed_mean");
  if (trim < 0) throw InputError("trimmed_mean: trim must be >= 0, got " + std::to_string(trim));
  if (2L * trim >= static_cast<long>(n))
    throw InputError("trimmed_mean needs 2*trim < n: trim = " + std::to_string(trim) +
                     ", n = " + std::to_string(n));
  require_finite(updates, n, p, "trimmed_mean");

  // Two nth_element calls (expected O(n) each) put the `trim` smallest in front and the `trim`
  // largest at the back; the kept middle is then summed in the order they left it, which depends
  // only on the input (introselect in libstdc++ draws no random pivots), so the result is
  // deterministic.
  const std::size_t count = static_cast<std::size_t>(n);
  const std::size_t keep_begin = static_cast<std::size_t>(trim);
  const std::size_t keep_end = count - static_cast<std::size_t>(trim);
  const double kept = static_cast<double>(keep_end - keep_begin);
  for_each_column(updates, n, p, [&](std::size_t j, double* values) {
    if (trim > 0) {
      std::nth_element(values, values + keep_begin, values + count);
      std::nth_element(values + keep_begin, values + keep_end, values + count);
    }
    // Same order and operations as mean_update() when trim = 0 (values in row order).
    double sum = values[keep_begin];
    for (std::size_t i = keep_begin + 1; i < keep_end; ++i) sum += values[i];
    out[j] = sum / kept;
  });
}

void centered_clipping(const double* updates, int n, std::size_t p, double tau, int iterations,
                       double* center) {
  require_shape(n, p, "centered_clipping");
  if (!(tau > 0.0))
    throw InputError("centered_clipping: the clipping radius tau must be > 0, got " +
                     std::to_string(tau));
  if (iterations < 0)
    throw InputError("centered_clipping: iterations must be >= 0, got " +
                     std::to_string(iterations));
  require_finite(updates, n, p, "centered_clipping");

  // All rows are clipped around the same center within an iteration (Alg. 2 is a fixed-point
  // iteration, not a sequential pass), so the step is accumulated apart and applied at the end.
  std::vector<double> step(p);
  const double count = static_cast<double>(n);
  for (int iteration = 0; iteration < iterations; ++iteration) {
    std::fill(step.begin(), step.end(), 0.0);
    for (int i = 0; i < n; ++i) {
      const double* row = updates + static_cast<std::size_t>(i) * p;
      double squared = 0.0;
      for (std::size_t j = 0; j < p; ++j) {
        const double d = row[j] - center[j];
        squared += d * d;
      }
      // A row at the center has nothing to contribute (and tau/0 would be inf, 0*inf NaN).
      if (squared == 0.0) continue;
      const double norm = std::sqrt(squared);
      const double scale = norm <= tau ? 1.0 : tau / norm;
      for (std::size_t j = 0; j < p; ++j) step[j] += scale * (row[j] - center[j]);
    }
    // Division rather than a multiplication by 1/n: from center 0 with tau = inf this reproduces
    // mean_update() exactly.
    for (std::size_t j = 0; j < p; ++j) center[j] += step[j] / count;
  }
}

namespace {

// The rules as parts. Each throws InputError for a cohort its parameters do not fit (KRUM's
// n > 2f + 2, the trimmed mean's 2f < n), naming the rule and the counts.
class MeanRule final : public Aggregator {
 public:
  std::string_view name() const override { return "mean"; }
  bool weighted_mean() const override { return true; }
  void aggregate(const double* u, int n, std::size_t p, double* step) override {
    mean_update(u, n, p, step);
  }
};

class MedianRule final : public Aggregator {
 public:
  std::string_view name() const override { return "median"; }
  void aggregate(const double* u, int n, std::size_t p, double* step) override {
    coordinate_median(u, n, p, step);
  }
  // Per coordinate, med^2 <= (2/n) sum_i u_ij^2 (at least half of the values lie beyond the median
  // on its side), so ||med|| <= sqrt(2) clip; two aggregates differ by at most twice that.
  double sensitivity(double clip) const override { return 2.0 * std::sqrt(2.0) * clip; }
};

class TrimmedMeanRule final : public Aggregator {
 public:
  explicit TrimmedMeanRule(const AggregatorConfig& config) : trim_(config.byzantine) {}
  std::string_view name() const override { return "trimmed_mean"; }
  void aggregate(const double* u, int n, std::size_t p, double* step) override {
    trimmed_mean(u, n, p, trim_, step);
  }
  // Per coordinate, the mean of the n - 2f kept values squared is at most their mean square, so
  // ||tm||^2 <= n / (n - 2f) clip^2 <= (2f + 1) clip^2 (n >= 2f + 1); twice its root bounds a
  // change.
  double sensitivity(double clip) const override {
    return 2.0 * std::sqrt(2.0 * trim_ + 1.0) * clip;
  }

 private:
  int trim_;
};

class KrumRule final : public Aggregator {
 public:
  KrumRule(const AggregatorConfig& config, bool multi)
      : byzantine_(config.byzantine), selected_(multi ? config.selected : 1), multi_(multi) {}
  std::string_view name() const override { return multi_ ? "multi_krum" : "krum"; }
  // The aggregate is one update (or a mean of some): in the ball of radius clip, so two differ by
  // at most 2 clip.
  double sensitivity(double clip) const override { return 2.0 * clip; }
  void aggregate(const double* u, int n, std::size_t p, double* step) override {
    if (multi_)
      // A Poisson or fixed cohort can be smaller than m: then every update is averaged.
      multi_krum(u, n, p, byzantine_, std::min(selected_, n), step);
    else
      krum(u, n, p, byzantine_, step);
  }

 private:
  int byzantine_, selected_;
  bool multi_;
};

// The previous round's aggregate is the next round's starting center (the momentum of
// Karimireddy, He & Jaggi's Algorithm 2), so the center is state a checkpoint keeps.
class CenteredClippingRule final : public Aggregator {
 public:
  explicit CenteredClippingRule(const AggregatorConfig& config) : config_(config) {}
  std::string_view name() const override { return "centered_clipping"; }
  void aggregate(const double* u, int n, std::size_t p, double* step) override {
    if (center_.empty()) center_.assign(p, 0.0);  // round 1: the center starts at 0
    if (center_.size() != p)
      throw InputError(fmt::format(
          "centered clipping: the restored center has {} values, the updates {} (a checkpoint of "
          "another model?)",
          center_.size(), p));
    centered_clipping(u, n, p, config_.tau, config_.iterations, center_.data());
    std::copy(center_.begin(), center_.end(), step);
  }
  std::vector<double> state() const override { return center_; }
  void restore(const std::vector<double>& state) override { center_ = state; }

 private:
  AggregatorConfig config_;
  std::vector<double> center_;
};

Registry<AggregatorSpec>& registry() {
  // The built-ins, in a fixed order, registered on first use (a static library drops none).
  static Registry<AggregatorSpec> instance(
      "an aggregator",
      {{"mean", "FedAvg's mean of the updates, weighted by the clients' rows",
        [](const AggregatorConfig&) { return std::unique_ptr<Aggregator>(new MeanRule()); }},
       {"median", "coordinate-wise median (Yin et al. 2018)",
        [](const AggregatorConfig&) { return std::unique_ptr<Aggregator>(new MedianRule()); }},
       {"trimmed_mean", "coordinate-wise mean without the f largest and f smallest values",
        [](const AggregatorConfig& c) {
          return std::unique_ptr<Aggregator>(new TrimmedMeanRule(c));
        }},
       {"krum", "the update closest to its n - f - 2 nearest others (Blanchard et al. 2017)",
        [](const AggregatorConfig& c) {
          return std::unique_ptr<Aggregator>(new KrumRule(c, false));
        }},
       {"multi_krum", "the mean of the m updates of lowest KRUM score",
        [](const AggregatorConfig& c) {
          return std::unique_ptr<Aggregator>(new KrumRule(c, true));
        }},
       {"centered_clipping",
        "centered clipping around the last aggregate (Karimireddy et al. 2021)",
        [](const AggregatorConfig& c) {
          return std::unique_ptr<Aggregator>(new CenteredClippingRule(c));
        }}});
  return instance;
}

}  // namespace

void register_aggregator(AggregatorSpec spec) {
  if (!spec.create) throw InputError("register_aggregator: an aggregator needs a factory");
  registry().add(std::move(spec));
}

std::vector<AggregatorSpec> registered_aggregators() {
  return registry().specs();
}

std::vector<std::string> aggregator_names() {
  return registry().names();
}

std::unique_ptr<Aggregator> make_aggregator(const AggregatorConfig& config, std::string_view what) {
  return registry().find(config.name, what).create(config);
}

}  // namespace fluence
