// `fluence whatif` (seed 001): estimates for a grid of (fraction, eps) from one s_test, and their
// ground truths by exact retraining (docs/math.md §6).
#include "fluence/whatif/whatif.hpp"

#include <cblas.h>
#include "fluence/whatif/purposes.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/log_stage.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/influence/estimators.hpp"
#include "fluence/influence/trust.hpp"
#include "fluence/privacy/randomized_response.hpp"
#include "fluence/whatif/retrain.hpp"
#include "fluence/whatif/row_influence.hpp"
#include "selection.hpp"

namespace fluence {

using whatif_detail::GroupSelection;
using whatif_detail::TestSelection;

namespace {

double nan() {
  return std::numeric_limits<double>::quiet_NaN();
}

// The label attribute as the rr_l and rr_flc variants randomize it.
WhatifAttribute label_attribute(const FederatedProblem& problem) {
  WhatifAttribute label;
  label.name = "label";
  label.domain = problem.data.train.classes();
  return label;
}

// The retrain counters in a checkpoint, stored as the array `whatif/retrain_totals` in this order.
const ScalarFields<WhatifResult> kRetrainTotals = {
    {"retrain_count", &WhatifResult::retrain_count},
    {"retrain_iterations", &WhatifResult::retrain_iterations},
    {"retrain_hessian_products", &WhatifResult::retrain_hessian_products},
    {"worst_gradient_norm", &WhatifResult::worst_gradient_norm}};

// The time spent in the checkpointed phases (the running one's included), as `whatif/seconds`.
struct PhaseSeconds {
  double second_order = 0.0, retrain = 0.0;
};
const ScalarFields<PhaseSeconds> kPhaseSeconds = {{"second_order", &PhaseSeconds::second_order},
                                                  {"retrain", &PhaseSeconds::retrain}};

class WhatifRunner {
 public:
  WhatifRunner(Federation& federation, const std::vector<double>& theta,
               const InfluenceConfig& influence, const WhatifConfig& config, bool progress,
               SweepCheckpoint* checkpoint)
      : federation_(federation),
        problem_(federation.problem()),
        theta_(theta),
        influence_(influence),
        config_(config),
        progress_(progress),
        C_(problem_.model->classes()),
        D_(problem_.model->features()),
        K_(config.fractions.size()),
        E_(config.epsilons.size()),
        test_(federation, config.test_sample),
        checkpoint_(checkpoint) {}

  WhatifResult run() {
    WhatifResult result;
    result.test_rows = test_.rows();
    std::tie(result.base_test_loss, result.base_test_accuracy) = test_.evaluate(theta_);
    result.stationarity =
        model_stationarity(federation_, theta_, config_.model_tolerance, "whatif");
    LogStage ihvp_stage(Stage::ihvp);  // the retrains push theirs on top
    solve_s_test(result);
    Stopwatch cells;
    selection_ = whatif_detail::select_group(problem_, config_);
    result.group_size = selection_.group_size;
    result.group_rows = selection_.selected;
    estimate_cells(result);
    result.time_cells = cells.seconds();
    prepare_units(result);
    if (config_.second_order && !second_order_cells(result)) return stopped(result);
    if (config_.retrain && !in_stage(Stage::retraining, [&] { return retrain_cells(result); }))
      return stopped(result);
    for (auto& variant : result.variants) {
      if (!config_.retrain) break;
      const std::vector<char> all(K_ * E_, 1),
          trusted = trusted_cells(variant, result.eigenvalue_max);
      variant.first = metrics(variant, variant.estimated, config_.repeats, all);
      variant.first_trusted = metrics(variant, variant.estimated, config_.repeats, trusted);
      if (config_.second_order) {
        variant.second = metrics(variant, variant.second_order, config_.repeats, all);
        variant.second_trusted = metrics(variant, variant.second_order, config_.repeats, trusted);
      }
    }
    if (config_.retrain) name_untrusted(result);
    if (result.worst_gradient_norm > config_.retrain_tolerance)
      log::warn(
          "whatif: some retrains stopped at ||grad|| = {:.3g} > retrain_tolerance {:.3g} "
          "(raise whatif.retrain_max_iterations)",
          result.worst_gradient_norm, config_.retrain_tolerance);
    return result;
  }

 private:
  static WhatifResult& stopped(WhatifResult& result) {
    result.stopped = true;
    return result;
  }

  std::size_t draws() const {
    return static_cast<std::size_t>(config_.repeats) + (config_.expected_retrain ? 1 : 0);
  }

  // The sweep's resumable state (docs/operations.md): the finished units and their results, the
  // retrain counters, and the solvers' histories (CG warm starts carry over from solve to solve).
  void save(const WhatifResult& result, StateArrays& state) const {
    state["whatif/second_done"] = flags_array(second_done_);
    state["whatif/chain_done"] = flags_array(chain_done_);
    auto joined = [&](std::vector<double> WhatifVariantResult::*member) {
      std::vector<double> values;
      for (const auto& variant : result.variants)
        values.insert(values.end(), (variant.*member).begin(), (variant.*member).end());
      return values;
    };
    state["whatif/second_order"] = joined(&WhatifVariantResult::second_order);
    state["whatif/actual"] = joined(&WhatifVariantResult::actual);
    state["whatif/expected_retrain"] = joined(&WhatifVariantResult::expected_retrain);
    state["whatif/actual_gradient_norm"] = joined(&WhatifVariantResult::actual_gradient_norm);
    state["whatif/expected_gradient_norm"] = joined(&WhatifVariantResult::expected_gradient_norm);
    state["whatif/actual_min_eigenvalue"] = joined(&WhatifVariantResult::actual_min_eigenvalue);
    state["whatif/expected_min_eigenvalue"] = joined(&WhatifVariantResult::expected_min_eigenvalue);
    state["whatif/retrain_totals"] = kRetrainTotals.pack(result);
    const double running = phase_clock_.seconds();
    const PhaseSeconds seconds{result.time_second_order + (phase_ == Phase::second ? running : 0.0),
                               result.time_retrain + (phase_ == Phase::retrain ? running : 0.0)};
    state["whatif/seconds"] = kPhaseSeconds.pack(seconds);
    state["whatif/solver"] = solver_->history();
    if (retrain_solver_) state["whatif/retrain_solver"] = retrain_solver_->history();
    partial_.save(state);
  }

  void prepare_units(WhatifResult& result) {
    const std::size_t V = result.variants.size(), R = static_cast<std::size_t>(config_.repeats);
    second_done_.assign(config_.second_order ? V * E_ : 0, 0);
    chain_done_.assign(config_.retrain ? V * E_ * draws() : 0, 0);
    for (auto& variant : result.variants) {
      if (config_.second_order) variant.second_order.assign(K_ * E_, nan());
      if (!config_.retrain) continue;
      variant.actual.assign(K_ * E_ * R, nan());
      variant.expected_retrain.assign(K_ * E_, nan());
      variant.actual_gradient_norm.assign(K_ * E_ * R, nan());
      variant.expected_gradient_norm.assign(K_ * E_, nan());
      variant.actual_min_eigenvalue.assign(K_ * E_ * R, nan());
      variant.expected_min_eigenvalue.assign(K_ * E_, nan());
    }
    if (!checkpoint_ || checkpoint_->restored().empty()) return;
    const StateArrays& state = checkpoint_->restored();
    second_done_ = state_flags(state, "whatif/second_done", second_done_.size());
    chain_done_ = state_flags(state, "whatif/chain_done", chain_done_.size());
    units_ = std::count(second_done_.begin(), second_done_.end(), 1) +
             std::count(chain_done_.begin(), chain_done_.end(), 1);
    auto split = [&](const std::string& name, std::vector<double> WhatifVariantResult::*member) {
      const std::size_t width = (result.variants.front().*member).size();
      const auto& values = state_array(state, name, V * width);
      for (std::size_t v = 0; v < V; ++v)
        std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(v * width), width,
                    (result.variants[v].*member).begin());
    };
    split("whatif/second_order", &WhatifVariantResult::second_order);
    split("whatif/actual", &WhatifVariantResult::actual);
    split("whatif/expected_retrain", &WhatifVariantResult::expected_retrain);
    split("whatif/actual_gradient_norm", &WhatifVariantResult::actual_gradient_norm);
    split("whatif/expected_gradient_norm", &WhatifVariantResult::expected_gradient_norm);
    split("whatif/actual_min_eigenvalue", &WhatifVariantResult::actual_min_eigenvalue);
    split("whatif/expected_min_eigenvalue", &WhatifVariantResult::expected_min_eigenvalue);
    kRetrainTotals.read(state, "whatif/retrain_totals", result);
    PhaseSeconds seconds;
    kPhaseSeconds.read(state, "whatif/seconds", seconds);
    result.time_second_order = seconds.second_order;
    result.time_retrain = seconds.retrain;
    solver_->restore_history(state_array(state, "whatif/solver"));
    partial_.restore(state);
  }

  enum class Phase { none, second, retrain };
  void start_phase(Phase phase) {
    phase_ = phase;
    phase_clock_ = Stopwatch();
  }
  double end_phase() {
    phase_ = Phase::none;
    return phase_clock_.seconds();
  }

  // The units a stop may interrupt inside (docs/operations.md "Stops inside a unit"): a
  // second-order unit at the solve of one fraction, a retrain chain at one fraction's retrain.
  // The partial unit's key: [kind, unit index, fraction].
  enum class PartialKind { second = 1, retrain = 2 };
  // The first fraction of `unit` to compute: where a stop interrupted it, else 0. The earlier
  // fractions' results are the checkpoint's.
  std::size_t first_fraction(PartialKind kind, std::size_t unit) const {
    const std::vector<double>& key = partial_.waiting();
    if (key.empty() || key[0] != static_cast<double>(kind) || key[1] != static_cast<double>(unit))
      return 0;
    return static_cast<std::size_t>(key[2]);
  }
  PartialUnit* partial() { return checkpoint_ ? &partial_ : nullptr; }
  static std::vector<double> partial_key(PartialKind kind, std::size_t unit, std::size_t k) {
    return {static_cast<double>(kind), static_cast<double>(unit), static_cast<double>(k)};
  }
  std::string fraction_name(std::size_t k) const {
    return fmt::format("fraction {:g}", config_.fractions[k]);
  }
  // Collective, when a stop (agreed by every rank) interrupted a unit recorded in partial_: the
  // checkpoint with its partial state. Returns false (the sweep stops).
  bool interrupted(const WhatifResult& result) {
    checkpoint_->units_done(units_, [&](StateArrays& state) { save(result, state); });
    return false;
  }

  // Collective, after a finished unit: true when a stop signal ends the sweep (checkpointed).
  bool unit_finished(const WhatifResult& result) {
    ++units_;
    return checkpoint_ &&
           checkpoint_->units_done(units_, [&](StateArrays& state) { save(result, state); });
  }

  void solve_s_test(WhatifResult& result) {
    result.damping = influence_.damping;
    hessian_ = make_federated_hessian(federation_, theta_);
    hessian_->set_damping(result.damping);
    std::optional<HessianSpectrum> spectrum;  // a diagnostic, not part of the timed IHVP
    if (influence_.spectrum)
      check_hessian_spectrum(*hessian_, influence_, spectrum, result.damping);
    if (spectrum) result.eigenvalue_max = spectrum->eigenvalue_max;
    Stopwatch clock;
    solver_ = make_ihvp_solver(influence_.ihvp, *hessian_);
    std::vector<double> test_gradient;
    test_.gradient(theta_, test_gradient);
    result.s_test_report = fluence::solve_s_test(*solver_, test_gradient, s_test_);
    result.time_ihvp = clock.seconds();
    result.s_test_above_tolerance =
        residual_above_tolerance(influence_.ihvp, result.s_test_report.relative_residual);
    if (result.s_test_above_tolerance)
      log::warn(
          "whatif: the s_test solve ended with a relative residual {:.3e} above influence.rtol = "
          "{:.1e}: every estimate carries its error",
          result.s_test_report.relative_residual, influence_.ihvp.rtol);
  }

  // Every cell's estimate: -(1/n) sum over S_k of the record scalars, per variant. Each client
  // sums its records in selection order; clients are reduced in id order (rank independent).
  void estimate_cells(WhatifResult& result) {
    const std::size_t V = config_.variants.size();
    const std::size_t width = V * K_ * E_;
    RowInfluence row(*problem_.model, theta_.data(), s_test_.data(), config_.attributes);
    const auto nc = static_cast<std::size_t>(problem_.data.train.categorical_count());
    std::vector<double> running(V * E_), totals(width);
    federation_.sum_over_clients(totals, [&](std::size_t c, double* sum) {
      std::fill(sum, sum + width, 0.0);
      std::fill(running.begin(), running.end(), 0.0);
      const auto& client = problem_.clients[c];
      const auto& rows = selection_.rows[c];
      for (std::size_t j = 0; j < rows.size(); ++j) {
        const std::size_t i = rows[j];
        row.set_row(client.features() + i * D_, client.labels()[i],
                    client.original_categorical().data() + i * nc);
        for (std::size_t v = 0; v < V; ++v)
          for (std::size_t e = 0; e < E_; ++e)
            running[v * E_ + e] += record_scalar(row, config_.variants[v], config_.epsilons[e]);
        for (std::size_t k = 0; k < K_; ++k) {
          if (selection_.prefix[c][k] != j + 1) continue;
          for (std::size_t v = 0; v < V; ++v)
            std::copy(running.begin() + v * E_, running.begin() + (v + 1) * E_,
                      sum + (v * K_ + k) * E_);
        }
      }
    });
    const double inverse_n = 1.0 / static_cast<double>(federation_.train_rows());
    for (std::size_t v = 0; v < V; ++v) {
      WhatifVariantResult variant;
      variant.variant = config_.variants[v];
      variant.estimated.assign(totals.begin() + v * K_ * E_, totals.begin() + (v + 1) * K_ * E_);
      for (auto& value : variant.estimated) value *= -inverse_n;
      result.variants.push_back(std::move(variant));
    }
  }

  double record_scalar(const RowInfluence& row, WhatifVariant variant, double epsilon) const {
    switch (variant) {
      case WhatifVariant::rr:
        return row.rr(epsilon, config_.rr_form);
      case WhatifVariant::rr_l:
        return row.rr_l(epsilon);
      case WhatifVariant::rr_flc:
        return row.rr_flc(epsilon, config_.flc_form);
    }
    return 0.0;
  }

  // The retrains precondition with a deterministic solve with the clean Hessian; LiSSA and the
  // low-rank projection are approximations, so those fall back to a dense or CG solve. A network
  // with CG takes the dense factor too when p allows: each CG preconditioning is a whole inner
  // solve of R-operator products (measured on inputs/whatif_mlp.toml: minutes instead of 25 s).
  IhvpSolver& retrain_solver() {
    const IhvpMethod method = influence_.ihvp.method;
    const bool small = federation_.parameters() <=
                       static_cast<std::size_t>(influence_.ihvp.explicit_max_parameters);
    if (method == IhvpMethod::explicit_cholesky ||
        (method == IhvpMethod::cg && (problem_.model->linear() || !small)))
      return *solver_;
    if (!retrain_solver_) {
      IhvpConfig exact = influence_.ihvp;
      exact.method = small ? IhvpMethod::explicit_cholesky : IhvpMethod::cg;
      retrain_solver_ = make_ihvp_solver(exact, *hessian_);
      if (checkpoint_ && checkpoint_->restored().count("whatif/retrain_solver"))
        retrain_solver_->restore_history(checkpoint_->restored().at("whatif/retrain_solver"));
    }
    return *retrain_solver_;
  }

  // Returns false when a stop signal ended it.
  bool retrain_cells(WhatifResult& result) {
    start_phase(Phase::retrain);
    const int R = config_.repeats;
    const auto draws = this->draws();
    pseudo_.resize(problem_.clients.size());
    PerturbedObjective objective(federation_, pseudo_);
    IhvpSolver& solver = retrain_solver();
    ProgressLine bar("retrains", static_cast<long>(chain_done_.size() * K_), progress_);
    long done = static_cast<long>(std::count(chain_done_.begin(), chain_done_.end(), 1) * K_);
    for (std::size_t v = 0; v < result.variants.size(); ++v) {
      auto& variant = result.variants[v];
      for (std::size_t e = 0; e < E_; ++e)
        for (std::size_t d = 0; d < draws; ++d) {
          const std::size_t chain = (v * E_ + e) * draws + d;
          if (chain_done_[chain]) continue;
          const bool expected = d == static_cast<std::size_t>(R);
          build_pseudo_rows(variant.variant, e, expected, static_cast<int>(d));
          std::vector<double> theta = theta_;  // warm start; then each fraction from the last
          // Resuming a chain a stop interrupted: its first fractions are the checkpoint's, and
          // the interrupted retrain continues from its saved iterate.
          const std::size_t first = first_fraction(PartialKind::retrain, chain);
          done += static_cast<long>(first);
          for (std::size_t k = first; k < K_; ++k) {
            std::vector<std::size_t> active;
            for (const auto& prefix : selection_.prefix) active.push_back(prefix[k]);
            objective.set_active_records(active);
            InterruptibleNewton stop(
                partial(), partial_key(PartialKind::retrain, chain, k),
                fmt::format("the retrain of {} eps {:g} {} at {}", to_string(variant.variant),
                            config_.epsilons[e],
                            expected ? std::string("expectation") : fmt::format("draw {}", d),
                            fraction_name(k)));
            const RetrainReport report =
                newton_retrain(objective, solver, theta, config_.retrain_tolerance,
                               config_.retrain_max_iterations, &stop);
            if (report.interrupted) return interrupted(result);
            result.retrain_iterations += report.iterations;
            result.retrain_hessian_products += report.hessian_products;
            result.worst_gradient_norm = std::max(result.worst_gradient_norm, report.gradient_norm);
            const double change = test_.evaluate(theta).first - result.base_test_loss;
            // The curvature where the retrain stopped: forward loss correction (and the clean
            // records' removal) can make h_S non-convex, and a stationary point with negative
            // curvature is a saddle point, not the retrained model it stands for.
            double curvature = nan();
            if (influence_.spectrum) try {
                curvature =
                    perturbed_min_eigenvalue(objective, theta, influence_.ihvp.eigen_tolerance);
              } catch (const RuntimeError& error) {
                log::warn("whatif: no curvature for the retrain of {} eps {:g} at {}: {}",
                          to_string(variant.variant), config_.epsilons[e], fraction_name(k),
                          error.what());
              }
            const std::size_t at =
                expected ? k * E_ + e : (k * E_ + e) * static_cast<std::size_t>(R) + d;
            (expected ? variant.expected_retrain : variant.actual)[at] = change;
            (expected ? variant.expected_gradient_norm : variant.actual_gradient_norm)[at] =
                report.gradient_norm;
            (expected ? variant.expected_min_eigenvalue : variant.actual_min_eigenvalue)[at] =
                curvature;
            ++result.retrain_count;
            bar.done(++done);
          }
          chain_done_[chain] = 1;
          if (unit_finished(result)) return false;
        }
    }
    result.time_retrain += end_phase();
    return true;
  }

  // The (fraction, eps) cells whose retrains (every draw, and the expected one) reached
  // retrain_tolerance at a minimum (no negative curvature above rounding on the trained model's
  // lambda_max scale): a retrain that stopped short, or at a saddle point, does not stand for the
  // change it measures.
  std::vector<char> trusted_cells(const WhatifVariantResult& variant, double scale) const {
    const std::size_t R = static_cast<std::size_t>(config_.repeats);
    std::vector<char> trusted(K_ * E_, 1);
    const auto ok = [&](double norm, double curvature) {
      return norm <= config_.retrain_tolerance && !is_saddle(curvature, scale);
    };
    for (std::size_t cell = 0; cell < K_ * E_; ++cell) {
      for (std::size_t r = 0; r < R; ++r)
        if (!ok(variant.actual_gradient_norm[cell * R + r],
                variant.actual_min_eigenvalue[cell * R + r]))
          trusted[cell] = 0;
      if (config_.expected_retrain &&
          !ok(variant.expected_gradient_norm[cell], variant.expected_min_eigenvalue[cell]))
        trusted[cell] = 0;
    }
    return trusted;
  }

  // One warning naming the retrains that stopped above retrain_tolerance, one naming those at
  // saddle points (the first 20 of each).
  void name_untrusted(const WhatifResult& result) const {
    const std::size_t R = static_cast<std::size_t>(config_.repeats);
    struct Names {
      std::vector<std::string> first;
      std::size_t count = 0;
      std::string list() const {
        std::string text;
        for (const auto& name : first) text += (text.empty() ? "" : ", ") + name;
        if (count > first.size()) text += fmt::format(" and {} more", count - first.size());
        return text;
      }
    } unconverged, saddles;
    const auto add = [&](Names& names, const WhatifVariantResult& variant, std::size_t k,
                         std::size_t e, const std::string& draw) {
      if (++names.count <= 20)
        names.first.push_back(fmt::format("{} fraction {:g} eps {:g} {}",
                                          to_string(variant.variant), config_.fractions[k],
                                          config_.epsilons[e], draw));
    };
    const auto check = [&](double norm, double curvature, const WhatifVariantResult& variant,
                           std::size_t k, std::size_t e, const std::string& draw) {
      if (!(norm <= config_.retrain_tolerance)) add(unconverged, variant, k, e, draw);
      if (is_saddle(curvature, result.eigenvalue_max)) add(saddles, variant, k, e, draw);
    };
    for (const auto& variant : result.variants)
      for (std::size_t k = 0; k < K_; ++k)
        for (std::size_t e = 0; e < E_; ++e) {
          for (std::size_t r = 0; r < R; ++r)
            check(variant.actual_gradient_norm[(k * E_ + e) * R + r],
                  variant.actual_min_eigenvalue[(k * E_ + e) * R + r], variant, k, e,
                  fmt::format("draw {}", r));
          if (config_.expected_retrain)
            check(variant.expected_gradient_norm[k * E_ + e],
                  variant.expected_min_eigenvalue[k * E_ + e], variant, k, e, "expectation");
        }
    if (unconverged.count > 0)
      log::warn(
          "whatif: {} retrains stopped above whatif.retrain_tolerance = {:.1e} ({}; "
          "/whatif/<v>/actual_converged, /whatif/<v>/expected_retrain_converged): their cells "
          "are left out of /whatif/<v>/trusted/*",
          unconverged.count, config_.retrain_tolerance, unconverged.list());
    if (saddles.count > 0)
      log::warn(
          "whatif: {} retrains stopped at saddle points, not minima ({}; "
          "/whatif/<v>/actual_saddle, "
          "/whatif/<v>/expected_retrain_saddle): their cells are left out of /whatif/<v>/trusted/*",
          saddles.count, saddles.list());
  }

  // MAE and Spearman rho over the eps grid per fraction (seed 001 §V-4, "run ten times and report
  // the average"): against the mean change over the draws (what an estimate of the expected change
  // is compared with), and per draw averaged over the draws.
  // Over the eps values whose cell `use` marks (all of them: the seed's metrics).
  EstimateMetrics metrics(const WhatifVariantResult& variant, const std::vector<double>& estimated,
                          int R, const std::vector<char>& use) const {
    EstimateMetrics m;
    for (auto* series : {&m.mae, &m.spearman, &m.mae_per_draw, &m.spearman_per_draw,
                         &m.mae_expected, &m.spearman_expected})
      series->assign(K_, nan());
    auto rho = [&](const std::vector<double>& a, const std::vector<double>& b) {
      return a.size() < 2 ? nan() : spearman(a, b);
    };
    for (std::size_t k = 0; k < K_; ++k) {
      std::vector<std::size_t> eps;  // the eps of the cells used, in grid order
      for (std::size_t e = 0; e < E_; ++e)
        if (use[k * E_ + e]) eps.push_back(e);
      if (eps.empty()) continue;
      const std::size_t n = eps.size();
      std::vector<double> estimate(n);
      for (std::size_t i = 0; i < n; ++i) estimate[i] = estimated[k * E_ + eps[i]];
      if (R > 0) {
        std::vector<double> mean(n, 0.0), actual(n);
        double mae = 0.0, correlation = 0.0;
        int defined = 0;  // rho is undefined for a draw whose changes are all equal (no record
                          // flipped at any eps, as happens for tiny groups): left out of the mean
        for (int r = 0; r < R; ++r) {
          for (std::size_t i = 0; i < n; ++i) {
            actual[i] = variant.actual[(k * E_ + eps[i]) * R + r];
            mean[i] += actual[i] / R;
          }
          mae += mean_absolute_error(estimate, actual) / R;
          const double value = rho(estimate, actual);
          if (std::isfinite(value)) {
            correlation += value;
            ++defined;
          }
        }
        m.mae_per_draw[k] = mae;
        m.spearman_per_draw[k] = defined > 0 ? correlation / defined : nan();
        m.mae[k] = mean_absolute_error(estimate, mean);
        m.spearman[k] = rho(estimate, mean);
      }
      if (config_.expected_retrain) {
        std::vector<double> expected(n);
        for (std::size_t i = 0; i < n; ++i) expected[i] = variant.expected_retrain[k * E_ + eps[i]];
        m.mae_expected[k] = mean_absolute_error(estimate, expected);
        m.spearman_expected[k] = rho(estimate, expected);
      }
    }
    return m;
  }

  // Second order (docs/math.md §6): with b(k, eps) the exact gradient sum of E l~ - l over S_k,
  // d theta = -(1/n) H^{-1} b and d L_te = g . d theta + d theta^T H_te d theta / 2. The first
  // term is the first-order estimate; the second dominates when g = grad L_te(theta^) is small,
  // as it is at an exact optimum when test and training data are alike.
  // Returns false when a stop signal ended it.
  bool second_order_cells(WhatifResult& result) {
    if (std::count(second_done_.begin(), second_done_.end(), 0) == 0) return true;
    start_phase(Phase::second);
    const std::size_t p = federation_.parameters();
    const bool dense = p <= static_cast<std::size_t>(influence_.ihvp.explicit_max_parameters);
    std::vector<double> test_hessian, g, b(K_ * p), delta(p), hd(p);
    if (dense) test_.hessian(theta_, test_hessian);
    test_.gradient(theta_, g);
    pseudo_.resize(problem_.clients.size());
    std::vector<double> scratch;
    const double inverse_n = 1.0 / static_cast<double>(federation_.train_rows());
    for (std::size_t v = 0; v < result.variants.size(); ++v) {
      auto& variant = result.variants[v];
      for (std::size_t e = 0; e < E_; ++e) {
        if (second_done_[v * E_ + e]) continue;
        build_pseudo_rows(variant.variant, e, true, 0);
        // b for every fraction: each client adds its records' segment to a running sum.
        std::fill(b.begin(), b.end(), 0.0);
        chain_sum(static_cast<int>(problem_.clients.size()), b, [&](int c, std::span<double> sum) {
          const PseudoRows& rows = pseudo_[c];
          std::vector<double> running(p, 0.0);
          std::size_t done = 0;
          for (std::size_t k = 0; k < K_; ++k) {
            const std::size_t end = rows.rows_of_records(selection_.prefix[c][k]);
            pseudo_rows_loss_gradient(*problem_.model, rows, done, end - done, theta_.data(),
                                      running.data(), scratch, work_);
            done = end;
            for (std::size_t j = 0; j < p; ++j) sum[k * p + j] += running[j];
          }
        });
        // Resuming a unit a stop interrupted: its first fractions are the checkpoint's, and the
        // interrupted solve continues from its saved state.
        for (std::size_t k = first_fraction(PartialKind::second, v * E_ + e); k < K_; ++k) {
          SolveReport report;
          if (!interruptible_solve(
                  *solver_, partial(), partial_key(PartialKind::second, v * E_ + e, k),
                  fmt::format("the second-order solve of {} eps {:g} at {}",
                              to_string(variant.variant), config_.epsilons[e], fraction_name(k)),
                  [&] { return solver_->solve(b.data() + k * p, delta.data()); }, report))
            return interrupted(result);
          double first = 0.0, quadratic = 0.0;
          for (std::size_t j = 0; j < p; ++j) delta[j] *= -inverse_n;
          if (dense)
            cblas_dsymv(CblasRowMajor, CblasUpper, static_cast<int>(p), 1.0, test_hessian.data(),
                        static_cast<int>(p), delta.data(), 1, 0.0, hd.data(), 1);
          else
            test_.hessian_vector(theta_, delta.data(), hd.data());
          for (std::size_t j = 0; j < p; ++j) {
            first += g[j] * delta[j];
            quadratic += delta[j] * hd[j];
          }
          variant.second_order[k * E_ + e] = first + 0.5 * quadratic;
        }
        second_done_[v * E_ + e] = 1;
        if (unit_finished(result)) return false;
      }
    }
    result.time_second_order += end_phase();
    return true;
  }

  // The stream of one k-RR draw of (record, attribute): shared by every eps with `common` draws,
  // so that the records flipped at eps are a subset of those flipped at any smaller eps.
  Stream draw_stream(std::int64_t row, int column, std::size_t e, int draw) const {
    const std::uint64_t key = config_.common_draws ? static_cast<std::uint64_t>(draw)
                                                   : (static_cast<std::uint64_t>(e) << 32) |
                                                         static_cast<std::uint64_t>(draw);
    return Stream(problem_.seed, purpose::whatif_randomization, static_cast<std::uint64_t>(row),
                  static_cast<std::uint64_t>(column + 1), key);
  }

  // Every local client's pseudo-records for one (variant, eps, draw or the expectation).
  void build_pseudo_rows(WhatifVariant variant, std::size_t e, bool expected, int draw) {
    const double epsilon = config_.epsilons[e];
    const auto nc = static_cast<std::size_t>(problem_.data.train.categorical_count());
    const std::vector<WhatifAttribute> attributes =
        variant == WhatifVariant::rr ? config_.attributes
                                     : std::vector<WhatifAttribute>{label_attribute(problem_)};
    const bool flc = variant == WhatifVariant::rr_flc;
    const std::vector<double> P = distortion_matrix(epsilon, C_);
    std::vector<double> one_hot(C_), soft(C_), moved(D_);
    for (std::size_t c = 0; c < problem_.clients.size(); ++c) {
      const auto& client = problem_.clients[c];
      PseudoRows& rows = pseudo_[c];
      rows.reset(C_, D_);
      rows.distortion = P;
      for (std::size_t i : selection_.rows[c]) {
        const double* x = client.features() + i * D_;
        const std::int32_t y = client.labels()[i];
        const std::int32_t* categorical = client.original_categorical().data() + i * nc;
        std::fill(one_hot.begin(), one_hot.end(), 0.0);
        one_hot[y] = 1.0;
        rows.add(x, -1.0, one_hot.data(), false);  // the clean record leaves the objective
        if (expected)
          add_expected_record(rows, attributes, flc, epsilon, x, y, categorical, P, soft, moved);
        else
          add_drawn_record(rows, attributes, flc, epsilon, e, draw, client.rows()[i], x, y,
                           categorical, one_hot, moved);
        rows.finish_record();
      }
    }
  }

  void add_drawn_record(PseudoRows& rows, const std::vector<WhatifAttribute>& attributes, bool flc,
                        double epsilon, std::size_t e, int draw, std::int64_t global_row,
                        const double* x, std::int32_t y, const std::int32_t* categorical,
                        std::vector<double>& target, std::vector<double>& moved) const {
    std::copy(x, x + D_, moved.begin());
    std::int32_t label = y;
    for (const auto& attribute : attributes) {
      Stream stream = draw_stream(global_row, attribute.column, e, draw);
      if (attribute.column < 0) {
        label = randomize_value(y, attribute.domain, epsilon, stream);
        continue;
      }
      const std::int32_t from = categorical[attribute.column];
      const std::int32_t to = randomize_value(from, attribute.domain, epsilon, stream);
      std::swap(moved[attribute.offset + from], moved[attribute.offset + to]);
    }
    std::fill(target.begin(), target.end(), 0.0);
    target[label] = 1.0;
    rows.add(moved.data(), 1.0, target.data(), flc);
  }

  // The exact expectation: every combination of the randomized features with its k-RR probability
  // from the original values, and the label's k-RR distribution as a soft target (the
  // cross-entropy and l_FLC are linear in the target).
  void add_expected_record(PseudoRows& rows, const std::vector<WhatifAttribute>& attributes,
                           bool flc, double epsilon, const double* x, std::int32_t y,
                           const std::int32_t* categorical, const std::vector<double>& P,
                           std::vector<double>& soft, std::vector<double>& moved) const {
    std::vector<const WhatifAttribute*> features;
    std::fill(soft.begin(), soft.end(), 0.0);
    soft[y] = 1.0;
    for (const auto& attribute : attributes) {
      if (attribute.column >= 0) {
        features.push_back(&attribute);
        continue;
      }
      for (int k = 0; k < C_; ++k) soft[k] = P[static_cast<std::size_t>(y) * C_ + k];
    }
    std::vector<std::int32_t> values(features.size(), 0);
    for (;;) {
      double weight = 1.0;
      std::copy(x, x + D_, moved.begin());
      for (std::size_t f = 0; f < features.size(); ++f) {
        const auto& attribute = *features[f];
        const std::int32_t from = categorical[attribute.column];
        const KrrProbabilities krr(epsilon, attribute.domain);
        weight *= values[f] == from ? krr.keep : krr.other;
        std::swap(moved[attribute.offset + from], moved[attribute.offset + values[f]]);
      }
      rows.add(moved.data(), weight, soft.data(), flc);
      std::size_t f = features.size();  // next combination, last feature fastest
      while (f > 0 && ++values[f - 1] == features[f - 1]->domain) values[--f] = 0;
      if (f == 0) break;
    }
  }

  Federation& federation_;
  FederatedProblem& problem_;
  const std::vector<double>& theta_;
  const InfluenceConfig& influence_;
  const WhatifConfig& config_;
  bool progress_;
  int C_, D_;
  std::size_t K_, E_;
  TestSelection test_;
  GroupSelection selection_;
  std::unique_ptr<HessianOperator> hessian_;
  std::unique_ptr<IhvpSolver> solver_;
  std::unique_ptr<IhvpSolver> retrain_solver_;
  std::vector<double> s_test_;
  std::vector<PseudoRows> pseudo_;
  Workspace work_;
  SweepCheckpoint* checkpoint_;
  std::vector<char> second_done_, chain_done_;  // per unit: finished (here or before a restart)
  PartialUnit partial_{"whatif", 3};            // the unit a stop interrupted inside
  long units_ = 0;
  Phase phase_ = Phase::none;
  Stopwatch phase_clock_;
};

}  // namespace

WhatifResult run_whatif(Federation& federation, const std::vector<double>& theta,
                        const InfluenceConfig& influence, const WhatifConfig& config, bool progress,
                        SweepCheckpoint* checkpoint) {
  return WhatifRunner(federation, theta, influence, config, progress, checkpoint).run();
}

}  // namespace fluence
