#include "fluence/influence/kfac.hpp"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "fluence/core/error.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/influence/kronecker.hpp"
#include "fluence/model/network.hpp"

namespace fluence {

namespace {

// The upper triangle of a SYRK sum copied to the lower one.
void mirror_upper(std::vector<double>& m, int n) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < i; ++j)
      m[static_cast<std::size_t>(i) * n + j] = m[static_cast<std::size_t>(j) * n + i];
}

// [a_r; 1] for each row (rows x width), or a_r itself without a bias.
const double* with_bias_column(const KfacLayer& layer, const double* a, int rows,
                               std::vector<double>& buffer) {
  if (!layer.bias) return a;
  const int in = layer.inputs, width = layer.width();
  buffer.resize(static_cast<std::size_t>(rows) * width);
  for (int r = 0; r < rows; ++r) {
    std::copy_n(a + static_cast<std::size_t>(r) * in, in,
                buffer.begin() + static_cast<std::ptrdiff_t>(r) * width);
    buffer[static_cast<std::size_t>(r) * width + in] = 1.0;
  }
  return buffer.data();
}

// Layer index in the network -> index in factors.layers (dense layers and convolutions).
std::vector<int> factored_index(const Network& network) {
  std::vector<int> index(network.layers().size(), -1);
  int k = 0;
  for (std::size_t l = 0; l < network.layers().size(); ++l)
    if (network.layers()[l].parametric()) index[l] = k++;
  return index;
}

// Every factor (and correction) of `factors`, concatenated: G, A, λ per layer.
std::size_t flat_size(const KfacFactors& f) {
  std::size_t size = 0;
  for (const auto& layer : f.layers)
    size += layer.output_factor.size() + layer.input_factor.size() + layer.corrected.size();
  return size;
}

template <class Visit>
void for_each_part(KfacFactors& f, Visit&& visit) {
  for (auto& layer : f.layers)
    for (auto* part : {&layer.output_factor, &layer.input_factor, &layer.corrected}) visit(*part);
}

void flatten(KfacFactors& f, double* out) {
  for_each_part(f,
                [&](std::vector<double>& part) { out = std::copy(part.begin(), part.end(), out); });
}

void unflatten(const double* in, KfacFactors& f) {
  for_each_part(f, [&](std::vector<double>& part) {
    std::copy_n(in, part.size(), part.begin());
    in += part.size();
  });
}

// EK-FAC's sums for one group of images of a convolution (docs/math.md eq. (3.2.7)): the
// gradient of v_c . z of image i in the layer's [W b] is the sum over its positions t of
// g_it ā_it^T (F x width), and λ_ij sums its squared coordinates in the eigenbasis,
// (q_G,i^T (sum_t g_it ā_it^T) q_A,j)^2. Unlike a dense layer's, this does not split into a
// factor per output and one per input, so each image's gradient is formed (one GEMM over its
// positions), rotated by Q_G image by image and by Q_A for the whole group in one GEMM, and
// squared. rows = images x positions; each direction's call adds its own squares.
void add_convolution_corrections(KfacLayer& layer, int rows, const double* a, const double* g,
                                 const std::vector<double>& qg, const std::vector<double>& qa,
                                 std::vector<double>& augmented, std::vector<double>& gradients,
                                 std::vector<double>& rotated) {
  const int out = layer.outputs, width = layer.width(), positions = layer.positions;
  const int images = rows / positions;
  const auto block = static_cast<std::size_t>(out) * width;
  const double* ab = with_bias_column(layer, a, rows, augmented);
  gradients.resize(static_cast<std::size_t>(images) * block);
  rotated.resize(static_cast<std::size_t>(images) * block);
  for (int i = 0; i < images; ++i) {
    const auto first = static_cast<std::size_t>(i) * positions;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, width, positions, 1.0,
                g + first * out, out, ab + first * width, width, 0.0, gradients.data() + i * block,
                width);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, out, width, out, 1.0, qg.data(), out,
                gradients.data() + i * block, width, 0.0, rotated.data() + i * block, width);
  }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, images * out, width, width, 1.0,
              rotated.data(), width, qa.data(), width, 0.0, gradients.data(), width);
  for (int i = 0; i < images; ++i)
    for (std::size_t k = 0; k < block; ++k) {
      const double value = gradients[i * block + k];
      layer.corrected[k] += value * value;
    }
}

}  // namespace

const Network& kfac_network(const Model& model, const char* use) {
  const auto* network = model.network();
  if (!network)
    throw InputError(fmt::format(
        "{} needs a network (model.type = \"mlp\" or \"cnn\"), not model.type = \"{}\"{}", use,
        model.type(),
        model.linear() ? ": the logistic model has its own, influence.preconditioner = "
                         "\"kronecker\""
                       : ""));
  return *network;
}

KfacFactors kfac_shapes(const Network& network, bool corrected) {
  KfacFactors f;
  f.parameters = network.parameters();
  for (const Layer& layer : network.layers()) {
    if (!layer.parametric()) continue;
    KfacLayer k;
    k.weights = layer.weights;
    k.biases = layer.biases;
    k.bias = layer.bias_count > 0;
    if (layer.kind == LayerKind::conv2d) {
      // Filters x (ky, kx, c) patches (network.hpp's layout), shared by every output position.
      k.convolution = true;
      k.outputs = layer.out.channels;
      k.inputs = layer.kernel * layer.kernel * layer.in.channels;
      k.positions = layer.out.height * layer.out.width;
    } else {
      k.outputs = static_cast<int>(layer.out.size());
      k.inputs = static_cast<int>(layer.in.size());
    }
    const auto out = static_cast<std::size_t>(k.outputs),
               width = static_cast<std::size_t>(k.width());
    k.output_factor.assign(out * out, 0.0);
    k.input_factor.assign(width * width, 0.0);
    if (corrected) k.corrected.assign(out * width, 0.0);
    f.layers.push_back(std::move(k));
  }
  return f;
}

void add_kfac_factor_sums(const Network& network, const double* x, std::size_t rows,
                          const double* theta, KfacFactors& sums, Workspace& work) {
  const std::vector<int> index = factored_index(network);
  std::vector<double> augmented;
  network.visit_curvature_directions(
      x, rows, theta, work, [&](std::size_t l, int n, int c, const double* a, const double* g) {
        KfacLayer& layer = sums.layers[static_cast<std::size_t>(index[l])];
        const int out = layer.outputs, width = layer.width();
        // SYRKs fill the upper triangles; the sums are mirrored once they are complete. For a
        // convolution the n rows are (image, position) pairs: the sums over positions of
        // docs/math.md eq. (3.2.5), the 1/|T| of G applied in normalize_kfac_sums.
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, out, n, 1.0, g, out, 1.0,
                    layer.output_factor.data(), out);
        if (c != 0) return;  // the inputs are the same for every direction
        const double* ab = with_bias_column(layer, a, n, augmented);
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, width, n, 1.0, ab, width, 1.0,
                    layer.input_factor.data(), width);
      });
}

void add_kfac_correction_sums(const Network& network, const double* x, std::size_t rows,
                              const double* theta, const KfacCurvature& curvature,
                              KfacFactors& sums, Workspace& work) {
  const std::vector<int> index = factored_index(network);
  const int C = network.classes();
  std::vector<double> augmented, rotated, gradients;
  std::vector<std::vector<double>> input_squares(sums.layers.size()),
      output_squares(sums.layers.size());
  network.visit_curvature_directions(
      x, rows, theta, work, [&](std::size_t l, int n, int c, const double* a, const double* g) {
        const auto k = static_cast<std::size_t>(index[l]);
        KfacLayer& layer = sums.layers[k];
        const int out = layer.outputs, width = layer.width();
        if (layer.convolution)
          return add_convolution_corrections(layer, n, a, g, curvature.output_vectors(k),
                                             curvature.input_vectors(k), augmented, gradients,
                                             rotated);
        auto& u = output_squares[k];
        auto& w = input_squares[k];
        if (c == 0) {  // (Q_A^T ā_r)_j^2 for every row, and the direction sums restarted
          const double* ab = with_bias_column(layer, a, n, augmented);
          w.resize(static_cast<std::size_t>(n) * width);
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, width, width, 1.0, ab, width,
                      curvature.input_vectors(k).data(), width, 0.0, w.data(), width);
          for (auto& value : w) value *= value;
          u.assign(static_cast<std::size_t>(n) * out, 0.0);
        }
        rotated.resize(static_cast<std::size_t>(n) * out);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, out, 1.0, g, out,
                    curvature.output_vectors(k).data(), out, 0.0, rotated.data(), out);
        for (std::size_t i = 0; i < u.size(); ++i) u[i] += rotated[i] * rotated[i];
        if (c + 1 < C) return;
        // sum_r sum_c (Q_G^T g_rc)_i^2 (Q_A^T ā_r)_j^2 = U^T W over the block's rows.
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, width, n, 1.0, u.data(), out,
                    w.data(), width, 1.0, layer.corrected.data(), width);
      });
}

KfacCurvature::KfacCurvature(const KfacFactors& factors)
    : parameters_(factors.parameters), shift_(factors.shift) {
  for (const KfacLayer& layer : factors.layers) {
    Block block;
    block.shape.weights = layer.weights;
    block.shape.biases = layer.biases;
    block.shape.outputs = layer.outputs;
    block.shape.inputs = layer.inputs;
    block.shape.bias = layer.bias;
    block.shape.convolution = layer.convolution;
    block.shape.positions = layer.positions;
    block.qg = layer.output_factor;
    block.qa = layer.input_factor;
    block.g = symmetric_eigendecomposition(block.qg, layer.outputs, "K-FAC output-gradient factor");
    block.a = symmetric_eigendecomposition(block.qa, layer.width(), "K-FAC input factor");
    const auto out = static_cast<std::size_t>(layer.outputs);
    const auto width = static_cast<std::size_t>(layer.width());
    block.lambda.resize(out * width);
    for (std::size_t i = 0; i < out; ++i)
      for (std::size_t j = 0; j < width; ++j) block.lambda[i * width + j] = block.g[i] * block.a[j];
    set_inverse(block);
    block.matrix.resize(out * width);
    block.work.resize(out * width);
    layers_.push_back(std::move(block));
  }
}

void KfacCurvature::correct_eigenvalues(const KfacFactors& corrected_sums, double rows) {
  const double scale = rows > 0.0 ? 1.0 / rows : 0.0;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const auto& sums = corrected_sums.layers.at(l).corrected;
    Block& block = layers_[l];
    for (std::size_t k = 0; k < block.lambda.size(); ++k) block.lambda[k] = sums.at(k) * scale;
    set_inverse(block);
  }
}

void KfacCurvature::set_inverse(Block& block) const {
  double largest = 0.0;
  for (double value : block.lambda) largest = std::max(largest, value);
  largest += shift_;
  block.inverse.resize(block.lambda.size());
  for (std::size_t k = 0; k < block.lambda.size(); ++k) {
    const double value = block.lambda[k] + shift_;
    block.inverse[k] = value > 1e-14 * largest ? 1.0 / value : 0.0;
  }
}

void KfacCurvature::apply_inverse(const double* r, double* z) const {
  const double outside = shift_ > 0.0 ? 1.0 / shift_ : 0.0;
  for (std::size_t k = 0; k < parameters_; ++k) z[k] = r[k] * outside;
  for (const Block& block : layers_) {
    const int out = block.shape.outputs, in = block.shape.inputs, width = block.shape.width();
    double* R = block.matrix.data();
    double* W = block.work.data();
    // R: the block's parameters as outputs x width, the bias column last.
    for (int o = 0; o < out; ++o) {
      std::copy_n(r + block.shape.weights + static_cast<std::size_t>(o) * in, in,
                  R + static_cast<std::size_t>(o) * width);
      if (block.shape.bias) R[static_cast<std::size_t>(o) * width + in] = r[block.shape.biases + o];
    }
    // Z = Q_G^T [(Q_G R Q_A^T) ⊘ (λ + shift)] Q_A with the eigenvectors as rows of qg and qa.
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, out, width, out, 1.0, block.qg.data(),
                out, R, width, 0.0, W, width);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, out, width, width, 1.0, W, width,
                block.qa.data(), width, 0.0, R, width);
    for (std::size_t k = 0; k < block.inverse.size(); ++k) R[k] *= block.inverse[k];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, out, width, width, 1.0, R, width,
                block.qa.data(), width, 0.0, W, width);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, width, out, 1.0, block.qg.data(), out,
                W, width, 0.0, R, width);
    for (int o = 0; o < out; ++o) {
      std::copy_n(R + static_cast<std::size_t>(o) * width, in,
                  z + block.shape.weights + static_cast<std::size_t>(o) * in);
      if (block.shape.bias) z[block.shape.biases + o] = R[static_cast<std::size_t>(o) * width + in];
    }
  }
}

namespace {

constexpr const char* kKfacUse =
    "K-FAC (influence.preconditioner = \"kfac\" or influence.solver = \"ekfac\")";

// The factors' sums over the included clients' rows, added in client order (chain_sum: the same
// bits for any rank count). Each rank first computes all its clients' sums (in parallel with the
// other ranks), then passes the running sum along.
void federated_sums(Federation& federation, KfacFactors& sums,
                    const std::function<void(const Client&, KfacFactors&)>& client_sums) {
  auto& problem = federation.problem();
  const std::size_t width = flat_size(sums);
  const std::size_t local = problem.clients.size();
  std::vector<double> items(local * width, 0.0);
  for (std::size_t k = 0; k < local; ++k) {
    if (!federation.included(k)) continue;
    KfacFactors one = sums;
    client_sums(problem.clients[k], one);
    flatten(one, items.data() + k * width);
  }
  std::vector<double> total(width, 0.0);
  chain_sum(static_cast<int>(local), total, [&](int k, std::span<double> result) {
    const double* item = items.data() + static_cast<std::size_t>(k) * width;
    for (std::size_t i = 0; i < width; ++i) result[i] += item[i];
  });
  unflatten(total.data(), sums);
}

}  // namespace

void normalize_kfac_sums(KfacFactors& f, double rows) {
  const double scale = rows > 0.0 ? 1.0 / rows : 0.0;
  for (auto& layer : f.layers) {
    mirror_upper(layer.output_factor, layer.outputs);
    mirror_upper(layer.input_factor, layer.width());
    // A convolution's G is the mean over positions too (KFC's spatial homogeneity, docs/math.md
    // eq. (3.2.5)); a dense layer has one position, and the same scale bit for bit.
    const double output_scale =
        layer.positions > 1 && rows > 0.0 ? 1.0 / (rows * layer.positions) : scale;
    for (auto& value : layer.output_factor) value *= output_scale;
    for (auto& value : layer.input_factor) value *= scale;
  }
}

std::unique_ptr<KfacCurvature> federated_kfac(Federation& federation,
                                              const std::vector<double>& theta, double shift,
                                              bool corrected) {
  auto& problem = federation.problem();
  const Network& network = kfac_network(*problem.model, kKfacUse);
  int objectives = 0;  // every rank must refuse together, not leave the others in a reduction
  for (std::size_t k = 0; k < problem.clients.size(); ++k)
    if (federation.included(k) && federation.local_objective(k)) ++objectives;
  MPI_Allreduce(MPI_IN_PLACE, &objectives, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (objectives > 0)
    throw InputError(std::string(kKfacUse) +
                     ": clients with an expected-loss objective (FLDP) have no K-FAC factors");
  Workspace work;
  const double rows = static_cast<double>(federation.train_rows());
  KfacFactors factors = kfac_shapes(network, false);
  factors.shift = shift;
  federated_sums(federation, factors, [&](const Client& client, KfacFactors& sums) {
    add_kfac_factor_sums(network, client.features(), client.size(), theta.data(), sums, work);
  });
  normalize_kfac_sums(factors, rows);
  auto curvature = std::make_unique<KfacCurvature>(factors);
  if (!corrected) return curvature;
  KfacFactors corrections = kfac_shapes(network, true);
  for (auto& layer : corrections.layers) {  // only the corrections travel
    layer.output_factor.clear();
    layer.input_factor.clear();
  }
  federated_sums(federation, corrections, [&](const Client& client, KfacFactors& sums) {
    add_kfac_correction_sums(network, client.features(), client.size(), theta.data(), *curvature,
                             sums, work);
  });
  curvature->correct_eigenvalues(corrections, rows);
  return curvature;
}

std::unique_ptr<KfacCurvature> client_kfac(const Model& model, const Client& client,
                                           const std::vector<double>& theta, double shift,
                                           bool corrected) {
  const Network& network = kfac_network(model, kKfacUse);
  Workspace work;
  const double rows = static_cast<double>(client.size());
  KfacFactors factors = kfac_shapes(network, false);
  factors.shift = shift;
  add_kfac_factor_sums(network, client.features(), client.size(), theta.data(), factors, work);
  normalize_kfac_sums(factors, rows);
  auto curvature = std::make_unique<KfacCurvature>(factors);
  if (!corrected) return curvature;
  KfacFactors corrections = kfac_shapes(network, true);
  add_kfac_correction_sums(network, client.features(), client.size(), theta.data(), *curvature,
                           corrections, work);
  curvature->correct_eigenvalues(corrections, rows);
  return curvature;
}

namespace {

class EkfacSolver final : public IhvpSolver {
 public:
  explicit EkfacSolver(HessianOperator& hessian) : hessian_(hessian) {}
  IhvpMethod method() const override { return IhvpMethod::ekfac; }

  void apply_inverse(const double* b, double* x) override {
    if (!curvature_) curvature_ = hessian_.kfac(true);
    curvature_->apply_inverse(b, x);
  }

  SolveReport solve(const double* b, double* x) override {
    apply_inverse(b, x);
    SolveReport report;
    report.relative_residual = relative_residual(hessian_, b, x);
    return report;
  }

 private:
  HessianOperator& hessian_;
  std::unique_ptr<KfacCurvature> curvature_;
};

}  // namespace

std::unique_ptr<IhvpSolver> make_ekfac_solver(HessianOperator& hessian) {
  return std::make_unique<EkfacSolver>(hessian);
}

}  // namespace fluence
