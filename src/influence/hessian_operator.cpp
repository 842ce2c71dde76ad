#include "fluence/influence/hessian_operator.hpp"

#include <algorithm>

#include "fluence/core/error.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/core/quantized_sum.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/influence/kfac.hpp"
#include "fluence/influence/purposes.hpp"
#include "fluence/model/block_products.hpp"
#include "fluence/model/network.hpp"

namespace fluence {

HessianScope parse_hessian_scope(const std::string& name) {
  if (name == "federated") return HessianScope::federated;
  if (name == "client") return HessianScope::client;
  throw InputError("unknown Hessian scope '" + name + "' (allowed: federated, client)");
}

std::string to_string(HessianScope scope) {
  return scope == HessianScope::federated ? "federated" : "client";
}

KroneckerFactors HessianOperator::kronecker_factors() {
  throw InputError(
      "influence.preconditioner = \"kronecker\" needs the Kronecker factors of the logistic "
      "model's Hessian, which this Hessian does not have; use \"jacobi\", \"none\" or \"auto\"");
}

void HessianOperator::apply_block(const double* V, double* out, int k) {
  const std::size_t p = parameters();
  for (int j = 0; j < k; ++j)
    apply(V + static_cast<std::size_t>(j) * p, out + static_cast<std::size_t>(j) * p);
}

std::unique_ptr<KfacCurvature> HessianOperator::kfac(bool) {
  throw InputError(
      "influence.preconditioner = \"kfac\" and influence.solver = \"ekfac\" need the K-FAC "
      "factors of a network's own Hessian, which this Hessian does not have");
}

namespace {

constexpr const char* kKroneckerUse =
    "the Kronecker preconditioner (influence.preconditioner = \"kronecker\")";

// Adds the sampled rows' Hessian-vector products of one client: rows are gathered into a batch so
// that the product is one pass over contiguous memory.
void sampled_client_product(const Model& model, const Client& client,
                            const std::vector<std::int64_t>& local_rows, const double* theta,
                            const double* v, double* out, std::vector<double>& batch,
                            std::vector<std::int32_t>& labels, Workspace& work) {
  const int D = model.features();
  batch.resize(local_rows.size() * D);
  labels.resize(local_rows.size());
  for (std::size_t b = 0; b < local_rows.size(); ++b) {
    std::copy_n(client.features() + local_rows[b] * D, D, batch.data() + b * D);
    labels[b] = client.labels()[static_cast<std::size_t>(local_rows[b])];
  }
  model.hessian_vector_sum(batch.data(), labels.data(), local_rows.size(), theta, v, out, work);
}

// A network's dense Hessian (damping included) from p exact products (p passes over the data: small
// p only, as influence.explicit_max_parameters bounds it).
void dense_from_products(HessianOperator& hessian, std::vector<double>& out) {
  const std::size_t p = hessian.parameters();
  out.assign(p * p, 0.0);
  fluence::dense_from_products({p, [&](const double* v, double* w) { hessian.apply(v, w); }, {}},
                               out.data());
}

// A client's Hessian-vector products at a fixed theta: the linear model caches its softmax
// probabilities (one pass over the features less per product); any other model runs its exact
// R-operator product.
class ClientProducts {
 public:
  ClientProducts(const Model& model, const Client& client, const std::vector<double>& theta)
      : model_(model), client_(client), theta_(theta) {
    if (const SoftmaxRegression* linear = model.linear()) {
      probabilities_.resize(client.size() * model.classes());
      linear->probabilities(client.features(), client.size(), theta.data(), probabilities_.data());
    }
  }
  /// The cached softmax probabilities (client rows x C; the linear model only).
  const double* probabilities() const { return probabilities_.data(); }
  void apply(const double* v, double* out, Workspace& work) const {
    if (const SoftmaxRegression* linear = model_.linear())
      return linear->hessian_vector_sum_at(client_.features(), client_.size(),
                                           probabilities_.data(), v, out, work);
    model_.hessian_vector_sum(client_.features(), client_.labels().data(), client_.size(),
                              theta_.data(), v, out, work);
  }
  /// apply() for k vectors one after another: one GEMM over the block for the linear model, one
  /// forward pass shared by the k R-operator products for a network.
  void apply_block(const double* V, double* out, int k, Workspace& work,
                   std::vector<double>& scratch) const {
    const std::size_t p = model_.parameters();
    if (const SoftmaxRegression* linear = model_.linear())
      return softmax_hessian_vector_block_at(*linear, client_.features(), client_.size(),
                                             probabilities_.data(), V, k, out, scratch);
    if (const auto* network = model_.network())
      return network_hessian_vector_block_sum(*network, client_.features(), client_.labels().data(),
                                              client_.size(), theta_.data(), V, k, out, work);
    for (int j = 0; j < k; ++j)
      model_.hessian_vector_sum(client_.features(), client_.labels().data(), client_.size(),
                                theta_.data(), V + static_cast<std::size_t>(j) * p,
                                out + static_cast<std::size_t>(j) * p, work);
  }

 private:
  const Model& model_;
  const Client& client_;
  const std::vector<double>& theta_;
  std::vector<double> probabilities_;
};

class FederatedHessian final : public HessianOperator {
 public:
  // theta is fixed: each included local client's softmax probabilities are computed once, so a
  // product costs two passes over the client's features instead of three. Clients whose data term
  // is a LocalObjective (FLDP's expected loss) are asked for their products directly.
  FederatedHessian(Federation& federation, const std::vector<double>& theta)
      : federation_(federation), theta_(theta) {
    auto& problem = federation.problem();
    products_.resize(problem.clients.size());
    for (std::size_t k = 0; k < problem.clients.size(); ++k) {
      if (!federation.included(k) || federation.local_objective(k)) continue;
      products_[k] = std::make_unique<ClientProducts>(*problem.model, problem.clients[k], theta);
    }
  }

  std::size_t parameters() const override { return federation_.parameters(); }
  bool collective() const override { return true; }

  void apply(const double* v, double* out) override {
    const std::size_t p = parameters();
    federation_.sum_over_clients(std::span<double>(out, p), [&](std::size_t k, double* sum) {
      if (auto* objective = federation_.local_objective(k))
        return objective->hessian_vector_sum(theta_.data(), v, sum);
      products_[k]->apply(v, sum, work_);
    });
    finish(v, out, 1.0 / static_cast<double>(federation_.train_rows()));
  }

  // The k columns in chunks whose per-client partial products (kept until the client-order
  // reduction) fit kBlockProductBytes on the root, which gathers every client's.
  void apply_block(const double* V, double* out, int k) override {
    const std::size_t p = parameters();
    const std::size_t clients = std::max<std::size_t>(1, federation_.problem().client_rows.size());
    const int chunk = static_cast<int>(std::clamp<std::size_t>(
        kBlockProductBytes / (sizeof(double) * p * clients), 1, static_cast<std::size_t>(k)));
    for (int first = 0; first < k; first += chunk) {
      const int width = std::min(chunk, k - first);
      const double* in = V + static_cast<std::size_t>(first) * p;
      double* result = out + static_cast<std::size_t>(first) * p;
      federation_.sum_over_clients(std::span<double>(result, static_cast<std::size_t>(width) * p),
                                   [&](std::size_t c, double* sum) {
                                     if (auto* objective = federation_.local_objective(c)) {
                                       for (int j = 0; j < width; ++j)
                                         objective->hessian_vector_sum(
                                             theta_.data(), in + static_cast<std::size_t>(j) * p,
                                             sum + static_cast<std::size_t>(j) * p);
                                       return;
                                     }
                                     products_[c]->apply_block(in, sum, width, work_, scratch_);
                                   });
      const double scale = 1.0 / static_cast<double>(federation_.train_rows());
      for (int j = 0; j < width; ++j)
        finish(in + static_cast<std::size_t>(j) * p, result + static_cast<std::size_t>(j) * p,
               scale);
    }
  }

  void apply_sampled(const double* v, double* out, int batch, std::uint64_t key0,
                     std::uint64_t key1) override {
    auto& problem = federation_.problem();
    const std::size_t p = parameters();
    const auto& model = *problem.model;
    // Draw global row positions over the included clients (same draws on every rank), then each
    // rank evaluates the draws that fall on its clients, one summed vector per client.
    std::vector<std::int64_t> cumulative(problem.client_rows.size() + 1, 0);
    for (std::size_t k = 0; k < problem.client_rows.size(); ++k)
      cumulative[k + 1] =
          cumulative[k] + (federation_.client_included(static_cast<int>(k))
                               ? static_cast<std::int64_t>(problem.client_rows[k].size())
                               : 0);
    const int first = problem.clients.empty() ? 0 : problem.clients.front().id();
    std::vector<std::vector<std::int64_t>> drawn(problem.clients.size());
    Stream stream(problem.seed, purpose::lissa_sample, key0, key1, 0);
    for (int b = 0; b < batch; ++b) {
      const auto position =
          static_cast<std::int64_t>(stream.below(static_cast<std::uint64_t>(cumulative.back())));
      const auto client =
          static_cast<int>(std::upper_bound(cumulative.begin(), cumulative.end(), position) -
                           cumulative.begin() - 1);
      const int local = client - first;
      if (local >= 0 && local < static_cast<int>(drawn.size()))
        drawn[local].push_back(position - cumulative[client]);
    }
    federation_.sum_over_clients(std::span<double>(out, p), [&](std::size_t k, double* sum) {
      if (drawn[k].empty())
        std::fill(sum, sum + p, 0.0);
      else if (auto* objective = federation_.local_objective(k))
        objective->sampled_hessian_vector_sum(theta_.data(), drawn[k].data(), drawn[k].size(), v,
                                              sum);
      else
        sampled_client_product(model, problem.clients[k], drawn[k], theta_.data(), v, sum, batch_,
                               labels_, work_);
    });
    finish(v, out, 1.0 / batch);
  }

  void diagonal(std::vector<double>& out) override {
    federation_.hessian_diagonal(theta_, out);
    for (auto& value : out) value += damping_;
  }

  // The feature factor is a sum of PSD client matrices: summed exactly in fixed point like the
  // explicit Hessian (docs/math.md §8.3); the class factor in client order. Both are then the same
  // bits for any rank count.
  KroneckerFactors kronecker_factors() override {
    auto& problem = federation_.problem();
    const SoftmaxRegression& linear = problem.linear_model(kKroneckerUse);
    int objectives = 0;  // every rank must refuse together, not leave the others in a reduction
    for (std::size_t k = 0; k < problem.clients.size(); ++k)
      if (federation_.included(k) && federation_.local_objective(k)) ++objectives;
    MPI_Allreduce(MPI_IN_PLACE, &objectives, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (objectives > 0)
      throw InputError(
          "influence.preconditioner = \"kronecker\": clients with an expected-loss objective "
          "(FLDP) have no Kronecker factors; use \"jacobi\", \"none\" or \"auto\"");
    const auto C = static_cast<std::size_t>(linear.classes());
    const auto D = static_cast<std::size_t>(linear.features());
    std::vector<double> class_sums(problem.clients.size() * C * C, 0.0), class_sum(C * C);
    std::vector<double> feature_sum;
    psd_matrix_sum(
        static_cast<int>(problem.clients.size()), D, feature_sum,
        [&](int k, double* diagonal) {
          if (!federation_.included(k)) return false;
          const auto& client = problem.clients[k];
          linear.kronecker_feature_diagonal_sum(client.features(), client.size(),
                                                products_[k]->probabilities(), diagonal);
          return true;
        },
        [&](int k, double* matrix) {
          if (!federation_.included(k)) return false;
          const auto& client = problem.clients[k];
          linear.kronecker_factor_sums(
              client.features(), client.size(), products_[k]->probabilities(),
              class_sums.data() + static_cast<std::size_t>(k) * C * C, matrix);
          return true;
        });
    federation_.sum_over_clients(class_sum, [&](std::size_t k, double* sum) {
      std::copy_n(class_sums.begin() + static_cast<std::ptrdiff_t>(k * C * C), C * C, sum);
    });
    return normalized_kronecker_factors(
        linear.classes(), linear.features(), std::move(class_sum), std::move(feature_sum),
        static_cast<double>(federation_.train_rows()), linear.l2() + damping_);
  }

  std::unique_ptr<KfacCurvature> kfac(bool corrected) override {
    return federated_kfac(federation_, theta_, federation_.problem().model->l2() + damping_,
                          corrected);
  }

  void dense(std::vector<double>& out) override {
    if (!federation_.problem().model->linear()) return dense_from_products(*this, out);
    federation_.explicit_hessian(theta_, out);
    const std::size_t p = parameters();
    for (std::size_t j = 0; j < p; ++j) out[j * p + j] += damping_;
  }

 private:
  void finish(const double* v, double* out, double scale) const {
    const double shift = federation_.problem().model->l2() + damping_;
    for (std::size_t j = 0; j < parameters(); ++j) out[j] = out[j] * scale + shift * v[j];
  }

  Federation& federation_;
  const std::vector<double>& theta_;
  std::vector<std::unique_ptr<ClientProducts>> products_;  // per local client
  std::vector<double> batch_, scratch_;
  std::vector<std::int32_t> labels_;
  Workspace work_;
};

class ClientHessian final : public HessianOperator {
 public:
  ClientHessian(Federation& federation, std::size_t local_client, const std::vector<double>& theta)
      : problem_(federation.problem()),
        client_(problem_.clients.at(local_client)),
        model_(*problem_.model),
        theta_(theta) {
    if (client_.size() == 0)
      throw InputError("client " + std::to_string(client_.id()) +
                       " holds no training rows: its local Hessian is undefined");
    products_ = std::make_unique<ClientProducts>(model_, client_, theta);
  }

  std::size_t parameters() const override { return model_.parameters(); }
  bool collective() const override { return false; }

  void apply(const double* v, double* out) override {
    products_->apply(v, out, work_);
    finish(v, out, 1.0 / static_cast<double>(client_.size()));
  }

  void apply_block(const double* V, double* out, int k) override {
    const std::size_t p = parameters();
    products_->apply_block(V, out, k, work_, scratch_);
    for (int j = 0; j < k; ++j)
      finish(V + static_cast<std::size_t>(j) * p, out + static_cast<std::size_t>(j) * p,
             1.0 / static_cast<double>(client_.size()));
  }

  void apply_sampled(const double* v, double* out, int batch, std::uint64_t key0,
                     std::uint64_t key1) override {
    Stream stream(problem_.seed, purpose::lissa_sample, key0, key1,
                  static_cast<std::uint64_t>(client_.id()) + 1);
    drawn_.resize(static_cast<std::size_t>(batch));
    for (auto& row : drawn_) row = static_cast<std::int64_t>(stream.below(client_.size()));
    sampled_client_product(model_, client_, drawn_, theta_.data(), v, out, batch_, labels_, work_);
    finish(v, out, 1.0 / batch);
  }

  void diagonal(std::vector<double>& out) override {
    out.resize(parameters());
    problem_.linear_model("the exact Hessian diagonal (influence.preconditioner = \"jacobi\")")
        .hessian_diagonal_sum(client_.features(), client_.size(), theta_.data(), out.data(), work_);
    const double scale = 1.0 / static_cast<double>(client_.size());
    for (auto& value : out) value = value * scale + model_.l2() + damping_;
  }

  KroneckerFactors kronecker_factors() override {
    const SoftmaxRegression& linear = problem_.linear_model(kKroneckerUse);
    const auto C = static_cast<std::size_t>(linear.classes());
    const auto D = static_cast<std::size_t>(linear.features());
    std::vector<double> class_sum(C * C), feature_sum(D * D);
    linear.kronecker_factor_sums(client_.features(), client_.size(), products_->probabilities(),
                                 class_sum.data(), feature_sum.data());
    return normalized_kronecker_factors(linear.classes(), linear.features(), std::move(class_sum),
                                        std::move(feature_sum), static_cast<double>(client_.size()),
                                        linear.l2() + damping_);
  }

  std::unique_ptr<KfacCurvature> kfac(bool corrected) override {
    return client_kfac(model_, client_, theta_, model_.l2() + damping_, corrected);
  }

  void dense(std::vector<double>& out) override {
    if (!model_.linear()) return dense_from_products(*this, out);
    const std::size_t p = parameters();
    out.resize(p * p);
    problem_.linear_model("the explicit Hessian (influence.solver = \"explicit\")")
        .hessian_sum(client_.features(), client_.size(), theta_.data(), out.data());
    const double scale = 1.0 / static_cast<double>(client_.size());
    for (auto& value : out) value *= scale;
    for (std::size_t j = 0; j < p; ++j) out[j * p + j] += model_.l2() + damping_;
  }

 private:
  void finish(const double* v, double* out, double scale) const {
    const double shift = model_.l2() + damping_;
    for (std::size_t j = 0; j < parameters(); ++j) out[j] = out[j] * scale + shift * v[j];
  }

  FederatedProblem& problem_;
  const Client& client_;
  const Model& model_;
  const std::vector<double>& theta_;
  std::unique_ptr<ClientProducts> products_;
  std::vector<std::int64_t> drawn_;
  std::vector<double> batch_, scratch_;
  std::vector<std::int32_t> labels_;
  Workspace work_;
};

class FirstBlockHessian final : public HessianOperator {
 public:
  FirstBlockHessian(std::unique_ptr<HessianOperator> base, int classes)
      : base_(std::move(base)),
        classes_(classes),
        block_(base_->parameters() / static_cast<std::size_t>(classes)),
        in_(base_->parameters(), 0.0),
        out_(base_->parameters()) {}

  std::size_t parameters() const override { return base_->parameters(); }
  bool collective() const override { return base_->collective(); }

  void apply(const double* v, double* out) override {
    for_each_block(v, out, [&](const double* in, double* result) { base_->apply(in, result); });
  }

  void apply_sampled(const double* v, double* out, int batch, std::uint64_t key0,
                     std::uint64_t key1) override {
    // The same draws for every block: one sampled H_00 applied to each class row.
    for_each_block(v, out, [&](const double* in, double* result) {
      base_->apply_sampled(in, result, batch, key0, key1);
    });
  }

  void diagonal(std::vector<double>& out) override {
    base_->diagonal(out);
    for (int c = 1; c < classes_; ++c)
      std::copy_n(out.begin(), block_, out.begin() + static_cast<std::ptrdiff_t>(c * block_));
  }

  // I ⊗ H_00 with H_00 ≈ G_00 A: the class factor becomes G_00 I.
  KroneckerFactors kronecker_factors() override {
    KroneckerFactors factors = base_->kronecker_factors();
    const double first = factors.class_factor.at(0);
    std::fill(factors.class_factor.begin(), factors.class_factor.end(), 0.0);
    for (int c = 0; c < factors.classes; ++c)
      factors.class_factor[static_cast<std::size_t>(c) * factors.classes + c] = first;
    return factors;
  }

  void dense(std::vector<double>& out) override {
    std::vector<double> full;
    base_->dense(full);
    const std::size_t p = parameters();
    out.assign(p * p, 0.0);
    for (int c = 0; c < classes_; ++c)
      for (std::size_t i = 0; i < block_; ++i)
        std::copy_n(full.begin() + static_cast<std::ptrdiff_t>(i * p), block_,
                    out.begin() + static_cast<std::ptrdiff_t>((c * block_ + i) * p + c * block_));
  }

 private:
  // out_c = H_00 v_c: v_c placed in block 0 of a zero vector, block 0 of the product kept.
  template <class Product>
  void for_each_block(const double* v, double* out, Product&& product) {
    for (int c = 0; c < classes_; ++c) {
      std::copy_n(v + c * block_, block_, in_.begin());
      product(in_.data(), out_.data());
      std::copy_n(out_.begin(), block_, out + c * block_);
    }
  }

  std::unique_ptr<HessianOperator> base_;
  int classes_;
  std::size_t block_;
  std::vector<double> in_, out_;
};

}  // namespace

LinearOperator as_linear_operator(HessianOperator& hessian) {
  LinearOperator op;
  op.size = hessian.parameters();
  op.apply = [&hessian](const double* v, double* out) { hessian.apply(v, out); };
  op.diagonal = [&hessian](double* out) {
    std::vector<double> diagonal;
    hessian.diagonal(diagonal);
    std::copy(diagonal.begin(), diagonal.end(), out);
  };
  return op;
}

std::unique_ptr<HessianOperator> make_first_block_hessian(std::unique_ptr<HessianOperator> base,
                                                          int classes) {
  return std::make_unique<FirstBlockHessian>(std::move(base), classes);
}

std::unique_ptr<HessianOperator> make_federated_hessian(Federation& federation,
                                                        const std::vector<double>& theta) {
  return std::make_unique<FederatedHessian>(federation, theta);
}

std::unique_ptr<HessianOperator> make_client_hessian(Federation& federation,
                                                     std::size_t local_client,
                                                     const std::vector<double>& theta) {
  return std::make_unique<ClientHessian>(federation, local_client, theta);
}

}  // namespace fluence
