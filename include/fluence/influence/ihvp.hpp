#pragma once
// Inverse-Hessian-vector products x = H^{-1} b (docs/math.md §3). Six methods, chosen by
// `[influence] solver`:
//   cg       PETSc KSP (CG by default) on a matrix-free MatShell of the Hessian operator, options
//            prefix "ihvp_", preconditioned by Jacobi from the exact diagonal or by the Kronecker
//            factors (influence/kronecker.hpp; a PCSHELL, also `-ihvp_pc_type kronecker`),
//            warm-started across right-hand sides by an H-orthogonal projection onto earlier
//            solutions;
//   explicit the dense Hessian, Cholesky-factored once (LAPACK), for small p;
//   lissa    stochastic Neumann-series estimation (Agarwal et al.; seed 001 Table I "SE");
//   lowrank  projection onto the top-k eigenpairs from SLEPc (an Arnoldi-style approximation to
//            compare against: exact only on that subspace);
//   ekfac    a network's EK-FAC inverse (influence/kfac.hpp), no iterations: an estimator that
//            `fluence influence` scores against exact CG;
//   first_order  no solve: H ~ c I, c = b^T H b / b^T b along the first right-hand side (the
//            scores from the gradients alone: first-order removal).
// CG on a network can be preconditioned by K-FAC (`kfac`, a PCSHELL, also `-ihvp_pc_type kfac`).
// Every solve reports its iterations and the true relative residual ||H x - b|| / ||b||.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fluence/core/config.hpp"
#include "fluence/core/resume.hpp"
#include "fluence/influence/hessian_operator.hpp"

namespace fluence {

enum class IhvpMethod { cg, explicit_cholesky, lissa, lowrank, ekfac, first_order };
IhvpMethod parse_ihvp_method(const std::string& name);
std::string to_string(IhvpMethod method);

enum class IhvpPreconditioner { none, jacobi, kronecker, kfac };
IhvpPreconditioner parse_ihvp_preconditioner(const std::string& name);
std::string to_string(IhvpPreconditioner preconditioner);

// Filled in by IhvpConfig::from_deck; the defaults are the declared keys' (register_ihvp_keys).
struct LissaConfig {
  double scale{};  // 0: 1.5 x the largest eigenvalue estimated by power iteration
  int depth{};
  int repeats{};
  int batch{};  // rows per stochastic Hessian sample; 0 = the exact Hessian (deterministic)
  double divergence_limit{};  // stop when ||h_j|| > limit * ||b|| / scale
};

// Filled in by from_deck; the defaults are the declared keys' (register_ihvp_keys).
struct IhvpConfig {
  IhvpMethod method{};
  double rtol{};                        // CG: stop when ||b - H x|| <= rtol ||b||
  int max_iterations{};                 // CG: 0 = 10 p + 100
  IhvpPreconditioner preconditioner{};  // CG: none, Jacobi from diag(H), Kronecker, K-FAC
  bool warm_start{};                    // CG: H-orthogonal projection onto earlier solutions
  int explicit_max_parameters{};
  LissaConfig lissa;
  int lowrank_rank{};
  double eigen_tolerance{};
  bool lanczos_spectrum{};  // influence.spectrum_solver = "lanczos" (influence/lanczos.hpp)

  static IhvpConfig from_deck(const Deck& deck);
};

/// Declares the solver keys of [influence] IhvpConfig::from_deck reads: type, default, range and
/// meaning of each (inputs/README.md's tables).
void register_ihvp_keys(DeckSchema& schema);

struct SolveReport {
  int iterations = 0;
  double relative_residual = 0.0;  // ||H x - b|| / ||b||, recomputed after the solve
  bool interrupted = false;        // a stop poll ended it: IhvpSolver::interrupted_state(), x unset
};

class IhvpSolver {
 public:
  virtual ~IhvpSolver() = default;
  /// x = H^{-1} b (x is overwritten). A collective when the operator is.
  virtual SolveReport solve(const double* b, double* x) = 0;
  /// x = H^{-1} b without the report (a preconditioner's application, where the residual check a
  /// solve makes would cost as much as the solve: a dense product for the explicit solver).
  virtual void apply_inverse(const double* b, double* x) { solve(b, x); }
  virtual IhvpMethod method() const = 0;
  /// What earlier solves left that changes later ones (CG's recycled solutions, LiSSA's solve
  /// counter): a resumed sweep restores it so that its solves are bitwise the uninterrupted ones.
  /// Empty for the stateless solvers.
  virtual std::vector<double> history() const { return {}; }
  /// Restores what history() returned (replacing this solver's own history).
  virtual void restore_history(const std::vector<double>& history) { (void)history; }

  /// Stops inside a solve (docs/operations.md "Stops inside a unit"): `poll` is called at the
  /// solver's fine boundaries (a CG iteration, a LiSSA step), collectively when the operator is
  /// a collective; when it says stop, solve() returns SolveReport::interrupted and
  /// interrupted_state() holds what the solve needs to continue. False: this solver (or its
  /// PETSc options) cannot continue bitwise, and its solves run to their end.
  virtual bool set_stop_poll(std::function<bool()> poll) {
    (void)poll;
    return false;
  }
  virtual std::vector<double> interrupted_state() const { return {}; }
  /// The next solve, of the same b, continues the interrupted one `state` describes: its result
  /// is the same bits as an uninterrupted solve.
  virtual void resume_next(std::vector<double> state) { (void)state; }
  /// The iterations (CG) or steps (LiSSA) done before the interruption `state` describes.
  virtual long interrupted_progress(const std::vector<double>& state) const {
    (void)state;
    return 0;
  }
};

/// Collective: `solve` (one solve by `solver`) as the unit `key` of `partial` that a stop may
/// interrupt at the solver's fine boundaries (docs/operations.md "Stops inside a unit"): when
/// `partial` holds this unit's state, the solve continues it ("resuming NAME after k
/// iterations"), else it starts afresh. Interrupted: `partial` holds the solver's state and false
/// is returned (the caller writes the checkpoint). A null `partial`, or a solver that cannot
/// continue bitwise, runs to its end. The poll is collective: the solve must be one every rank
/// takes part in.
bool interruptible_solve(IhvpSolver& solver, PartialUnit* partial, const std::vector<double>& key,
                         const std::string& name, const std::function<SolveReport()>& solve,
                         SolveReport& report);

/// The solver for `config.method` on `hessian` (kept by reference). InputError when the method
/// does not fit (explicit with p above explicit_max_parameters).
std::unique_ptr<IhvpSolver> make_ihvp_solver(const IhvpConfig& config, HessianOperator& hessian);

/// ||H x - b|| / ||b|| with one product by the operator (0 when b = 0 and x = 0).
double relative_residual(HessianOperator& hessian, const double* b, const double* x);

}  // namespace fluence
