#include "fluence/influence/unlearning.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <memory>
#include <numeric>
#include <span>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/newton.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/core/vector_ops.hpp"
#include "fluence/fl/newton.hpp"
#include "fluence/influence/estimators.hpp"
#include "fluence/influence/hessian_operator.hpp"
#include "fluence/influence/purposes.hpp"

namespace fluence {

namespace {

// Far from the retrain a nearby Hessian's factor is a poor preconditioner: each refinement solve
// is capped there (its CG iterate is still a descent direction; the line search does the rest),
// as in FLDP's refinement.
constexpr int kRefineIterations = 200;

// The refinement's own target: a proven distance of at most this to the minimizer of h_-k
// (|grad h_-k| / l2, docs/math.md §1.7), 1% of issue 40's 1e-8, so that the refined removal's
// distance to the retrain is the retrain's own error. Chord steps past the rounding of the
// gradient stop on stagnation instead.
constexpr double kDistanceTarget = 1e-10;
// A chord step must shrink |grad h_-k| at least this much, else Newton takes over.
constexpr double kChordContraction = 0.5;
constexpr int kMaxChordSteps = 100;
// Anderson mixing over this many earlier chord steps.
constexpr std::size_t kMixingDepth = 5;

// The Lipschitz constant of the logit Hessian diag(p) - p p^T of softmax cross-entropy in the
// 2-norm: |A(z) - A(z')|_2 <= gamma |z - z'|_2 (docs/math.md §1.7a).
const double kSoftmaxHessianLipschitz = 1.0 / std::sqrt(2.0);

double distance(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (std::size_t k = 0; k < a.size(); ++k) sum += (a[k] - b[k]) * (a[k] - b[k]);
  return std::sqrt(sum);
}

// Client `id`'s removal gradient sum_{j in D_k} grad l~_j(theta) (docs/math.md §1.2), computed by
// its owner and broadcast to every rank.
std::vector<double> client_removal_gradient(Federation& federation,
                                            const std::vector<double>& theta, int id,
                                            RemovalGradient kind) {
  auto& problem = federation.problem();
  std::vector<double> gradient(federation.parameters(), 0.0);
  const int owner = problem.layout->owner(id);
  if (owner == world_rank()) {
    const auto& client =
        problem.clients[static_cast<std::size_t>(id - problem.layout->first_client(owner))];
    Workspace work;
    group_gradient_sum(*problem.model, client.features(), client.labels().data(), client.size(),
                       theta.data(), kind, gradient, work);
  }
  MPI_Bcast(gradient.data(), static_cast<int>(gradient.size()), MPI_DOUBLE, owner, MPI_COMM_WORLD);
  return gradient;
}

// The clean Hessian's Cholesky factor as the inverse of a nearby Hessian (explicit solver, no
// damping), as FLDP's refinement and retrains use it; empty otherwise.
NewtonPreconditioner clean_factor(IhvpSolver& solver, double damping) {
  if (solver.method() != IhvpMethod::explicit_cholesky || damping != 0.0) return {};
  return [&solver](const double* r, double* z) { solver.apply_inverse(r, z); };
}

struct ChordReport {
  int steps = 0;
  double gradient_norm = 0.0;
  bool contracting = true;  // every plain step shrank |grad| by kChordContraction at least
};

// Anderson mixing's least squares min_gamma |f - DF gamma|_2 over the columns of DF (p x m, m
// small) by modified Gram-Schmidt, a column dropped when it is numerically in the span of the
// earlier ones (rounding near the optimum); gamma 0 there. The same arithmetic on every rank.
std::vector<double> mixing_coefficients(const std::deque<std::vector<double>>& columns,
                                        const std::vector<double>& f) {
  const std::size_t m = columns.size(), p = f.size();
  std::vector<std::vector<double>> q(m);
  std::vector<double> r(m * m, 0.0), gamma(m, 0.0);
  std::vector<char> kept(m, 0);
  for (std::size_t j = 0; j < m; ++j) {
    q[j] = columns[j];
    const double original = norm2(q[j]);
    for (std::size_t i = 0; i < j; ++i) {
      if (!kept[i]) continue;
      const double projection = dot(q[i], q[j]);
      r[i * m + j] = projection;
      for (std::size_t k = 0; k < p; ++k) q[j][k] -= projection * q[i][k];
    }
    const double length = norm2(q[j]);
    if (!(length > 1e-10 * original)) continue;
    r[j * m + j] = length;
    for (double& value : q[j]) value /= length;
    kept[j] = 1;
  }
  std::vector<double> qf(m, 0.0);
  for (std::size_t j = 0; j < m; ++j)
    if (kept[j]) qf[j] = dot(q[j], f);
  for (std::size_t j = m; j-- > 0;) {
    if (!kept[j]) continue;
    double value = qf[j];
    for (std::size_t i = j + 1; i < m; ++i)
      if (kept[i]) value -= r[j * m + i] * gamma[i];
    gamma[j] = value / r[j * m + j];
  }
  return gamma;
}

// Chord (simplified Newton) steps on h_-k from theta, every one with the inverse of the same
// nearby Hessian M = H(theta^)^-1: the fixed point of G(theta) = theta - M grad h_-k(theta), with
// Anderson mixing of the last kMixingDepth steps (Walker and Ni 2011: on the nearly linear map
// near the optimum, GMRES on the preconditioned system). No Hessian products and no objective
// values: one gradient (one pass over the data, one collective) per step. `gradient` holds
// grad h_-k(theta) on entry and on return. A mixed step that does not lower |grad| is redone as
// a plain chord step (history cleared); a plain step that does not shrink |grad| by
// kChordContraction ends the steps (rounding, or a start far from the optimum: Newton takes
// over). Stops at |grad| <= target or after kMaxChordSteps.
ChordReport chord_refine(Federation& federation, IhvpSolver& solver, std::vector<double>& theta,
                         std::vector<double>& gradient, double target) {
  const std::size_t p = theta.size();
  ChordReport report;
  report.gradient_norm = norm2(gradient);
  std::vector<double> f(p), f_old, theta_old, trial(p), trial_gradient;
  std::deque<std::vector<double>> dx, df;
  while (report.gradient_norm > target && report.steps < kMaxChordSteps) {
    solver.apply_inverse(gradient.data(), f.data());
    for (double& value : f) value = -value;  // G(theta) - theta
    if (!f_old.empty()) {
      std::vector<double> x_step(p), f_step(p);
      for (std::size_t k = 0; k < p; ++k) {
        x_step[k] = theta[k] - theta_old[k];
        f_step[k] = f[k] - f_old[k];
      }
      dx.push_back(std::move(x_step));
      df.push_back(std::move(f_step));
      if (dx.size() > kMixingDepth) {
        dx.pop_front();
        df.pop_front();
      }
    }
    for (std::size_t k = 0; k < p; ++k) trial[k] = theta[k] + f[k];
    const bool mixed = !df.empty();
    if (mixed) {
      const std::vector<double> gamma = mixing_coefficients(df, f);
      for (std::size_t j = 0; j < gamma.size(); ++j)
        for (std::size_t k = 0; k < p; ++k) trial[k] -= gamma[j] * (dx[j][k] + df[j][k]);
    }
    federation.gradient(trial, trial_gradient);
    double norm = norm2(trial_gradient);
    if (mixed && !(norm < report.gradient_norm)) {  // redo as a plain chord step
      dx.clear();
      df.clear();
      for (std::size_t k = 0; k < p; ++k) trial[k] = theta[k] + f[k];
      federation.gradient(trial, trial_gradient);
      norm = norm2(trial_gradient);
      ++report.steps;
      if (!(norm <= kChordContraction * report.gradient_norm)) {
        report.contracting = false;
        break;
      }
    } else if (!mixed && !(norm <= kChordContraction * report.gradient_norm)) {
      report.contracting = false;
      break;
    }
    theta_old = theta;
    f_old = f;
    theta.swap(trial);
    gradient.swap(trial_gradient);
    report.gradient_norm = norm;
    ++report.steps;
  }
  return report;
}

// A NewtonObjective of h + linear^T theta (certified removal's perturbed training objective).
class PerturbedObjective final : public NewtonObjective {
 public:
  PerturbedObjective(Federation& federation, const std::vector<double>& linear)
      : base_(federation), linear_(linear) {}
  std::size_t parameters() const override { return base_.parameters(); }
  double value_and_gradient(const std::vector<double>& theta,
                            std::vector<double>& gradient) override {
    const double value = base_.value_and_gradient(theta, gradient);
    for (std::size_t k = 0; k < gradient.size(); ++k) gradient[k] += linear_[k];
    return value + dot(linear_, theta);
  }
  void set_point(const std::vector<double>& theta) override { base_.set_point(theta); }
  void hessian_vector(const double* v, double* out) override { base_.hessian_vector(v, out); }
  bool hessian_diagonal(double* out) override { return base_.hessian_diagonal(out); }
  bool has_hessian_diagonal() const override { return base_.has_hessian_diagonal(); }

 private:
  FederatedObjective base_;
  const std::vector<double>& linear_;
};

// (gamma/2) sum over the included rows j of |x_j| |P Delta W x_j|^2, P the centring of the logits
// (softmax ignores a common shift): the bound on the Lipschitz part of the removed model's
// gradient residual (docs/math.md §1.7a). Collective.
double lipschitz_residual_bound(Federation& federation, const std::vector<double>& delta) {
  auto& problem = federation.problem();
  const auto& model = *problem.model;
  const std::size_t D = static_cast<std::size_t>(model.features());
  const std::size_t C = static_cast<std::size_t>(model.classes());
  double total = 0.0;
  federation.sum_over_clients(std::span<double>(&total, 1), [&](std::size_t k, double* sum) {
    const auto& client = problem.clients[k];
    const double* x = client.features();
    std::vector<double> logits(C);
    double value = 0.0;
    for (std::size_t j = 0; j < client.size(); ++j) {
      const double* row = x + j * D;
      double row_norm = 0.0, mean = 0.0, logit_change = 0.0;
      for (std::size_t d = 0; d < D; ++d) row_norm += row[d] * row[d];
      for (std::size_t c = 0; c < C; ++c) {
        double s = 0.0;
        for (std::size_t d = 0; d < D; ++d) s += delta[c * D + d] * row[d];
        logits[c] = s;
        mean += s;
      }
      mean /= static_cast<double>(C);
      for (std::size_t c = 0; c < C; ++c) logit_change += (logits[c] - mean) * (logits[c] - mean);
      value += std::sqrt(row_norm) * logit_change;
    }
    *sum = value;
  });
  return 0.5 * kSoftmaxHessianLipschitz * total;
}

// Certified removal (Guo et al. 2020, docs/math.md §1.7a): trains the perturbed model theta_b
// (Newton from theta^ on h + b^T theta / n) and removes each client from it by the influence
// step, with the data-dependent bound on the summed objective's gradient residual, the exact
// residual, and whether the budget covers the bound.
Unlearning::Certified certified_removal(Federation& federation, const std::vector<double>& theta,
                                        IhvpSolver& solver, const InfluenceConfig& config,
                                        const FederationConfig& training,
                                        const NewtonSettings& base_settings) {
  auto& problem = federation.problem();
  if (!problem.model->linear())
    throw InputError(
        "influence.certified_epsilon > 0 needs a convex model (model.type = \"logistic\"): "
        "certified removal bounds the gradient residual by the Hessian's Lipschitz constant");
  if (problem.model->l2() <= 0.0)
    throw InputError(
        "influence.certified_epsilon > 0 needs model.l2 > 0 (a strongly convex objective: "
        "the perturbed model is its unique minimizer)");
  Unlearning::Certified out;
  out.epsilon = config.certified_epsilon;
  out.delta = config.certified_delta;
  out.budget = config.certified_budget;
  out.c = std::sqrt(2.0 * std::log(1.5 / out.delta));
  out.sigma = out.c * out.budget / out.epsilon;
  const std::size_t p = theta.size();
  const std::int64_t n = federation.train_rows();
  out.noise.resize(p);
  Stream stream(problem.seed, purpose::certified_removal_noise);
  stream.fill_normal(out.noise);
  for (double& value : out.noise) value *= out.sigma;
  // The perturbed objective on the mean scale: h + (b / n)^T theta.
  std::vector<double> linear(p);
  for (std::size_t k = 0; k < p; ++k) linear[k] = out.noise[k] / static_cast<double>(n);
  out.perturbed_model = theta;
  {
    PerturbedObjective objective(federation, linear);
    NewtonSettings settings = base_settings;
    settings.tolerance = training.tolerance;
    const NewtonReport report = minimize_newton(objective, out.perturbed_model, settings);
    out.training_residual = static_cast<double>(n) * report.gradient_norm;
  }
  const std::vector<double>& theta_b = out.perturbed_model;
  std::vector<double> delta, gradient, product, removed(p);
  for (int id = 0; id < config.unlearning_clients; ++id) {
    const std::vector<double> client_gradient =
        client_removal_gradient(federation, theta_b, id, config.removal_gradient);
    removal_parameter_change(solver, client_gradient, n, delta);
    for (std::size_t k = 0; k < p; ++k) removed[k] = theta_b[k] + delta[k];
    federation.exclude_clients({id});
    const double rest = static_cast<double>(federation.train_rows());
    // grad L'_b(theta_b) + H'(theta_b) Delta on the summed scale: n' (grad h_-k + H_-k Delta) + b
    federation.gradient(theta_b, gradient);
    product.resize(p);
    federation.hessian_vector(theta_b, delta.data(), product.data());
    std::vector<double> linear_part(p);
    for (std::size_t k = 0; k < p; ++k)
      linear_part[k] = rest * (gradient[k] + product[k]) + out.noise[k];
    const double lipschitz = lipschitz_residual_bound(federation, delta);
    federation.gradient(removed, gradient);
    std::vector<double> residual(p);
    for (std::size_t k = 0; k < p; ++k) residual[k] = rest * gradient[k] + out.noise[k];
    federation.exclude_clients({});
    const double bound = norm2(linear_part) + lipschitz;
    out.linear_residual.push_back(norm2(linear_part));
    out.lipschitz_bound.push_back(lipschitz);
    out.residual_bound.push_back(bound);
    out.residual.push_back(norm2(residual));
    out.budget_exceeded.push_back(bound > out.budget ? 1 : 0);
    if (bound > out.budget)
      log::warn(
          "certified removal of client {}: the gradient-residual bound {:.3e} exceeds the budget "
          "{:.3e}: the removal is not certified, the model must be retrained without the client",
          id, bound, out.budget);
    if (id + 1 == config.unlearning_clients) out.last_removed = removed;
  }
  log::info(
      "certified removal (epsilon {:g}, delta {:g}): noise sigma {:.4e} (c {:.4f}, budget "
      "{:.3e}); residual bounds up to {:.3e}; {} of {} removal(s) over the budget",
      out.epsilon, out.delta, out.sigma, out.c, out.budget,
      out.residual_bound.empty()
          ? 0.0
          : *std::max_element(out.residual_bound.begin(), out.residual_bound.end()),
      std::count(out.budget_exceeded.begin(), out.budget_exceeded.end(), 1),
      out.budget_exceeded.size());
  return out;
}

}  // namespace

Unlearning verify_unlearning(Federation& federation, const std::vector<double>& theta,
                             const InfluenceConfig& config, const FederationConfig& training,
                             double damping, bool progress) {
  const int clients = static_cast<int>(federation.problem().client_rows.size());
  const int removals = config.unlearning_clients;
  if (removals > clients)
    throw InputError(
        fmt::format("influence.unlearning_clients = {} is more than the federation's {} clients",
                    removals, clients));
  Unlearning result;
  Stopwatch setup;
  auto hessian = make_federated_hessian(federation, theta);
  hessian->set_damping(damping);
  auto solver = make_ihvp_solver(config.ihvp, *hessian);
  result.setup_seconds = setup.seconds();
  const std::int64_t n = federation.train_rows();
  const double base_loss = federation.evaluate_test(theta).first;
  // A network's trained model is no stationary point: its retrain moves even without a removal.
  // The influence step estimates the removal's change alone, so it is compared with the retrain
  // less that move (the retrain with every client, as the leave-one-out control of `influence`).
  std::vector<double> shift(theta.size(), 0.0);
  if (!federation.problem().model->linear() ||
      config.retrain_mode == InfluenceConfig::Retrain::warm) {
    const std::vector<double> control = retrained_model(federation, theta, config, training);
    for (std::size_t k = 0; k < shift.size(); ++k) shift[k] = control[k] - theta[k];
    result.control_distance = norm2(shift);
  }

  // Newton on h without the client from the influence step, by the one Newton's method with the
  // retrain's tolerance; each CG preconditioned by the clean Hessian's factor where there is one
  // (the full federation's H(theta^) is close to the one without a client), else by Jacobi as the
  // retrain's. Forcing term |grad h|: quadratic convergence, so few steps.
  NewtonSettings settings;
  settings.tolerance = training.tolerance;
  settings.max_steps = training.polish_max_steps;
  settings.forcing_power = 1.0;
  const NewtonPreconditioner factor = clean_factor(*solver, damping);
  if (factor) {
    settings.preconditioner = factor;
    settings.max_cg_iterations = kRefineIterations;
  }
  // The chord refinement's stop: |grad h_-k| / l2 <= kDistanceTarget (and never above the
  // retrain's tolerance); without strong convexity, the retrain's tolerance.
  // (D) needs strong convexity: a convex model with l2 > 0 (a network's bound is +inf).
  const double l2 = federation.problem().model->convex() ? federation.problem().model->l2() : 0.0;
  const double target =
      l2 > 0.0 ? std::min(training.tolerance, l2 * kDistanceTarget) : training.tolerance;
  if (config.certified_epsilon > 0.0 && removals > 0)
    result.certified = certified_removal(federation, theta, *solver, config, training, settings);

  ProgressLine bar("verified removals", removals, progress);
  std::vector<double> delta;
  for (int id = 0; id < removals; ++id) {
    Stopwatch first_order_clock;
    const std::vector<double> gradient =
        client_removal_gradient(federation, theta, id, config.removal_gradient);
    removal_parameter_change(*solver, gradient, n, delta);
    std::vector<double> first_order = theta;
    for (std::size_t k = 0; k < first_order.size(); ++k) first_order[k] += delta[k];
    const double first_order_seconds = first_order_clock.seconds();

    federation.exclude_clients({id});
    Stopwatch newton_clock;
    std::vector<double> refined = first_order;
    std::vector<double> residual;
    federation.gradient(first_order, residual);
    const double first_order_residual = norm2(residual);
    // With the factor: chord steps to the proven distance target (a gradient pass each), Newton
    // only if they stall above it; without: Newton to the retrain's tolerance, as the retrain.
    ChordReport chord;
    NewtonReport report;
    report.gradient_norm = first_order_residual;
    if (factor) {
      chord = chord_refine(federation, *solver, refined, residual, target);
      report.gradient_norm = chord.gradient_norm;
      // Stalled above the retrain's own tolerance: Newton finishes (never needed on the decks).
      if (chord.gradient_norm > training.tolerance) {
        NewtonSettings fallback = settings;
        fallback.tolerance = target;
        FederatedObjective objective(federation);
        report = minimize_newton(objective, refined, fallback);
      }
    } else {
      FederatedObjective objective(federation);
      report = minimize_newton(objective, refined, settings);
    }
    const double newton_seconds = first_order_seconds + newton_clock.seconds();

    Stopwatch retrain_clock;
    const std::vector<double> retrained = retrained_model(federation, theta, config, training);
    const double retrain_seconds = retrain_clock.seconds();
    // The same Newton from theta^ with the factor instead of Jacobi: what of the refinement's
    // saving comes from the factor alone (the first-order start saves the rest).
    double factored_seconds = std::nan("");
    if (factor) {
      Stopwatch factored_clock;
      std::vector<double> factored = theta;
      newton_polish(federation, factored, training.tolerance, training.polish_max_steps, false,
                    factor);
      factored_seconds = factored_clock.seconds();
    }
    federation.exclude_clients({});

    const double retrain_loss = federation.evaluate_test(retrained).first;
    result.clients.push_back(id);
    std::vector<double> shifted = first_order;
    for (std::size_t k = 0; k < shifted.size(); ++k) shifted[k] += shift[k];
    result.first_order_distance.push_back(distance(shifted, retrained));
    result.newton_distance.push_back(distance(refined, retrained));
    result.removal_norm.push_back(distance(theta, retrained));
    result.first_order_gradient_residual.push_back(first_order_residual);
    result.chord_steps.push_back(chord.steps);
    result.newton_distance_bound.push_back(l2 > 0.0 ? report.gradient_norm / l2
                                                    : std::numeric_limits<double>::infinity());
    result.newton_steps.push_back(report.steps);
    result.newton_cg_iterations.push_back(report.cg_iterations);
    result.newton_gradient_norm.push_back(report.gradient_norm);
    result.retrain_loss_change.push_back(retrain_loss - base_loss);
    result.first_order_loss_error.push_back(federation.evaluate_test(first_order).first -
                                            retrain_loss);
    result.newton_loss_error.push_back(federation.evaluate_test(refined).first - retrain_loss);
    // Rank 0's clock, the same times on every rank (the output's contract).
    double seconds[4] = {first_order_seconds, newton_seconds, retrain_seconds, factored_seconds};
    MPI_Bcast(seconds, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    result.first_order_seconds.push_back(seconds[0]);
    result.newton_seconds.push_back(seconds[1]);
    result.retrain_seconds.push_back(seconds[2]);
    result.factored_retrain_seconds.push_back(seconds[3]);
    if (id + 1 == removals) {
      result.last_first_order = first_order;
      result.last_newton = refined;
      result.last_retrain = retrained;
    }
    bar.done(id + 1);
  }
  MPI_Bcast(&result.setup_seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (removals > 0) {
    const auto max_of = [](const std::vector<double>& v) {
      return *std::max_element(v.begin(), v.end());
    };
    const auto sum_of = [](const std::vector<double>& v) {
      return std::accumulate(v.begin(), v.end(), 0.0);
    };
    log::info(
        "unlearning {} client(s): max distance to the retrain: influence step {:.3e}, "
        "Newton-refined "
        "{:.3e}; time {:.3f}s and {:.3f}s against the retrains' {:.3f}s ({:.1f}%), set-up {:.3f}s",
        removals, max_of(result.first_order_distance), max_of(result.newton_distance),
        sum_of(result.first_order_seconds), sum_of(result.newton_seconds),
        sum_of(result.retrain_seconds),
        100.0 * sum_of(result.newton_seconds) / sum_of(result.retrain_seconds),
        result.setup_seconds);
  }
  return result;
}

std::vector<int> lds_subset(std::uint64_t seed, int subset, int clients, int left_out) {
  // A partial Fisher-Yates shuffle of the ids: the first `left_out` places.
  Stream stream(seed, purpose::lds_subset, static_cast<std::uint64_t>(subset));
  std::vector<int> ids(static_cast<std::size_t>(clients));
  std::iota(ids.begin(), ids.end(), 0);
  for (int j = 0; j < left_out; ++j) {
    const auto pick = j + static_cast<int>(stream.below(static_cast<std::uint64_t>(clients - j)));
    std::swap(ids[static_cast<std::size_t>(j)], ids[static_cast<std::size_t>(pick)]);
  }
  ids.resize(static_cast<std::size_t>(left_out));
  std::sort(ids.begin(), ids.end());
  return ids;
}

ClientLds client_lds(Federation& federation, const std::vector<double>& theta,
                     const std::vector<double>& estimate, const InfluenceConfig& config,
                     const FederationConfig& training, double damping, std::uint64_t seed,
                     bool progress) {
  const int clients = static_cast<int>(federation.problem().client_rows.size());
  ClientLds result;
  result.left_out = std::max(1, static_cast<int>(std::lround(config.lds_fraction * clients)));
  if (result.left_out >= clients)
    throw InputError(fmt::format(
        "influence.lds_fraction = {:g} leaves out {} of the {} clients: at least one must remain",
        config.lds_fraction, result.left_out, clients));
  // As for the leave-one-out retrains: a network's (or a warm retrain's) change is measured
  // against the same retraining with every client, so that only the removal's effect remains.
  double base_loss = 0.0;
  if (!federation.problem().model->linear() ||
      config.retrain_mode == InfluenceConfig::Retrain::warm)
    base_loss =
        federation.evaluate_test(retrained_model(federation, theta, config, training)).first;
  else
    base_loss = federation.evaluate_test(theta).first;
  // A convex model's exact retrain (Newton from theta^ to the tolerance) preconditioned by the
  // clean factor where there is one, as FLDP's retrains: the same minimizer in a fraction of
  // Jacobi's CG iterations.
  std::unique_ptr<HessianOperator> hessian;
  std::unique_ptr<IhvpSolver> solver;
  NewtonPreconditioner factor;
  if (federation.problem().model->linear() &&
      config.retrain_mode == InfluenceConfig::Retrain::newton &&
      config.ihvp.method == IhvpMethod::explicit_cholesky && damping == 0.0) {
    hessian = make_federated_hessian(federation, theta);
    solver = make_ihvp_solver(config.ihvp, *hessian);
    factor = clean_factor(*solver, damping);
  }
  ProgressLine bar("FL-LDS subset federations", config.lds_subsets, progress);
  for (int subset = 0; subset < config.lds_subsets; ++subset) {
    const std::vector<int> ids = lds_subset(seed, subset, clients, result.left_out);
    double predicted = 0.0;
    for (int id : ids) {
      predicted += estimate[static_cast<std::size_t>(id)];
      result.left_out_ids.push_back(id);
    }
    federation.exclude_clients(ids);
    Stopwatch clock;
    std::vector<double> retrained = theta;
    if (factor)
      newton_polish(federation, retrained, training.tolerance, training.polish_max_steps, false,
                    factor);
    else
      retrained = retrained_model(federation, theta, config, training);
    double seconds = clock.seconds();
    federation.exclude_clients({});
    MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    result.predicted.push_back(predicted);
    result.actual.push_back(federation.evaluate_test(retrained).first - base_loss);
    result.retrain_seconds.push_back(seconds);
    bar.done(subset + 1);
  }
  if (config.lds_subsets > 0) {
    result.score = spearman(result.predicted, result.actual);
    log::info("FL-LDS over {} subset federations without {} of {} clients: Spearman {:.4f}",
              config.lds_subsets, result.left_out, clients, result.score);
  }
  return result;
}

}  // namespace fluence
