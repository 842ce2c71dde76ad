#pragma once
// Feed-forward networks built from layers (dense, ReLU, tanh, 2-D convolution, 2 x 2 max-pooling,
// flatten) ending in a dense layer of C logits and the shared softmax cross-entropy head
// (softmax_head.hpp). theta holds, layer by layer, a parametric layer's weights (dense: out x in,
// row-major; convolution: filters x (ky, kx, c)) followed by its biases (docs/math.md §10).
//
// Every pass works on blocks of rows with GEMMs (layers.hpp): the forward pass, the backward pass
// (gradients), Pearlmutter's R-operator (exact Hessian-vector products: a forward and a backward
// pass of directional derivatives), and per-example gradient norms for DP-SGD's clipping. Local
// SGD runs in double or in float (federation.local_precision) and writes each layer's update
// straight into theta from the weight-gradient GEMM.
#include <functional>
#include <string>
#include <vector>

#include "fluence/model/model.hpp"

namespace fluence {

class Deck;

enum class LayerKind { dense, relu, tanh, conv2d, max_pool, flatten };
enum class Padding { same, valid };
enum class Activation { relu, tanh };
enum class Initialization { he, glorot };
/// How the float passes run a convolution: Winograd's minimal filtering where it applies
/// (winograd.hpp: 3 x 3 and 5 x 5 kernels with 8 or more channels in and out), or im2col + GEMM
/// everywhere. The double passes always use im2col + GEMM.
enum class ConvolutionMethod { winograd, im2col };

/// An activation's shape: height x width x channels (a flat vector is 1 x 1 x n).
struct Shape {
  int height = 1, width = 1, channels = 1;
  std::size_t size() const { return std::size_t(height) * width * channels; }
};

struct LayerSpec {
  LayerKind kind = LayerKind::dense;
  int units = 0;   // dense: outputs; conv2d: filters
  int kernel = 0;  // conv2d: k (square, stride 1)
  Padding padding = Padding::same;
};

struct NetworkSpec {
  std::string type = "mlp";  // model.type
  Shape input;
  std::vector<LayerSpec> layers;  // ends with the dense layer of the C logits
  bool bias = true;
  Initialization initialization = Initialization::he;
  ConvolutionMethod convolution = ConvolutionMethod::winograd;

  /// inputs -> hidden[0] -> ... -> classes, the activation after every hidden dense layer.
  static NetworkSpec mlp(int inputs, const std::vector<int>& hidden, Activation activation,
                         int classes, bool bias);
  /// For each entry of `filters`: conv(k x k, same/valid) -> activation -> 2 x 2 max-pool (when
  /// `pool`); then flatten and the mlp of `hidden`.
  static NetworkSpec cnn(Shape input, const std::vector<int>& filters, int kernel, Padding padding,
                         bool pool, const std::vector<int>& hidden, Activation activation,
                         int classes, bool bias);
};

/// A layer placed in a network: its shapes and where its parameters lie in theta.
struct Layer {
  LayerKind kind = LayerKind::dense;
  Shape in, out;
  int kernel = 0, pad = 0;
  std::size_t weights = 0, weight_count = 0;  // offset and count in theta
  std::size_t biases = 0, bias_count = 0;
  int conv_rows = 1;      // convolution: images per im2col matrix (about 2 MB of floats)
  bool winograd = false;  // convolution: the float passes run Winograd's algorithm
  bool parametric() const { return kind == LayerKind::dense || kind == LayerKind::conv2d; }
};

class Network final : public Model {
 public:
  Network(const NetworkSpec& spec, int classes, double l2);

  const std::vector<Layer>& layers() const { return layers_; }
  const Network* network() const override { return this; }
  const NetworkSpec& spec() const { return spec_; }
  /// Rows per block of the passes over many rows that keep every buffer (gradients, R-operator).
  std::size_t block_rows() const { return block_rows_; }
  /// Rows per block of the forward-only evaluation (loss_sum, logits).
  std::size_t evaluation_rows() const { return evaluation_rows_; }

  std::string type() const override { return spec_.type; }
  std::string describe() const override;
  int features() const override { return static_cast<int>(spec_.input.size()); }
  int classes() const override { return classes_; }
  double l2() const override { return l2_; }
  std::size_t parameters() const override { return parameters_; }
  double batch_bytes(std::size_t rows) const override;
  std::vector<ParameterBlock> parameter_blocks() const override;
  bool convex() const override;
  void initialize(std::uint64_t seed, double* theta) const override;

  LossAndAccuracy loss_sum(const double* x, const std::int32_t* y, std::size_t rows,
                           const double* theta, Workspace& work) const override;
  LossAndAccuracy fast_loss_sum(const double* x, const std::int32_t* y, std::size_t rows,
                                const double* theta, Workspace& work) const override;
  double gradient_sum(const double* x, const std::int32_t* y, std::size_t rows, const double* theta,
                      double* gradient, Workspace& work) const override;
  void hessian_vector_sum(const double* x, const std::int32_t* y, std::size_t rows,
                          const double* theta, const double* v, double* out,
                          Workspace& work) const override;
  void logits(const double* x, std::size_t rows, const double* theta, double* out,
              Workspace& work) const override;
  /// Width of the last dense layer's input: what the network without its last layer outputs.
  int head_width() const { return static_cast<int>(layers_.back().in.size()); }
  /// The last dense layer's input of each row (rows x head_width()): the network without its last
  /// layer as a frozen body (LIA, seed 002 §III-B).
  void head_inputs(const double* x, std::size_t rows, const double* theta, double* out,
                   Workspace& work) const;
  double loss_gradient_sum(const double* x, std::size_t rows, const LogitLoss& loss,
                           const double* theta, double* gradient, Workspace& work) const override;
  void loss_hessian_vector_sum(const double* x, std::size_t rows, const LogitLoss& loss,
                               const double* theta, const double* v, double* out,
                               Workspace& work) const override;
  void directional_logits(const double* x, std::size_t rows, const double* theta, const double* v,
                          double* z, double* r_z, Workspace& work) const override;
  void clipped_gradient_sum(const double* x, const std::int32_t* y, std::size_t rows,
                            const double* theta, double clip, double* out, Workspace& work,
                            double* norms = nullptr) const override;

  /// What K-FAC's factors are made of (influence/kfac.hpp, docs/math.md §3.2, §3.2.1). With p_r
  /// the softmax probabilities of row r at theta and the C directions v_rc = sqrt(p_rc) (e_c -
  /// p_r), whose outer products sum to the head's Hessian diag(p_r) - p_r p_r^T: for each block of
  /// rows (block_rows() at most), each c in ascending order and each parametric layer l in
  /// ascending order, visit(l, rows, c, a, g). A dense layer is visited once per block: a its
  /// inputs (rows x in), g the gradients of v_rc . z_r with respect to its outputs before the
  /// activation (rows x out). A convolution is visited once per group of Layer::conv_rows images of
  /// the block, with rows = images x positions: a the im2col rows of its input ((image, oy, ox) x
  /// (ky, kx, c)), g the gradients with respect to its outputs before the activation at each
  /// (image, oy, ox) (rows x filters).
  using CurvatureVisitor = std::function<void(std::size_t layer, int rows, int direction,
                                              const double* inputs, const double* gradients)>;
  void visit_curvature_directions(const double* x, std::size_t rows, const double* theta,
                                  Workspace& work, const CurvatureVisitor& visit) const;

  void sgd_epoch(const TrainingRows& data, const std::int64_t* order, int batch_size,
                 double learning_rate, double* theta, Workspace& work, const StepTerms& terms = {},
                 const double* start = nullptr) const override;
  bool trains_single(const TrainingRows&) const override { return true; }
  void sgd_epoch(const TrainingRows& data, const std::int64_t* order, int batch_size,
                 double learning_rate, float* theta, Workspace& work, const StepTerms& terms = {},
                 const float* start = nullptr) const override;
  void gradient_step(const TrainingRows& data, double learning_rate, double* theta, Workspace& work,
                     const StepTerms& terms = {}) const override;

 private:
  NetworkSpec spec_;
  int classes_;
  double l2_;
  std::vector<Layer> layers_;
  std::size_t parameters_ = 0, block_rows_ = 1, evaluation_rows_ = 1;
};

}  // namespace fluence
