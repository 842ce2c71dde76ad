#include "fluence/lia/aggregators.hpp"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <vector>

#include "fluence/core/error.hpp"

namespace fluence::lia {

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

void trimmed_mean(const double* updates, int n, std::size_t p, int trim, double* out) {
  require_shape(n, p, "trimmed_mean");
  if (trim < 0) throw InputError("trimmed_mean: trim must be >= 0, got " + std::to_string(trim));
  if (2L * trim >= static_cast<long>(n))
    throw InputError("trimmed_mean needs 2*trim < n: trim = " + std::to_string(trim) +
                     ", n = " + std::to_string(n));
  require_finite(updates, n, p, "trimmed_mean");

  // Each coordinate needs its n values contiguous to select among them; copying a block of columns
  // transposed keeps the reads of `updates` row-contiguous. Two nth_element calls (expected O(n)
  // each) put the `trim` smallest in front and the `trim` largest at the back; the kept middle is
  // then summed in the order they left it, which depends only on the input (introselect in
  // libstdc++ draws no random pivots), so the result is deterministic.
  const std::size_t count = static_cast<std::size_t>(n);
  const std::size_t keep_begin = static_cast<std::size_t>(trim);
  const std::size_t keep_end = count - static_cast<std::size_t>(trim);
  const double kept = static_cast<double>(keep_end - keep_begin);
  std::vector<double> block(count * std::min(kBlockColumns, p));
  for (std::size_t j0 = 0; j0 < p; j0 += kBlockColumns) {
    const std::size_t width = std::min(kBlockColumns, p - j0);
    for (std::size_t i = 0; i < count; ++i) {
      const double* row = updates + i * p + j0;
      for (std::size_t c = 0; c < width; ++c) block[c * count + i] = row[c];
    }
    for (std::size_t c = 0; c < width; ++c) {
      double* values = block.data() + c * count;
      if (trim > 0) {
        std::nth_element(values, values + keep_begin, values + count);
        std::nth_element(values + keep_begin, values + keep_end, values + count);
      }
      // Same order and operations as mean_update() when trim = 0 (values in row order).
      double sum = values[keep_begin];
      for (std::size_t i = keep_begin + 1; i < keep_end; ++i) sum += values[i];
      out[j0 + c] = sum / kept;
    }
  }
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

}  // namespace fluence::lia
