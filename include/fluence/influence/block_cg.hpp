#pragma once
// Block conjugate gradients for many right-hand sides at once (docs/math.md §3.3): H X = B with k
// columns, each iteration one block product H P (HessianOperator::apply_block: GEMMs over the
// block). The breakdown-free variant of O'Leary's block CG (Ji & Li 2017): the search block is
// made H-orthonormal by an eigendecomposition of its Gram matrix, dropping the directions the
// block no longer spans (rank deficiency: residuals that became dependent), and a column whose
// residual reached the tolerance leaves the block (deflation). Every column is then checked on
// its true residual ||b - H x|| / ||b|| and restarted from it if the recurrence drifted.
//
// The preconditioner is a callback (Z = M^-1 R for a block), so any symmetric positive definite
// preconditioner plugs in. Every rank runs the same sequential dense algebra on replicated blocks
// (one BLAS thread per rank): the iterates are the same bits for any rank count.
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "fluence/influence/hessian_operator.hpp"
#include "fluence/influence/ihvp.hpp"

namespace fluence {

/// Z = M^-1 R for k vectors of p values, one after another (k x p row-major); Z does not alias R.
using BlockPreconditioner = std::function<void(const double* R, double* Z, int k)>;

struct BlockCgSettings {
  double rtol = 1e-10;                 // per column: ||b - H x|| <= rtol ||b||
  int max_iterations = 0;              // per column; 0 = 10 p + 100
  BlockPreconditioner preconditioner;  // empty: none
  /// Polled (collectively when the operator is a collective) after every block iteration that
  /// leaves columns to solve: true ends the solve there with BlockCgOutcome::interrupted
  /// (docs/operations.md "Stops inside a unit").
  std::function<bool()> stop_poll;
  /// Continue the interrupted solve of the same B that this state describes (null: a fresh
  /// start; X's initial guesses are then not read).
  const std::vector<double>* resume = nullptr;
};

struct BlockCgOutcome {
  std::vector<SolveReport> columns;  // iterations each column took part in, its true residual
  int block_iterations = 0;          // block products by the search blocks
  long column_products = 0;          // Hessian products in all (search blocks and residuals)
  bool converged = true;             // every column reached rtol on its true residual
  bool indefinite = false;           // a search block met non-positive curvature
  bool interrupted = false;          // stop_poll ended it: `state` continues it, X is unset
  std::vector<double> state;         // the interrupted solve's state (block_cg.cpp)
};

/// X = H^-1 B for k columns (B, X: k x p row-major; X holds the initial guesses). A collective
/// when the operator is.
BlockCgOutcome block_cg(HessianOperator& hessian, const double* B, double* X, int k,
                        const BlockCgSettings& settings);

/// The preconditioner of `config` (influence.preconditioner, -ihvp_pc_type) for block solves:
/// Jacobi from diag(H), the Kronecker factors, or none (empty). A collective when the operator is.
BlockPreconditioner make_block_preconditioner(const IhvpConfig& config, HessianOperator& hessian);

/// Block solves with warm starts: each block starts from the H-orthogonal projection onto the
/// solutions given by add_solution (s_test, as the single-vector CG starts from it; at most 32).
/// A block does not add its own: a sweep resumed after a stop then solves its later blocks from
/// the same start, bitwise as the uninterrupted sweep.
class BlockIhvpSolver {
 public:
  BlockIhvpSolver(const IhvpConfig& config, HessianOperator& hessian);
  /// A solution known already (x = H^-1 b): later blocks start from their projection onto it.
  void add_solution(const double* x, const double* b);
  /// X = H^-1 B (k x p row-major; X overwritten). With a stop poll set, the outcome may be
  /// interrupted (its state continues it through resume_next).
  BlockCgOutcome solve(const double* B, double* X, int k);
  /// Stops inside a block solve (docs/operations.md "Stops inside a unit"): `poll` is called after
  /// every block iteration, collectively; empty: solves run to their end.
  void set_stop_poll(std::function<bool()> poll) { settings_.stop_poll = std::move(poll); }
  /// The next solve, of the same B, continues the interrupted one `state` describes: the same
  /// operations in the same order, so the same bits as an uninterrupted solve.
  void resume_next(std::vector<double> state) { resume_ = std::move(state); }
  /// The block iterations done before the interruption `state` describes.
  static int interrupted_iterations(const std::vector<double>& state);

 private:
  void initial_guess(const double* B, double* X, int k) const;

  HessianOperator& hessian_;
  IhvpConfig config_;
  BlockCgSettings settings_;
  bool preconditioner_made_ = false;
  std::vector<double> solutions_, images_;  // earlier x and H x = b, count x p
  std::vector<double> resume_;              // the state the next solve continues (resume_next)
};

}  // namespace fluence
