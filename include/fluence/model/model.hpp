#pragma once
// The model every command trains and differentiates (docs/architecture.md, model/): a classifier
// with C logits, one softmax cross-entropy head (softmax_head.hpp), and parameters theta, p doubles
// in the layout parameter_blocks() names. Two kinds implement it: multinomial logistic regression
// (softmax_regression.hpp, with the fast paths the influence commands use) and networks built from
// layers (network.hpp). Callers name Model; a fast path of one kind is reached through a
// capability (linear()), never by naming the kind.
//
// Conventions shared by every kind:
//  - x holds `rows` rows of features() encoded inputs (row-major doubles), y their labels;
//  - functions named *_sum return sums over rows without regularization; the objective adds
//    l2/2 ||theta||^2 (callers: Federation, local SGD);
//  - results are one fixed sequence of operations per row block whatever the rank count: a sum over
//    rows adds fixed-size blocks in ascending order, so a client's sums do not depend on its rank.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fluence/data/dataset.hpp"

namespace fluence {

class SoftmaxRegression;
class Network;
struct NetworkBuffers;

struct LossAndAccuracy {
  double loss_sum = 0.0;
  long correct = 0;
};

/// A network's scratch inside a Workspace: created on first use, never shared by copies (a copied
/// Workspace starts with none of its own).
class NetworkScratch {
 public:
  NetworkScratch();
  NetworkScratch(const NetworkScratch&);
  NetworkScratch& operator=(const NetworkScratch&);
  NetworkScratch(NetworkScratch&&) noexcept;
  NetworkScratch& operator=(NetworkScratch&&) noexcept;
  ~NetworkScratch();
  NetworkBuffers& buffers();

 private:
  std::unique_ptr<NetworkBuffers> buffers_;
};

/// Reusable scratch of the model kernels: one per caller, so that hot loops allocate nothing after
/// their first call. The first block is the logistic model's (its byte-coded and tiled kernels),
/// `network` a network's.
struct Workspace {
  std::vector<double> logits;   // rows x C
  std::vector<double> scratch;  // rows x C
  std::vector<double> batch;    // gathered mini-batch rows x D
  std::vector<const double*> batch_rows;
  std::vector<std::int32_t> batch_labels;
  std::vector<double> gradient;  // parameters
  std::vector<double> folded;    // weights and biases folded into a byte coding
  std::vector<float> folded_float;
  std::vector<float> single_theta, single_start, single_coefficients;
  std::vector<double> single_bias;        // C: the float SGD's bias, summed in float
  std::vector<std::uint8_t> batch_block;  // 16 x D: a mini-batch's codes in the blocked layout
  std::vector<double> block_logits;       // C x 16: one block's logits
  std::vector<const std::uint8_t*> batch_codes;
  NetworkScratch network;
  void reserve(std::size_t rows, int classes, int features);
};

/// A client's rows as local training reads them: the encoded doubles, and the same rows as 8-bit
/// codes of `coding` when the data allow (image pixels), which training then prefers (an eighth of
/// the memory traffic).
struct TrainingRows {
  const double* features = nullptr;  // rows x features()
  const std::int32_t* labels = nullptr;
  std::size_t rows = 0;
  const std::uint8_t* codes = nullptr;  // rows x features(), or null
  const ByteCoding* coding = nullptr;
};

/// What a local SGD step adds to the gradient of its data and L2 terms (docs/math.md §8.6), every
/// term taken at the step's old theta as the data gradient is: proximal (theta - center) when
/// `center` is given (FedProx's mu, Ditto's lambda) and the constant `correction` when given
/// (SCAFFOLD's c - c_i). Without either, the step is plain SGD, bit for bit.
struct StepTerms {
  const double* center = nullptr;
  double proximal = 0.0;
  const double* correction = nullptr;
  bool empty() const { return !center && !correction; }
};

/// theta -= learning_rate (gradient / n + l2 theta + the step terms): a full-batch step from the
/// data gradient's sum over n rows (p values).
void full_batch_step(const double* gradient, double inverse_n, double l2, double learning_rate,
                     const StepTerms& terms, std::size_t p, double* theta);

/// A named block of theta: a layer's weights or biases, with its shape (outermost first).
struct ParameterBlock {
  std::string name;
  std::size_t offset = 0, size = 0;
  std::vector<int> shape;
};

/// A loss on each row's logits (docs/math.md §10): row r contributes L_r(z_r), z_r its C logits.
/// The softmax cross-entropy of a label is one; weighted soft targets (the exact expectations of
/// FLDP and what-if under k-RR, softmax_head.hpp) and the forward-corrected loss (seed 001 Eq. 18)
/// are others. A model differentiates through it: the gradient and the exact Hessian-vector
/// product of sum_r L_r(z_r(theta)) in theta, for any model, from dL/dz and d^2L/dz^2 alone.
class LogitLoss {
 public:
  virtual ~LogitLoss() = default;
  /// Rows [first, first + rows) of the loss, their logits z (rows x C): writes dL_r/dz_r into
  /// `delta` (rows x C, when not null) and returns `loss` plus the rows' L_r added in row order.
  virtual double gradient(std::size_t first, std::size_t rows, int classes, const double* z,
                          double* delta, double loss) const = 0;
  /// The same rows: delta = dL_r/dz_r and r_delta = (d^2 L_r / dz_r^2) r_z (rows x C each).
  virtual void hessian(std::size_t first, std::size_t rows, int classes, const double* z,
                       const double* r_z, double* delta, double* r_delta) const = 0;
};

class Model {
 public:
  virtual ~Model() = default;

  /// model.type: "logistic", "mlp" or "cnn".
  virtual std::string type() const = 0;
  /// One line for the console: the layers and their widths.
  virtual std::string describe() const = 0;
  /// Encoded input columns D.
  virtual int features() const = 0;
  virtual int classes() const = 0;
  virtual double l2() const = 0;
  virtual std::size_t parameters() const = 0;
  virtual std::vector<ParameterBlock> parameter_blocks() const = 0;
  /// The shape /model/theta is written with: [C, D] for the linear model, [p] for a network.
  virtual std::vector<std::size_t> theta_shape() const { return {parameters()}; }
  /// Is the regularized objective convex in theta (a stationary point is the minimizer)? Only then
  /// do Newton's method and influence functions without damping apply.
  virtual bool convex() const = 0;
  /// The deterministic starting point theta0 (p values) from the run seed: zeros for the linear
  /// model, He or Glorot draws for a network's weights (one stream per layer).
  virtual void initialize(std::uint64_t seed, double* theta) const = 0;

  /// Sum of cross-entropy losses and the number of rows whose first maximal logit is the label.
  virtual LossAndAccuracy loss_sum(const double* x, const std::int32_t* y, std::size_t rows,
                                   const double* theta, Workspace& work) const = 0;
  /// loss_sum allowed to trade accuracy for speed (float arithmetic: a mean loss within about 1e-6
  /// relative): the per-round training curve. Default: loss_sum.
  virtual LossAndAccuracy fast_loss_sum(const double* x, const std::int32_t* y, std::size_t rows,
                                        const double* theta, Workspace& work) const {
    return loss_sum(x, y, rows, theta, work);
  }
  /// Sum of per-row gradients into `gradient` (overwritten); returns the loss sum.
  virtual double gradient_sum(const double* x, const std::int32_t* y, std::size_t rows,
                              const double* theta, double* gradient, Workspace& work) const = 0;
  /// Sum of per-row Hessian-vector products H_r v (overwritten into `out`): exact, by the
  /// R-operator for networks (docs/math.md §10). The labels matter for a network's Hessian.
  virtual void hessian_vector_sum(const double* x, const std::int32_t* y, std::size_t rows,
                                  const double* theta, const double* v, double* out,
                                  Workspace& work) const = 0;
  /// sum_r L_r(z_r(theta)) over the rows for a loss on the logits (row r of x is the loss's row
  /// r) and, when `gradient` is not null, its gradient in theta (overwritten).
  virtual double loss_gradient_sum(const double* x, std::size_t rows, const LogitLoss& loss,
                                   const double* theta, double* gradient,
                                   Workspace& work) const = 0;
  /// The exact Hessian of that sum in theta applied to v (overwritten into `out`): the R-operator
  /// with the loss's d^2L/dz^2 at the head.
  virtual void loss_hessian_vector_sum(const double* x, std::size_t rows, const LogitLoss& loss,
                                       const double* theta, const double* v, double* out,
                                       Workspace& work) const = 0;
  /// The logits z and their directional derivative r_z = (dz/dtheta) v, rows x C each (the
  /// forward R-operator: what-if's u = S x for any model).
  virtual void directional_logits(const double* x, std::size_t rows, const double* theta,
                                  const double* v, double* z, double* r_z,
                                  Workspace& work) const = 0;
  /// The logits, rows x C (predictions are their first maximal entries).
  virtual void logits(const double* x, std::size_t rows, const double* theta, double* out,
                      Workspace& work) const = 0;
  /// DP-SGD's clipped sum sum_r min(1, clip / ||g_r||) g_r of the per-row loss gradients g_r
  /// (overwritten into `out`); with `norms`, each ||g_r|| is written there (rows values).
  virtual void clipped_gradient_sum(const double* x, const std::int32_t* y, std::size_t rows,
                                    const double* theta, double clip, double* out, Workspace& work,
                                    double* norms = nullptr) const = 0;

  /// One epoch of mini-batch SGD on (1/|B|) sum_B loss + l2/2 ||theta||^2 over the rows in `order`
  /// (data.rows indices), updating theta in place, each step's gradient with the step `terms`
  /// (a proximal pull: Ditto, seed 004 Eq. 2, and FedProx; SCAFFOLD's correction). With `start`,
  /// the epoch begins from start instead of theta's contents (the same bits as copying start into
  /// theta first).
  virtual void sgd_epoch(const TrainingRows& data, const std::int64_t* order, int batch_size,
                         double learning_rate, double* theta, Workspace& work,
                         const StepTerms& terms = {}, const double* start = nullptr) const = 0;
  /// Bytes an SGD epoch surely allocates for batches of `rows` rows besides the model's vectors (a
  /// network's layer outputs and their deltas), for the up-front memory check (core/memory.hpp).
  virtual double batch_bytes(std::size_t /*rows*/) const { return 0.0; }
  /// Can these rows be trained in float (federation.local_precision = "single")?
  virtual bool trains_single(const TrainingRows& data) const = 0;
  /// The float SGD epoch; the step terms' vectors are rounded to float as they are read. `start`
  /// as in the double version.
  virtual void sgd_epoch(const TrainingRows& data, const std::int64_t* order, int batch_size,
                         double learning_rate, float* theta, Workspace& work,
                         const StepTerms& terms = {}, const float* start = nullptr) const = 0;
  /// One full-batch gradient step on (1/n) sum loss + l2/2 ||theta||^2 and the step terms.
  virtual void gradient_step(const TrainingRows& data, double learning_rate, double* theta,
                             Workspace& work, const StepTerms& terms = {}) const = 0;

  /// The linear model's fast paths (one-hot kernels, explicit Hessian, byte-coded evaluation), or
  /// null for a model without them.
  virtual const SoftmaxRegression* linear() const { return nullptr; }
  /// The layered network's own paths (its R-operator on a block of directions, its K-FAC
  /// factors), or null for a model that is not one.
  virtual const Network* network() const { return nullptr; }
};

}  // namespace fluence
