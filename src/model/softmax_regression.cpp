#include "fluence/model/softmax_regression.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "fluence/core/lanes.hpp"
#include "fluence/model/block_products.hpp"
#include "fluence/model/dense_kernels.hpp"
#include "fluence/model/row_kernels.hpp"

namespace fluence {

namespace {

// Rows per chunk in full-data passes: bounds the workspace (chunk x C) while keeping GEMMs large.
constexpr std::size_t kChunkRows = 2048;

// With this few classes the GEMMs are too skinny for BLAS: the tiled kernels of dense_kernels.hpp
// take them, in cache-sized blocks of rows so that x is read from memory once per pass pair.
inline bool skinny(int C) {
  return C >= 2 && C <= kDenseMaxClasses;
}
inline std::size_t chunk_rows(int C) {
  return skinny(C) ? kDenseBlockRows : kChunkRows;
}

inline void axpy(double alpha, const double* x, double* y, int n) {
  for (int j = 0; j < n; ++j) y[j] += alpha * x[j];
}

// The step terms after a double step (softmax_regression.hpp): + lr proximal center, - lr
// correction.
void add_step_terms(const StepTerms& terms, double learning_rate, int p, double* theta) {
  if (terms.center) axpy(learning_rate * terms.proximal, terms.center, theta, p);
  if (terms.correction) axpy(-learning_rate, terms.correction, theta, p);
}

// One epoch's mini-batches in `order`: each batch's row pointers (into `x`, D values per row) and
// labels are gathered into the workspace vectors and handed to train(pointers, labels, batch).
template <class Value, class Train>
void for_each_batch(const Value* x, int D, const std::int32_t* y, const std::int64_t* order,
                    std::size_t rows, int batch_size, std::vector<const Value*>& pointers,
                    std::vector<std::int32_t>& labels, Train&& train) {
  // The largest batch there is: not a huge batch_size's worth of rows that do not exist.
  pointers.resize(std::min(static_cast<std::size_t>(batch_size), rows));
  labels.resize(std::min(static_cast<std::size_t>(batch_size), rows));
  for (std::size_t start = 0; start < rows; start += batch_size) {
    const int batch = static_cast<int>(std::min<std::size_t>(batch_size, rows - start));
    for (int b = 0; b < batch; ++b) {
      const auto r = static_cast<std::size_t>(order[start + b]);
      pointers[b] = x + r * D;
      labels[b] = y[r];
    }
    train(pointers.data(), labels.data(), batch);
  }
}

}  // namespace

SoftmaxRegression::SoftmaxRegression(int features, int classes, double l2)
    : features_(features), classes_(classes), l2_(l2) {}

std::string SoftmaxRegression::describe() const {
  return "logistic " + std::to_string(features_) + " -> " + std::to_string(classes_);
}

std::vector<ParameterBlock> SoftmaxRegression::parameter_blocks() const {
  return {{"weights", 0, parameters(), {classes_, features_}}};
}

void SoftmaxRegression::initialize(std::uint64_t, double* theta) const {
  std::fill(theta, theta + parameters(), 0.0);
}

void SoftmaxRegression::logits(const double* x, std::size_t rows, const double* theta, double* out,
                               Workspace&) const {
  const std::size_t chunk = chunk_rows(classes_);
  for (std::size_t start = 0; start < rows; start += chunk)
    compute_logits(x + start * features_, std::min(chunk, rows - start), theta,
                   out + start * classes_);
}

void SoftmaxRegression::clipped_gradient_sum(const double* x, const std::int32_t* y,
                                             std::size_t rows, const double* theta, double clip,
                                             double* out, Workspace& work, double* norms) const {
  const int C = classes_, D = features_;
  const std::size_t chunk = chunk_rows(C);
  work.reserve(std::min(rows, chunk), C, 0);
  std::fill(out, out + parameters(), 0.0);
  for (std::size_t start = 0; start < rows; start += chunk) {
    const std::size_t n = std::min(chunk, rows - start);
    double* residual = work.logits.data();
    const double* xs = x + start * D;
    compute_logits(xs, n, theta, residual);
    softmax_probabilities(residual, n, C);
    for (std::size_t r = 0; r < n; ++r) {
      double* g = residual + r * C;
      g[y[start + r]] -= 1.0;
      const double norm = std::sqrt(lanes_dot(g, g, C) * lanes_dot(xs + r * D, xs + r * D, D));
      if (norms) norms[start + r] = norm;
      if (norm > clip)
        for (int c = 0; c < C; ++c) g[c] *= clip / norm;
    }
    add_outer(residual, xs, n, D, C, out);
  }
}

void SoftmaxRegression::sgd_epoch(const TrainingRows& data, const std::int64_t* order,
                                  int batch_size, double learning_rate, double* theta,
                                  Workspace& work, const StepTerms& terms,
                                  const double* start) const {
  if (data.codes) {
    sgd_epoch(data.codes, *data.coding, data.labels, order, data.rows, batch_size, learning_rate,
              theta, work, terms, start);
    return;
  }
  if (start) std::copy(start, start + parameters(), theta);
  sgd_epoch(data.features, data.labels, order, data.rows, batch_size, learning_rate, theta, work,
            terms);
}

void SoftmaxRegression::sgd_epoch(const TrainingRows& data, const std::int64_t* order,
                                  int batch_size, double learning_rate, float* theta,
                                  Workspace& work, const StepTerms& terms,
                                  const float* start) const {
  if (!data.codes)
    throw std::logic_error("the logistic model's float SGD runs on byte-coded rows only");
  sgd_epoch(data.codes, *data.coding, data.labels, order, data.rows, batch_size, learning_rate,
            theta, work, terms, start);
}

void SoftmaxRegression::compute_logits(const double* x, std::size_t rows, const double* theta,
                                       double* logits) const {
  row_logits(x, rows, features_, classes_, theta, logits);
}

LossAndAccuracy SoftmaxRegression::loss_sum(const double* x, const std::int32_t* y,
                                            std::size_t rows, const double* theta,
                                            Workspace& work) const {
  const int C = classes_, D = features_;
  const std::size_t chunk = chunk_rows(C);
  work.reserve(std::min(rows, chunk), C, 0);
  LossAndAccuracy result;
  for (std::size_t start = 0; start < rows; start += chunk) {
    const std::size_t n = std::min(chunk, rows - start);
    double* z = work.logits.data();
    compute_logits(x + start * D, n, theta, z);
    for (std::size_t r = 0; r < n; ++r) {
      const double* row = z + r * C;
      if (std::max_element(row, row + C) - row == y[start + r]) ++result.correct;
    }
    result.loss_sum = log_loss_rows(z, n, C, y + start, result.loss_sum);
  }
  return result;
}

double SoftmaxRegression::gradient_sum(const double* x, const std::int32_t* y, std::size_t rows,
                                       const double* theta, double* gradient, Workspace& work,
                                       double* probabilities) const {
  const int C = classes_, D = features_;
  const std::size_t chunk = chunk_rows(C);
  work.reserve(std::min(rows, chunk), C, 0);
  std::fill(gradient, gradient + parameters(), 0.0);
  double loss = 0.0;
  for (std::size_t start = 0; start < rows; start += chunk) {
    const std::size_t n = std::min(chunk, rows - start);
    double* residual = work.logits.data();
    compute_logits(x + start * D, n, theta, residual);
    loss = softmax_rows(residual, n, C, y + start, loss);
    if (probabilities) std::copy(residual, residual + n * C, probabilities + start * C);
    for (std::size_t r = 0; r < n; ++r) residual[r * C + y[start + r]] -= 1.0;  // p - onehot(y)
    add_outer(residual, x + start * D, n, D, C, gradient);  // gradient += residual^T x
  }
  return loss;
}

double SoftmaxRegression::loss_gradient_sum(const double* x, std::size_t rows,
                                            const LogitLoss& loss, const double* theta,
                                            double* gradient, Workspace& work) const {
  const int C = classes_, D = features_;
  const std::size_t chunk = chunk_rows(C);
  work.reserve(std::min(rows, chunk), C, 0);
  if (gradient) std::fill(gradient, gradient + parameters(), 0.0);
  double sum = 0.0;
  for (std::size_t start = 0; start < rows; start += chunk) {
    const std::size_t n = std::min(chunk, rows - start);
    compute_logits(x + start * D, n, theta, work.logits.data());
    double* delta = gradient ? work.scratch.data() : nullptr;
    sum = loss.gradient(start, n, C, work.logits.data(), delta, sum);
    if (gradient) add_outer(delta, x + start * D, n, D, C, gradient);  // gradient += delta^T x
  }
  return sum;
}

void SoftmaxRegression::loss_hessian_vector_sum(const double* x, std::size_t rows,
                                                const LogitLoss& loss, const double* theta,
                                                const double* v, double* out,
                                                Workspace& work) const {
  const int C = classes_, D = features_;
  const std::size_t chunk = chunk_rows(C);
  work.reserve(std::min(rows, chunk), C, 2 * C);  // batch: delta and R{delta}
  std::fill(out, out + parameters(), 0.0);
  for (std::size_t start = 0; start < rows; start += chunk) {
    const std::size_t n = std::min(chunk, rows - start);
    compute_logits(x + start * D, n, theta, work.logits.data());
    compute_logits(x + start * D, n, v, work.scratch.data());  // R{z} = V x
    double* delta = work.batch.data();
    double* r_delta = delta + n * C;
    loss.hessian(start, n, C, work.logits.data(), work.scratch.data(), delta, r_delta);
    // The logits are linear in theta: only the head's curvature, (d^2L/dz^2 R{z}) x^T.
    add_outer(r_delta, x + start * D, n, D, C, out);
  }
}

void SoftmaxRegression::directional_logits(const double* x, std::size_t rows, const double* theta,
                                           const double* v, double* z, double* r_z,
                                           Workspace& work) const {
  logits(x, rows, theta, z, work);
  logits(x, rows, v, r_z, work);
}

void SoftmaxRegression::probabilities(const double* x, std::size_t rows, const double* theta,
                                      double* out) const {
  const std::size_t chunk = chunk_rows(classes_);
  for (std::size_t start = 0; start < rows; start += chunk) {
    const std::size_t n = std::min(chunk, rows - start);
    compute_logits(x + start * features_, n, theta, out + start * classes_);
    softmax_probabilities(out + start * classes_, n, classes_);
  }
}

void SoftmaxRegression::hessian_vector_chunk(const double* x, std::size_t n, const double* p,
                                             const double* v, double* out, double* a) const {
  const int C = classes_, D = features_;
  compute_logits(x, n, v, a);  // a_r = V x_r
  // Per row, (diag(p) - p p^T) a: the softmax Jacobian applied to the directional logits.
  softmax_jacobian_rows(p, a, n, C, 1.0, a);
  add_outer(a, x, n, D, C, out);
}

void SoftmaxRegression::hessian_vector_sum(const double* x, std::size_t rows, const double* theta,
                                           const double* v, double* out, Workspace& work) const {
  const int C = classes_, D = features_;
  const std::size_t chunk = chunk_rows(C);
  work.reserve(std::min(rows, chunk), C, 0);
  std::fill(out, out + parameters(), 0.0);
  for (std::size_t start = 0; start < rows; start += chunk) {
    const std::size_t n = std::min(chunk, rows - start);
    double* p = work.logits.data();
    compute_logits(x + start * D, n, theta, p);
    softmax_probabilities(p, n, C);
    hessian_vector_chunk(x + start * D, n, p, v, out, work.scratch.data());
  }
}

void SoftmaxRegression::hessian_vector_sum_at(const double* x, std::size_t rows,
                                              const double* probabilities, const double* v,
                                              double* out, Workspace& work) const {
  const int C = classes_, D = features_;
  const std::size_t chunk = chunk_rows(C);
  work.reserve(std::min(rows, chunk), C, 0);
  std::fill(out, out + parameters(), 0.0);
  for (std::size_t start = 0; start < rows; start += chunk) {
    const std::size_t n = std::min(chunk, rows - start);
    hessian_vector_chunk(x + start * D, n, probabilities + start * C, v, out, work.scratch.data());
  }
}

void softmax_hessian_vector_block_at(const SoftmaxRegression& model, const double* x,
                                     std::size_t rows, const double* probabilities, const double* v,
                                     int k, double* out, std::vector<double>& scratch) {
  const int C = model.classes(), D = model.features(), width = k * C;
  std::fill(out, out + static_cast<std::size_t>(k) * model.parameters(), 0.0);
  if (rows == 0 || k == 0) return;
  // Rows per pass: the directional logits (rows x kC) stay near 2 MB, and at least 64 rows keep
  // the update GEMM's inner dimension long enough.
  const std::size_t chunk =
      std::max<std::size_t>(64, (std::size_t(1) << 18) / static_cast<std::size_t>(width));
  scratch.resize(std::min(rows, chunk) * static_cast<std::size_t>(width));
  double* a = scratch.data();
  for (std::size_t start = 0; start < rows; start += chunk) {
    const auto n = static_cast<int>(std::min(chunk, rows - start));
    const double* xs = x + start * D;
    // a_r = [V_1 x_r, ..., V_k x_r]: the stacked weights are a kC x D row-major matrix.
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, width, D, 1.0, xs, D, v, D, 0.0, a,
                width);
    for (int r = 0; r < n; ++r) {
      const double* pr = probabilities + (start + static_cast<std::size_t>(r)) * C;
      for (int j = 0; j < k; ++j) {
        double* ar = a + static_cast<std::size_t>(r) * width + static_cast<std::size_t>(j) * C;
        double mean = 0.0;
        for (int c = 0; c < C; ++c) mean += pr[c] * ar[c];
        for (int c = 0; c < C; ++c) ar[c] = pr[c] * (ar[c] - mean);
      }
    }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, width, D, n, 1.0, a, width, xs, D, 1.0,
                out, D);
  }
}

void SoftmaxRegression::hessian_diagonal_sum(const double* x, std::size_t rows, const double* theta,
                                             double* out, Workspace& work) const {
  const int C = classes_, D = features_;
  const std::size_t chunk = chunk_rows(C);
  work.reserve(std::min(rows, chunk), C, D);
  std::fill(out, out + parameters(), 0.0);
  for (std::size_t start = 0; start < rows; start += chunk) {
    const std::size_t n = std::min(chunk, rows - start);
    double* weight = work.logits.data();
    compute_logits(x + start * D, n, theta, weight);
    softmax_probabilities(weight, n, C);
    for (std::size_t k = 0; k < n * C; ++k) weight[k] *= 1.0 - weight[k];  // p_rc (1 - p_rc)
    double* squares = work.batch.data();
    const double* xs = x + start * D;
    for (std::size_t k = 0; k < n * D; ++k) squares[k] = xs[k] * xs[k];
    add_outer(weight, squares, n, D, C, out);  // out_cd += sum_r w_rc x_rd^2
  }
}

namespace {
// t_r = 1 - ||p_r||^2, the trace of row r's softmax covariance diag(p_r) - p_r p_r^T.
double covariance_trace(const double* p, int classes) {
  double squares = 0.0;
  for (int c = 0; c < classes; ++c) squares += p[c] * p[c];
  return std::max(0.0, 1.0 - squares);
}
}  // namespace

void SoftmaxRegression::kronecker_factor_sums(const double* x, std::size_t rows,
                                              const double* probabilities, double* class_sum,
                                              double* feature_sum) const {
  const int C = classes_, D = features_;
  const auto DD = static_cast<std::size_t>(D);
  std::fill(class_sum, class_sum + static_cast<std::size_t>(C) * C, 0.0);
  std::fill(feature_sum, feature_sum + DD * DD, 0.0);
  std::vector<double> scaled(std::min(rows, kChunkRows) * DD);
  for (std::size_t start = 0; start < rows; start += kChunkRows) {
    const std::size_t n = std::min(kChunkRows, rows - start);
    for (std::size_t r = 0; r < n; ++r) {
      const double* p = probabilities + (start + r) * C;
      for (int c = 0; c < C; ++c) {
        class_sum[c * C + c] += p[c];
        for (int cp = 0; cp < C; ++cp) class_sum[c * C + cp] -= p[c] * p[cp];
      }
      // sum_r t_r x_r x_r^T as one SYRK of the rows scaled by sqrt(t_r) (t_r >= 0).
      const double root = std::sqrt(covariance_trace(p, C));
      const double* xr = x + (start + r) * DD;
      for (std::size_t j = 0; j < DD; ++j) scaled[r * DD + j] = root * xr[j];
    }
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, D, static_cast<int>(n), 1.0, scaled.data(),
                D, 1.0, feature_sum, D);
  }
  for (std::size_t i = 0; i < DD; ++i)
    for (std::size_t j = 0; j < i; ++j) feature_sum[i * DD + j] = feature_sum[j * DD + i];
}

void SoftmaxRegression::kronecker_feature_diagonal_sum(const double* x, std::size_t rows,
                                                       const double* probabilities,
                                                       double* out) const {
  const int C = classes_;
  const auto D = static_cast<std::size_t>(features_);
  std::fill(out, out + D, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    const double t = covariance_trace(probabilities + r * C, C);
    const double* xr = x + r * D;
    for (std::size_t j = 0; j < D; ++j) out[j] += t * xr[j] * xr[j];
  }
}

void SoftmaxRegression::hessian_sum(const double* x, std::size_t rows, const double* theta,
                                    double* out) const {
  const int C = classes_, D = features_;
  const std::size_t p = parameters();
  std::fill(out, out + p * p, 0.0);
  Workspace work;
  work.reserve(std::min(rows, kChunkRows), C, D);
  auto block = [&](int c, int cp) { return out + static_cast<std::size_t>(c) * D * p + cp * D; };
  // Block (c, c') = sum_r p_rc (delta_cc' - p_rc') x_r x_r^T is symmetric in (c, c') and a
  // symmetric D x D matrix. Its weight has one sign (>= 0 on the diagonal, <= 0 off it), so it is
  // a rank-n SYRK of sqrt|w| x. Rows of the weights sum to zero, so the blocks of the last class
  // follow from the others: only C(C-1)/2 SYRKs (one for two classes).
  const int computed = C - 1;
  for (std::size_t start = 0; start < rows; start += kChunkRows) {
    const std::size_t n = std::min(kChunkRows, rows - start);
    double* prob = work.logits.data();
    compute_logits(x + start * D, n, theta, prob);
    softmax_probabilities(prob, n, C);
    for (int c = 0; c < computed; ++c) {
      for (int cp = c; cp < computed; ++cp) {
        double* scaled = work.batch.data();
        for (std::size_t r = 0; r < n; ++r) {
          const double w = prob[r * C + c] * ((c == cp ? 1.0 : 0.0) - prob[r * C + cp]);
          const double root = std::sqrt(std::abs(w));
          const double* xr = x + (start + r) * D;
          for (int j = 0; j < D; ++j) scaled[r * D + j] = root * xr[j];
        }
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, D, static_cast<int>(n),
                    c == cp ? 1.0 : -1.0, scaled, D, 1.0, block(c, cp), static_cast<int>(p));
      }
    }
  }
  // Complete each computed block from its upper triangle, mirror it to (c', c).
  for (int c = 0; c < computed; ++c)
    for (int cp = c; cp < computed; ++cp) {
      double* b = block(c, cp);
      for (int i = 0; i < D; ++i)
        for (int j = 0; j < i; ++j) b[i * p + j] = b[j * p + i];
      if (cp != c) {
        double* mirror = block(cp, c);
        for (int i = 0; i < D; ++i)
          for (int j = 0; j < D; ++j) mirror[i * p + j] = b[i * p + j];
      }
    }
  // Last class: (c, C-1) = -sum_{c' < C-1} (c, c'), then (C-1, C-1) = -sum_c (c, C-1).
  const int last = C - 1;
  for (int c = 0; c <= last; ++c) {
    double* target = block(c, last);
    for (int cp = 0; cp < last; ++cp) {
      const double* source = block(c, cp);
      for (int i = 0; i < D; ++i)
        for (int j = 0; j < D; ++j) target[i * p + j] -= source[i * p + j];
    }
    if (c == last) break;
    double* mirror = block(last, c);
    for (int i = 0; i < D; ++i)
      for (int j = 0; j < D; ++j) mirror[i * p + j] = target[i * p + j];
  }
}

void SoftmaxRegression::sgd_batch(const double* const* rows_x, const std::int32_t* labels,
                                  int batch, double learning_rate, double* theta, Workspace& work,
                                  const StepTerms& terms) const {
  // theta <- (1 - lr (l2 + proximal)) theta - lr grad + lr proximal center - lr correction: the L2,
  // proximal and correction terms are taken at the old theta, as the data gradient is.
  const double shrink = 1.0 - learning_rate * (l2_ + (terms.center ? terms.proximal : 0.0));
  sgd_batch_update(rows_x, labels, batch, learning_rate, shrink, theta, work);
  add_step_terms(terms, learning_rate, static_cast<int>(parameters()), theta);
}

void SoftmaxRegression::sgd_batch_update(const double* const* rows_x, const std::int32_t* labels,
                                         int batch, double learning_rate, double shrink,
                                         double* theta, Workspace& work) const {
  const int C = classes_, D = features_;
  const double step = learning_rate / batch;
  double* g = work.logits.data();
  if (static_cast<std::size_t>(batch) * C * D >= kBlasWork) {
    // Gather the batch, then logits and the whole update as two GEMMs:
    // theta <- shrink * theta - step * (P - Y)^T X_b.
    double* xb = work.batch.data();
    for (int b = 0; b < batch; ++b) std::copy_n(rows_x[b], D, xb + static_cast<std::size_t>(b) * D);
    compute_logits(xb, batch, theta, g);
    softmax_probabilities(g, batch, C);
    for (int b = 0; b < batch; ++b) g[b * C + labels[b]] -= 1.0;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, D, batch, -step, g, C, xb, D, shrink,
                theta, D);
    return;
  }
  for (int b = 0; b < batch; ++b)
    for (int c = 0; c < C; ++c) g[b * C + c] = lanes_dot(rows_x[b], theta + c * D, D);
  softmax_probabilities(g, batch, C);
  for (int b = 0; b < batch; ++b) g[b * C + labels[b]] -= 1.0;
  // theta_c <- shrink theta_c - step sum_b g_bc x_b, the shrink fused into the first row's pass.
  for (int c = 0; c < C; ++c) {
    double* tc = theta + c * D;
    const double* x0 = rows_x[0];
    const double a0 = -step * g[c];
    for (int j = 0; j < D; ++j) tc[j] = shrink * tc[j] + a0 * x0[j];
    for (int b = 1; b < batch; ++b) axpy(-step * g[b * C + c], rows_x[b], tc, D);
  }
}

void SoftmaxRegression::sgd_epoch(const double* x, const std::int32_t* y, const std::int64_t* order,
                                  std::size_t rows, int batch_size, double learning_rate,
                                  double* theta, Workspace& work, const StepTerms& terms) const {
  work.reserve(static_cast<std::size_t>(batch_size), classes_, features_);
  for_each_batch(x, features_, y, order, rows, batch_size, work.batch_rows, work.batch_labels,
                 [&](const double* const* batch_rows, const std::int32_t* labels, int batch) {
                   sgd_batch(batch_rows, labels, batch, learning_rate, theta, work, terms);
                 });
}

void SoftmaxRegression::sgd_batch(const std::uint8_t* const* rows_k, const std::int32_t* labels,
                                  int batch, const ByteCoding& coding, double learning_rate,
                                  const double* source, double* theta, Workspace& work,
                                  const StepTerms& terms) const {
  const int C = classes_, D = features_;
  const double shrink = 1.0 - learning_rate * (l2_ + (terms.center ? terms.proximal : 0.0));
  const double step = learning_rate / batch;
  // theta x = bias + (theta * step) k: the kernels read the codes (a batch of 16 rows is 12.5 KB
  // at D = 785, in L1) where they lie, and no BLAS call or packing is paid on a 16-row batch.
  double* g = work.logits.data();
  byte_logits(rows_k, batch, D, source, coding.step.data(), coding.offset.data(), C,
              work.folded.data(), g);
  softmax_probabilities(g, batch, C);
  for (int b = 0; b < batch; ++b) g[b * C + labels[b]] -= 1.0;
  for (int k = 0; k < batch * C; ++k) g[k] *= -step;
  // theta <- shrink theta - step (P - Y)^T X, then the step terms as in the double path.
  byte_rank_update(rows_k, batch, D, g, C, shrink, coding.step.data(), coding.offset.data(), theta,
                   source);
  add_step_terms(terms, learning_rate, static_cast<int>(parameters()), theta);
}

void SoftmaxRegression::sgd_epoch(const std::uint8_t* codes, const ByteCoding& coding,
                                  const std::int32_t* y, const std::int64_t* order,
                                  std::size_t rows, int batch_size, double learning_rate,
                                  double* theta, Workspace& work, const StepTerms& terms,
                                  const double* start) const {
  work.reserve(static_cast<std::size_t>(batch_size), classes_, 0);
  work.folded.resize(classes_);
  if (start && rows == 0) std::copy(start, start + parameters(), theta);
  const double* source = start ? start : theta;
  for_each_batch(codes, features_, y, order, rows, batch_size, work.batch_codes, work.batch_labels,
                 [&](const std::uint8_t* const* batch_rows, const std::int32_t* labels, int batch) {
                   sgd_batch(batch_rows, labels, batch, coding, learning_rate, source, theta, work,
                             terms);
                   source = theta;
                 });
}

void SoftmaxRegression::sgd_batch(const std::uint8_t* const* rows_k, const std::int32_t* labels,
                                  int batch, const float* step, const float* offset,
                                  double learning_rate, const float* source, float* theta,
                                  Workspace& work, bool source_folded, bool fold_result,
                                  const StepTerms& terms) const {
  const int C = classes_, D = features_;
  const auto count = static_cast<std::size_t>(batch) * C;
  // The logits as the fast test evaluation takes them (block_logits_by_class): the batch's rows
  // transposed into 16-row blocks, so that one converted column serves every class and each weight
  // is a broadcast; the row-major form would convert each row once per group of classes and end
  // in a horizontal sum per row and class. Each row's logits do not depend on its batch.
  float* folded = work.folded_float.data();
  double* bias = work.single_bias.data();
  double* z = work.block_logits.data();
  if (!source_folded) fold_classes(source, C, D, step, offset, folded, bias);
  double* g = work.logits.data();
  for (int b0 = 0; b0 < batch; b0 += kCodeBlockRows) {
    const int n = std::min(kCodeBlockRows, batch - b0);
    block_rows(rows_k + b0, n, D, work.batch_block.data());
    block_logits_by_class(work.batch_block.data(), D, folded, bias, C, z);
    for (int r = 0; r < n; ++r) {
      double top = z[r];
      for (int c = 1; c < C; ++c) top = std::max(top, z[c * kCodeBlockRows + r]);
      double* gb = g + static_cast<std::ptrdiff_t>(b0 + r) * C;
      for (int c = 0; c < C; ++c) gb[c] = z[c * kCodeBlockRows + r] - top;
    }
  }
  // The softmax in double, its exponentials eight at a time (lanes::exp_nonpositive, within about
  // an ulp of exp): one scalar exp per logit would cost a tenth of the float step.
  lanes::exp_nonpositive(g, g, count);
  for (int b = 0; b < batch; ++b) {
    double* gb = g + static_cast<std::ptrdiff_t>(b) * C;
    double total = 0.0;
    for (int c = 0; c < C; ++c) total += gb[c];
    const double inverse = 1.0 / total;
    for (int c = 0; c < C; ++c) gb[c] *= inverse;
    gb[labels[b]] -= 1.0;
  }
  const double scale = -learning_rate / batch;
  float* a = work.single_coefficients.data();
  for (std::size_t k = 0; k < count; ++k) a[k] = static_cast<float>(scale * g[k]);
  const double shrink = 1.0 - learning_rate * (l2_ + (terms.center ? terms.proximal : 0.0));
  byte_rank_update(rows_k, static_cast<std::size_t>(batch), D, a, C, static_cast<float>(shrink),
                   step, offset, theta, source, fold_result ? folded : nullptr,
                   fold_result ? bias : nullptr);
  const std::size_t p = parameters();
  if (terms.center)
    for (std::size_t k = 0; k < p; ++k)
      theta[k] +=
          static_cast<float>(learning_rate * terms.proximal) * static_cast<float>(terms.center[k]);
  if (terms.correction)
    for (std::size_t k = 0; k < p; ++k)
      theta[k] -= static_cast<float>(learning_rate) * static_cast<float>(terms.correction[k]);
}

void SoftmaxRegression::sgd_epoch(const std::uint8_t* codes, const ByteCoding& coding,
                                  const std::int32_t* y, const std::int64_t* order,
                                  std::size_t rows, int batch_size, double learning_rate,
                                  float* theta, Workspace& work, const StepTerms& terms,
                                  const float* start) const {
  if (coding.single_step.size() != static_cast<std::size_t>(features_))
    throw std::logic_error("single-precision SGD needs ByteCoding::with_single()");
  work.reserve(static_cast<std::size_t>(batch_size), classes_, 0);
  const auto count = static_cast<std::size_t>(batch_size) * classes_;
  if (work.single_coefficients.size() < count) work.single_coefficients.resize(count);
  work.single_bias.resize(classes_);
  work.folded_float.resize(parameters());
  work.batch_block.resize(static_cast<std::size_t>(kCodeBlockRows) * features_);
  work.block_logits.resize(static_cast<std::size_t>(kCodeBlockRows) * classes_);
  if (start && rows == 0) std::copy(start, start + parameters(), theta);
  const float* source = start ? start : theta;
  // Each update but the last folds its result for the next batch's logits, unless step terms
  // change theta after the update (the next batch then folds theta itself).
  const bool fused = terms.empty();
  std::size_t done = 0;
  for_each_batch(codes, features_, y, order, rows, batch_size, work.batch_codes, work.batch_labels,
                 [&](const std::uint8_t* const* batch_rows, const std::int32_t* labels, int batch) {
                   const bool first = done == 0;
                   done += static_cast<std::size_t>(batch);
                   sgd_batch(batch_rows, labels, batch, coding.single_step.data(),
                             coding.single_offset.data(), learning_rate, source, theta, work,
                             !first && fused, fused && done < rows, terms);
                   source = theta;
                 });
}

LossAndAccuracy SoftmaxRegression::loss_sum_blocked(const std::uint8_t* blocked,
                                                    const ByteCoding& coding, std::size_t rows,
                                                    const std::int32_t* y, const double* theta,
                                                    Workspace& work, bool fast) const {
  const int C = classes_, D = features_;
  work.folded.resize(parameters() + C);
  double* wt = work.folded.data();
  double* bias = wt + parameters();
  if (fast) {
    work.folded_float.resize(parameters());
    fold_transposed(theta, C, D, coding.step.data(), work.folded_float.data());
  } else {
    fold_transposed(theta, C, D, coding.step.data(), wt);
  }
  byte_bias(theta, C, D, coding.offset.data(), bias);
  work.reserve(kCodeBlockRows, C, 0);
  double* z = work.logits.data();  // C x 16: class-major within the block
  LossAndAccuracy result;
  for (std::size_t start = 0; start < rows; start += kCodeBlockRows) {
    if (fast)
      block_logits(blocked + start * D, D, work.folded_float.data(), bias, C, z);
    else
      block_logits(blocked + start * D, D, wt, bias, C, z);
    const int n = static_cast<int>(std::min<std::size_t>(kCodeBlockRows, rows - start));
    block_loss(z, C, y + start, n, result.loss_sum, result.correct);
  }
  return result;
}

void SoftmaxRegression::gradient_step(const double* x, const std::int32_t* y, std::size_t rows,
                                      double learning_rate, double* theta, Workspace& work,
                                      const StepTerms& terms) const {
  std::vector<double>& gradient = work.gradient;
  gradient.resize(parameters());
  gradient_sum(x, y, rows, theta, gradient.data(), work);
  full_batch_step(gradient.data(), 1.0 / static_cast<double>(rows), l2_, learning_rate, terms,
                  parameters(), theta);
}

}  // namespace fluence
