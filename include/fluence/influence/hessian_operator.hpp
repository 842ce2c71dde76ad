#pragma once
// The Hessian of the training objective at a fixed theta, as an operator (docs/math.md §2):
//   federated scope: H = (1/n) sum_j grad^2 l_j(theta) + (l2 + damping) I   (seed 000 Eq. 1 + L2)
//   client scope:    H_k = (1/n_k) sum_{j in k} grad^2 l_j(theta) + (l2 + damping) I
// The federated product is a collective (each client contributes only H_k v, reduced in client
// order, so the result is bitwise identical for any rank count); the client product touches only
// that client's data and no other rank.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fluence/core/krylov.hpp"
#include "fluence/fl/federation.hpp"
#include "fluence/influence/kronecker.hpp"

namespace fluence {

class KfacCurvature;

enum class HessianScope { federated, client };
HessianScope parse_hessian_scope(const std::string& name);
std::string to_string(HessianScope scope);

/// What a federated block product holds at most of per-client partial products until their
/// client-order reduction (it works through the block's columns in chunks that fit; the root
/// gathers every client's): influence/memory.hpp counts it.
constexpr std::size_t kBlockProductBytes = std::size_t(256) << 20;

class HessianOperator {
 public:
  virtual ~HessianOperator() = default;

  virtual std::size_t parameters() const = 0;
  /// True when apply() and friends are collectives that every rank must call together.
  virtual bool collective() const = 0;
  /// out = H v.
  virtual void apply(const double* v, double* out) = 0;
  /// out = H V for k vectors at once (influence.block_size; docs/math.md §3.3): V and out hold k
  /// vectors of p values, one after another (k x p row-major, i.e. the p x k block column-major),
  /// so that the products run as GEMMs over the block. Default: k products by apply(). The
  /// federated product sums each client's block in client order, like apply(): the same bits
  /// for any rank count.
  virtual void apply_block(const double* V, double* out, int k);
  /// out = H_B v, with the data term averaged over `batch` rows drawn uniformly with replacement
  /// from stream (seed, lissa_sample, key0, key1, scope id): an unbiased estimate of H v (LiSSA).
  virtual void apply_sampled(const double* v, double* out, int batch, std::uint64_t key0,
                             std::uint64_t key1) = 0;
  /// diag(H).
  virtual void diagonal(std::vector<double>& out) = 0;
  /// H as a dense p x p row-major matrix (small p only).
  virtual void dense(std::vector<double>& out) = 0;
  /// The factors of the Kronecker preconditioner at theta (influence/kronecker.hpp), shift =
  /// l2 + damping. A collective when the operator is. InputError where there are none: only the
  /// logistic model's own data term has them (not a network, not FLDP's expected-loss clients).
  virtual KroneckerFactors kronecker_factors();
  /// K-FAC of a network's Hessian at theta (EK-FAC with `corrected`; influence/kfac.hpp), shift =
  /// l2 + damping. A collective when the operator is. InputError where there is none (not a
  /// network of dense layers, FLDP's expected-loss clients).
  virtual std::unique_ptr<KfacCurvature> kfac(bool corrected);

  double damping() const { return damping_; }
  void set_damping(double damping) { damping_ = damping; }

 protected:
  double damping_ = 0.0;
};

/// The operator as the Krylov solvers take it (core/krylov.hpp): its products and its diagonal
/// (kept by reference: the operator must outlive what uses it).
LinearOperator as_linear_operator(HessianOperator& hessian);

/// Hessian of h over the clients included in `federation` when it is made, at `theta` (kept by
/// reference; its softmax probabilities are cached, so theta must not change).
std::unique_ptr<HessianOperator> make_federated_hessian(Federation& federation,
                                                        const std::vector<double>& theta);
/// Hessian of the local objective of one client hosted on this rank (index into
/// problem.clients) at `theta`.
std::unique_ptr<HessianOperator> make_client_hessian(Federation& federation,
                                                     std::size_t local_client,
                                                     const std::vector<double>& theta);

/// Seed 000 code's Hessian (FLDP-FL, issue "b"): the first class's diagonal block H_00 of `base`
/// applied to every class row, block-diagonal. For two classes H_00 = H_11, so this is the
/// block-diagonal approximation; the cross-class blocks are dropped. Each product costs `classes`
/// products by `base`. Damping is the base operator's.
std::unique_ptr<HessianOperator> make_first_block_hessian(std::unique_ptr<HessianOperator> base,
                                                          int classes);

}  // namespace fluence
