#include "fluence/influence/unlearning.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

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
    std::vector<double> residual;
    federation.gradient(first_order, residual);
    Stopwatch newton_clock;
    std::vector<double> refined = first_order;
    FederatedObjective objective(federation);
    const NewtonReport report = minimize_newton(objective, refined, settings);
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
    result.first_order_gradient_residual.push_back(norm2(residual));
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
