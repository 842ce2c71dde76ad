#include "fluence/lia/mlp_body.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <utility>

#include "fluence/core/error.hpp"

namespace fluence::lia {

namespace {

// Rows per chunk in full-data passes: bounds the scratch (chunk x (H + 1 + C + H) doubles) while
// keeping the GEMMs large enough to run at BLAS speed.
constexpr std::size_t kChunkRows = 1024;

// Adam's moment decay rates and denominator guard: Kingma & Ba 2015's defaults.
constexpr double kBeta1 = 0.9;
constexpr double kBeta2 = 0.999;
constexpr double kAdamEpsilon = 1e-8;

void require_dimensions(int features, int classes, int hidden) {
  if (features < 1)
    throw InputError("MLP body: features must be >= 1, got " + std::to_string(features));
  if (classes < 2)
    throw InputError("MLP body: classes must be >= 2, got " + std::to_string(classes));
  if (hidden < 1)
    throw InputError("MLP body: hidden units must be >= 1, got " + std::to_string(hidden));
}

}  // namespace

struct MlpBody::Buffers {
  std::vector<double> activations;  // m x (H + 1)
  std::vector<double> logits;       // m x C, then (softmax - onehot) * scale
  std::vector<double> hidden;       // m x H: gradient with respect to the pre-activations
  Buffers(std::size_t rows, int classes, int hidden_units)
      : activations(rows * (hidden_units + 1)),
        logits(rows * classes),
        hidden(rows * hidden_units) {}
};

MlpBody::MlpBody(int features, int classes, int hidden, std::vector<double> w1,
                 std::vector<double> w2)
    : features_(features),
      classes_(classes),
      hidden_(hidden),
      w1_(std::move(w1)),
      w2_(std::move(w2)) {
  require_dimensions(features, classes, hidden);
  if (w1_.size() != static_cast<std::size_t>(hidden) * features)
    throw InputError("MLP body: W1 has " + std::to_string(w1_.size()) + " values, expected " +
                     std::to_string(static_cast<std::size_t>(hidden) * features) +
                     " (hidden x features)");
  if (w2_.size() != static_cast<std::size_t>(classes) * (hidden + 1))
    throw InputError("MLP body: W2 has " + std::to_string(w2_.size()) + " values, expected " +
                     std::to_string(static_cast<std::size_t>(classes) * (hidden + 1)) +
                     " (classes x (hidden + 1))");
}

MlpBody MlpBody::initialize(int features, int classes, int hidden, Stream& stream) {
  require_dimensions(features, classes, hidden);
  // He et al. 2015: variance 2 / fan-in keeps the ReLU activations' scale from layer to layer. The
  // bias columns start at 0 (as in He et al.), so a pre-activation starts as a pure projection.
  std::vector<double> w1(static_cast<std::size_t>(hidden) * features, 0.0);
  const double w1_scale = std::sqrt(2.0 / features);
  for (int k = 0; k < hidden; ++k)
    for (int j = 0; j + 1 < features; ++j) w1[k * features + j] = w1_scale * stream.normal();
  // The softmax layer is linear: variance 1 / fan-in (LeCun) keeps the initial logits O(1).
  const int width = hidden + 1;
  std::vector<double> w2(static_cast<std::size_t>(classes) * width, 0.0);
  const double w2_scale = std::sqrt(1.0 / width);
  for (int c = 0; c < classes; ++c)
    for (int k = 0; k < hidden; ++k) w2[c * width + k] = w2_scale * stream.normal();
  return MlpBody(features, classes, hidden, std::move(w1), std::move(w2));
}

MlpBody MlpBody::train(const double* x, const std::int32_t* y, std::size_t rows, int features,
                       int classes, int hidden, const MlpTraining& options, Stream& stream) {
  MlpBody body = initialize(features, classes, hidden, stream);
  body.fit(x, y, rows, options, stream);
  return body;
}

void MlpBody::check_labels(const std::int32_t* y, std::size_t rows) const {
  for (std::size_t r = 0; r < rows; ++r)
    if (y[r] < 0 || y[r] >= classes_)
      throw InputError("MLP body: label " + std::to_string(y[r]) + " of row " + std::to_string(r) +
                       " is outside [0, " + std::to_string(classes_) + ")");
}

void MlpBody::forward(const double* x, int m, Buffers& b) const {
  const int D = features_, H = hidden_, C = classes_, W = hidden_ + 1;
  double* a = b.activations.data();
  // Pre-activations written straight into the activation buffer (leading dimension H + 1), so the
  // bias column needs no copy.
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, H, D, 1.0, x, D, w1_.data(), D, 0.0, a,
              W);
  for (int r = 0; r < m; ++r) {
    double* row = a + static_cast<std::size_t>(r) * W;
    for (int k = 0; k < H; ++k) row[k] = std::max(row[k], 0.0);
    row[H] = 1.0;
  }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, C, W, 1.0, a, W, w2_.data(), W, 0.0,
              b.logits.data(), C);
}

double MlpBody::backward(const double* x, const std::int32_t* y, int m, double scale, double beta,
                         Buffers& b, double* g1, double* g2) const {
  const int D = features_, H = hidden_, C = classes_, W = hidden_ + 1;
  double loss = 0.0;
  for (int r = 0; r < m; ++r) {
    double* z = b.logits.data() + static_cast<std::size_t>(r) * C;
    const double top = *std::max_element(z, z + C);
    double total = 0.0;
    for (int c = 0; c < C; ++c) total += std::exp(z[c] - top);
    const double log_total = std::log(total);
    loss += top + log_total - z[y[r]];
    // d(cross-entropy)/d(logits) = softmax - onehot.
    for (int c = 0; c < C; ++c) z[c] = std::exp(z[c] - top - log_total) * scale;
    z[y[r]] -= scale;
  }
  const double* g = b.logits.data();
  const double* a = b.activations.data();
  // dW2 = G^T [h, 1]
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, W, m, 1.0, g, C, a, W, beta, g2, W);
  // dh = G W2[:, :H] (the bias column of the activations has no input behind it), masked by the
  // ReLU derivative: relu(z) > 0 exactly when z > 0, so the activations carry the mask.
  double* dh = b.hidden.data();
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, H, C, 1.0, g, C, w2_.data(), W, 0.0, dh,
              H);
  for (int r = 0; r < m; ++r)
    for (int k = 0; k < H; ++k)
      if (!(a[static_cast<std::size_t>(r) * W + k] > 0.0))
        dh[static_cast<std::size_t>(r) * H + k] = 0.0;
  // dW1 = dh^T x
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, H, D, m, 1.0, dh, H, x, D, beta, g1, D);
  return loss;
}

void MlpBody::transform(const double* x, std::size_t rows, double* out) const {
  const int D = features_, H = hidden_, W = hidden_ + 1;
  for (std::size_t r0 = 0; r0 < rows; r0 += kChunkRows) {
    const int m = static_cast<int>(std::min(kChunkRows, rows - r0));
    double* a = out + r0 * W;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, H, D, 1.0, x + r0 * D, D, w1_.data(), D,
                0.0, a, W);
    for (int r = 0; r < m; ++r) {
      double* row = a + static_cast<std::size_t>(r) * W;
      for (int k = 0; k < H; ++k) row[k] = std::max(row[k], 0.0);
      row[H] = 1.0;
    }
  }
}

double MlpBody::loss(const double* x, const std::int32_t* y, std::size_t rows) const {
  if (rows == 0) throw InputError("MLP body: loss over zero rows");
  check_labels(y, rows);
  const int C = classes_;
  Buffers b(std::min(kChunkRows, rows), classes_, hidden_);
  double sum = 0.0;
  for (std::size_t r0 = 0; r0 < rows; r0 += kChunkRows) {
    const int m = static_cast<int>(std::min(kChunkRows, rows - r0));
    forward(x + r0 * features_, m, b);
    for (int r = 0; r < m; ++r) {
      const double* z = b.logits.data() + static_cast<std::size_t>(r) * C;
      const double top = *std::max_element(z, z + C);
      double total = 0.0;
      for (int c = 0; c < C; ++c) total += std::exp(z[c] - top);
      sum += top + std::log(total) - z[y[r0 + r]];
    }
  }
  return sum / static_cast<double>(rows);
}

double MlpBody::gradient(const double* x, const std::int32_t* y, std::size_t rows,
                         double* w1_gradient, double* w2_gradient) const {
  if (rows == 0) throw InputError("MLP body: gradient over zero rows");
  check_labels(y, rows);
  Buffers b(std::min(kChunkRows, rows), classes_, hidden_);
  const double scale = 1.0 / static_cast<double>(rows);
  double sum = 0.0;
  for (std::size_t r0 = 0; r0 < rows; r0 += kChunkRows) {
    const int m = static_cast<int>(std::min(kChunkRows, rows - r0));
    forward(x + r0 * features_, m, b);
    sum += backward(x + r0 * features_, y + r0, m, scale, r0 == 0 ? 0.0 : 1.0, b, w1_gradient,
                    w2_gradient);
  }
  return sum / static_cast<double>(rows);
}

double MlpBody::accuracy(const double* x, const std::int32_t* y, std::size_t rows) const {
  if (rows == 0) throw InputError("MLP body: accuracy over zero rows");
  const int C = classes_;
  Buffers b(std::min(kChunkRows, rows), classes_, hidden_);
  std::size_t correct = 0;
  for (std::size_t r0 = 0; r0 < rows; r0 += kChunkRows) {
    const int m = static_cast<int>(std::min(kChunkRows, rows - r0));
    forward(x + r0 * features_, m, b);
    for (int r = 0; r < m; ++r) {
      const double* z = b.logits.data() + static_cast<std::size_t>(r) * C;
      correct += (std::max_element(z, z + C) - z) == y[r0 + r];
    }
  }
  return static_cast<double>(correct) / static_cast<double>(rows);
}

void MlpBody::fit(const double* x, const std::int32_t* y, std::size_t rows,
                  const MlpTraining& options, Stream& stream) {
  if (rows == 0) throw InputError("MLP body: no training rows");
  if (options.epochs < 0)
    throw InputError("MLP body: epochs must be >= 0, got " + std::to_string(options.epochs));
  if (!(options.learning_rate > 0.0))
    throw InputError("MLP body: learning_rate must be > 0, got " +
                     std::to_string(options.learning_rate));
  if (options.batch_size < 1)
    throw InputError("MLP body: batch_size must be >= 1, got " +
                     std::to_string(options.batch_size));
  if (!(options.l2 >= 0.0))
    throw InputError("MLP body: l2 must be >= 0, got " + std::to_string(options.l2));
  check_labels(y, rows);

  const std::size_t batch = std::min(static_cast<std::size_t>(options.batch_size), rows);
  const std::size_t D = static_cast<std::size_t>(features_);
  const std::size_t n1 = w1_.size(), n2 = w2_.size();
  // One parameter vector view for Adam: [W1, W2] and their gradients and moments side by side.
  std::vector<double> gradient(n1 + n2), first(n1 + n2, 0.0), second(n1 + n2, 0.0);
  std::vector<double> xb(batch * D);
  std::vector<std::int32_t> yb(batch);
  std::vector<std::int64_t> order(rows);
  for (std::size_t r = 0; r < rows; ++r) order[r] = static_cast<std::int64_t>(r);
  Buffers b(batch, classes_, hidden_);

  long step = 0;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    stream.shuffle(std::span<std::int64_t>(order));
    for (std::size_t start = 0; start < rows; start += batch) {
      const std::size_t m = std::min(batch, rows - start);
      for (std::size_t i = 0; i < m; ++i) {
        const std::size_t r = static_cast<std::size_t>(order[start + i]);
        std::copy(x + r * D, x + (r + 1) * D, xb.data() + i * D);
        yb[i] = y[r];
      }
      forward(xb.data(), static_cast<int>(m), b);
      backward(xb.data(), yb.data(), static_cast<int>(m), 1.0 / static_cast<double>(m), 0.0, b,
               gradient.data(), gradient.data() + n1);

      ++step;
      const double correction1 = 1.0 - std::pow(kBeta1, static_cast<double>(step));
      const double correction2 = 1.0 - std::pow(kBeta2, static_cast<double>(step));
      const double rate = options.learning_rate / correction1;
      const double root2 = std::sqrt(correction2);
      auto adam = [&](double* w, std::size_t offset, std::size_t count) {
        for (std::size_t i = 0; i < count; ++i) {
          const std::size_t q = offset + i;
          const double g = gradient[q] + options.l2 * w[i];
          first[q] = kBeta1 * first[q] + (1.0 - kBeta1) * g;
          second[q] = kBeta2 * second[q] + (1.0 - kBeta2) * g * g;
          // Kingma & Ba's bias-corrected step, with the corrections folded into rate and root2.
          w[i] -= rate * first[q] / (std::sqrt(second[q]) / root2 + kAdamEpsilon);
        }
      };
      adam(w1_.data(), 0, n1);
      adam(w2_.data(), n1, n2);
    }
  }
}

}  // namespace fluence::lia
