#pragma once
// What the PLD and PRV accountants share (docs/math.md §7.1, §7.2): the privacy loss of one step of
// the Poisson-subsampled Gaussian mechanism in closed form, the FFT composition of loss PMFs on a
// uniform grid, and delta(eps) / eps(delta) of a composed PMF. Internal to src/privacy.
#include <utility>
#include <vector>

namespace fluence::privacy_loss {

/// The two directions of add/remove adjacency. Remove: P = (1-q) N(0,z^2) + q N(1,z^2) against
/// Q = N(0,z^2); add: P = N(0,z^2) against Q = the mixture. The loss L = log(P/Q)(x), x ~ P.
enum class Direction { remove, add };

/// Hockey-stick divergence delta(eps) = E_P[(1 - e^{eps - L})_+] of one step, in closed form, in
/// long double (the discretizations difference it).
long double hockey_stick(Direction direction, double q, double z, long double eps);
/// P(L <= t) and P(L > t) of one step (use each where it is small: no 1 - x cancellation).
long double loss_cdf(Direction direction, double q, double z, long double t);
long double loss_sf(Direction direction, double q, double z, long double t);

/// Masses on the grid (offset + i) h + shift, i = 0 .. mass.size()-1, and `infinity` at +inf.
struct GridPmf {
  long offset = 0;
  double shift = 0.0;
  std::vector<double> mass;
  double infinity = 0.0;
};

/// The composition of `parts` (a PMF on mesh h and how many times it is composed) read on the
/// window of indices [first, first + size'), size' >= size the FFT length actually used (>= every
/// part's length). Mass outside the window wraps around (circular convolution): the caller bounds
/// it. The grid shifts add up; the masses at +inf are not included (the caller composes them).
GridPmf compose(const std::vector<std::pair<const GridPmf*, long>>& parts, long first, long size);

/// The smallest eps with sum_j p_j (1 - e^{eps - s_j})_+ + extra <= delta, s_j = (offset + j) h +
/// shift, solved exactly between grid points (delta(eps) is explicit there); +inf when extra >=
/// delta, -inf when every eps qualifies.
double epsilon_for_delta(const GridPmf& pmf, double h, double delta, double extra);

/// The FFT length FFTW handles fast: the smallest 2^a 3^b 5^c >= n.
long fft_length(long n);

}  // namespace fluence::privacy_loss
