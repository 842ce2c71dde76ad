#include "fluence/influence/block_cg.hpp"

#include <cblas.h>
#include <petscsys.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/solver_options.hpp"
#include "fluence/influence/kronecker.hpp"

extern "C" {
void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
            double* work, const int* lwork, int* info);
}

namespace fluence {

namespace {

// Directions whose Gram eigenvalue is below this fraction of the largest are dropped: the block
// spans them only to rounding (two residual columns became parallel, say).
constexpr double kDropTolerance = 1e-12;
constexpr int kRestarts = 5;

std::size_t at(int row, std::size_t p) {
  return static_cast<std::size_t>(row) * p;
}

double squared_norm(const double* a, std::size_t n) {
  double s = 0.0;
  for (std::size_t i = 0; i < n; ++i) s += a[i] * a[i];
  return s;
}

// C (m x n) = A B^T for row-major A (m x p) and B (n x p): the inner products of their rows.
void row_products(const double* a, int m, const double* b, int n, std::size_t p, double* c) {
  if (m == 0 || n == 0) return;
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, static_cast<int>(p), 1.0, a,
              static_cast<int>(p), b, static_cast<int>(p), 0.0, c, n);
}

// Y (n x p) += alpha C^T A, for C (m x n) and A (m x p): each row of Y gains a combination of A's.
void add_combinations(double alpha, const double* c, int m, int n, const double* a, std::size_t p,
                      double* y) {
  if (m == 0 || n == 0) return;
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, static_cast<int>(p), m, alpha, c, n, a,
              static_cast<int>(p), 1.0, y, static_cast<int>(p));
}

// Eigendecomposition of the symmetric m x m matrix g (row-major; symmetric, so the column-major
// LAPACK sees the same matrix): values ascending, g overwritten by the eigenvectors as rows.
void symmetric_eigen(std::vector<double>& g, int m, std::vector<double>& values) {
  values.resize(static_cast<std::size_t>(m));
  if (m == 0) return;
  int info = 0, lwork = -1;
  double size = 0.0;
  dsyev_("V", "U", &m, g.data(), &m, values.data(), &size, &lwork, &info);
  lwork = static_cast<int>(size);
  std::vector<double> work(static_cast<std::size_t>(lwork));
  dsyev_("V", "U", &m, g.data(), &m, values.data(), work.data(), &lwork, &info);
  if (info != 0) throw RuntimeError(fmt::format("block CG: dsyev failed (info {})", info));
}

// The coefficients W (m x s, row-major) that make the rows of W^T Y orthonormal in the inner
// product whose Gram matrix of Y's rows is g (m x m): W = U_kept Lambda_kept^-1/2, where the
// eigenvalues below kDropTolerance of the largest are left out. Returns s; `negative` is set when
// an eigenvalue is clearly negative (the operator is not positive definite on the block).
int orthonormalizer(std::vector<double> g, int m, std::vector<double>& w, bool& negative) {
  // Symmetrize: the Gram matrix of a symmetric operator is symmetric only to rounding.
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < i; ++j) {
      const double mean =
          0.5 * (g[static_cast<std::size_t>(i) * m + j] + g[static_cast<std::size_t>(j) * m + i]);
      g[static_cast<std::size_t>(i) * m + j] = g[static_cast<std::size_t>(j) * m + i] = mean;
    }
  std::vector<double> values;
  symmetric_eigen(g, m, values);
  const double largest = m > 0 ? values.back() : 0.0;
  negative = m > 0 && (largest <= 0.0 || values.front() < -1e-10 * largest);
  std::vector<int> kept;
  for (int i = m; i-- > 0;)
    if (values[static_cast<std::size_t>(i)] > kDropTolerance * largest && largest > 0.0)
      kept.push_back(i);
  const int s = static_cast<int>(kept.size());
  w.assign(static_cast<std::size_t>(m) * s, 0.0);
  for (int c = 0; c < s; ++c) {
    const int i = kept[static_cast<std::size_t>(c)];
    const double scale = 1.0 / std::sqrt(values[static_cast<std::size_t>(i)]);
    const double* u = g.data() + static_cast<std::size_t>(i) * m;  // eigenvector i
    for (int r = 0; r < m; ++r) w[static_cast<std::size_t>(r) * s + c] = u[r] * scale;
  }
  return s;
}

// Y (s x p) = W^T X for W (m x s) and X (m x p).
void combine(const double* w, int m, int s, const double* x, std::size_t p, double* y) {
  std::fill(y, y + at(s, p), 0.0);
  add_combinations(1.0, w, m, s, x, p, y);
}

// An interrupted block solve's state, at the end of a block iteration that left columns to
// solve: [k, restart, m, s, block iterations, column products, indefinite, each column's
// iterations (k), the active columns (m), X (k x p: the deflated columns' solutions), the active
// iterates and recurrence residuals (m x p each), the search block and its image (s x p each)].
// Everything else the loop uses is recomputed from these before it is read.
enum StateHead : std::size_t {
  kK,
  kRestart,
  kM,
  kS,
  kBlockIterations,
  kProducts,
  kIndefinite,
  kHead
};

}  // namespace

BlockCgOutcome block_cg(HessianOperator& hessian, const double* B, double* X, int k,
                        const BlockCgSettings& settings) {
  const std::size_t p = hessian.parameters();
  const int limit =
      settings.max_iterations > 0 ? settings.max_iterations : static_cast<int>(10 * p + 100);
  BlockCgOutcome outcome;
  outcome.columns.assign(static_cast<std::size_t>(k), SolveReport{});
  std::vector<double> target(static_cast<std::size_t>(k)), bnorm(static_cast<std::size_t>(k));
  for (int j = 0; j < k; ++j) {
    bnorm[static_cast<std::size_t>(j)] = std::sqrt(squared_norm(B + at(j, p), p));
    target[static_cast<std::size_t>(j)] = settings.rtol * bnorm[static_cast<std::size_t>(j)];
    if (bnorm[static_cast<std::size_t>(j)] == 0.0) std::fill(X + at(j, p), X + at(j, p) + p, 0.0);
  }
  std::vector<double> residual(at(k, p));  // true residuals B - H X, all columns
  auto true_residuals = [&] {
    hessian.apply_block(X, residual.data(), k);
    outcome.column_products += k;
    for (std::size_t i = 0; i < residual.size(); ++i) residual[i] = B[i] - residual[i];
  };

  std::vector<int> active;  // the columns still being solved
  std::vector<double> xa, ra, z, q, search, image, coefficients, w, gram;
  int m = 0, s = 0;  // active columns; rows of the current search block (H-orthonormal)
  int first_restart = 0;
  bool resumed = settings.resume != nullptr;
  if (resumed) {  // the loop's variables where the interrupted solve left them
    const std::vector<double>& state = *settings.resume;
    const auto read = [&](std::size_t from, std::size_t count, double* to) {
      if (from + count > state.size())
        throw InputError("checkpoint: the interrupted block CG solve does not fit this problem");
      std::copy_n(state.begin() + static_cast<std::ptrdiff_t>(from), count, to);
    };
    if (state.size() < kHead || static_cast<int>(state[kK]) != k)
      throw InputError("checkpoint: the interrupted block CG solve does not fit this block");
    first_restart = static_cast<int>(state[kRestart]);
    m = static_cast<int>(state[kM]);
    s = static_cast<int>(state[kS]);
    outcome.block_iterations = static_cast<int>(state[kBlockIterations]);
    outcome.column_products = static_cast<long>(state[kProducts]);
    outcome.indefinite = state[kIndefinite] != 0.0;
    std::size_t at_state = kHead;
    for (int j = 0; j < k; ++j)
      outcome.columns[static_cast<std::size_t>(j)].iterations =
          static_cast<int>(state.at(at_state++));
    active.resize(static_cast<std::size_t>(m));
    for (int a = 0; a < m; ++a)
      active[static_cast<std::size_t>(a)] = static_cast<int>(state.at(at_state++));
    xa.resize(at(m, p));
    ra.resize(at(m, p));
    search.resize(at(s, p));
    image.resize(at(s, p));
    read(at_state, at(k, p), X);
    at_state += at(k, p);
    for (std::vector<double>* block : {&xa, &ra, &search, &image}) {
      read(at_state, block->size(), block->data());
      at_state += block->size();
    }
  } else {
    true_residuals();
  }
  // Restarts from the true residuals when the recurrence's drifted below the target: a few at
  // most (a tolerance near rounding could otherwise never be met).
  for (int restart = first_restart; restart <= kRestarts; ++restart) {
    if (!resumed) {
      // (Re)start from the true residuals of the columns above their target.
      active.clear();
      for (int j = 0; j < k; ++j) {
        auto& report = outcome.columns[static_cast<std::size_t>(j)];
        const double r = std::sqrt(squared_norm(residual.data() + at(j, p), p));
        report.relative_residual =
            bnorm[static_cast<std::size_t>(j)] > 0.0 ? r / bnorm[static_cast<std::size_t>(j)] : r;
        if (r > target[static_cast<std::size_t>(j)] && report.iterations < limit &&
            bnorm[static_cast<std::size_t>(j)] > 0.0)
          active.push_back(j);
      }
      if (active.empty()) break;
      m = static_cast<int>(active.size());
      xa.resize(at(m, p));
      ra.resize(at(m, p));
      for (int a = 0; a < m; ++a) {
        std::copy_n(X + at(active[static_cast<std::size_t>(a)], p), p, xa.begin() + at(a, p));
        std::copy_n(residual.begin() + at(active[static_cast<std::size_t>(a)], p), p,
                    ra.begin() + at(a, p));
      }
      s = 0;
    }
    resumed = false;
    bool progress = true;
    while (m > 0 && progress) {
      // Z = M^-1 R, then the new directions Z - P (Q^T Z): H-orthogonal to the last block.
      z.resize(at(m, p));
      if (settings.preconditioner)
        settings.preconditioner(ra.data(), z.data(), m);
      else
        std::copy_n(ra.begin(), at(m, p), z.begin());
      if (s > 0) {
        coefficients.resize(static_cast<std::size_t>(s) * m);
        row_products(image.data(), s, z.data(), m, p, coefficients.data());
        add_combinations(-1.0, coefficients.data(), s, m, search.data(), p, z.data());
      }
      // Unit rows first, so that the Gram matrix's eigenvalues measure (in)dependence, not scale.
      for (int a = 0; a < m; ++a) {
        const double length = std::sqrt(squared_norm(z.data() + at(a, p), p));
        if (length > 0.0)
          for (std::size_t i = 0; i < p; ++i) z[at(a, p) + i] /= length;
      }
      q.resize(at(m, p));
      hessian.apply_block(z.data(), q.data(), m);
      outcome.column_products += m;
      ++outcome.block_iterations;
      gram.resize(static_cast<std::size_t>(m) * m);
      row_products(z.data(), m, q.data(), m, p, gram.data());
      bool negative = false;
      s = orthonormalizer(gram, m, w, negative);
      if (negative) outcome.indefinite = true;
      search.resize(at(s, p));
      image.resize(at(s, p));
      combine(w.data(), m, s, z.data(), p, search.data());
      combine(w.data(), m, s, q.data(), p, image.data());
      if (s == 0) break;
      // alpha = P^T R (P^T H P = I): X += P alpha, R -= H P alpha.
      coefficients.resize(static_cast<std::size_t>(s) * m);
      row_products(search.data(), s, ra.data(), m, p, coefficients.data());
      add_combinations(1.0, coefficients.data(), s, m, search.data(), p, xa.data());
      add_combinations(-1.0, coefficients.data(), s, m, image.data(), p, ra.data());
      // Deflation: a column at its target (or its iteration limit) leaves the block.
      int kept = 0;
      for (int a = 0; a < m; ++a) {
        const int j = active[static_cast<std::size_t>(a)];
        auto& report = outcome.columns[static_cast<std::size_t>(j)];
        ++report.iterations;
        const double r = std::sqrt(squared_norm(ra.data() + at(a, p), p));
        if (r <= target[static_cast<std::size_t>(j)] || report.iterations >= limit) {
          std::copy_n(xa.begin() + at(a, p), p, X + at(j, p));
          continue;
        }
        if (kept != a) {
          std::copy_n(xa.begin() + at(a, p), p, xa.begin() + at(kept, p));
          std::copy_n(ra.begin() + at(a, p), p, ra.begin() + at(kept, p));
        }
        active[static_cast<std::size_t>(kept++)] = j;
      }
      m = kept;
      active.resize(static_cast<std::size_t>(m));
      progress = !outcome.indefinite;
      if (m > 0 && progress && settings.stop_poll && settings.stop_poll()) {
        auto& state = outcome.state;
        state = {static_cast<double>(k),
                 static_cast<double>(restart),
                 static_cast<double>(m),
                 static_cast<double>(s),
                 static_cast<double>(outcome.block_iterations),
                 static_cast<double>(outcome.column_products),
                 outcome.indefinite ? 1.0 : 0.0};
        for (const auto& report : outcome.columns) state.push_back(report.iterations);
        state.insert(state.end(), active.begin(), active.end());
        state.insert(state.end(), X, X + at(k, p));
        for (const std::vector<double>* block : {&xa, &ra, &search, &image})
          state.insert(state.end(), block->begin(), block->end());
        outcome.interrupted = true;
        return outcome;
      }
    }
    for (int a = 0; a < m; ++a)
      std::copy_n(xa.begin() + at(a, p), p, X + at(active[static_cast<std::size_t>(a)], p));
    true_residuals();
    if (outcome.indefinite || s == 0) break;  // negative curvature, or no direction left
  }
  for (int j = 0; j < k; ++j) {  // what each column reached, on its true residual
    auto& report = outcome.columns[static_cast<std::size_t>(j)];
    const double r = std::sqrt(squared_norm(residual.data() + at(j, p), p));
    report.relative_residual =
        bnorm[static_cast<std::size_t>(j)] > 0.0 ? r / bnorm[static_cast<std::size_t>(j)] : r;
    if (report.relative_residual > settings.rtol) outcome.converged = false;
  }
  return outcome;
}

BlockPreconditioner make_block_preconditioner(const IhvpConfig& config, HessianOperator& hessian) {
  // -ihvp_pc_type wins over the deck, as for the single-vector solver.
  IhvpPreconditioner kind = config.preconditioner;
  char name[64] = "";
  PetscBool set = PETSC_FALSE;
  petsc_check(PetscOptionsGetString(nullptr, kIhvpPrefix, "-pc_type", name, sizeof name, &set),
              "PetscOptionsGetString");
  if (set == PETSC_TRUE) {
    const std::string type = name;
    kind = type == kKroneckerPcType ? IhvpPreconditioner::kronecker
           : type == "jacobi"       ? IhvpPreconditioner::jacobi
                                    : IhvpPreconditioner::none;
  }
  const std::size_t p = hessian.parameters();
  if (kind == IhvpPreconditioner::jacobi) {
    auto inverse = std::make_shared<std::vector<double>>();
    hessian.diagonal(*inverse);
    for (auto& value : *inverse) value = value > 0.0 ? 1.0 / value : 1.0;
    return [inverse, p](const double* r, double* z, int k) {
      for (int j = 0; j < k; ++j)
        for (std::size_t i = 0; i < p; ++i) z[at(j, p) + i] = (*inverse)[i] * r[at(j, p) + i];
    };
  }
  if (kind == IhvpPreconditioner::kronecker) {
    auto kronecker = std::make_shared<KroneckerPreconditioner>(hessian.kronecker_factors());
    return [kronecker, p](const double* r, double* z, int k) {
      for (int j = 0; j < k; ++j) kronecker->apply(r + at(j, p), z + at(j, p));
    };
  }
  return {};
}

BlockIhvpSolver::BlockIhvpSolver(const IhvpConfig& config, HessianOperator& hessian)
    : hessian_(hessian), config_(config) {
  settings_.rtol = config.rtol;
  settings_.max_iterations = config.max_iterations;
  PetscReal rtol = 0.0;
  PetscBool set = PETSC_FALSE;
  petsc_check(PetscOptionsGetReal(nullptr, kIhvpPrefix, "-ksp_rtol", &rtol, &set),
              "PetscOptionsGetReal");
  if (set == PETSC_TRUE) settings_.rtol = rtol;
}

void BlockIhvpSolver::add_solution(const double* x, const double* b) {
  const std::size_t p = hessian_.parameters();
  if (!config_.warm_start || solutions_.size() >= 32 * p) return;
  solutions_.insert(solutions_.end(), x, x + p);
  images_.insert(images_.end(), b, b + p);
}

// x0 = X_s S^-1 X_s^T b with S = X_s^T H X_s = X_s^T B_s: the minimizer of the H-norm error over
// the span of the earlier solutions (no products: H X_s = B_s is known).
void BlockIhvpSolver::initial_guess(const double* B, double* X, int k) const {
  const std::size_t p = hessian_.parameters();
  std::fill(X, X + at(k, p), 0.0);
  const int s = static_cast<int>(solutions_.size() / std::max<std::size_t>(p, 1));
  if (s == 0 || k == 0) return;
  std::vector<double> gram(static_cast<std::size_t>(s) * s), w;
  row_products(solutions_.data(), s, images_.data(), s, p, gram.data());
  bool negative = false;
  const int r = orthonormalizer(gram, s, w, negative);
  if (r == 0) return;
  // U = W^T X_s is H-orthonormal with H U = W^T B_s; x0 = U^T (U b)... as rows: X0 = (B U^T) U.
  std::vector<double> basis(at(r, p)), c(static_cast<std::size_t>(r) * k);
  combine(w.data(), s, r, solutions_.data(), p, basis.data());
  row_products(basis.data(), r, B, k, p, c.data());
  add_combinations(1.0, c.data(), r, k, basis.data(), p, X);
}

BlockCgOutcome BlockIhvpSolver::solve(const double* B, double* X, int k) {
  if (!preconditioner_made_) {
    settings_.preconditioner = make_block_preconditioner(config_, hessian_);
    preconditioner_made_ = true;
  }
  std::vector<double> resume = std::move(resume_);
  resume_.clear();
  BlockCgSettings settings = settings_;
  if (!resume.empty())
    settings.resume = &resume;  // X is the state's
  else if (config_.warm_start)
    initial_guess(B, X, k);
  else
    std::fill(X, X + at(k, hessian_.parameters()), 0.0);
  BlockCgOutcome outcome = block_cg(hessian_, B, X, k, settings);
  if (outcome.interrupted) return outcome;
  if (!outcome.converged)
    log::warn(
        "IHVP: block CG left columns above rtol{} after {} block iterations",
        outcome.indefinite ? " (the Hessian is not positive definite: set influence.damping)" : "",
        outcome.block_iterations);
  return outcome;
}

int BlockIhvpSolver::interrupted_iterations(const std::vector<double>& state) {
  return state.size() > kBlockIterations ? static_cast<int>(state[kBlockIterations]) : 0;
}

}  // namespace fluence
