#include "fluence/influence/client_influence.hpp"

#include <cmath>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"

namespace fluence {

InfluenceConfig InfluenceConfig::from_deck(const Deck& deck) {
  InfluenceConfig config;
  config.scope = parse_hessian_scope(deck.string("influence.hessian"));
  config.damping = deck.real("influence.damping");
  config.auto_damping = deck.boolean("influence.auto_damping");
  config.ihvp = IhvpConfig::from_deck(deck);
  config.spectrum = deck.boolean("influence.spectrum");
  config.removal_gradient = parse_removal_gradient(deck.string("influence.removal_gradient"));
  config.vectors = deck.boolean("influence.vectors");
  config.retrain = deck.boolean("influence.retrain");
  config.retrain_full = deck.string("influence.retrain_mode") == "full";
  return config;
}

namespace {

// Every local client's removal gradient sum_k grad l~_j (docs/math.md §1), clients x p.
std::vector<double> local_removal_gradients(Federation& federation,
                                            const std::vector<double>& theta,
                                            RemovalGradient kind) {
  auto& problem = federation.problem();
  const std::size_t p = federation.parameters();
  std::vector<double> gradients(problem.clients.size() * p);
  std::vector<double> one;
  Workspace work;
  for (std::size_t k = 0; k < problem.clients.size(); ++k) {
    const auto& client = problem.clients[k];
    group_gradient_sum(*problem.model, client.features(), client.labels().data(), client.size(),
                       theta.data(), kind, one, work);
    std::copy(one.begin(), one.end(), gradients.begin() + static_cast<std::ptrdiff_t>(k * p));
  }
  return gradients;
}

void federated_scope(Federation& federation, const InfluenceConfig& config,
                     const std::vector<double>& test_gradient, const std::vector<double>& gradients,
                     HessianOperator& hessian, bool progress, ClientInfluence& result) {
  auto& problem = federation.problem();
  const std::size_t p = federation.parameters();
  const int clients = static_cast<int>(problem.client_rows.size());
  const std::int64_t n = federation.train_rows();
  auto solver = make_ihvp_solver(config.ihvp, hessian);
  std::vector<double> s_test;
  const SolveReport report = solve_s_test(*solver, test_gradient, s_test);
  log::info("s_test: {} iterations, relative residual {:.3e}", report.iterations,
            report.relative_residual);
  result.iterations.push_back(report.iterations);
  result.relative_residual.push_back(report.relative_residual);
  std::vector<double> local_estimates(problem.clients.size());
  for (std::size_t k = 0; k < problem.clients.size(); ++k)
    local_estimates[k] = removal_loss_change(
        s_test,
        std::vector<double>(gradients.begin() + static_cast<std::ptrdiff_t>(k * p),
                            gradients.begin() + static_cast<std::ptrdiff_t>((k + 1) * p)),
        n);
  result.estimate = ordered_allgather(local_estimates, static_cast<int>(problem.clients.size()), 1);
  if (!config.vectors) return;
  // Each client's parameter change needs a solve with the federated Hessian: every rank takes part
  // (the product is a collective), the owner broadcasts its gradient and keeps the vector.
  ProgressLine bar("parameter-change vectors", clients, progress);
  std::vector<double> rhs(p), delta;
  for (int id = 0; id < clients; ++id) {
    const int owner = problem.layout->owner(id);
    if (owner == world_rank())
      std::copy_n(
          gradients.begin() + static_cast<std::ptrdiff_t>((id - result.first_local_client) * p), p,
          rhs.begin());
    MPI_Bcast(rhs.data(), static_cast<int>(p), MPI_DOUBLE, owner, MPI_COMM_WORLD);
    const SolveReport solve = removal_parameter_change(*solver, rhs, n, delta);
    result.iterations.push_back(solve.iterations);
    result.relative_residual.push_back(solve.relative_residual);
    if (owner == world_rank())
      std::copy(delta.begin(), delta.end(),
                result.local_vectors.begin() +
                    static_cast<std::ptrdiff_t>((id - result.first_local_client) * p));
    bar.done(id + 1);
  }
}

void client_scope(Federation& federation, const std::vector<double>& theta,
                  const InfluenceConfig& config, const std::vector<double>& test_gradient,
                  const std::vector<double>& gradients, bool progress, ClientInfluence& result) {
  auto& problem = federation.problem();
  const std::size_t p = federation.parameters();
  const std::int64_t n = federation.train_rows();
  const auto local = problem.clients.size();
  std::vector<double> local_estimates(local), local_reports(2 * local), delta;
  ProgressLine bar("local solves on rank 0", static_cast<int>(local), progress);
  for (std::size_t k = 0; k < local; ++k) {
    // Seed 000 Table 1: the client inverts only its own Hessian; no other party takes part.
    auto hessian = make_client_hessian(federation, k, theta);
    hessian->set_damping(result.damping);
    auto solver = make_ihvp_solver(config.ihvp, *hessian);
    const std::vector<double> g(gradients.begin() + static_cast<std::ptrdiff_t>(k * p),
                                gradients.begin() + static_cast<std::ptrdiff_t>((k + 1) * p));
    const SolveReport report = removal_parameter_change(*solver, g, n, delta);
    local_estimates[k] = loss_change(test_gradient, delta);
    local_reports[2 * k] = report.iterations;
    local_reports[2 * k + 1] = report.relative_residual;
    std::copy(delta.begin(), delta.end(),
              result.local_vectors.begin() + static_cast<std::ptrdiff_t>(k * p));
    bar.done(static_cast<int>(k + 1));
  }
  result.estimate = ordered_allgather(local_estimates, static_cast<int>(local), 1);
  const auto reports = ordered_allgather(local_reports, static_cast<int>(local), 2);
  for (std::size_t k = 0; k < reports.size() / 2; ++k) {
    result.iterations.push_back(static_cast<std::int64_t>(reports[2 * k]));
    result.relative_residual.push_back(reports[2 * k + 1]);
  }
}

void retrain_without_each_client(Federation& federation, const std::vector<double>& theta,
                                 const InfluenceConfig& config, const FederationConfig& training,
                                 bool progress, ClientInfluence& result) {
  const int clients = static_cast<int>(federation.problem().client_rows.size());
  ProgressLine bar("retrained without client", clients, progress);
  result.actual.resize(static_cast<std::size_t>(clients));
  result.retrain_gradient_norm.resize(static_cast<std::size_t>(clients));
  std::vector<double> gradient;
  for (int id = 0; id < clients; ++id) {
    federation.exclude_clients({id});
    std::vector<double> retrained = theta;
    if (config.retrain_full) {
      FederationConfig quiet = training;
      quiet.polish_verbose = false;
      retrained = federation.train(quiet).theta;
    } else {
      // The objective without the client is strictly convex (l2 > 0): its minimizer is unique, so
      // Newton from theta^ finds exactly what retraining from scratch converges to.
      newton_polish(federation, retrained, training.tolerance, training.polish_max_steps, false);
    }
    federation.gradient(retrained, gradient);
    result.retrain_gradient_norm[static_cast<std::size_t>(id)] = norm2(gradient);
    result.actual[static_cast<std::size_t>(id)] =
        federation.evaluate_test(retrained).first - result.base_test_loss;
    bar.done(id + 1);
  }
  federation.exclude_clients({});
  result.spearman = spearman(result.estimate, result.actual);
  result.mae = mean_absolute_error(result.estimate, result.actual);
  log::info("estimate vs exact retraining: Spearman rho {:.4f}  MAE {:.3e}", result.spearman,
            result.mae);
}

}  // namespace

void check_hessian_spectrum(HessianOperator& hessian, const InfluenceConfig& config,
                            std::optional<HessianSpectrum>& result, double& damping) {
  result = hessian_spectrum(hessian, config.ihvp.eigen_tolerance);
  const auto& spectrum = *result;
  log::info("Hessian spectrum: lambda_min {:.6e}  lambda_max {:.6e}  condition number {:.3e}",
            spectrum.eigenvalue_min, spectrum.eigenvalue_max, spectrum.condition_number);
  const double extra = damping_for(spectrum);
  if (extra == 0.0) return;
  if (config.auto_damping) {
    damping += extra;
    hessian.set_damping(damping);
    log::warn(
        "the Hessian is not positive definite (lambda_min = {:.3e}, lambda_max = {:.3e}): adding "
        "damping {:.3e} (rule: 1e-8 lambda_max - lambda_min; docs/math.md)",
        spectrum.eigenvalue_min, spectrum.eigenvalue_max, extra);
  } else {
    log::warn(
        "the Hessian is not positive definite (lambda_min = {:.3e}, lambda_max = {:.3e}); IHVPs "
        "may fail or be meaningless: set influence.damping >= {:.3e} or influence.auto_damping = "
        "true",
        spectrum.eigenvalue_min, spectrum.eigenvalue_max, extra);
  }
}

ClientInfluence client_removal_influence(Federation& federation, const std::vector<double>& theta,
                                         const InfluenceConfig& config,
                                         const FederationConfig& training, bool progress) {
  auto& problem = federation.problem();
  const std::size_t p = federation.parameters();
  ClientInfluence result;
  result.damping = config.damping;
  result.first_local_client = problem.layout->first_client(world_rank());
  result.local_clients = static_cast<int>(problem.clients.size());
  result.local_vectors.assign(
      config.vectors || config.scope == HessianScope::client ? problem.clients.size() * p : 0, 0.0);

  auto hessian = make_federated_hessian(federation, theta);
  hessian->set_damping(result.damping);
  if (config.spectrum) check_hessian_spectrum(*hessian, config, result.spectrum, result.damping);

  std::vector<double> test_gradient;
  federation.test_gradient(theta, test_gradient);
  result.base_test_loss = federation.evaluate_test(theta).first;
  const auto gradients = local_removal_gradients(federation, theta, config.removal_gradient);

  if (config.scope == HessianScope::federated)
    federated_scope(federation, config, test_gradient, gradients, *hessian, progress, result);
  else
    client_scope(federation, theta, config, test_gradient, gradients, progress, result);
  if (!config.vectors) result.local_vectors.clear();

  if (config.retrain)
    retrain_without_each_client(federation, theta, config, training, progress, result);
  return result;
}

}  // namespace fluence
