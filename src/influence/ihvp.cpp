#include "fluence/influence/ihvp.hpp"

#include <cblas.h>
#include <petscksp.h>

#include <cmath>
#include <limits>

#include "fluence/core/deck_keys.hpp"
#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/core/signals.hpp"
#include "fluence/core/solver_options.hpp"
#include "fluence/influence/kfac.hpp"
#include "fluence/influence/purposes.hpp"
#include "fluence/influence/spectrum.hpp"

extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
}

namespace fluence {

IhvpMethod parse_ihvp_method(const std::string& name) {
  if (name == "cg") return IhvpMethod::cg;
  if (name == "explicit") return IhvpMethod::explicit_cholesky;
  if (name == "lissa") return IhvpMethod::lissa;
  if (name == "lowrank") return IhvpMethod::lowrank;
  if (name == "ekfac") return IhvpMethod::ekfac;
  if (name == "first_order") return IhvpMethod::first_order;
  throw InputError("unknown IHVP solver '" + name +
                   "' (allowed: cg, explicit, lissa, lowrank, ekfac, first_order)");
}

std::string to_string(IhvpMethod method) {
  switch (method) {
    case IhvpMethod::cg:
      return "cg";
    case IhvpMethod::explicit_cholesky:
      return "explicit";
    case IhvpMethod::lissa:
      return "lissa";
    case IhvpMethod::lowrank:
      return "lowrank";
    case IhvpMethod::ekfac:
      return "ekfac";
    case IhvpMethod::first_order:
      return "first_order";
  }
  return "?";
}

IhvpPreconditioner parse_ihvp_preconditioner(const std::string& name) {
  if (name == "none") return IhvpPreconditioner::none;
  if (name == "jacobi") return IhvpPreconditioner::jacobi;
  if (name == "kronecker") return IhvpPreconditioner::kronecker;
  if (name == "kfac") return IhvpPreconditioner::kfac;
  throw InputError("unknown IHVP preconditioner '" + name +
                   "' (allowed: none, jacobi, kronecker, kfac)");
}

std::string to_string(IhvpPreconditioner preconditioner) {
  switch (preconditioner) {
    case IhvpPreconditioner::none:
      return "none";
    case IhvpPreconditioner::jacobi:
      return "jacobi";
    case IhvpPreconditioner::kronecker:
      return "kronecker";
    case IhvpPreconditioner::kfac:
      return "kfac";
  }
  return "?";
}

void register_ihvp_keys(DeckSchema& schema) {
  using namespace deck_keys;
  using T = KeyType;
  schema.add({
      choice("influence.solver", "\"cg\"",
             {"cg", "explicit", "lissa", "lowrank", "ekfac", "first_order"},
             "IHVP solver (`ekfac`: a network's EK-FAC inverse, mlp or cnn, no iterations, scored "
             "against exact CG in the output; docs/math.md §3.2; `first_order`: no Hessian solve, "
             "H ≈ c I with c = bᵀHb / bᵀb along the first right-hand side, s_test's ∇L_test: "
             "scores from the gradients alone, docs/math.md §3)"),
      below_maximum(key("influence.rtol", T::real, "1e-10",
                        "cg: stop when ‖b − Hx‖ ≤ rtol ‖b‖ (PETSc `-ihvp_ksp_rtol` overrides)", 0.0,
                        1.0, true)),
      key("influence.max_iterations", T::integer, "0", "cg: most iterations (0 = 10 p + 100)", 0),
      choice("influence.preconditioner", "\"auto\"",
             {"auto", "jacobi", "kronecker", "kfac", "none"},
             "cg: Jacobi from the exact Hessian diagonal, or kronecker: (G ⊗ A + (l2 + damping) "
             "I)⁻¹ from the softmax and feature factors (docs/math.md §3.1), both only "
             "for the logistic model; kfac: K-FAC's layer-wise (G ⊗ A + (l2 + damping) I)⁻¹ "
             "for an mlp or a cnn (dense layers and convolutions, docs/math.md §3.2); or none; "
             "`auto` = jacobi for logistic, none for "
             "mlp and cnn"),
      key("influence.warm_start", T::boolean, "true",
          "cg: start each solve from the projection onto earlier solutions"),
      key("influence.explicit_max_parameters", T::integer, "6000",
          "explicit: refuse larger p (the dense Hessian needs 8 p² bytes per rank)", 1),
      section("influence.lissa",
              "LiSSA stochastic estimation ([Carey et al. "
              "2023](../docs/references.md#carey-2023) Table I, SE)"),
      key("influence.lissa.scale", T::real, "0.0",
          "recursion scale (must exceed the largest eigenvalue); 0 = 1.5 × a "
          "power-iteration estimate",
          0.0),
      key("influence.lissa.depth", T::integer, "5000", "recursion depth r", 1),
      key("influence.lissa.repeats", T::integer, "1", "independent recursions t averaged", 1),
      key("influence.lissa.batch", T::integer, "0",
          "rows per stochastic Hessian sample (0 = exact Hessian, deterministic)", 0),
      key("influence.lissa.divergence_limit", T::real, "1e8",
          "abort when ‖h_j‖ exceeds this multiple of ‖b‖ / scale", 1.0),
      key("influence.lowrank_rank", T::integer, "20", "lowrank: eigenpairs k", 1),
      below_maximum(key("influence.eigen_tolerance", T::real, "1e-8", "SLEPc relative tolerance",
                        0.0, 1.0, true)),
      choice("influence.spectrum_solver", "\"krylovschur\"", {"krylovschur", "lanczos"},
             "the extreme Hessian eigenvalues: SLEPc Krylov–Schur, one solve per end, or one "
             "unrestarted Lanczos space for both ends (full reorthogonalization; one p-vector per "
             "product, at most 300; docs/math.md §4)"),
  });
}

IhvpConfig IhvpConfig::from_deck(const Deck& deck) {
  IhvpConfig config;
  config.method = parse_ihvp_method(deck.string("influence.solver"));
  config.rtol = deck.real("influence.rtol");
  config.max_iterations = static_cast<int>(deck.integer("influence.max_iterations"));
  // Jacobi needs the exact Hessian diagonal, Kronecker the softmax and feature factors, which only
  // the logistic model computes.
  const std::string preconditioner = deck.string("influence.preconditioner");
  const bool logistic = deck.string("model.type") == "logistic";
  config.preconditioner = preconditioner == "auto"
                              ? (logistic ? IhvpPreconditioner::jacobi : IhvpPreconditioner::none)
                              : parse_ihvp_preconditioner(preconditioner);
  // K-FAC factors dense layers and convolutions (docs/math.md §3.2, §3.2.1): every network.
  const bool network = deck.string("model.type") == "mlp" || deck.string("model.type") == "cnn";
  if (config.preconditioner == IhvpPreconditioner::kfac && !network)
    throw InputError(fmt::format(
        "{}: influence.preconditioner = \"kfac\" needs a network (model.type = \"mlp\" or "
        "\"cnn\"), not \"{}\"; {}",
        deck.where("influence.preconditioner"), deck.string("model.type"),
        logistic ? "the logistic model has \"kronecker\"" : "use \"auto\" or \"none\""));
  if (config.method == IhvpMethod::ekfac && !network)
    throw InputError(fmt::format(
        "{}: influence.solver = \"ekfac\" needs a network (model.type = \"mlp\" or \"cnn\"), "
        "not \"{}\"",
        deck.where("influence.solver"), deck.string("model.type")));
  if (config.preconditioner != IhvpPreconditioner::none &&
      config.preconditioner != IhvpPreconditioner::kfac && !logistic)
    throw InputError(fmt::format(
        "{}: influence.preconditioner = \"{}\" needs {}, which model.type = \"{}\" does not "
        "compute (it would take p Hessian products); use \"auto\" or \"none\"",
        deck.where("influence.preconditioner"), preconditioner,
        preconditioner == "jacobi" ? "the exact Hessian diagonal"
                                   : "the Kronecker factors of the Hessian",
        deck.string("model.type")));
  config.warm_start = deck.boolean("influence.warm_start");
  config.explicit_max_parameters =
      static_cast<int>(deck.integer("influence.explicit_max_parameters"));
  config.lissa.scale = deck.real("influence.lissa.scale");
  config.lissa.depth = static_cast<int>(deck.integer("influence.lissa.depth"));
  config.lissa.repeats = static_cast<int>(deck.integer("influence.lissa.repeats"));
  config.lissa.batch = static_cast<int>(deck.integer("influence.lissa.batch"));
  config.lissa.divergence_limit = deck.real("influence.lissa.divergence_limit");
  config.lowrank_rank = static_cast<int>(deck.integer("influence.lowrank_rank"));
  config.eigen_tolerance = deck.real("influence.eigen_tolerance");
  config.lanczos_spectrum = deck.string("influence.spectrum_solver") == "lanczos";
  return config;
}

namespace {

double dot(const double* a, const double* b, std::size_t n) {
  double s = 0.0;
  for (std::size_t k = 0; k < n; ++k) s += a[k] * b[k];
  return s;
}

double norm(const double* a, std::size_t n) {
  return std::sqrt(dot(a, a, n));
}

}  // namespace

double relative_residual(HessianOperator& hessian, const double* b, const double* x) {
  const std::size_t p = hessian.parameters();
  std::vector<double> hx(p);
  hessian.apply(x, hx.data());
  for (std::size_t k = 0; k < p; ++k) hx[k] -= b[k];
  const double scale = norm(b, p);
  return scale > 0.0 ? norm(hx.data(), p) / scale : norm(hx.data(), p);
}

namespace {

// Initial guesses from earlier solves: with x_i = H^{-1} b_i known, the H-orthogonal projection
// of the new solution onto span{x_i} needs only the b_i (H x_i = b_i), no extra products. The basis
// is kept H-orthonormal: u_i with H u_i = w_i.
class SolutionRecycler {
 public:
  explicit SolutionRecycler(std::size_t p, std::size_t capacity) : p_(p), capacity_(capacity) {}

  /// x0 = sum_i (u_i . b) u_i, the minimizer of the H-norm error over the span.
  void initial_guess(const double* b, double* x0) const {
    std::fill(x0, x0 + p_, 0.0);
    for (std::size_t i = 0; i < basis_.size(); ++i) {
      const double c = dot(basis_[i].data(), b, p_);
      for (std::size_t k = 0; k < p_; ++k) x0[k] += c * basis_[i][k];
    }
  }

  void add(const double* x, const double* b) {
    if (basis_.size() == capacity_) return;
    std::vector<double> u(x, x + p_), w(b, b + p_);
    for (std::size_t i = 0; i < basis_.size(); ++i) {
      const double c = dot(images_[i].data(), x, p_);  // u_i^T H x
      for (std::size_t k = 0; k < p_; ++k) {
        u[k] -= c * basis_[i][k];
        w[k] -= c * images_[i][k];
      }
    }
    const double energy = dot(u.data(), w.data(), p_);        // u^T H u
    if (!(energy > 1e-12 * std::abs(dot(x, b, p_)))) return;  // (nearly) in the span already
    const double inverse = 1.0 / std::sqrt(energy);
    for (std::size_t k = 0; k < p_; ++k) {
      u[k] *= inverse;
      w[k] *= inverse;
    }
    basis_.push_back(std::move(u));
    images_.push_back(std::move(w));
  }

  /// [count, basis vectors, their images], p values each.
  std::vector<double> saved() const {
    std::vector<double> values{static_cast<double>(basis_.size())};
    for (const auto* vectors : {&basis_, &images_})
      for (const auto& v : *vectors) values.insert(values.end(), v.begin(), v.end());
    return values;
  }

  void restore(const std::vector<double>& values) {
    const auto count = values.empty() ? 0 : static_cast<std::size_t>(values[0]);
    if (values.size() != 1 + 2 * count * p_ || count > capacity_)
      throw InputError("checkpoint: the CG solver history does not fit this problem");
    basis_.assign(count, std::vector<double>(p_));
    images_.assign(count, std::vector<double>(p_));
    for (std::size_t i = 0; i < count; ++i) {
      std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(1 + i * p_), p_, basis_[i].begin());
      std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(1 + (count + i) * p_), p_,
                  images_[i].begin());
    }
  }

 private:
  std::size_t p_, capacity_;
  std::vector<std::vector<double>> basis_, images_;
};

// The preconditioner `-ihvp_pc_type` names, when it names one of ours (the command line wins
// over the deck); the deck's otherwise.
IhvpPreconditioner command_line_preconditioner(IhvpPreconditioner deck) {
  char name[64] = "";
  PetscBool set = PETSC_FALSE;
  petsc_check(PetscOptionsGetString(nullptr, kIhvpPrefix, "-pc_type", name, sizeof name, &set),
              "PetscOptionsGetString");
  if (set != PETSC_TRUE) return deck;
  const std::string type = name;
  if (type == kKroneckerPcType) return IhvpPreconditioner::kronecker;
  if (type == kKfacPcType) return IhvpPreconditioner::kfac;
  if (type == "jacobi") return IhvpPreconditioner::jacobi;
  return IhvpPreconditioner::none;  // PETSc's own PC, set up by KSPSetFromOptions
}

// CG on the exact products (core/krylov.hpp, options prefix "ihvp_"), each solve started from
// the projection onto earlier solutions (warm_start). The Kronecker preconditioner is a PCSHELL
// whose factors are taken at the first solve (a collective for the federated Hessian, as the
// solves are), like PETSc's Jacobi takes the diagonal.
class KrylovSolver final : public IhvpSolver {
 public:
  KrylovSolver(const IhvpConfig& config, HessianOperator& hessian)
      : hessian_(hessian),
        recycler_(hessian.parameters(), 32),
        config_(config),
        preconditioner_(command_line_preconditioner(config.preconditioner)),
        cg_(as_linear_operator(hessian), [&] {
          CgSettings settings;
          settings.prefix = kIhvpPrefix;
          settings.rtol = config.rtol;
          settings.max_iterations = config.max_iterations;
          const bool shell = preconditioner_ == IhvpPreconditioner::kronecker ||
                             preconditioner_ == IhvpPreconditioner::kfac;
          settings.preconditioner = preconditioner_ == IhvpPreconditioner::jacobi
                                        ? CgPreconditioner::jacobi
                                    : shell ? CgPreconditioner::custom
                                            : CgPreconditioner::none;
          settings.custom_name =
              preconditioner_ == IhvpPreconditioner::kfac ? kKfacPcType : kKroneckerPcType;
          settings.apply_preconditioner = [this](const double* r, double* z) {
            if (kfac_) return kfac_->apply_inverse(r, z);
            kronecker_->apply(r, z);
          };
          settings.initial_guess = true;
          return settings;
        }()) {}

  IhvpMethod method() const override { return IhvpMethod::cg; }
  std::vector<double> history() const override { return recycler_.saved(); }
  void restore_history(const std::vector<double>& history) override { recycler_.restore(history); }
  bool set_stop_poll(std::function<bool()> poll) override {
    return cg_.set_stop_poll(std::move(poll));
  }
  std::vector<double> interrupted_state() const override { return cg_.interrupted_state(); }
  void resume_next(std::vector<double> state) override { cg_.resume_next(std::move(state)); }
  long interrupted_progress(const std::vector<double>& state) const override {
    return ConjugateGradient::interrupted_iterations(state);
  }

  SolveReport solve(const double* b, double* x) override {
    const std::size_t p = hessian_.parameters();
    SolveReport report;
    if (norm(b, p) == 0.0) {
      std::fill(x, x + p, 0.0);
      return report;
    }
    if (config_.warm_start)
      recycler_.initial_guess(b, x);
    else
      std::fill(x, x + p, 0.0);
    if (preconditioner_ == IhvpPreconditioner::kronecker && !kronecker_)
      kronecker_ = std::make_unique<KroneckerPreconditioner>(hessian_.kronecker_factors());
    if (preconditioner_ == IhvpPreconditioner::kfac && !kfac_) kfac_ = hessian_.kfac(false);
    const CgOutcome outcome = cg_.solve(b, x);
    report.interrupted = outcome.interrupted;
    if (report.interrupted) return report;
    report.iterations = outcome.iterations;
    report.relative_residual = relative_residual(hessian_, b, x);
    if (!outcome.converged)
      log::warn("IHVP: CG did not converge{} after {} iterations; relative residual {:.3e}",
                outcome.indefinite
                    ? " (the Hessian is not positive definite: set influence.damping)"
                    : "",
                outcome.iterations, report.relative_residual);
    if (config_.warm_start) recycler_.add(x, b);
    return report;
  }

 private:
  HessianOperator& hessian_;
  SolutionRecycler recycler_;
  IhvpConfig config_;
  IhvpPreconditioner preconditioner_;
  std::unique_ptr<KroneckerPreconditioner> kronecker_;  // built at the first solve
  std::unique_ptr<KfacCurvature> kfac_;                 // built at the first solve
  ConjugateGradient cg_;
};

class CholeskySolver final : public IhvpSolver {
 public:
  CholeskySolver(const IhvpConfig& config, HessianOperator& hessian) : hessian_(hessian) {
    const std::size_t p = hessian.parameters();
    if (p > static_cast<std::size_t>(config.explicit_max_parameters))
      throw InputError(fmt::format(
          "influence.solver = \"explicit\" needs the dense {} x {} Hessian ({:.1f} GiB per "
          "rank), above influence.explicit_max_parameters = {}; use solver = \"cg\" or raise "
          "the limit",
          p, p, 8.0 * p * p / (1 << 30), config.explicit_max_parameters));
    hessian.dense(dense_);
    factor_ = dense_;
    const int n = static_cast<int>(p);
    int info = 0;
    dpotrf_("L", &n, factor_.data(), &n, &info);
    if (info != 0)
      throw RuntimeError(fmt::format(
          "explicit IHVP: the Hessian is not positive definite (Cholesky failed at pivot {}); "
          "set influence.damping > 0 or influence.auto_damping = true",
          info));
  }

  IhvpMethod method() const override { return IhvpMethod::explicit_cholesky; }

  void apply_inverse(const double* b, double* x) override {
    const std::size_t p = hessian_.parameters();
    const int n = static_cast<int>(p);
    std::copy(b, b + p, x);
    // Column-major "L" of the row-major symmetric matrix is the same factorization: H = L L^T,
    // x = L^-T L^-1 b. Two triangular solves read the factor once each; dpotrs with one
    // right-hand side goes through dtrsm, which packs the whole factor on every call (as much
    // time as a Hessian product at p = 7,890 when this preconditions CG).
    cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, n, factor_.data(), n, x, 1);
    cblas_dtrsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, n, factor_.data(), n, x, 1);
  }

  SolveReport solve(const double* b, double* x) override {
    const std::size_t p = hessian_.parameters();
    apply_inverse(b, x);
    SolveReport report;
    report.iterations = 1;
    // True residual with the dense matrix itself (a product by the operator would cost a pass
    // over the data and, federated, a reduction).
    double residual = 0.0, scale = 0.0;
    for (std::size_t i = 0; i < p; ++i) {
      const double r = dot(dense_.data() + i * p, x, p) - b[i];
      residual += r * r;
      scale += b[i] * b[i];
    }
    report.relative_residual = scale > 0.0 ? std::sqrt(residual / scale) : std::sqrt(residual);
    return report;
  }

 private:
  HessianOperator& hessian_;
  std::vector<double> dense_, factor_;
};

// Largest eigenvalue by power iteration from a keyed random start (Rayleigh quotients approach it
// from below), for LiSSA's scale.
double largest_eigenvalue_estimate(HessianOperator& hessian, int iterations) {
  const std::size_t p = hessian.parameters();
  std::vector<double> v(p), hv(p);
  Stream stream(0, purpose::spectrum_start, p);
  for (auto& value : v) value = stream.normal();
  double estimate = 0.0;
  for (int it = 0; it < iterations; ++it) {
    const double length = norm(v.data(), p);
    for (auto& value : v) value /= length;
    hessian.apply(v.data(), hv.data());
    estimate = dot(v.data(), hv.data(), p);
    v.swap(hv);
  }
  return estimate;
}

class LissaSolver final : public IhvpSolver {
 public:
  LissaSolver(const IhvpConfig& config, HessianOperator& hessian)
      : hessian_(hessian), config_(config.lissa) {
    if (config_.scale <= 0.0) {
      config_.scale = 1.5 * largest_eigenvalue_estimate(hessian, 50);
      log::info("LiSSA: scale = 1.5 x estimated largest eigenvalue = {:.6g}", config_.scale);
    }
  }

  IhvpMethod method() const override { return IhvpMethod::lissa; }
  std::vector<double> history() const override { return {static_cast<double>(solve_count_)}; }
  void restore_history(const std::vector<double>& history) override {
    if (history.size() != 1) throw InputError("checkpoint: the LiSSA solver history is malformed");
    solve_count_ = static_cast<std::uint64_t>(history[0]);
  }
  bool set_stop_poll(std::function<bool()> poll) override {
    poll_ = std::move(poll);
    return true;
  }
  // [repeat, step, x, h]: the recursion's place, the finished repeats' sum and its iterate.
  std::vector<double> interrupted_state() const override { return interrupted_; }
  void resume_next(std::vector<double> state) override {
    if (state.size() != 2 + 2 * hessian_.parameters())
      throw InputError("checkpoint: the interrupted LiSSA solve does not fit this problem");
    resume_ = std::move(state);
  }
  long interrupted_progress(const std::vector<double>& state) const override {
    return state.size() < 2
               ? 0
               : static_cast<long>(state[0]) * config_.depth + static_cast<long>(state[1]);
  }

  // Koh & Liang's recursion h_j = b + (I - H_j / scale) h_{j-1}, h_0 = b, so that
  // h_J / scale -> H^{-1} b when every eigenvalue of H lies in (0, 2 scale); averaged over repeats.
  SolveReport solve(const double* b, double* x) override {
    const std::size_t p = hessian_.parameters();
    std::vector<double> h(p), hh(p);
    std::fill(x, x + p, 0.0);
    const double limit = config_.divergence_limit * norm(b, p) / config_.scale;
    int first_repeat = 0, first_step = 0;
    interrupted_.clear();
    if (!resume_.empty()) {
      first_repeat = static_cast<int>(resume_[0]);
      first_step = static_cast<int>(resume_[1]);
      std::copy_n(resume_.begin() + 2, p, x);
      std::copy_n(resume_.begin() + 2 + static_cast<std::ptrdiff_t>(p), p, h.begin());
      resume_.clear();
    }
    for (int repeat = first_repeat; repeat < config_.repeats; ++repeat) {
      if (repeat != first_repeat || first_step == 0) std::copy(b, b + p, h.begin());
      for (int step = repeat == first_repeat ? first_step : 0; step < config_.depth; ++step) {
        if (poll_ && poll_()) {
          interrupted_ = {static_cast<double>(repeat), static_cast<double>(step)};
          interrupted_.insert(interrupted_.end(), x, x + p);
          interrupted_.insert(interrupted_.end(), h.begin(), h.end());
          SolveReport report;
          report.interrupted = true;
          return report;
        }
        if (config_.batch > 0)
          hessian_.apply_sampled(h.data(), hh.data(), config_.batch,
                                 solve_count_ * 1000003ULL + static_cast<std::uint64_t>(repeat),
                                 static_cast<std::uint64_t>(step));
        else
          hessian_.apply(h.data(), hh.data());
        for (std::size_t k = 0; k < p; ++k) h[k] = b[k] + h[k] - hh[k] / config_.scale;
        const double size = norm(h.data(), p);
        if (!std::isfinite(size) || size > limit)
          throw RuntimeError(fmt::format(
              "LiSSA diverged at step {} of repeat {} (||h|| = {:.3e}): the scale {:.6g} must "
              "exceed the largest eigenvalue of the (sampled) Hessian; raise influence.lissa.scale "
              "or influence.lissa.batch",
              step + 1, repeat + 1, size, config_.scale));
      }
      for (std::size_t k = 0; k < p; ++k) x[k] += h[k] / config_.scale / config_.repeats;
    }
    ++solve_count_;
    SolveReport report;
    report.iterations = config_.depth * config_.repeats;
    report.relative_residual = relative_residual(hessian_, b, x);
    return report;
  }

 private:
  HessianOperator& hessian_;
  LissaConfig config_;
  std::uint64_t solve_count_ = 0;
  std::function<bool()> poll_;
  std::vector<double> interrupted_, resume_;
};

class LowRankSolver final : public IhvpSolver {
 public:
  LowRankSolver(const IhvpConfig& config, HessianOperator& hessian)
      : hessian_(hessian),
        pairs_(top_eigenpairs(hessian, config.lowrank_rank, config.eigen_tolerance)) {}

  IhvpMethod method() const override { return IhvpMethod::lowrank; }

  // x = U diag(1/lambda) U^T b: exact on the span of the top eigenvectors, zero off it.
  SolveReport solve(const double* b, double* x) override {
    const std::size_t p = hessian_.parameters();
    std::fill(x, x + p, 0.0);
    for (std::size_t i = 0; i < pairs_.values.size(); ++i) {
      const double* u = pairs_.vectors.data() + i * p;
      const double c = dot(u, b, p) / pairs_.values[i];
      for (std::size_t k = 0; k < p; ++k) x[k] += c * u[k];
    }
    SolveReport report;
    report.iterations = static_cast<int>(pairs_.values.size());
    report.relative_residual = relative_residual(hessian_, b, x);
    return report;
  }

 private:
  HessianOperator& hessian_;
  Eigenpairs pairs_;
};

// First-order removal (docs/math.md §3): no inverse Hessian, H ~ c I, so x = b / c and a client's
// score is (1/n) grad L_test . g~_k / c, the gradients alone. c is the Rayleigh quotient
// b^T H b / b^T b along the first nonzero right-hand side (s_test's grad L_test in `fluence
// influence`), so that the first solve is CG's first iterate (the steepest-descent step), and is
// then kept: every later solve uses the same multiple of the identity, a linear estimator whose
// scores are the s_test route's.
class FirstOrderSolver final : public IhvpSolver {
 public:
  explicit FirstOrderSolver(HessianOperator& hessian) : hessian_(hessian) {}

  IhvpMethod method() const override { return IhvpMethod::first_order; }

  SolveReport solve(const double* b, double* x) override {
    const std::size_t p = hessian_.parameters();
    const double size = dot(b, b, p);
    if (curvature_ == 0.0 && size > 0.0) {
      std::vector<double> hb(p);
      hessian_.apply(b, hb.data());
      curvature_ = dot(b, hb.data(), p) / size;
      if (!(curvature_ > 0.0))
        throw RuntimeError(fmt::format(
            "influence.solver = \"first_order\": the curvature b^T H b / b^T b = {:.3e} along "
            "the first right-hand side is not positive; add influence.damping",
            curvature_));
    }
    for (std::size_t k = 0; k < p; ++k) x[k] = curvature_ > 0.0 ? b[k] / curvature_ : 0.0;
    SolveReport report;
    report.relative_residual = relative_residual(hessian_, b, x);
    return report;
  }
  // The curvature c once the first solve set it: a resumed sweep keeps the same estimator.
  std::vector<double> history() const override {
    return curvature_ > 0.0 ? std::vector<double>{curvature_} : std::vector<double>{};
  }
  void restore_history(const std::vector<double>& history) override {
    if (history.size() > 1)
      throw InputError("checkpoint: the first-order solver history is malformed");
    curvature_ = history.empty() ? 0.0 : history[0];
  }

 private:
  HessianOperator& hessian_;
  double curvature_ = 0.0;  // c of H ~ c I; 0 until the first nonzero right-hand side
};

}  // namespace

bool interruptible_solve(IhvpSolver& solver, PartialUnit* partial, const std::vector<double>& key,
                         const std::string& name, const std::function<SolveReport()>& solve,
                         SolveReport& report) {
  const bool pollable = partial && solver.set_stop_poll(stop_inside_unit_anywhere);
  if (const std::vector<double>* state = partial ? partial->resume(key, nullptr) : nullptr) {
    log::info("resuming {} after {} iterations (from the checkpoint)", name,
              solver.interrupted_progress(*state));
    solver.resume_next(*state);
  }
  report = solve();
  if (pollable) solver.set_stop_poll({});
  if (!report.interrupted) return true;
  std::vector<double> state = solver.interrupted_state();
  const long progress = solver.interrupted_progress(state);
  partial->interrupted(key, {}, std::move(state), name, fmt::format("{} iterations", progress));
  return false;
}

std::unique_ptr<IhvpSolver> make_ihvp_solver(const IhvpConfig& config, HessianOperator& hessian) {
  switch (config.method) {
    case IhvpMethod::cg:
      return std::make_unique<KrylovSolver>(config, hessian);
    case IhvpMethod::explicit_cholesky:
      return std::make_unique<CholeskySolver>(config, hessian);
    case IhvpMethod::lissa:
      return std::make_unique<LissaSolver>(config, hessian);
    case IhvpMethod::lowrank:
      return std::make_unique<LowRankSolver>(config, hessian);
    case IhvpMethod::ekfac:
      return make_ekfac_solver(hessian);
    case IhvpMethod::first_order:
      return std::make_unique<FirstOrderSolver>(hessian);
  }
  throw InputError("unknown IHVP solver");
}

}  // namespace fluence
