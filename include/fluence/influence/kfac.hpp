#pragma once
// K-FAC and EK-FAC for networks of dense layers and convolutions (docs/math.md §3.2): the
// curvature of the objective approximated block-diagonally over the layers, each block a
// Kronecker product
//   G_l ⊗ A_l,  A_l = (1/n) sum_r ā_r ā_r^T  (ā_r = [a_r; 1], the layer's inputs and the bias 1),
//               G_l = (1/n) sum_r sum_c g_rc g_rc^T,
// g_rc the gradient of v_rc . z_r with respect to the layer's outputs before the activation, for
// the C directions v_rc = sqrt(p_rc) (e_c - p_r) whose outer products sum to the head's Hessian
// diag(p_r) - p_r p_r^T: the Fisher of the model's own predictive distribution, taken in
// expectation (no sampled labels), which is the generalized Gauss-Newton matrix. A convolution
// (KFC, Grosse & Martens 2016; docs/math.md §3.2.1) is a dense layer applied at every output
// position t of its patches ā_rt: A_l sums over the positions, G_l averages over them,
//   A_l = (1/n) sum_r sum_t ā_rt ā_rt^T,   G_l = (1/(n |T|)) sum_r sum_c sum_t g_rct g_rct^T.
//
// With G_l = Q_G diag(g) Q_G^T and A_l = Q_A diag(a) Q_A^T, the approximation is
// (Q_G ⊗ Q_A) diag(λ) (Q_G ⊗ Q_A)^T plus shift = l2 + damping, with λ_ij = g_i a_j (K-FAC) or the
// eigenvalue-corrected λ_ij = (1/n) sum_r sum_c (q_G,i^T Γ_rc q_A,j)^2, Γ_rc the layer's gradient
// of v_rc . z_r in [W b] (g_rc ā_r^T; a convolution's sum_t g_rct ā_rt^T): the GGN's own diagonal
// in that eigenbasis (EK-FAC, George et al. 2018; Grosse et al. 2023).
//
// Determinism: each client's sums are one fixed sequence of GEMMs over its rows; the clients' sums
// are added in client order (chain_sum), and every rank eigendecomposes the same matrices with one
// BLAS thread, so every rank holds the same bits for any rank count.
#include <cstddef>
#include <memory>
#include <vector>

#include "fluence/fl/federation.hpp"
#include "fluence/influence/ihvp.hpp"

namespace fluence {

class Network;

struct KfacLayer {
  std::size_t weights = 0, biases = 0;  // offsets in theta: weights (out x in, row-major), biases
  int outputs = 0, inputs = 0;          // inputs without the bias column
  bool bias = false;
  // A convolution: outputs = filters, inputs = its (ky, kx, c) patch, shared by `positions`
  // output positions (a dense layer has one).
  bool convolution = false;
  int positions = 1;
  std::vector<double> output_factor;  // G, outputs x outputs
  std::vector<double> input_factor;   // A, width() x width(), the bias column last
  std::vector<double> corrected;      // EK-FAC's λ, outputs x width() (empty: K-FAC's g_i a_j)
  int width() const { return inputs + (bias ? 1 : 0); }
};

struct KfacFactors {
  std::size_t parameters = 0;
  double shift = 0.0;  // l2 + damping
  std::vector<KfacLayer> layers;
};

/// The network behind `model` for K-FAC; InputError naming influence.preconditioner /
/// influence.solver when it is not a network (logistic has its own Kronecker preconditioner).
const Network& kfac_network(const Model& model, const char* use);

/// The layers of `network` with zero factors (and zero corrections when `corrected`).
KfacFactors kfac_shapes(const Network& network, bool corrected);

/// Adds the sums over `rows` rows (not yet divided by n) of ā ā^T into every A and of g g^T into
/// every G (a convolution's summed over its positions as well).
void add_kfac_factor_sums(const Network& network, const double* x, std::size_t rows,
                          const double* theta, KfacFactors& sums, Workspace& work);

/// The factors from their sums over `rows` rows: the SYRKs' upper triangles mirrored, then
/// divided by rows (a convolution's G by rows x positions; the corrections are left as sums:
/// KfacCurvature::correct_eigenvalues).
void normalize_kfac_sums(KfacFactors& sums, double rows);

class KfacCurvature;
/// Adds the sums over `rows` rows of (q_G,i^T Γ_rc q_A,j)^2 into each layer's `corrected` (the
/// eigenbasis is `curvature`'s; Γ_rc as above).
void add_kfac_correction_sums(const Network& network, const double* x, std::size_t rows,
                              const double* theta, const KfacCurvature& curvature,
                              KfacFactors& sums, Workspace& work);

class KfacCurvature {
 public:
  /// Eigendecomposes every layer's factors (LAPACK dsyevd; negative eigenvalues from rounding
  /// clamped to 0). With shift = 0, eigenvalues below 1e-14 of a layer's largest are left out (a
  /// pseudo-inverse), as in the Kronecker preconditioner.
  explicit KfacCurvature(const KfacFactors& factors);
  /// EK-FAC: λ_ij from `corrected` sums (divided by `rows` here), in this curvature's eigenbasis.
  void correct_eigenvalues(const KfacFactors& corrected_sums, double rows);

  std::size_t parameters() const { return parameters_; }
  std::size_t layers() const { return layers_.size(); }
  /// z = (Q (λ + shift) Q^T)^{-1} r, block by block (z must not alias r); entries of theta outside
  /// every factored layer (none for an mlp or a cnn) get r / shift.
  void apply_inverse(const double* r, double* z) const;
  /// Layer l's eigenvectors, one per row: of G (outputs x outputs) and of A (width x width).
  const std::vector<double>& output_vectors(std::size_t l) const { return layers_[l].qg; }
  const std::vector<double>& input_vectors(std::size_t l) const { return layers_[l].qa; }
  /// Layer l's λ (outputs x width, row-major), before the shift.
  const std::vector<double>& eigenvalues(std::size_t l) const { return layers_[l].lambda; }

 private:
  struct Block {
    KfacLayer shape;  // offsets and sizes (factors moved out)
    std::vector<double> qg, qa, g, a, lambda, inverse;
    mutable std::vector<double> matrix, work;
  };
  void set_inverse(Block& block) const;

  std::size_t parameters_ = 0;
  double shift_ = 0.0;
  std::vector<Block> layers_;
};

/// K-FAC (or EK-FAC with `corrected`) of the federated objective's Hessian at theta over the
/// clients `federation` includes: a collective, the same bits on every rank and for any rank
/// count. shift = l2 + damping.
std::unique_ptr<KfacCurvature> federated_kfac(Federation& federation,
                                              const std::vector<double>& theta, double shift,
                                              bool corrected);

/// The same for one client's own rows (its local Hessian); no communication.
std::unique_ptr<KfacCurvature> client_kfac(const Model& model, const Client& client,
                                           const std::vector<double>& theta, double shift,
                                           bool corrected);

/// influence.solver = "ekfac": x = (Q (λ + shift) Q^T)^{-1} b with the eigenvalue-corrected λ of
/// `hessian` (taken at the first solve, a collective when the operator is). Each solve reports 0
/// iterations and its true relative residual (one exact product).
std::unique_ptr<IhvpSolver> make_ekfac_solver(HessianOperator& hessian);

}  // namespace fluence
