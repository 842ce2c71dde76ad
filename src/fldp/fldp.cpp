// FLDP-FL estimates and their ground truths (seed 000 §4-5; docs/math.md §5).
#include "fluence/fldp/fldp.hpp"

#include "fluence/fl/newton.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/rank_warnings.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/core/vector_ops.hpp"
#include "fluence/fl/interruptible_rounds.hpp"
#include "fluence/fldp/purposes.hpp"
#include "fluence/influence/estimators.hpp"
#include "fluence/influence/spectrum.hpp"
#include "fluence/influence/trust.hpp"

namespace fluence {

std::vector<ChangedAttribute> changed_attributes(const FederatedProblem& problem,
                                                 const FldpChange& change) {
  std::vector<ChangedAttribute> changed;
  const LdpPlan& plan = problem.ldp;
  for (std::size_t a = 0; a < change.epsilon.size(); ++a) {
    if (std::isnan(change.epsilon[a])) continue;
    const int column = plan.categorical_column[a];
    changed.push_back({column, plan.domain[a],
                       column < 0 ? 0 : problem.encoding.categorical_offset(column),
                       change.epsilon[a]});
  }
  return changed;
}

Client rerandomized_client(const FederatedProblem& problem, const Client& client,
                           const std::vector<ChangedAttribute>& changed, std::uint64_t draw) {
  std::vector<std::int32_t> categorical = client.categorical(), labels = client.labels();
  const std::size_t n = client.size();
  const std::size_t nc = static_cast<std::size_t>(problem.data.train.categorical_count());
  for (const auto& attribute : changed)
    for (std::size_t i = 0; i < n; ++i) {
      // From the ORIGINAL value (seed 000 §4.3): the client re-randomizes its true data.
      Stream stream(problem.seed, purpose::fldp_rerandomization,
                    static_cast<std::uint64_t>(client.rows()[i]),
                    static_cast<std::uint64_t>(attribute.column + 1), draw);
      const bool label = attribute.column < 0;
      const std::int32_t original = label
                                        ? client.original_labels()[i]
                                        : client.original_categorical()[i * nc + attribute.column];
      (label ? labels[i] : categorical[i * nc + attribute.column]) =
          randomize_value(original, attribute.domain, attribute.epsilon, stream);
    }
  const Encoding& encoding = problem.encoding_of(client.id());
  std::vector<double> features(n * encoding.width());
  encoding.encode(problem.data.train, client.rows(), categorical.data(), features.data());
  Client out(client.id(), client.rows(), client.original_categorical(), client.original_labels(),
             std::move(categorical), std::move(labels), std::move(features));
  attach_codes(problem, out);
  return out;
}

namespace {

// CG iterations per preconditioned Newton refinement step: about the cost of assembling and
// factoring the dense Hessian at p = 7,890 on 2 ranks (43 s, docs/performance.md, FLDP).
constexpr int kRefineIterations = 200;

FederationConfig quiet(FederationConfig config) {
  config.polish_verbose = false;
  return config;
}

double distance(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t k = 0; k < a.size(); ++k) s += (a[k] - b[k]) * (a[k] - b[k]);
  return std::sqrt(s);
}

// A finished case in a checkpoint (docs/operations.md): its vectors under `fldp/case_<c>/`, its
// scalars as the array `fldp/case_<c>/numbers` in this order.
const VectorFields<FldpCaseResult> kCaseVectors = {
    {"theta_estimate", &FldpCaseResult::theta_estimate},
    {"theta_expected", &FldpCaseResult::theta_expected},
    {"theta_newton", &FldpCaseResult::theta_newton},
    {"newton_ed_expected", &FldpCaseResult::newton_ed_expected},
    {"newton_time", &FldpCaseResult::newton_time},
    {"test_loss_retrain", &FldpCaseResult::test_loss_retrain},
    {"test_accuracy_retrain", &FldpCaseResult::test_accuracy_retrain},
    {"ald", &FldpCaseResult::ald},
    {"aad", &FldpCaseResult::aad},
    {"ed", &FldpCaseResult::ed},
    {"retrain_gradient_norm", &FldpCaseResult::retrain_gradient_norm},
    {"retrain_min_eigenvalue", &FldpCaseResult::retrain_min_eigenvalue}};
const ScalarFields<FldpCaseResult> kCaseNumbers = {
    {"test_loss_estimate", &FldpCaseResult::test_loss_estimate},
    {"test_accuracy_estimate", &FldpCaseResult::test_accuracy_estimate},
    {"test_loss_expected", &FldpCaseResult::test_loss_expected},
    {"test_accuracy_expected", &FldpCaseResult::test_accuracy_expected},
    {"ald_expected", &FldpCaseResult::ald_expected},
    {"aad_expected", &FldpCaseResult::aad_expected},
    {"ed_expected", &FldpCaseResult::ed_expected},
    {"time_estimate", &FldpCaseResult::time_estimate},
    {"time_retrain", &FldpCaseResult::time_retrain},
    {"mc_standard_error", &FldpCaseResult::mc_standard_error},
    {"ihvp_iterations", &FldpCaseResult::ihvp_iterations},
    {"ihvp_residual", &FldpCaseResult::ihvp_residual},
    {"expected_gradient_norm", &FldpCaseResult::expected_gradient_norm},
    {"expected_min_eigenvalue", &FldpCaseResult::expected_min_eigenvalue}};

std::string case_prefix(std::size_t c) {
  return fmt::format("fldp/case_{:06d}/", c);
}

// The sweep's resumable state: which cases are done, each done case, the solver's history.
void save_cases(const std::vector<FldpCaseResult>& cases, const std::vector<char>& done,
                const IhvpSolver* solver, StateArrays& state) {
  state["fldp/case_done"] = flags_array(done);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    if (!done[c]) continue;
    kCaseVectors.write(cases[c], case_prefix(c), state);
    state[case_prefix(c) + "numbers"] = kCaseNumbers.pack(cases[c]);
  }
  if (solver) state["fldp/solver"] = solver->history();
}

// The inverse of save_cases: the done flags (all false on a fresh start), the done cases into
// `cases`, the solver's history (CG warm starts) into `solver`.
std::vector<char> restore_cases(const StateArrays& state, std::vector<FldpCaseResult>& cases,
                                IhvpSolver* solver) {
  std::vector<char> done = state_flags(state, "fldp/case_done", cases.size());
  for (std::size_t c = 0; c < cases.size(); ++c) {
    if (!done[c]) continue;
    kCaseVectors.read(state, case_prefix(c), cases[c]);
    kCaseNumbers.read(state, case_prefix(c) + "numbers", cases[c]);
  }
  if (solver && state.count("fldp/solver")) solver->restore_history(state.at("fldp/solver"));
  return done;
}

// One case on this rank: the changes' expected losses (their owners only) and removals.
struct CaseState {
  std::vector<std::shared_ptr<ExpectedChange>> expected;  // per change; null off-owner or removal
  std::vector<int> removed;                               // client ids
  bool monte_carlo = false;                               // some change is sampled (all ranks)
};

class FldpRunner {
 public:
  FldpRunner(Federation& federation, const std::vector<double>& theta,
             const InfluenceConfig& influence, const FldpConfig& config,
             const FederationConfig& training, bool progress, SweepCheckpoint* checkpoint)
      : federation_(federation),
        problem_(federation.problem()),
        theta_(theta),
        influence_(influence),
        config_(config),
        training_(training),
        progress_(progress),
        checkpoint_(checkpoint),
        p_(federation.parameters()) {}

  FldpResult run() {
    FldpResult result;
    std::tie(result.base_test_loss, result.base_test_accuracy) = federation_.evaluate_test(theta_);
    result.stationarity = model_stationarity(federation_, theta_, training_.tolerance, "fldp");
    Stopwatch setup;
    LogStage ihvp_stage(Stage::ihvp);  // the retrains of each case push theirs on top
    result.damping = influence_.damping;
    hessian_ = make_federated_hessian(federation_, theta_);
    hessian_->set_damping(result.damping);
    if (influence_.spectrum)
      check_hessian_spectrum(*hessian_, influence_, result.spectrum, result.damping);
    damping_ = result.damping;
    if (influence_.scope == HessianScope::federated) {
      if (config_.hessian_block == HessianBlock::first)
        hessian_ = make_first_block_hessian(std::move(hessian_), problem_.model->classes());
      solver_ = make_ihvp_solver(influence_.ihvp, *hessian_);
    }
    result.time_setup = setup.seconds();
    // Resuming: the finished cases and the solver's history (CG warm starts) are restored.
    const std::size_t cases = config_.cases.size();
    const StateArrays none;
    result.cases.resize(cases);
    const StateArrays& restored = checkpoint_ ? checkpoint_->restored() : none;
    std::vector<char> done = restore_cases(restored, result.cases, solver_.get());
    restore_partial(restored);
    long finished = std::count(done.begin(), done.end(), 1);
    ProgressLine bar("cases", static_cast<long>(cases), progress_);
    for (std::size_t c = 0; c < cases; ++c) {
      if (done[c]) continue;
      const auto save = [&](StateArrays& state) {
        save_cases(result.cases, done, solver_.get(), state);
        save_partial(state);
      };
      if (!run_case(config_.cases[c], c, result.cases[c])) {
        // A stop inside the case: the checkpoint holds its partial state.
        checkpoint_->units_done(finished, save);
        result.stopped = true;
        return result;
      }
      report(config_.cases[c], result.cases[c]);
      bar.done(++finished);
      done[c] = 1;
      if (checkpoint_ && checkpoint_->units_done(finished, save)) {
        result.stopped = true;
        return result;
      }
    }
    flag_residuals(result);
    flag_retrains(result);
    return result;
  }

 private:
  int owner(int client) const { return problem_.layout->owner(client); }

  // A case a stop interrupted (docs/operations.md "Stops inside a unit"): the partial unit's key
  // is [case, stage, index in the stage], its state the interrupted solve's or Newton run's, and
  // the case's results so far are saved as a finished case's under `fldp/partial_case/`.
  enum CaseStage { kEstimate = 1, kExpectedRetrain = 2, kRefine = 3, kDraw = 4 };
  PartialUnit* partial() { return checkpoint_ ? &partial_ : nullptr; }
  static std::vector<double> partial_key(std::size_t index, CaseStage stage, int at) {
    return {static_cast<double>(index), static_cast<double>(stage), static_cast<double>(at)};
  }
  static constexpr const char* kPartialCase = "fldp/partial_case/";
  void restore_partial(const StateArrays& state) {
    partial_.restore(state);
    if (partial_.waiting().empty()) return;
    kCaseVectors.read(state, kPartialCase, partial_case_);
    kCaseNumbers.read(state, std::string(kPartialCase) + "numbers", partial_case_);
  }
  void save_partial(StateArrays& state) const {
    partial_.save(state);
    if (partial_.waiting().empty()) return;
    kCaseVectors.write(partial_case_, kPartialCase, state);
    state[std::string(kPartialCase) + "numbers"] = kCaseNumbers.pack(partial_case_);
  }
  // Records the case's results so far with the interrupted unit (already in partial_). False.
  bool stop_case(const FldpCaseResult& result) {
    partial_case_ = result;
    return false;
  }
  // Where case `index` resumes: its stage and index there (0, 0: from its start), `result` set to
  // its results so far.
  std::pair<int, int> resume_point(std::size_t index, FldpCaseResult& result) const {
    const std::vector<double>& key = partial_.waiting();
    if (key.empty() || key[0] != static_cast<double>(index)) return {0, 0};
    result = partial_case_;
    return {static_cast<int>(key[1]), static_cast<int>(key[2])};
  }

  // The cases whose solves ended above their residual target, flagged and named.
  void flag_residuals(FldpResult& result) const {
    std::vector<int> flagged;
    double worst = 0.0;
    for (std::size_t c = 0; c < result.cases.size(); ++c) {
      auto& one = result.cases[c];
      one.residual_above_tolerance = residual_above_tolerance(influence_.ihvp, one.ihvp_residual);
      if (!one.residual_above_tolerance) continue;
      flagged.push_back(static_cast<int>(c));
      worst = std::max(worst, one.ihvp_residual);
    }
    if (!flagged.empty())
      log::warn(
          "fldp: the solves of {} of {} cases ended with a relative residual above "
          "influence.rtol = {:.1e} (largest {:.3e}): cases {} "
          "(/fldp/ihvp_residual_above_tolerance)",
          flagged.size(), result.cases.size(), influence_.ihvp.rtol, worst, id_list(flagged));
  }
  // "case 0 expected, case 3 draw 1": the first 20 names and "and N more".
  static std::string name_list(const std::vector<std::string>& names) {
    std::string list;
    for (std::size_t k = 0; k < names.size() && k < 20; ++k) list += (k > 0 ? ", " : "") + names[k];
    if (names.size() > 20) list += fmt::format(" and {} more", names.size() - 20);
    return list;
  }

  // The retrains that cannot stand for the changed model (docs/outputs.md): stopped above
  // federation.tolerance (a Newton retrain, or a full one with the polish; the others have no
  // target), or at a saddle point (negative curvature above rounding, on the trained model's
  // lambda_max scale), flagged and named. The expected retrain is Newton's in every mode.
  void flag_retrains(FldpResult& result) const {
    if (!config_.retrain) return;
    const bool draws_have_tolerance = !config_.retrain_full || training_.newton_polish;
    const double scale = result.spectrum ? result.spectrum->eigenvalue_max : 0.0;
    const auto reached = [&](double norm) { return norm <= training_.tolerance; };
    const auto converged = [&](double norm) { return !draws_have_tolerance || reached(norm); };
    std::vector<std::string> unconverged, saddles;
    long count = 0;
    for (std::size_t c = 0; c < result.cases.size(); ++c) {
      auto& one = result.cases[c];
      ++count;
      one.expected_converged = reached(one.expected_gradient_norm);
      one.expected_saddle = is_saddle(one.expected_min_eigenvalue, scale);
      if (!one.expected_converged) unconverged.push_back(fmt::format("case {} expected", c));
      if (one.expected_saddle) saddles.push_back(fmt::format("case {} expected", c));
      const std::size_t draws = one.retrain_gradient_norm.size();
      one.retrain_converged.assign(draws, 1);
      one.retrain_saddle.assign(draws, 0);
      for (std::size_t d = 0; d < draws; ++d) {
        ++count;
        one.retrain_converged[d] = converged(one.retrain_gradient_norm[d]) ? 1 : 0;
        one.retrain_saddle[d] = is_saddle(one.retrain_min_eigenvalue[d], scale) ? 1 : 0;
        if (!one.retrain_converged[d]) unconverged.push_back(fmt::format("case {} draw {}", c, d));
        if (one.retrain_saddle[d]) saddles.push_back(fmt::format("case {} draw {}", c, d));
      }
    }
    if (!unconverged.empty())
      log::warn(
          "fldp: {} of {} retrains stopped above federation.tolerance = {:.1e} ({}; "
          "/fldp/expected_retrain_converged, /fldp/retrain_converged): the estimates' errors "
          "against them include the retrains' own",
          unconverged.size(), count, training_.tolerance, name_list(unconverged));
    if (!saddles.empty())
      log::warn(
          "fldp: {} of {} retrains stopped at saddle points, not minima ({}; "
          "/fldp/expected_retrain_saddle, /fldp/retrain_saddle)",
          saddles.size(), count, name_list(saddles));
  }

  // Collective: how far the retrain at `point` is from a minimum of the objective as installed
  // (the changed one): ||grad h'|| and, with influence.spectrum, the smallest eigenvalue of its
  // Hessian there (undamped; SLEPc runs alike on every rank, so a failure is everywhere).
  void assess_retrain(const std::vector<double>& point, const std::string& what,
                      double& gradient_norm, double& min_eigenvalue) {
    FederatedObjective objective(federation_);
    std::vector<double> gradient(p_);
    objective.value_and_gradient(point, gradient);
    gradient_norm = norm2(gradient);
    if (!influence_.spectrum) return;
    auto hessian = make_federated_hessian(federation_, point);
    try {
      min_eigenvalue = smallest_eigenvalue(*hessian, influence_.ihvp.eigen_tolerance);
    } catch (const RuntimeError& error) {
      log::warn("fldp: no curvature for the {}: {}", what, error.what());
    }
  }

  std::size_t local_index(int client) const {
    return static_cast<std::size_t>(client - problem_.layout->first_client(world_rank()));
  }

  CaseState prepare(const FldpCase& c, std::size_t index) {
    CaseState state;
    state.expected.resize(c.changes.size());
    int sampled = 0;
    for (std::size_t k = 0; k < c.changes.size(); ++k) {
      const auto& change = c.changes[k];
      if (change.remove) {
        state.removed.push_back(change.client);
        continue;
      }
      if (owner(change.client) != world_rank()) continue;
      state.expected[k] = make_expected_loss(
          *problem_.model, problem_.clients[local_index(change.client)],
          changed_attributes(problem_, change), config_.expectation, problem_.seed, index);
      sampled |= !state.expected[k]->exact();
    }
    MPI_Allreduce(MPI_IN_PLACE, &sampled, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    state.monte_carlo = sampled != 0;
    return state;
  }

  // The client's gradient difference b with d theta = -(1/n) H^{-1} b:
  // seed 000 Eq. 14's sum [grad E l(z_eps') - grad l(z~)] for a change, -sum grad l~(z~) for a
  // removal (seed 000 Eq. 27). `batch` >= 0 uses one Monte-Carlo batch of the expectation.
  void change_gradient(const FldpChange& change, ExpectedChange* expected, int batch,
                       std::vector<double>& out) {
    out.resize(p_);
    if (!change.remove) {
      expected->change_gradient_sum(theta_.data(), batch, out.data());
      return;
    }
    const Client& client = problem_.clients[local_index(change.client)];
    std::vector<double> original;
    group_gradient_sum(*problem_.model, client.features(), client.labels().data(), client.size(),
                       theta_.data(), influence_.removal_gradient, original, work_);
    for (std::size_t j = 0; j < p_; ++j) out[j] = -original[j];
  }

  // I = -H^{-1} b for one change. Federated scope: every rank takes part in the solve (the
  // owner broadcasts b); client scope: the owner solves with its own Hessian and broadcasts I
  // (only the influence vector leaves the client, seed 000 Alg. 1).
  // With `stop` (the federated scope's solve, which every rank takes part in), a stop may
  // interrupt the solve as that unit: false, `partial_` then holds it. The client scope's solve
  // is the owner's alone and runs to its end.
  bool influence_vector(const FldpChange& change, ExpectedChange* expected, int batch,
                        std::vector<double>& influence, FldpCaseResult& result,
                        const std::vector<double>* stop = nullptr) {
    const int root = owner(change.client);
    std::vector<double> b(p_);
    influence.resize(p_);
    SolveReport report;
    if (root == world_rank()) change_gradient(change, expected, batch, b);
    if (influence_.scope == HessianScope::federated) {
      MPI_Bcast(b.data(), static_cast<int>(p_), MPI_DOUBLE, root, MPI_COMM_WORLD);
      if (!interruptible_solve(
              *solver_, stop ? partial() : nullptr, stop ? *stop : std::vector<double>{},
              fmt::format("the solve for client {}", change.client),
              [&] { return solver_->solve(b.data(), influence.data()); }, report))
        return false;
    } else {
      // The owner's own solve: its warnings reach rank 0 through the gather.
      RankWarnings warnings;
      if (root == world_rank())
        report = warnings.keep(fmt::format("client {}", change.client), change.client, [&] {
          std::unique_ptr<HessianOperator> local =
              make_client_hessian(federation_, local_index(change.client), theta_);
          local->set_damping(damping_);
          if (config_.hessian_block == HessianBlock::first)
            local = make_first_block_hessian(std::move(local), problem_.model->classes());
          return make_ihvp_solver(influence_.ihvp, *local)->solve(b.data(), influence.data());
        });
      warnings.gather();
    }
    for (auto& value : influence) value = -value;
    if (influence_.scope == HessianScope::client) {
      MPI_Bcast(influence.data(), static_cast<int>(p_), MPI_DOUBLE, root, MPI_COMM_WORLD);
      double numbers[2] = {static_cast<double>(report.iterations), report.relative_residual};
      MPI_Bcast(numbers, 2, MPI_DOUBLE, root, MPI_COMM_WORLD);
      report = {static_cast<int>(numbers[0]), numbers[1]};
    }
    result.ihvp_iterations += report.iterations;
    result.ihvp_residual = std::max(result.ihvp_residual, report.relative_residual);
    return true;
  }

  // theta^ + (1/n) sum_i I_i (seed 000 Eq. 19-20), the changes in client order.
  std::vector<double> estimate(const FldpCase& c, const CaseState& state, int batch,
                               FldpCaseResult& result) {
    std::vector<double> theta = theta_;
    estimate_from(c, state, batch, 0, theta, result, nullptr);
    return theta;
  }
  // The sum of the changes from `first` on into `theta` (the sum of the earlier ones). With
  // `index` (the case's), each solve is a unit a stop may interrupt: false, `theta` then holds
  // the sum before the interrupted change.
  bool estimate_from(const FldpCase& c, const CaseState& state, int batch, std::size_t first,
                     std::vector<double>& theta, FldpCaseResult& result, const std::size_t* index) {
    std::vector<double> influence;
    const double inverse_n = 1.0 / static_cast<double>(federation_.train_rows());
    for (std::size_t k = first; k < c.changes.size(); ++k) {
      std::vector<double> key;
      if (index) key = partial_key(*index, kEstimate, static_cast<int>(k));
      if (!influence_vector(c.changes[k], state.expected[k].get(), batch, influence, result,
                            index ? &key : nullptr))
        return false;
      for (std::size_t j = 0; j < p_; ++j) theta[j] += inverse_n * influence[j];
    }
    return true;
  }

  // The standard error of theta_I from the spread of the per-batch estimates (each batch is an
  // independent unbiased estimate; theta_I is their mean, by linearity).
  double monte_carlo_error(const FldpCase& c, const CaseState& state) {
    const int batches = config_.expectation.batches;
    std::vector<double> mean(p_, 0.0), square(p_, 0.0);
    FldpCaseResult scratch;
    for (int b = 0; b < batches; ++b) {
      const auto theta = estimate(c, state, b, scratch);
      for (std::size_t j = 0; j < p_; ++j) {
        mean[j] += theta[j] / batches;
        square[j] += theta[j] * theta[j] / batches;
      }
    }
    double variance = 0.0;  // of the mean: sum_j s_j^2 / B
    for (std::size_t j = 0; j < p_; ++j)
      variance += std::max(0.0, square[j] - mean[j] * mean[j]) * batches / (batches - 1) / batches;
    return std::sqrt(variance);
  }

  // The changed objective in the federation: expected losses for changes, exclusions for
  // removals.
  void install(const FldpCase& c, const CaseState& state) {
    for (std::size_t k = 0; k < c.changes.size(); ++k)
      if (state.expected[k])
        federation_.set_local_objective(local_index(c.changes[k].client), state.expected[k]);
    federation_.exclude_clients(state.removed);
  }
  void uninstall() {
    federation_.clear_local_objectives();
    federation_.exclude_clients({});
  }

  // Newton steps on the changed objective from theta_I by the one Newton's method: each a
  // federated gradient and a CG solve with the changed objective's exact Hessian at the current
  // point, with its backtracking (a large change can put theta_I where the full step overshoots);
  // near the optimum the full step is taken and the convergence to the expected retrain is
  // quadratic (forcing term |grad h'|, Dembo, Eisenstat and Steihaug 1982). CG is preconditioned
  // by the clean factor when there is one (a few products instead of a dense Hessian assembled
  // and factored at every step; far from theta^ a poor preconditioner, so each solve is capped at
  // kRefineIterations: CG's iterate is a descent direction and the line search does the rest),
  // else Jacobi's, with the influence damping.
  // `seconds_before`: what the refined estimate has cost before its first step (the first-order
  // estimate and installing the changed client's expected data), so that newton_time is the whole
  // refined estimator's time after each step (issue 26: one estimator, its error and its time).
  // With `stop`, a stop may end it between steps (false; `result` then holds the steps so far).
  bool refine(FldpCaseResult& result, double seconds_before, InterruptibleNewton& stop) {
    Stopwatch clock;
    std::vector<double> theta = result.theta_estimate;
    FederatedObjective objective(federation_);
    NewtonSettings settings;
    settings.tolerance = 0.0;  // exactly fldp.newton_steps steps
    settings.max_steps = config_.newton_steps;
    settings.forcing_power = 1.0;
    settings.forcing_floor = influence_.ihvp.rtol;
    if (const auto preconditioner = clean_preconditioner(); preconditioner && damping_ == 0.0) {
      settings.preconditioner = preconditioner;
      settings.max_cg_iterations = kRefineIterations;
    } else {
      settings.damping = influence_.damping;
    }
    settings.after_step = [&](int, const std::vector<double>& current) {
      result.newton_time.push_back(seconds_before + clock.seconds());
      result.newton_ed_expected.push_back(config_.retrain ? distance(current, result.theta_expected)
                                                          : std::nan(""));
    };
    stop.arm(settings, theta);
    if (stop.interrupted(minimize_newton(objective, theta, settings), theta)) return false;
    // A zero gradient ends the steps early: the remaining distances are the last one.
    while (result.newton_time.size() < static_cast<std::size_t>(config_.newton_steps))
      result.newton_time.push_back(seconds_before + clock.seconds());
    while (result.newton_ed_expected.size() < static_cast<std::size_t>(config_.newton_steps))
      result.newton_ed_expected.push_back(
          result.newton_ed_expected.empty()
              ? (config_.retrain ? distance(theta, result.theta_expected) : std::nan(""))
              : result.newton_ed_expected.back());
    result.theta_newton = theta;
    return true;
  }

  // The clean Hessian's Cholesky factor (explicit solver, federated scope; with
  // fldp.hessian_block = "first" the block approximation, still symmetric positive definite) as
  // the inverse of a nearby Hessian; empty otherwise (the retrains' CG is then Jacobi's).
  NewtonPreconditioner clean_preconditioner() {
    if (!solver_ || solver_->method() != IhvpMethod::explicit_cholesky) return {};
    return [this](const double* r, double* z) { solver_->apply_inverse(r, z); };
  }

  // The minimizer of the current objective by Newton from `start` (warm start: the changed
  // objective is strictly convex, so this is what retraining from scratch converges to).
  // With `stop`, a stop may end it between steps (stop->stopped(): the iterate is returned).
  std::vector<double> retrain_from(const std::vector<double>& start,
                                   InterruptibleNewton* stop = nullptr) {
    std::vector<double> theta = start;
    newton_polish(federation_, theta, training_.tolerance, training_.polish_max_steps, false,
                  clean_preconditioner(), stop);
    return theta;
  }

  // Retrains on re-randomized data of the changing clients (draws `first` .. retrain_seeds - 1;
  // the earlier draws' results are in `result`). Each Newton retrain is a unit a stop may
  // interrupt: false, `result` then holds the finished draws (time_retrain their total time).
  bool rerandomized_retrains(const FldpCase& c, std::size_t index, const CaseState& state,
                             int first, FldpCaseResult& result) {
    federation_.exclude_clients(state.removed);
    double total_time = result.time_retrain;  // the finished draws' and a stopped draw's so far
    for (int draw = first; draw < config_.retrain_seeds; ++draw) {
      std::vector<std::pair<std::size_t, Client>> saved;
      for (const auto& change : c.changes) {
        if (change.remove || owner(change.client) != world_rank()) continue;
        const std::size_t k = local_index(change.client);
        Client replacement =
            rerandomized_client(problem_, problem_.clients[k], changed_attributes(problem_, change),
                                static_cast<std::uint64_t>(draw));
        std::swap(problem_.clients[k], replacement);
        saved.emplace_back(k, std::move(replacement));
      }
      Stopwatch clock;
      // A Newton retrain stops between its steps, a full one between its rounds; the deck
      // decides which, so they share the draw's key.
      const std::string name = fmt::format("the retrain of case {} draw {}", index, draw);
      InterruptibleNewton stop(partial(), partial_key(index, kDraw, draw), name);
      InterruptibleRounds rounds(partial(), partial_key(index, kDraw, draw), name);
      // A draw's optimum scatters around the expected retrain's (when there is one): starting
      // there saves Newton steps over starting from theta^.
      const std::vector<double> retrained =
          config_.retrain_full
              ? rounds.train(federation_, quiet(training_)).theta
              : retrain_from(result.theta_expected.empty() ? theta_ : result.theta_expected, &stop);
      total_time += clock.seconds();
      const bool stopped = stop.stopped() || rounds.stopped();
      double gradient_norm = std::nan(""), min_eigenvalue = std::nan("");
      if (!stopped)  // on the re-randomized data it was retrained on
        assess_retrain(retrained, fmt::format("retrain of case {} draw {}", index, draw),
                       gradient_norm, min_eigenvalue);
      for (auto& [k, original] : saved) std::swap(problem_.clients[k], original);
      if (stopped) {
        federation_.exclude_clients({});
        result.time_retrain = total_time;
        return false;
      }
      const auto [loss, accuracy] = federation_.evaluate_test(retrained);
      result.test_loss_retrain.push_back(loss);
      result.test_accuracy_retrain.push_back(accuracy);
      result.ald.push_back(result.test_loss_estimate - loss);
      result.aad.push_back(result.test_accuracy_estimate - accuracy);
      result.ed.push_back(distance(result.theta_estimate, retrained));
      result.retrain_gradient_norm.push_back(gradient_norm);
      result.retrain_min_eigenvalue.push_back(min_eigenvalue);
    }
    federation_.exclude_clients({});
    result.time_retrain = config_.retrain_seeds > 0 ? total_time / config_.retrain_seeds : 0.0;
    return true;
  }

  // One case into `result`. False: a stop interrupted it (docs/operations.md "Stops inside a
  // unit"), `partial_` and partial_case_ hold where; a restart continues it from there: the
  // finished stages are the checkpoint's, the interrupted solve or Newton run continues from its
  // state (a full retrain, fldp.retrain_full, from its last round). The Monte-Carlo standard
  // error's solves run to their end.
  bool run_case(const FldpCase& c, std::size_t index, FldpCaseResult& result) {
    result = FldpCaseResult();
    const auto [stage, at] = resume_point(index, result);
    MPI_Barrier(MPI_COMM_WORLD);
    Stopwatch clock;
    const CaseState state = prepare(c, index);
    if (stage <= kEstimate) {
      std::vector<double> theta = stage == kEstimate ? result.theta_estimate : theta_;
      const bool done =
          estimate_from(c, state, -1, static_cast<std::size_t>(at), theta, result, &index);
      result.theta_estimate = std::move(theta);
      if (!done) return stop_case(result);
      MPI_Barrier(MPI_COMM_WORLD);
      result.time_estimate += clock.seconds();
      std::tie(result.test_loss_estimate, result.test_accuracy_estimate) =
          federation_.evaluate_test(result.theta_estimate);
      if (state.monte_carlo) result.mc_standard_error = monte_carlo_error(c, state);
    }

    LogStage retraining(Stage::retraining);
    if ((config_.retrain || config_.newton_steps > 0) && stage <= kRefine) {
      Stopwatch install_clock;
      install(c, state);
      const double install_seconds = install_clock.seconds();
      if (config_.retrain && stage <= kExpectedRetrain) {
        InterruptibleNewton stop(partial(), partial_key(index, kExpectedRetrain, 0),
                                 fmt::format("the expected retrain of case {}", index));
        result.theta_expected = retrain_from(theta_, &stop);
        if (stop.stopped()) {
          uninstall();
          return stop_case(result);
        }
        assess_retrain(result.theta_expected, fmt::format("expected retrain of case {}", index),
                       result.expected_gradient_norm, result.expected_min_eigenvalue);
        std::tie(result.test_loss_expected, result.test_accuracy_expected) =
            federation_.evaluate_test(result.theta_expected);
        result.ald_expected = result.test_loss_estimate - result.test_loss_expected;
        result.aad_expected = result.test_accuracy_estimate - result.test_accuracy_expected;
        result.ed_expected = distance(result.theta_estimate, result.theta_expected);
      }
      if (config_.newton_steps > 0) {
        InterruptibleNewton stop(partial(), partial_key(index, kRefine, 0),
                                 fmt::format("the Newton refinement of case {}", index));
        if (!refine(result, result.time_estimate + install_seconds, stop)) {
          uninstall();
          return stop_case(result);
        }
      }
      uninstall();
    }
    if (config_.retrain && !rerandomized_retrains(c, index, state, stage == kDraw ? at : 0, result))
      return stop_case(result);
    return true;
  }

  void report(const FldpCase& c, const FldpCaseResult& result) const {
    if (!progress_) return;
    log::info("  {}", c.description);
    log::info("    estimate: test loss {:.6f}  acc {:.2f}%  in {:.2f} ms ({} IHVP iterations){}",
              result.test_loss_estimate, 100.0 * result.test_accuracy_estimate,
              1e3 * result.time_estimate, result.ihvp_iterations,
              result.mc_standard_error > 0
                  ? fmt::format("  Monte-Carlo s.e. {:.3e}", result.mc_standard_error)
                  : std::string());
    if (config_.retrain) {
      log::info("    vs expected retrain: ALD {:+.2e}  AAD {:+.3f}%  ED {:.3e}",
                result.ald_expected, 100.0 * result.aad_expected, result.ed_expected);
      double mean_ed = 0.0;
      for (double e : result.ed) mean_ed += e / static_cast<double>(result.ed.size());
      if (!result.ed.empty())
        log::info("    vs {} re-randomized retrains: mean ED {:.3e}  (one retrain {:.3f} s)",
                  result.ed.size(), mean_ed, result.time_retrain);
    }
    for (std::size_t s = 0; s < result.newton_ed_expected.size(); ++s)
      log::info(
          "    Newton step {}: ED to expected retrain {:.3e}  (estimate refined so far: {:.2f} ms)",
          s + 1, result.newton_ed_expected[s], 1e3 * result.newton_time[s]);
  }

  Federation& federation_;
  FederatedProblem& problem_;
  const std::vector<double>& theta_;
  const InfluenceConfig& influence_;
  const FldpConfig& config_;
  const FederationConfig& training_;
  bool progress_;
  SweepCheckpoint* checkpoint_;
  std::size_t p_;
  double damping_ = 0.0;
  std::unique_ptr<HessianOperator> hessian_;
  std::unique_ptr<IhvpSolver> solver_;
  Workspace work_;
  PartialUnit partial_{"fldp", 3};  // the case a stop interrupted inside: [case, stage, index]
  FldpCaseResult partial_case_;     // its results so far
};

}  // namespace

FldpResult run_fldp(Federation& federation, const std::vector<double>& theta,
                    const InfluenceConfig& influence, const FldpConfig& config,
                    const FederationConfig& training, bool progress, SweepCheckpoint* checkpoint) {
  return FldpRunner(federation, theta, influence, config, training, progress, checkpoint).run();
}

}  // namespace fluence
