#include "fluence/influence/client_influence.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>

#include "fluence/core/deck_keys.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/rank_warnings.hpp"
#include "fluence/core/signals.hpp"
#include "fluence/fl/newton.hpp"
#include "fluence/influence/block_cg.hpp"
#include "fluence/influence/lanczos.hpp"

namespace fluence {

void register_influence_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      section("influence",
              "influence functions: Hessian, IHVP solvers, estimators "
              "([FLDP-FL](../docs/references.md#fldp-fl), [Carey et al. "
              "2023](../docs/references.md#carey-2023))"),
      choice("influence.hessian", "\"federated\"", {"federated", "client"},
             "Hessian scope: the whole objective (collective) or each client's local data only"),
      key("influence.damping", T::real, "0.0", "added to the Hessian's diagonal (H + damping I)",
          0.0),
      key("influence.auto_damping", T::boolean, "true",
          "when the spectrum shows H is not positive definite, add the documented damping"),
      choice("influence.auto_damping_floor", "\"relative\"", {"relative", "damping"},
             "the smallest eigenvalue the automatic damping leaves (docs/math.md §4): 1e-8 "
             "lambda_max (`relative`: condition number about 1e8), or `damping`: at least "
             "influence.damping, which then stays above the most negative curvature (H + "
             "(damping - lambda_min) I: the well-conditioned choice at a network that is no "
             "minimum, such as FedAvg's; docs/results/attribution.md)"),
      key("influence.spectrum", T::boolean, "true",
          "compute the smallest and largest Hessian eigenvalues with SLEPc"),
      choice("influence.removal_gradient", "\"regularized\"", {"regularized", "loss"},
             "per-point gradient of a removal: with its share of the L2 term (exact for "
             "retraining) or the papers' loss-only variant"),
      key("influence.vectors", T::boolean, "true",
          "solve and write every client's parameter-change vector [clients × parameters]"),
      key("influence.block_size", T::integer, "1",
          "with `vectors`: right-hand sides per block CG solve (docs/math.md §3.3), each "
          "Hessian product a GEMM over the block; 1 = one CG solve per client (as before), 0 = "
          "all clients in one block. The block's working set is about 9 × block × p doubles per "
          "rank",
          0),
      key("influence.retrain", T::boolean, "false",
          "check the estimates against exact retraining without each client"),
      choice("influence.retrain_mode", "\"newton\"", {"newton", "full", "warm"},
             "retraining without each client: Newton from the trained model to "
             "`federation.tolerance` (the exact minimizer, fast; for a network the damped "
             "local Newton of `federation.polish`), the full federation schedule from the "
             "initial model, or the schedule again from the trained model (`warm`: its rounds "
             "draw the same cohorts and shuffles). With `warm`, and for any network, the "
             "actual change is measured against the same retraining with every client, so "
             "that only the removal's effect remains"),
      key("influence.unlearning_clients", T::integer, "0",
          "verified unlearning: remove clients 0 .. this - 1 one at a time by the influence step "
          "and by the Newton-refined step, each against the exact retrain "
          "(`influence.retrain_mode`) in distance and time (docs/math.md §1.7)",
          0),
      key("influence.lds_subsets", T::integer, "0",
          "FL-LDS: subset federations, each retrained exactly without a random "
          "`influence.lds_fraction` of the clients; the Spearman correlation of the predicted and "
          "actual test-loss changes ([Park et al. 2023](../docs/references.md#park-2023), "
          "docs/math.md §1.8; 0 = none)",
          0),
      below_maximum(key("influence.lds_fraction", T::real, "0.1",
                        "FL-LDS: the fraction of the clients each subset federation leaves out "
                        "(at least one client, rounded to the nearest count)",
                        0.0, 1.0, true)),
      key("influence.certified_epsilon", T::real, "0.0",
          "certified removal ([Guo et al. 2020](../docs/references.md#guo-2020), docs/math.md "
          "§1.7a) with `influence.unlearning_clients`, a convex model only: the epsilon of the "
          "(epsilon, delta)-certified removal; the model is trained with the objective perturbed "
          "by b^T theta, b ~ N(0, sigma^2 I), sigma = sqrt(2 ln(1.5/delta)) "
          "`certified_budget` / epsilon, and each removal checks its gradient residual against "
          "the budget (0 = off)",
          0.0),
      below_maximum(key("influence.certified_delta", T::real, "1e-4",
                        "certified removal: the delta of (epsilon, delta)", 0.0, 1.0, true)),
      key("influence.certified_budget", T::real, "1.0",
          "certified removal: the budget eps' on the gradient-residual norm of the summed "
          "objective that the noise covers; a removal whose data-dependent bound exceeds it is "
          "not certified (the model must be retrained without the client)",
          0.0, kInf, true),
  });
  register_ihvp_keys(schema);
}

InfluenceConfig InfluenceConfig::from_deck(const Deck& deck) {
  InfluenceConfig config;
  config.scope = parse_hessian_scope(deck.string("influence.hessian"));
  config.damping = deck.real("influence.damping");
  config.auto_damping = deck.boolean("influence.auto_damping");
  config.auto_damping_keeps_damping = deck.string("influence.auto_damping_floor") == "damping";
  config.ihvp = IhvpConfig::from_deck(deck);
  config.spectrum = deck.boolean("influence.spectrum");
  config.removal_gradient = parse_removal_gradient(deck.string("influence.removal_gradient"));
  config.vectors = deck.boolean("influence.vectors");
  config.block_size = static_cast<int>(deck.integer("influence.block_size"));
  if (config.block_size != 1 &&
      (config.ihvp.method != IhvpMethod::cg || config.scope != HessianScope::federated))
    throw InputError(fmt::format(
        "{}: influence.block_size = {} solves the clients' vectors by block CG, which needs "
        "influence.solver = \"cg\" and influence.hessian = \"federated\" (here \"{}\" and "
        "\"{}\"); use block_size = 1",
        deck.where("influence.block_size"), config.block_size, to_string(config.ihvp.method),
        to_string(config.scope)));
  config.retrain = deck.boolean("influence.retrain");
  const std::string mode = deck.string("influence.retrain_mode");
  config.retrain_mode = mode == "full"   ? InfluenceConfig::Retrain::full
                        : mode == "warm" ? InfluenceConfig::Retrain::warm
                                         : InfluenceConfig::Retrain::newton;
  config.unlearning_clients = static_cast<int>(deck.integer("influence.unlearning_clients"));
  config.lds_subsets = static_cast<int>(deck.integer("influence.lds_subsets"));
  config.lds_fraction = deck.real("influence.lds_fraction");
  config.certified_epsilon = deck.real("influence.certified_epsilon");
  config.certified_delta = deck.real("influence.certified_delta");
  config.certified_budget = deck.real("influence.certified_budget");
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

// A client's solve in a checkpoint: one row of `influence/solves` (clients x kSolveColumns), its
// columns in this order. kSolved is 0 until the client's system is solved.
enum SolveColumn : std::size_t { kSolved, kEstimate, kIterations, kResidual, kSolveColumns };

// A unit a stop interrupted (docs/operations.md "Stops inside a unit"): `influence/partial` holds
// [kind, client id (-1 for s_test), then the kind's scalars], `influence/partial_state` the
// solver's state or, for a retrain, its Newton iterate (by rounds: the model and the parts' states
// after the last round, fl/interruptible_rounds.hpp).
enum class PartialUnitKind { s_test = 1, vector = 2, retrain = 3, block = 4, retrain_rounds = 5 };

// What messages call the unit `kind` of client `id` (-1: s_test).
std::string partial_name(PartialUnitKind kind, int id) {
  const std::string client = id >= 0 ? fmt::format(" for client {}", id) : std::string();
  switch (kind) {
    case PartialUnitKind::s_test:
      return "the s_test solve";
    case PartialUnitKind::vector:
      return "the solve" + client;
    case PartialUnitKind::retrain:
    case PartialUnitKind::retrain_rounds:
      return "the retrain" + client;
    case PartialUnitKind::block:
      return "the block solve" + fmt::format(" from client {}", id);
  }
  return "";
}

std::vector<double> partial_key(PartialUnitKind kind, int id) {
  return {static_cast<double>(kind), static_cast<double>(id)};
}

// The sweep's resumable state (docs/operations.md). Units: one client's solve (its
// parameter-change vector with the federated Hessian, or its local solve with its own), then one
// client's leave-one-out retrain. Per local client, `numbers` holds a SolveColumn row;
// `retrained`, `actual` and `gradient_norm` are global.
class InfluenceSweep {
 public:
  InfluenceSweep(SweepCheckpoint* checkpoint, const FederatedProblem& problem, std::size_t p,
                 bool keep_vectors, ClientInfluence& result)
      : checkpoint_(checkpoint),
        clients_(problem.client_rows.size()),
        local_(problem.clients.size()),
        p_(p),
        keep_vectors_(keep_vectors),
        result_(result),
        numbers_(local_ * kSolveColumns, 0.0),
        retrained_(clients_, 0) {
    result.actual.assign(clients_, 0.0);
    result.retrain_gradient_norm.assign(clients_, 0.0);
    result.retrain_min_eigenvalue.assign(clients_, std::numeric_limits<double>::quiet_NaN());
    result.retrain_saddle.assign(clients_, 0);
    if (!checkpoint || checkpoint->restored().empty()) return;
    const StateArrays& state = checkpoint->restored();
    const auto& numbers = state_array(state, "influence/solves", clients_ * kSolveColumns);
    const auto first = static_cast<std::size_t>(result.first_local_client);
    std::copy_n(numbers.begin() + static_cast<std::ptrdiff_t>(first * kSolveColumns),
                local_ * kSolveColumns, numbers_.begin());
    if (keep_vectors_) {
      const auto& vectors = state_array(state, "influence/vectors", clients_ * p);
      std::copy_n(vectors.begin() + static_cast<std::ptrdiff_t>(first * p), local_ * p,
                  result.local_vectors.begin());
    }
    retrained_ = state_flags(state, "influence/retrained", clients_);
    result.actual = state_array(state, "influence/actual", clients_);
    result.retrain_gradient_norm = state_array(state, "influence/retrain_gradient_norm", clients_);
    if (state.count("influence/retrain_min_eigenvalue")) {  // absent in older checkpoints
      result.retrain_min_eigenvalue =
          state_array(state, "influence/retrain_min_eigenvalue", clients_);
      result.retrain_saddle = state_flags(state, "influence/retrain_saddle", clients_);
    }
    for (std::size_t id = 0; id < clients_; ++id)
      units_ += numbers[id * kSolveColumns + kSolved] != 0.0 ? 1 : 0;
    units_ += std::count(retrained_.begin(), retrained_.end(), 1);
    if (state.count("influence/solver")) solver_history_ = state.at("influence/solver");
    partial_.restore(state);
    if (state.count("influence/local_partial"))
      restore_local_partial(state.at("influence/local_partial"), result.first_local_client);
  }

  /// Client scope (docs/operations.md "Stops inside a unit"): the local solves are each rank's
  /// own and not in step, so each polls its own rank's signal and a stop may interrupt one solve
  /// per rank. The saved state of this rank's client `id` (null: none); given once.
  const std::vector<double>* local_resume(int id) {
    const auto found = local_partial_.find(id);
    if (found == local_partial_.end()) return nullptr;
    local_resumed_ = std::move(found->second.second);
    local_partial_.erase(found);
    return &local_resumed_;
  }
  /// Records this rank's client `id` whose local solve a stop interrupted after `progress`
  /// iterations (or LiSSA steps), with the solver's state.
  void local_interrupted(int id, long progress, std::vector<double> state) {
    local_partial_[id] = {progress, std::move(state)};
    local_new_.push_back(id);
  }
  /// Collective, after a step of local solves: rank 0 names the solves a stop interrupted in it.
  void log_local_interruptions() {
    std::vector<double> mine;
    for (int id : local_new_)
      mine.insert(mine.end(),
                  {static_cast<double>(id), static_cast<double>(local_partial_.at(id).first)});
    local_new_.clear();
    const std::vector<double> all = ordered_allgather(mine, static_cast<int>(mine.size()), 1);
    for (std::size_t k = 0; k + 1 < all.size(); k += 2)
      log::info("stop inside the local solve for client {}: {} iterations saved",
                static_cast<int>(all[k]), static_cast<long>(all[k + 1]));
  }

  /// The interrupted unit a restart continues, and the one a stop saves: null when the sweep has
  /// no checkpoints to write it to (its units then run to their end).
  PartialUnit* partial() { return checkpoint_ ? &partial_ : nullptr; }
  /// Collective, when a stop (agreed by every rank) interrupted a unit, recorded in partial():
  /// writes the checkpoint with its partial state (the same on every rank). True.
  bool interrupted() { return finished(0); }

  /// Restores the federated solver's history (CG warm starts) when resuming.
  void restore(IhvpSolver& solver) {
    solver_ = &solver;
    if (!solver_history_.empty()) solver.restore_history(solver_history_);
  }
  /// The solver is gone after the vectors: later checkpoints keep its last history.
  void detach(IhvpSolver& solver) {
    solver_history_ = solver.history();
    solver_ = nullptr;
  }
  double* numbers(std::size_t local) { return numbers_.data() + local * kSolveColumns; }
  bool solved(std::size_t local) const { return numbers_[local * kSolveColumns + kSolved] != 0.0; }
  bool retrained(int id) const { return retrained_[static_cast<std::size_t>(id)] != 0; }
  void mark_retrained(int id) { retrained_[static_cast<std::size_t>(id)] = 1; }

  /// Collective, after `count` more units finished (on all ranks together): true on a stop signal.
  bool finished(long count) {
    units_ += count;
    return checkpoint_ && checkpoint_->units_done(units_, [&](StateArrays& state) { save(state); });
  }
  /// The SolveColumn rows of every client, in id order, on every rank.
  std::vector<double> all_numbers() const {
    return ordered_allgather(numbers_, static_cast<int>(local_), static_cast<int>(kSolveColumns));
  }

 private:
  void save(StateArrays& state) const {
    state["influence/solves"] = all_numbers();
    if (keep_vectors_)
      state["influence/vectors"] =
          ordered_allgather(result_.local_vectors, static_cast<int>(local_), static_cast<int>(p_));
    state["influence/retrained"] = flags_array(retrained_);
    state["influence/actual"] = result_.actual;
    state["influence/retrain_gradient_norm"] = result_.retrain_gradient_norm;
    state["influence/retrain_min_eigenvalue"] = result_.retrain_min_eigenvalue;
    state["influence/retrain_saddle"] = flags_array(result_.retrain_saddle);
    if (solver_)
      state["influence/solver"] = solver_->history();
    else if (!solver_history_.empty())
      state["influence/solver"] = solver_history_;
    partial_.save(state);
    // Every rank's interrupted local solves, in rank order: [client id, progress, size, state...]
    // per solve (the same array on every rank).
    std::vector<double> mine;
    for (const auto& [id, entry] : local_partial_) {
      mine.insert(mine.end(), {static_cast<double>(id), static_cast<double>(entry.first),
                               static_cast<double>(entry.second.size())});
      mine.insert(mine.end(), entry.second.begin(), entry.second.end());
    }
    std::vector<double> all = ordered_allgather(mine, static_cast<int>(mine.size()), 1);
    if (!all.empty()) {
      state["influence/local_partial"] = std::move(all);
      state[kPartialUnit] = {1.0};
    }
  }

  // The inverse of save's `influence/local_partial`: this rank's clients' entries are kept for
  // local_resume; rank 0 names every one.
  void restore_local_partial(const std::vector<double>& all, int first_local) {
    for (std::size_t k = 0; k + 3 <= all.size();) {
      const int id = static_cast<int>(all[k]);
      const auto progress = static_cast<long>(all[k + 1]);
      const auto size = static_cast<std::size_t>(all[k + 2]);
      if (k + 3 + size > all.size())
        throw InputError("checkpoint: influence/local_partial does not fit this run");
      log::info("resuming the local solve for client {} after {} iterations (from the checkpoint)",
                id, progress);
      if (id >= first_local && id < first_local + static_cast<int>(local_))
        local_partial_[id] = {
            progress, std::vector<double>(all.begin() + static_cast<std::ptrdiff_t>(k + 3),
                                          all.begin() + static_cast<std::ptrdiff_t>(k + 3 + size))};
      k += 3 + size;
    }
  }

  SweepCheckpoint* checkpoint_;
  std::size_t clients_, local_, p_;
  bool keep_vectors_;
  ClientInfluence& result_;
  std::vector<double> numbers_;
  std::vector<char> retrained_;
  long units_ = 0;
  std::vector<double> solver_history_;
  IhvpSolver* solver_ = nullptr;
  PartialUnit partial_{"influence", 2};  // [kind, client id (-1 for s_test)]
  // Client scope: this rank's interrupted local solves, client id -> (progress, solver state);
  // local_new_ those of the current step, local_resumed_ the one given to local_resume.
  std::map<int, std::pair<long, std::vector<double>>> local_partial_;
  std::vector<int> local_new_;
  std::vector<double> local_resumed_;
};

bool single_parameter_changes(Federation& federation, IhvpSolver& solver,
                              const std::vector<double>& gradients, bool progress,
                              InfluenceSweep& sweep, ClientInfluence& result);
bool block_parameter_changes(Federation& federation, const InfluenceConfig& config,
                             const std::vector<double>& test_gradient,
                             const std::vector<double>& s_test,
                             const std::vector<double>& gradients, HessianOperator& hessian,
                             bool progress, InfluenceSweep& sweep, ClientInfluence& result);

// Collective: the solve of `b` into `x` as the unit `kind` of client `id`, which a stop may
// interrupt (influence/ihvp.hpp). Interrupted: writes the checkpoint and returns false.
bool interruptible_solve(IhvpSolver& solver, InfluenceSweep& sweep, PartialUnitKind kind, int id,
                         const std::function<SolveReport()>& solve, SolveReport& report) {
  if (interruptible_solve(solver, sweep.partial(), partial_key(kind, id), partial_name(kind, id),
                          solve, report))
    return true;
  sweep.interrupted();
  return false;
}

// The estimator's s_test and scores against the exact s_test by CG (the deck's preconditioner and
// tolerance), logged and kept for /influence/estimator.
ClientInfluence::EstimatorError estimator_error(
    const InfluenceConfig& config, HessianOperator& hessian,
    const std::vector<double>& test_gradient, const std::vector<double>& s_test,
    const std::vector<double>& estimate, double seconds,
    const std::function<std::vector<double>(const std::vector<double>&)>& scores) {
  ClientInfluence::EstimatorError error;
  error.seconds = seconds;
  IhvpConfig exact = config.ihvp;
  exact.method = IhvpMethod::cg;
  Stopwatch clock;
  auto solver = make_ihvp_solver(exact, hessian);
  std::vector<double> s_exact;
  const SolveReport report = solve_s_test(*solver, test_gradient, s_exact);
  error.exact_seconds = clock.seconds();
  error.exact_iterations = report.iterations;
  error.exact_estimate = scores(s_exact);
  const auto relative = [](const std::vector<double>& a, const std::vector<double>& b) {
    double difference = 0.0, size = 0.0;
    for (std::size_t k = 0; k < a.size(); ++k) {
      difference += (a[k] - b[k]) * (a[k] - b[k]);
      size += b[k] * b[k];
    }
    return size > 0.0 ? std::sqrt(difference / size) : std::sqrt(difference);
  };
  error.score_relative_difference = relative(estimate, error.exact_estimate);
  error.solution_relative_difference = relative(s_test, s_exact);
  error.spearman = spearman(estimate, error.exact_estimate);
  log::info(
      "{} against exact CG ({} iterations, {:.3g} s; the estimator {:.3g} s): scores' relative "
      "difference {:.3e}, Spearman {:.4f}; s_test's relative difference {:.3e}",
      to_string(config.ihvp.method), report.iterations, error.exact_seconds, seconds,
      error.score_relative_difference, error.spearman, error.solution_relative_difference);
  return error;
}

// Returns false when a stop signal ended it.
bool federated_scope(Federation& federation, const InfluenceConfig& config,
                     const std::vector<double>& test_gradient, const std::vector<double>& gradients,
                     HessianOperator& hessian, bool progress, InfluenceSweep& sweep,
                     ClientInfluence& result) {
  auto& problem = federation.problem();
  const std::size_t p = federation.parameters();
  const int clients = static_cast<int>(problem.client_rows.size());
  const std::int64_t n = federation.train_rows();
  Stopwatch clock;
  auto solver = make_ihvp_solver(config.ihvp, hessian);
  std::vector<double> s_test;
  SolveReport report;
  if (!interruptible_solve(
          *solver, sweep, PartialUnitKind::s_test, -1,
          [&] { return solve_s_test(*solver, test_gradient, s_test); }, report))
    return false;
  double seconds = clock.seconds();
  MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);  // rank 0's clock, on every rank
  result.s_test_seconds = seconds;
  log::info("s_test: {} iterations, relative residual {:.3e} ({})", report.iterations,
            report.relative_residual, format_duration(seconds));
  result.iterations.push_back(report.iterations);
  result.relative_residual.push_back(report.relative_residual);
  const auto scores = [&](const std::vector<double>& s) {
    std::vector<double> local_estimates(problem.clients.size());
    for (std::size_t k = 0; k < problem.clients.size(); ++k)
      local_estimates[k] = removal_loss_change(
          s,
          std::vector<double>(gradients.begin() + static_cast<std::ptrdiff_t>(k * p),
                              gradients.begin() + static_cast<std::ptrdiff_t>((k + 1) * p)),
          n);
    return ordered_allgather(local_estimates, static_cast<int>(problem.clients.size()), 1);
  };
  result.estimate = scores(s_test);
  if (config.ihvp.method == IhvpMethod::ekfac)
    result.estimator_error =
        estimator_error(config, hessian, test_gradient, s_test, result.estimate, seconds, scores);
  if (!config.vectors) return true;
  sweep.restore(*solver);
  if (config.block_size != 1) {
    const bool done = block_parameter_changes(federation, config, test_gradient, s_test, gradients,
                                              hessian, progress, sweep, result);
    if (!done) return false;
  } else if (!single_parameter_changes(federation, *solver, gradients, progress, sweep, result)) {
    return false;
  }
  sweep.detach(*solver);
  const std::vector<double> numbers = sweep.all_numbers();
  for (int id = 0; id < clients; ++id) {
    const double* row = numbers.data() + static_cast<std::size_t>(id) * kSolveColumns;
    result.iterations.push_back(static_cast<std::int64_t>(row[kIterations]));
    result.relative_residual.push_back(row[kResidual]);
  }
  return true;
}

// One CG solve per client (influence.block_size = 1). Returns false when a stop signal ended it.
bool single_parameter_changes(Federation& federation, IhvpSolver& solver,
                              const std::vector<double>& gradients, bool progress,
                              InfluenceSweep& sweep, ClientInfluence& result) {
  auto& problem = federation.problem();
  const std::size_t p = federation.parameters();
  const int clients = static_cast<int>(problem.client_rows.size());
  const std::int64_t n = federation.train_rows();
  // Each client's parameter change needs a solve with the federated Hessian: every rank takes part
  // (the product is a collective), the owner broadcasts its gradient and keeps the vector.
  ProgressLine bar("parameter-change vectors", clients, progress);
  std::vector<double> rhs(p), delta;
  std::vector<double> numbers = sweep.all_numbers();  // which clients are solved
  for (int id = 0; id < clients; ++id) {
    if (numbers[static_cast<std::size_t>(id) * kSolveColumns + kSolved] != 0.0) continue;
    const int owner = problem.layout->owner(id);
    const auto local = static_cast<std::size_t>(id - result.first_local_client);
    if (owner == world_rank())
      std::copy_n(gradients.begin() + static_cast<std::ptrdiff_t>(local * p), p, rhs.begin());
    MPI_Bcast(rhs.data(), static_cast<int>(p), MPI_DOUBLE, owner, MPI_COMM_WORLD);
    SolveReport solve;
    if (!interruptible_solve(
            solver, sweep, PartialUnitKind::vector, id,
            [&] { return removal_parameter_change(solver, rhs, n, delta); }, solve))
      return false;
    if (owner == world_rank()) {
      std::copy(delta.begin(), delta.end(),
                result.local_vectors.begin() + static_cast<std::ptrdiff_t>(local * p));
      double* row = sweep.numbers(local);
      row[kSolved] = 1.0;
      row[kIterations] = solve.iterations;
      row[kResidual] = solve.relative_residual;
    }
    bar.done(id + 1);
    if (sweep.finished(1)) return false;
  }
  return true;
}

// The clients' parameter changes by block CG, influence.block_size clients per block (0: all),
// each block started from the projection onto s_test. A block is one unit of the sweep per
// client in it. Returns false when a stop signal ended it.
bool block_parameter_changes(Federation& federation, const InfluenceConfig& config,
                             const std::vector<double>& test_gradient,
                             const std::vector<double>& s_test,
                             const std::vector<double>& gradients, HessianOperator& hessian,
                             bool progress, InfluenceSweep& sweep, ClientInfluence& result) {
  auto& problem = federation.problem();
  const std::size_t p = federation.parameters();
  const int clients = static_cast<int>(problem.client_rows.size());
  const double scale = 1.0 / static_cast<double>(federation.train_rows());
  const std::vector<double> numbers = sweep.all_numbers();
  std::vector<int> pending;
  for (int id = 0; id < clients; ++id)
    if (numbers[static_cast<std::size_t>(id) * kSolveColumns + kSolved] == 0.0)
      pending.push_back(id);
  const int total = static_cast<int>(pending.size());
  const int width = config.block_size > 0 ? config.block_size : std::max(1, total);
  BlockIhvpSolver solver(config.ihvp, hessian);
  solver.add_solution(s_test.data(), test_gradient.data());
  // A block solve is interruptible after every block iteration (docs/operations.md); a restart
  // forms the same blocks from the unsolved clients, so the interrupted one is its first.
  if (sweep.partial()) solver.set_stop_poll(stop_inside_unit_anywhere);
  ProgressLine bar("parameter-change vectors (block CG)", total, progress);
  std::vector<double> B, X;
  for (int first = 0; first < total; first += width) {
    const int k = std::min(width, total - first);
    B.resize(static_cast<std::size_t>(k) * p);
    X.resize(B.size());
    for (int j = 0; j < k; ++j) {  // each owner broadcasts its client's gradient
      const int id = pending[static_cast<std::size_t>(first + j)];
      const int owner = problem.layout->owner(id);
      double* column = B.data() + static_cast<std::size_t>(j) * p;
      if (owner == world_rank())
        std::copy_n(
            gradients.begin() + static_cast<std::ptrdiff_t>((id - result.first_local_client) * p),
            p, column);
      MPI_Bcast(column, static_cast<int>(p), MPI_DOUBLE, owner, MPI_COMM_WORLD);
    }
    const int first_id = pending[static_cast<std::size_t>(first)];
    const std::vector<double> key = partial_key(PartialUnitKind::block, first_id);
    const std::string name = partial_name(PartialUnitKind::block, first_id);
    if (const std::vector<double>* state =
            sweep.partial() ? sweep.partial()->resume(key, nullptr) : nullptr) {
      log::info("resuming {} after {} block iterations (from the checkpoint)", name,
                BlockIhvpSolver::interrupted_iterations(*state));
      solver.resume_next(*state);
    }
    BlockCgOutcome outcome = solver.solve(B.data(), X.data(), k);
    if (outcome.interrupted) {
      sweep.partial()->interrupted(key, {}, std::move(outcome.state), name,
                                   fmt::format("{} block iterations", outcome.block_iterations));
      sweep.interrupted();
      return false;
    }
    for (int j = 0; j < k; ++j) {
      const int id = pending[static_cast<std::size_t>(first + j)];
      if (problem.layout->owner(id) != world_rank()) continue;
      const auto local = static_cast<std::size_t>(id - result.first_local_client);
      const double* x = X.data() + static_cast<std::size_t>(j) * p;
      std::transform(x, x + p,
                     result.local_vectors.begin() + static_cast<std::ptrdiff_t>(local * p),
                     [scale](double value) { return value * scale; });
      double* row = sweep.numbers(local);
      row[kSolved] = 1.0;
      row[kIterations] = outcome.columns[static_cast<std::size_t>(j)].iterations;
      row[kResidual] = outcome.columns[static_cast<std::size_t>(j)].relative_residual;
    }
    bar.done(first + k);
    if (sweep.finished(k)) return false;
  }
  return true;
}

// Every rank solves its clients' local systems in parallel, one client each per step; a step is a
// unit boundary. Returns false when a stop signal ended it.
bool client_scope(Federation& federation, const std::vector<double>& theta,
                  const InfluenceConfig& config, const std::vector<double>& test_gradient,
                  const std::vector<double>& gradients, bool progress, InfluenceSweep& sweep,
                  ClientInfluence& result) {
  auto& problem = federation.problem();
  const std::size_t p = federation.parameters();
  const std::int64_t n = federation.train_rows();
  const auto local = problem.clients.size();
  std::vector<std::size_t> pending;
  for (std::size_t k = 0; k < local; ++k)
    if (!sweep.solved(k)) pending.push_back(k);
  int steps = static_cast<int>(pending.size());
  MPI_Allreduce(MPI_IN_PLACE, &steps, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  std::vector<double> delta;
  ProgressLine bar("local solves on rank 0", static_cast<int>(pending.size()), progress);
  // The solves are each rank's own: their warnings are gathered to rank 0 (RankWarnings).
  RankWarnings warnings;
  for (int step = 0; step < steps; ++step) {
    int solved = 0;
    if (static_cast<std::size_t>(step) < pending.size()) {
      const std::size_t k = pending[static_cast<std::size_t>(step)];
      const int id = result.first_local_client + static_cast<int>(k);
      // Seed 000 Table 1: the client inverts only its own Hessian; no other party takes part.
      // Its solve polls this rank's own stop signal (the ranks' solves are not in step); an
      // interrupted one is saved and continued by the restart, the others of the step finish.
      bool interrupted = false;
      const SolveReport report = warnings.keep(fmt::format("client {}", id), id, [&] {
        auto hessian = make_client_hessian(federation, k, theta);
        hessian->set_damping(result.damping);
        auto solver = make_ihvp_solver(config.ihvp, *hessian);
        if (sweep.partial()) solver->set_stop_poll(stop_signal_inside_unit);
        if (const std::vector<double>* state = sweep.local_resume(id)) solver->resume_next(*state);
        const std::vector<double> g(gradients.begin() + static_cast<std::ptrdiff_t>(k * p),
                                    gradients.begin() + static_cast<std::ptrdiff_t>((k + 1) * p));
        SolveReport one = removal_parameter_change(*solver, g, n, delta);
        if (one.interrupted) {
          std::vector<double> state = solver->interrupted_state();
          const long progress = solver->interrupted_progress(state);
          sweep.local_interrupted(id, progress, std::move(state));
          interrupted = true;
        }
        return one;
      });
      if (!interrupted) {
        double* row = sweep.numbers(k);
        row[kSolved] = 1.0;
        row[kEstimate] = loss_change(test_gradient, delta);
        row[kIterations] = report.iterations;
        row[kResidual] = report.relative_residual;
        std::copy(delta.begin(), delta.end(),
                  result.local_vectors.begin() + static_cast<std::ptrdiff_t>(k * p));
        solved = 1;
        bar.done(step + 1);
      }
    }
    // An interrupted solve is not counted; the stop that interrupted it writes the checkpoint
    // with its state.
    MPI_Allreduce(MPI_IN_PLACE, &solved, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    sweep.log_local_interruptions();
    if (sweep.finished(solved)) {
      warnings.gather();
      return false;
    }
  }
  warnings.gather();  // after the loop: in client order, whatever the rank count
  const auto numbers = sweep.all_numbers();
  for (std::size_t id = 0; id < numbers.size() / kSolveColumns; ++id) {
    const double* row = numbers.data() + id * kSolveColumns;
    result.estimate.push_back(row[kEstimate]);
    result.iterations.push_back(static_cast<std::int64_t>(row[kIterations]));
    result.relative_residual.push_back(row[kResidual]);
  }
  return true;
}

// Whether the retrain of influence.retrain_mode runs to federation.tolerance (the Newton retrain,
// or a full schedule that ends with the polish); the others stop by their round count.
bool retrain_has_tolerance(const InfluenceConfig& config, const FederationConfig& training) {
  return config.retrain_mode == InfluenceConfig::Retrain::newton ||
         (config.retrain_mode == InfluenceConfig::Retrain::full && training.newton_polish);
}

}  // namespace

// The model the federation's current clients retrain to from theta (influence.retrain_mode).
std::vector<double> retrained_model(Federation& federation, const std::vector<double>& theta,
                                    const InfluenceConfig& config, const FederationConfig& training,
                                    InterruptibleNewton* stop, InterruptibleRounds* rounds) {
  FederationConfig quiet = training;
  quiet.polish_verbose = false;
  quiet.evaluate_rounds = false;
  const auto train = [&](const TrainingResume* start) {
    return rounds ? rounds->train(federation, quiet, start).theta
                  : federation.train(quiet, {}, {}, {}, start).theta;
  };
  switch (config.retrain_mode) {
    case InfluenceConfig::Retrain::full:
      return train(nullptr);
    case InfluenceConfig::Retrain::warm: {
      // The same schedule again, from theta: its rounds draw the same cohorts and shuffles.
      quiet.newton_polish = false;
      TrainingResume from_theta;
      from_theta.theta = theta;
      return train(&from_theta);
    }
    case InfluenceConfig::Retrain::newton:
      break;
  }
  // A convex objective without the client is strictly convex (l2 > 0): Newton from theta^ finds
  // its unique minimizer, what retraining from scratch converges to. For a network it is a damped
  // local Newton: the stationary point near theta.
  // newton_polish's settings; its unnamed warning is replaced by one naming the client (the
  // caller's, from the final gradient norm).
  std::vector<double> retrained = theta;
  FederatedObjective objective(federation);
  NewtonSettings settings;
  settings.tolerance = training.tolerance;
  settings.max_steps = training.polish_max_steps;
  if (stop) stop->arm(settings, retrained);
  const NewtonReport report = minimize_newton(objective, retrained, settings);
  if (stop) stop->interrupted(report, retrained);
  return retrained;
}

namespace {

// The retrains that did not converge or stopped at saddle points, named; the statistics without
// them.
void summarize_trusted_retrains(const InfluenceConfig& config, const FederationConfig& training,
                                ClientInfluence& result) {
  const std::size_t clients = result.actual.size();
  const bool has_tolerance = retrain_has_tolerance(config, training);
  result.retrain_converged.assign(clients, 1);
  std::vector<char> keep(clients, 1);
  std::vector<int> unconverged, saddles;
  for (std::size_t id = 0; id < clients; ++id) {
    if (has_tolerance && !(result.retrain_gradient_norm[id] <= training.tolerance)) {
      result.retrain_converged[id] = 0;
      unconverged.push_back(static_cast<int>(id));
    }
    if (result.retrain_saddle[id]) saddles.push_back(static_cast<int>(id));
    keep[id] = result.retrain_converged[id] && !result.retrain_saddle[id];
  }
  result.trusted = statistics_over(result.estimate, result.actual, keep);
  if (unconverged.empty() && saddles.empty()) return;
  if (!unconverged.empty())
    log::warn("influence: {} of {} retrains did not converge (without clients {})",
              unconverged.size(), clients, id_list(unconverged));
  if (!saddles.empty())
    log::warn("influence: {} of {} retrains stopped at saddle points (without clients {})",
              saddles.size(), clients, id_list(saddles));
  log::info(
      "estimate vs the {} trusted retrains (converged minima): Spearman rho {:.4f}  MAE {:.3e} "
      "(/influence/spearman_trusted, /influence/mae_trusted)",
      result.trusted.count, result.trusted.spearman, result.trusted.mae);
}

// Returns false when a stop signal ended it.
bool retrain_without_each_client(Federation& federation, const std::vector<double>& theta,
                                 const InfluenceConfig& config, const FederationConfig& training,
                                 bool progress, InfluenceSweep& sweep, ClientInfluence& result) {
  const int clients = static_cast<int>(federation.problem().client_rows.size());
  // A network's trained model is no minimizer: retraining moves it even without a removal. The
  // removals are then measured against the same retraining with every client (the control, made
  // again on a restart), so that only the removal's effect remains.
  double base_test_loss = result.base_test_loss;
  if (!federation.problem().model->linear() ||
      config.retrain_mode == InfluenceConfig::Retrain::warm)
    base_test_loss =
        federation.evaluate_test(retrained_model(federation, theta, config, training)).first;
  ProgressLine bar("retrained without client", clients, progress);
  const bool has_tolerance = retrain_has_tolerance(config, training);
  std::vector<double> gradient;
  for (int id = 0; id < clients; ++id) {
    if (sweep.retrained(id)) continue;
    const auto at = static_cast<std::size_t>(id);
    federation.exclude_clients({id});
    // A Newton retrain is interruptible between its steps, one by rounds between its rounds
    // (docs/operations.md).
    InterruptibleNewton stop(sweep.partial(), partial_key(PartialUnitKind::retrain, id),
                             partial_name(PartialUnitKind::retrain, id));
    InterruptibleRounds rounds(sweep.partial(), partial_key(PartialUnitKind::retrain_rounds, id),
                               partial_name(PartialUnitKind::retrain_rounds, id));
    const std::vector<double> retrained =
        retrained_model(federation, theta, config, training, &stop, &rounds);
    if (stop.stopped() || rounds.stopped()) {
      federation.exclude_clients({});
      sweep.interrupted();
      return false;
    }
    federation.gradient(retrained, gradient);
    result.retrain_gradient_norm[at] = norm2(gradient);
    result.actual[at] = federation.evaluate_test(retrained).first - base_test_loss;
    if (has_tolerance && !(result.retrain_gradient_norm[at] <= training.tolerance))
      log::warn(
          "influence: the retrain without client {} stopped at |grad h| = {:.3e} > "
          "federation.tolerance = {:.1e} (raise federation.polish_max_steps)",
          id, result.retrain_gradient_norm[at], training.tolerance);
    if (config.spectrum) {
      // The curvature where the retrain stopped (undamped): a stationary point with negative
      // curvature is a saddle point, not the minimizer the retrain stands for. The scale of the
      // test is the trained model's lambda_max (the threshold is of the order of rounding: a
      // nearby Hessian's scale serves, and the smallest eigenvalue alone is half the work).
      // SLEPc runs on every rank alike: a failure is the same everywhere.
      auto hessian = make_federated_hessian(federation, retrained);
      try {
        const double smallest = smallest_eigenvalue(*hessian, config.ihvp.eigen_tolerance);
        const double scale = result.spectrum ? result.spectrum->eigenvalue_max : 0.0;
        result.retrain_min_eigenvalue[at] = smallest;
        result.retrain_saddle[at] = is_saddle(smallest, scale) ? 1 : 0;
        if (result.retrain_saddle[at])
          log::warn(
              "influence: the retrain without client {} stopped at a saddle point (smallest "
              "Hessian eigenvalue {:.3e}), not a minimum",
              id, smallest);
      } catch (const RuntimeError& error) {
        log::warn("influence: no curvature for the retrain without client {}: {}", id,
                  error.what());
      }
    }
    federation.exclude_clients({});
    sweep.mark_retrained(id);
    bar.done(id + 1);
    if (sweep.finished(1)) return false;
  }
  result.spearman = spearman(result.estimate, result.actual);
  result.mae = mean_absolute_error(result.estimate, result.actual);
  log::info("estimate vs exact retraining: Spearman rho {:.4f}  MAE {:.3e}", result.spearman,
            result.mae);
  summarize_trusted_retrains(config, training, result);
  return true;
}

// Each solve whose residual is above its target, flagged and named: federated scope, s_test then
// each client's vector; client scope, each client's local solve.
void flag_residuals(const InfluenceConfig& config, ClientInfluence& result) {
  const std::size_t first_client = config.scope == HessianScope::federated ? 1 : 0;
  std::vector<std::string> names;
  result.residual_above_tolerance.assign(result.relative_residual.size(), 0);
  double worst = 0.0;
  for (std::size_t s = 0; s < result.relative_residual.size(); ++s) {
    if (!residual_above_tolerance(config.ihvp, result.relative_residual[s])) continue;
    result.residual_above_tolerance[s] = 1;
    worst = std::max(worst, result.relative_residual[s]);
    names.push_back(s < first_client ? "s_test" : fmt::format("client {}", s - first_client));
  }
  if (names.empty()) return;
  constexpr std::size_t kMost = 20;
  const std::size_t shown = std::min(names.size(), kMost);
  std::string list;
  for (std::size_t i = 0; i < shown; ++i) list += (i == 0 ? "" : ", ") + names[i];
  if (names.size() > shown) list += fmt::format(" and {} more", names.size() - shown);
  log::warn(
      "influence: {} of {} solves ended with a relative residual above influence.rtol = {:.1e} "
      "(largest {:.3e}): {} (/ihvp/residual_above_tolerance)",
      names.size(), result.relative_residual.size(), config.ihvp.rtol, worst, list);
}

}  // namespace

void check_hessian_spectrum(HessianOperator& hessian, const InfluenceConfig& config,
                            std::optional<HessianSpectrum>& result, double& damping) {
  // SLEPc sees the operator the solves use, with the deck's damping added; the extra damping a
  // non-positive-definite Hessian needs is decided on that, and the spectrum is kept undamped
  // (what /hessian/eigenvalue_* promise: the curvature of the objective itself).
  const double applied = damping;
  result = config.ihvp.lanczos_spectrum
               ? lanczos_spectrum(hessian, config.ihvp.eigen_tolerance, 300)
               : hessian_spectrum(hessian, config.ihvp.eigen_tolerance);
  // With auto_damping_floor = "damping", the operator SLEPc saw already holds the deck's damping:
  // lifting its smallest eigenvalue to that damping adds -lambda_min(H) in all.
  const double extra = damping_for(*result, config.auto_damping_keeps_damping ? applied : 0.0);
  auto& spectrum = *result;
  spectrum.eigenvalue_min -= applied;
  spectrum.eigenvalue_max -= applied;
  spectrum.condition_number = spectrum.eigenvalue_min > 0.0
                                  ? spectrum.eigenvalue_max / spectrum.eigenvalue_min
                                  : std::numeric_limits<double>::infinity();
  const std::string with_damping =
      applied != 0.0
          ? fmt::format(", undamped (influence.damping = {:g} added in the solves)", applied)
          : std::string();
  log::info(
      "Hessian spectrum: lambda_min {:.6e}  lambda_max {:.6e}  condition number {:.3e}{} ({} {} "
      "iterations)",
      spectrum.eigenvalue_min, spectrum.eigenvalue_max, spectrum.condition_number, with_damping,
      spectrum.iterations, config.ihvp.lanczos_spectrum ? "Lanczos" : "Krylov-Schur");
  if (extra == 0.0) return;
  if (config.auto_damping) {
    damping += extra;
    hessian.set_damping(damping);
    log::warn(
        "the Hessian is not positive definite (lambda_min = {:.3e}, lambda_max = {:.3e}{}): "
        "adding damping {:.3e} (rule: {} - lambda_min of the damped operator; docs/math.md)",
        spectrum.eigenvalue_min, spectrum.eigenvalue_max, with_damping, extra,
        config.auto_damping_keeps_damping && applied > 0.0
            ? "max(influence.damping, 1e-8 lambda_max)"
            : "1e-8 lambda_max");
  } else {
    log::warn(
        "the Hessian is not positive definite (lambda_min = {:.3e}, lambda_max = {:.3e}{}); IHVPs "
        "may fail or be meaningless: set influence.damping >= {:.3e} or influence.auto_damping = "
        "true",
        spectrum.eigenvalue_min, spectrum.eigenvalue_max, with_damping, applied + extra);
  }
}

ClientInfluence client_removal_influence(Federation& federation, const std::vector<double>& theta,
                                         const InfluenceConfig& config,
                                         const FederationConfig& training, bool progress,
                                         SweepCheckpoint* checkpoint) {
  auto& problem = federation.problem();
  const std::size_t p = federation.parameters();
  ClientInfluence result;
  result.damping = config.damping;
  result.first_local_client = problem.layout->first_client(world_rank());
  result.local_clients = static_cast<int>(problem.clients.size());
  result.local_vectors.assign(
      config.vectors || config.scope == HessianScope::client ? problem.clients.size() * p : 0, 0.0);

  // The retrains push their stage on top of this one: PETSc charges each its own time.
  LogStage ihvp_stage(Stage::ihvp);
  auto hessian = make_federated_hessian(federation, theta);
  hessian->set_damping(result.damping);
  if (config.spectrum) check_hessian_spectrum(*hessian, config, result.spectrum, result.damping);

  result.stationarity = model_stationarity(federation, theta, training.tolerance, "influence");
  std::vector<double> test_gradient;
  federation.test_gradient(theta, test_gradient);
  result.base_test_loss = federation.evaluate_test(theta).first;
  const auto gradients = local_removal_gradients(federation, theta, config.removal_gradient);

  InfluenceSweep sweep(checkpoint, problem, p, config.vectors, result);
  const bool done = config.scope == HessianScope::federated
                        ? federated_scope(federation, config, test_gradient, gradients, *hessian,
                                          progress, sweep, result)
                        : client_scope(federation, theta, config, test_gradient, gradients,
                                       progress, sweep, result);
  if (done && config.retrain)
    result.stopped = !in_stage(Stage::retraining, [&] {
      return retrain_without_each_client(federation, theta, config, training, progress, sweep,
                                         result);
    });
  else
    result.stopped = !done;
  if (!config.vectors) result.local_vectors.clear();
  if (!config.retrain) {
    result.actual.clear();
    result.retrain_gradient_norm.clear();
    result.retrain_min_eigenvalue.clear();
    result.retrain_saddle.clear();
  }
  if (!result.stopped) flag_residuals(config, result);
  return result;
}

}  // namespace fluence
