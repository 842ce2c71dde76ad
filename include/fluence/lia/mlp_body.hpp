#pragma once
// A one-hidden-layer ReLU network whose hidden layer serves as the frozen "body" of seed 002
// §III-B: contributors train and share only the last layer (here a softmax regression on the
// body's features), so the body is trained once, centrally, and then only transforms inputs.
//
// Shapes, all row-major: inputs x are rows x D and, by the repository's convention, already end
// with a constant-1 bias column, so W1 (H x D) carries the hidden biases in its last column. The
// body's output is [relu(x W1^T), 1] (rows x (H+1)), again ending with a constant-1 column so the
// last layer trained on it has its bias the same way. W2 (C x (H+1)) is the softmax output layer
// used only while training the body.
//
// Training minimizes (1/rows) sum cross-entropy + l2/2 (||W1||^2 + ||W2||^2) with Adam (Kingma &
// Ba 2015) on shuffled mini-batches; forward and backward passes are GEMMs. Everything random
// (initialization, shuffling) comes from the caller's Stream, so the caller keys it by its own
// purpose; the same stream state gives bitwise the same weights.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fluence/core/rng.hpp"

namespace fluence::lia {

struct MlpTraining {
  int epochs = 30;
  double learning_rate = 1e-3;  // Adam step size
  int batch_size = 64;          // clamped to the number of rows
  double l2 = 0.0;              // weight decay, as an L2 term in the objective (both layers)
};

class MlpBody {
 public:
  /// Restores a body from its weights (e.g. a checkpoint): w1 has hidden x features values, w2 has
  /// classes x (hidden + 1). InputError on inconsistent sizes.
  MlpBody(int features, int classes, int hidden, std::vector<double> w1, std::vector<double> w2);

  /// He initialization (He et al. 2015) of W1, N(0, 2 / features), and N(0, 1 / (hidden + 1)) for
  /// W2; both bias columns start at 0. Draws W1 then W2 in row-major order from `stream`.
  static MlpBody initialize(int features, int classes, int hidden, Stream& stream);

  /// initialize() then fit(): the body trained on (x, y), labels in [0, classes).
  static MlpBody train(const double* x, const std::int32_t* y, std::size_t rows, int features,
                       int classes, int hidden, const MlpTraining& options, Stream& stream);

  /// `options.epochs` passes of Adam over the rows, each in an order drawn from `stream`.
  void fit(const double* x, const std::int32_t* y, std::size_t rows, const MlpTraining& options,
           Stream& stream);

  int features() const { return features_; }
  int classes() const { return classes_; }
  int hidden() const { return hidden_; }
  /// Width of transform()'s output: the hidden units plus a constant-1 bias column.
  int output_features() const { return hidden_ + 1; }
  const std::vector<double>& w1() const { return w1_; }  // hidden x features
  const std::vector<double>& w2() const { return w2_; }  // classes x (hidden + 1)

  /// out (rows x output_features()) = [relu(x W1^T), 1].
  void transform(const double* x, std::size_t rows, double* out) const;

  /// Mean cross-entropy of the full network over the rows (no regularization).
  double loss(const double* x, const std::int32_t* y, std::size_t rows) const;

  /// Gradient of loss() with respect to W1 (hidden x features) and W2 (classes x (hidden + 1)),
  /// overwritten into the two buffers; returns loss(). At a ReLU kink (pre-activation exactly 0)
  /// the subgradient 0 is taken.
  double gradient(const double* x, const std::int32_t* y, std::size_t rows, double* w1_gradient,
                  double* w2_gradient) const;

  /// Fraction of rows whose argmax logit (lowest class on ties) is the label.
  double accuracy(const double* x, const std::int32_t* y, std::size_t rows) const;

 private:
  struct Buffers;
  // Activations [relu(x W1^T), 1] into b.activations and logits into b.logits for m rows.
  void forward(const double* x, int m, Buffers& b) const;
  // Turns b.logits into (softmax - onehot) * scale and adds the gradients of those rows to
  // g1/g2 (beta = 0 overwrites, 1 accumulates); returns the rows' cross-entropy sum.
  double backward(const double* x, const std::int32_t* y, int m, double scale, double beta,
                  Buffers& b, double* g1, double* g2) const;
  void check_labels(const std::int32_t* y, std::size_t rows) const;

  int features_, classes_, hidden_;
  std::vector<double> w1_, w2_;
};

}  // namespace fluence::lia
