// Networks from layers: forward and backward passes, the R-operator, per-example clipping and local
// SGD (docs/math.md §10). Every pass is templated on the arithmetic (float for local SGD in single
// precision and the fast evaluation, double elsewhere).
#include "fluence/model/network.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "fluence/core/rng.hpp"
#include "fluence/model/block_products.hpp"
#include "fluence/model/layers.hpp"
#include "fluence/model/purposes.hpp"
#include "fluence/model/softmax_head.hpp"
#include "fluence/model/winograd.hpp"

namespace fluence {

// ---- Scratch ---------------------------------------------------------------------------------

template <class T>
struct PassBuffers {
  std::size_t rows = 0;                           // capacity in rows of every buffer below
  std::vector<std::vector<T>> act, delta;         // per layer: output and d loss / d output
  std::vector<std::vector<T>> col;                // per convolution: im2col of its input
  std::vector<std::vector<std::int32_t>> argmax;  // per max-pool
  std::vector<std::vector<T>> r_act, r_delta;     // R-operator: R{output}, R{d loss / d output}
  std::vector<std::vector<T>> r_col;              // R-operator: im2col of R{input}
  std::vector<T> input, dcol, r_dcol, filter_gradient, theta;
  std::vector<double> logits, squared_norms, row_scale;
  WinogradScratch<T> winograd;
};

struct NetworkBuffers {
  PassBuffers<float> single;
  PassBuffers<double> twice;
};

NetworkScratch::NetworkScratch() = default;
NetworkScratch::NetworkScratch(const NetworkScratch&) {}
NetworkScratch& NetworkScratch::operator=(const NetworkScratch&) {
  return *this;
}
NetworkScratch::NetworkScratch(NetworkScratch&&) noexcept = default;
NetworkScratch& NetworkScratch::operator=(NetworkScratch&&) noexcept = default;
NetworkScratch::~NetworkScratch() = default;
NetworkBuffers& NetworkScratch::buffers() {
  if (!buffers_) buffers_ = std::make_unique<NetworkBuffers>();
  return *buffers_;
}

namespace {

template <class T>
PassBuffers<T>& pass_buffers(Workspace& work);
template <>
PassBuffers<float>& pass_buffers<float>(Workspace& work) {
  return work.network.buffers().single;
}
template <>
PassBuffers<double>& pass_buffers<double>(Workspace& work) {
  return work.network.buffers().twice;
}

ConvGeometry geometry(const Layer& layer) {
  return {layer.in.height, layer.in.width, layer.in.channels,
          layer.kernel,    layer.pad,      layer.out.channels};
}

template <class T>
void grow(std::vector<T>& buffer, std::size_t size) {
  if (buffer.size() < size) buffer.resize(size);
}

// ---- The passes ------------------------------------------------------------------------------

// A convolution works through a block a few images at a time (Layer::conv_rows): each group's
// im2col matrix (about 2 MB of floats) is made, used by the GEMM while it is in cache, and made
// again where the backward pass needs it. Keeping a whole mini-batch's columns (6 MB for the CNN's
// second convolution on 10 images) measured a few percent slower for the streams through memory
// it costs, and a block of many rows could not keep them at all.
template <class T>
class Passes {
 public:
  // Buffers for blocks of up to `rows` rows; `backward` sizes the deltas, `r_operator` the
  // directional buffers.
  Passes(const std::vector<Layer>& layers, int classes, bool backward, bool r_operator,
         PassBuffers<T>& buffers, std::size_t rows)
      : layers_(layers), b_(buffers), classes_(classes), argmax_needed_(backward || r_operator) {
    const std::size_t L = layers.size(), R = rows;
    b_.act.resize(L);
    b_.delta.resize(L);
    b_.col.resize(L);
    b_.argmax.resize(L);
    b_.r_act.resize(L);
    b_.r_delta.resize(L);
    b_.r_col.resize(L);
    act_.assign(L, nullptr);
    delta_.assign(L, nullptr);
    r_act_.assign(L, nullptr);
    r_delta_.assign(L, nullptr);
    std::size_t widest_patch = 0;
    for (std::size_t l = 0; l < L; ++l) {
      const Layer& layer = layers[l];
      // Activations and flatten work in place on the layer below's buffers: their backward passes
      // need only their outputs, and the layer below's own output is not needed once they ran.
      const bool in_place =
          l > 0 && (layer.kind == LayerKind::relu || layer.kind == LayerKind::tanh ||
                    layer.kind == LayerKind::flatten);
      if (in_place) {
        act_[l] = act_[l - 1];
        delta_[l] = delta_[l - 1];
        r_act_[l] = r_act_[l - 1];
        r_delta_[l] = r_delta_[l - 1];
      } else {
        const std::size_t out = R * layer.out.size();
        grow(b_.act[l], out);
        act_[l] = b_.act[l].data();
        if (backward) {
          grow(b_.delta[l], out);
          delta_[l] = b_.delta[l].data();
        }
        if (r_operator) {
          grow(b_.r_act[l], out);
          grow(b_.r_delta[l], out);
          r_act_[l] = b_.r_act[l].data();
          r_delta_[l] = b_.r_delta[l].data();
        }
      }
      if (layer.kind == LayerKind::max_pool && argmax_needed_)
        grow(b_.argmax[l], R * layer.out.size());
      if (layer.kind != LayerKind::conv2d || (winograd(layer) && !r_operator)) continue;
      const ConvGeometry g = geometry(layer);
      const std::size_t per_image = std::size_t(g.positions()) * g.patch();
      const std::size_t columns = per_image * std::min(R, std::size_t(layer.conv_rows));
      grow(b_.col[l], columns);
      if (r_operator) grow(b_.r_col[l], columns);
      widest_patch = std::max(widest_patch, columns);
      grow(b_.filter_gradient, std::size_t(g.filters) * g.patch());
    }
    if (backward) grow(b_.dcol, widest_patch);
    if (r_operator) grow(b_.r_dcol, widest_patch);
    grow(b_.input, R * layers.front().in.size());
    grow(b_.logits, R * classes);
    grow(b_.squared_norms, R);
    grow(b_.row_scale, R);
  }

  T* input() { return b_.input.data(); }
  const T* logits() const { return act_.back(); }
  T* logit_delta() { return delta_.back(); }
  const T* r_logits() const { return r_act_.back(); }
  // Layer l's output (after any activation fused into it by finish_output).
  const T* activation(std::size_t l) const { return act_[l]; }
  // Layer l's d loss / d output (after backward; a parametric layer's with a fused activation
  // below the activation, since the activation's backward works in place).
  const T* output_delta(std::size_t l) const { return delta_[l]; }
  T* r_logit_delta() { return r_delta_.back(); }
  // The im2col rows of images [r0, r0 + n) of convolution l's input `in` (n x positions rows of
  // its patches), made in the layer's column buffer.
  const T* patch_rows(std::size_t l, const T* in, int r0, int n) {
    return columns(l, in, r0, n, b_.col[l]);
  }
  double* squared_norms() { return b_.squared_norms.data(); }
  double* row_scale() { return b_.row_scale.data(); }

  // Activations of `rows` rows x (rows x D) at theta.
  void forward(const T* theta, const T* x, int rows) {
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const Layer& layer = layers_[l];
      const T* in = l ? act_[l - 1] : x;
      T* out = act_[l];
      const int n_in = static_cast<int>(layer.in.size()),
                n_out = static_cast<int>(layer.out.size());
      switch (layer.kind) {
        case LayerKind::dense:
          gemm<T>(false, true, rows, n_out, n_in, T(1), in, n_in, theta + layer.weights, n_in, T(0),
                  out, n_out);
          l += finish_output(l, theta, out, std::size_t(rows), n_out);
          break;
        case LayerKind::conv2d: {
          const ConvGeometry g = geometry(layer);
          if (winograd(layer))
            winograd_convolution(in, rows, g, theta + layer.weights, out, b_.winograd);
          else
            for_each_images(l, rows, [&](int r0, int n) {
              const T* col = columns(l, in, r0, n, b_.col[l]);
              gemm<T>(false, true, n * g.positions(), g.filters, g.patch(), T(1), col, g.patch(),
                      theta + layer.weights, g.patch(), T(0), out + r0 * layer.out.size(),
                      g.filters);
            });
          l += finish_output(l, theta, out, std::size_t(rows) * g.positions(), g.filters);
          break;
        }
        case LayerKind::relu:
          for (std::size_t i = 0; i < std::size_t(rows) * n_out; ++i)
            out[i] = in[i] > T(0) ? in[i] : T(0);
          break;
        case LayerKind::tanh:
          for (std::size_t i = 0; i < std::size_t(rows) * n_out; ++i) out[i] = std::tanh(in[i]);
          break;
        case LayerKind::max_pool:
          max_pool(in, rows, layer.in.height, layer.in.width, layer.in.channels, out,
                   argmax_needed_ ? b_.argmax[l].data() : nullptr);
          break;
        case LayerKind::flatten:
          if (out != in) std::copy(in, in + std::size_t(rows) * n_out, out);
          break;
      }
    }
  }

  // From delta.back() (d loss / d logits) down: every layer's delta, and for parametric layers
  // target <- beta target + alpha (d loss / d parameters) (no parameter work when target is null).
  // With target == theta this is an SGD step: a layer's input delta is complete before its update
  // overwrites its weights, and the layers below read only their own, not yet updated, weights.
  void backward(const T* theta, const T* x, int rows, T* target, T alpha, T beta) {
    for (std::size_t l = layers_.size(); l-- > 0;) {
      const Layer& layer = layers_[l];
      const T* in = l ? act_[l - 1] : x;
      const T* d_out = delta_[l];
      T* d_in = l ? delta_[l - 1] : nullptr;
      const int n_in = static_cast<int>(layer.in.size()),
                n_out = static_cast<int>(layer.out.size());
      const std::size_t count = std::size_t(rows) * n_out;
      switch (layer.kind) {
        case LayerKind::dense:
          if (d_in) dense_input_delta(d_out, rows, n_out, theta + layer.weights, n_in, d_in);
          if (target) {
            gemm<T>(true, false, n_out, n_in, rows, alpha, d_out, n_out, in, n_in, beta,
                    target + layer.weights, n_in);
            if (layer.bias_count)
              add_column_sums(d_out, rows, n_out, alpha, beta, target + layer.biases);
          }
          break;
        case LayerKind::conv2d:
          if (d_in) convolution_input_delta(l, theta, d_out, rows, d_in);
          if (target) {
            filter_gradient(l, in, d_out, rows, alpha, beta, target + layer.weights);
            if (layer.bias_count)
              add_column_sums(d_out, std::size_t(rows) * layer.out.height * layer.out.width,
                              layer.out.channels, alpha, beta, target + layer.biases);
          }
          break;
        case LayerKind::relu:
          if (d_in) {
            const T* y = act_[l];
            for (std::size_t i = 0; i < count; ++i) d_in[i] = y[i] > T(0) ? d_out[i] : T(0);
          }
          break;
        case LayerKind::tanh:
          if (d_in) {
            const T* y = act_[l];
            for (std::size_t i = 0; i < count; ++i) d_in[i] = d_out[i] * (T(1) - y[i] * y[i]);
          }
          break;
        case LayerKind::max_pool:
          if (d_in)
            max_pool_adjoint(d_out, b_.argmax[l].data(), rows, layer.out.size(), layer.in.size(),
                             d_in);
          break;
        case LayerKind::flatten:
          if (d_in && d_in != d_out) std::copy(d_out, d_out + count, d_in);
          break;
      }
    }
  }

  // R{activations} along v (after forward at theta): R{x} = 0 for the inputs.
  void r_forward(const T* theta, const T* v, const T* x, int rows) {
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const Layer& layer = layers_[l];
      const T* in = l ? act_[l - 1] : x;
      const T* r_in = l ? r_act_[l - 1] : nullptr;
      T* r_out = r_act_[l];
      const int n_in = static_cast<int>(layer.in.size()),
                n_out = static_cast<int>(layer.out.size());
      const std::size_t count = std::size_t(rows) * n_out;
      switch (layer.kind) {
        case LayerKind::dense:  // R{z} = R{a} W^T + a V^T + v_b
          gemm<T>(false, true, rows, n_out, n_in, T(1), in, n_in, v + layer.weights, n_in, T(0),
                  r_out, n_out);
          if (r_in)
            gemm<T>(false, true, rows, n_out, n_in, T(1), r_in, n_in, theta + layer.weights, n_in,
                    T(1), r_out, n_out);
          if (layer.bias_count) add_bias(r_out, rows, n_out, v + layer.biases);
          break;
        case LayerKind::conv2d: {
          const ConvGeometry g = geometry(layer);
          for_each_images(l, rows, [&](int r0, int n) {
            T* r_out_part = r_out + r0 * layer.out.size();
            const T* col = columns(l, in, r0, n, b_.col[l]);
            gemm<T>(false, true, n * g.positions(), g.filters, g.patch(), T(1), col, g.patch(),
                    v + layer.weights, g.patch(), T(0), r_out_part, g.filters);
            if (!r_in) return;
            const T* r_col = columns(l, r_in, r0, n, b_.r_col[l]);
            gemm<T>(false, true, n * g.positions(), g.filters, g.patch(), T(1), r_col, g.patch(),
                    theta + layer.weights, g.patch(), T(1), r_out_part, g.filters);
          });
          if (layer.bias_count)
            add_bias(r_out, std::size_t(rows) * g.positions(), g.filters, v + layer.biases);
          break;
        }
        case LayerKind::relu: {
          const T* y = act_[l];
          for (std::size_t i = 0; i < count; ++i) r_out[i] = y[i] > T(0) ? r_in[i] : T(0);
          break;
        }
        case LayerKind::tanh: {
          const T* y = act_[l];
          for (std::size_t i = 0; i < count; ++i) r_out[i] = r_in[i] * (T(1) - y[i] * y[i]);
          break;
        }
        case LayerKind::max_pool: {
          const std::int32_t* index = b_.argmax[l].data();
          const std::size_t in_size = layer.in.size(), out_size = layer.out.size();
          for (int r = 0; r < rows; ++r)
            for (std::size_t j = 0; j < out_size; ++j)
              r_out[r * out_size + j] = r_in[r * in_size + index[r * out_size + j]];
          break;
        }
        case LayerKind::flatten:
          if (r_out != r_in) std::copy(r_in, r_in + count, r_out);
          break;
      }
    }
  }

  // From delta.back() and r_delta.back() down: out += R{d loss / d theta} (the Hessian times v).
  void r_backward(const T* theta, const T* v, const T* x, int rows, T* out) {
    for (std::size_t l = layers_.size(); l-- > 0;) {
      const Layer& layer = layers_[l];
      const T* in = l ? act_[l - 1] : x;
      const T* r_in = l ? r_act_[l - 1] : nullptr;
      const T* d_out = delta_[l];
      const T* r_d_out = r_delta_[l];
      T* d_in = l ? delta_[l - 1] : nullptr;
      T* r_d_in = l ? r_delta_[l - 1] : nullptr;
      const int n_in = static_cast<int>(layer.in.size()),
                n_out = static_cast<int>(layer.out.size());
      const std::size_t count = std::size_t(rows) * n_out;
      switch (layer.kind) {
        case LayerKind::dense:
          if (d_in) {  // delta_in = delta W; R{delta_in} = R{delta} W + delta V
            gemm<T>(false, false, rows, n_in, n_out, T(1), d_out, n_out, theta + layer.weights,
                    n_in, T(0), d_in, n_in);
            gemm<T>(false, false, rows, n_in, n_out, T(1), r_d_out, n_out, theta + layer.weights,
                    n_in, T(0), r_d_in, n_in);
            gemm<T>(false, false, rows, n_in, n_out, T(1), d_out, n_out, v + layer.weights, n_in,
                    T(1), r_d_in, n_in);
          }
          // R{g_W} = R{delta}^T a + delta^T R{a}; R{g_b} = sum R{delta}
          gemm<T>(true, false, n_out, n_in, rows, T(1), r_d_out, n_out, in, n_in, T(1),
                  out + layer.weights, n_in);
          if (r_in)
            gemm<T>(true, false, n_out, n_in, rows, T(1), d_out, n_out, r_in, n_in, T(1),
                    out + layer.weights, n_in);
          if (layer.bias_count)
            add_column_sums(r_d_out, rows, n_out, T(1), T(1), out + layer.biases);
          break;
        case LayerKind::conv2d: {
          const ConvGeometry g = geometry(layer);
          if (d_in) {
            convolution_input_delta(l, theta, d_out, rows, d_in);
            const std::size_t in_size = layer.in.size(), out_size = layer.out.size();
            for_each_images(l, rows, [&](int r0, int n) {
              const int positions = n * g.positions();
              T* r_dcol = b_.r_dcol.data();
              gemm<T>(false, false, positions, g.patch(), g.filters, T(1), r_d_out + r0 * out_size,
                      g.filters, theta + layer.weights, g.patch(), T(0), r_dcol, g.patch());
              gemm<T>(false, false, positions, g.patch(), g.filters, T(1), d_out + r0 * out_size,
                      g.filters, v + layer.weights, g.patch(), T(1), r_dcol, g.patch());
              col2im(r_dcol, n, g, r_d_in + r0 * in_size);
            });
          }
          filter_gradient(l, in, r_d_out, rows, T(1), T(1), out + layer.weights);
          if (r_in) filter_gradient(l, r_in, d_out, rows, T(1), T(1), out + layer.weights, true);
          if (layer.bias_count)
            add_column_sums(r_d_out, std::size_t(rows) * g.positions(), g.filters, T(1), T(1),
                            out + layer.biases);
          break;
        }
        case LayerKind::relu:
          if (d_in) {
            const T* y = act_[l];
            for (std::size_t i = 0; i < count; ++i) {
              const bool on = y[i] > T(0);
              const T d = d_out[i], r_d = r_d_out[i];
              d_in[i] = on ? d : T(0);
              r_d_in[i] = on ? r_d : T(0);
            }
          }
          break;
        case LayerKind::tanh:
          if (d_in) {  // d(1 - y^2) = -2 y R{y}
            const T* y = act_[l];
            const T* r_y = r_act_[l];
            for (std::size_t i = 0; i < count; ++i) {  // in place: read both before writing
              const T slope = T(1) - y[i] * y[i], d = d_out[i], r_d = r_d_out[i];
              d_in[i] = d * slope;
              r_d_in[i] = r_d * slope - T(2) * y[i] * r_y[i] * d;
            }
          }
          break;
        case LayerKind::max_pool:
          if (d_in) {
            max_pool_adjoint(d_out, b_.argmax[l].data(), rows, layer.out.size(), layer.in.size(),
                             d_in);
            max_pool_adjoint(r_d_out, b_.argmax[l].data(), rows, layer.out.size(), layer.in.size(),
                             r_d_in);
          }
          break;
        case LayerKind::flatten:
          if (d_in && d_in != d_out) {
            std::copy(d_out, d_out + count, d_in);
            std::copy(r_d_out, r_d_out + count, r_d_in);
          }
          break;
      }
    }
  }

  // After backward without a target: each row's squared gradient norm ||g_r||^2 into
  // squared_norms() (dense: ||delta_r||^2 ||a_r||^2, the norm of an outer product; convolution:
  // the row's own filter-gradient GEMM).
  void per_row_squared_norms(const T* x, int rows) {
    double* norms = b_.squared_norms.data();
    std::fill(norms, norms + rows, 0.0);
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const Layer& layer = layers_[l];
      if (!layer.parametric()) continue;
      const T* in = l ? act_[l - 1] : x;
      const T* d_out = delta_[l];
      if (layer.kind == LayerKind::dense) {
        const std::size_t n_in = layer.in.size(), n_out = layer.out.size();
        for (int r = 0; r < rows; ++r) {
          const double delta = squared_norm(d_out + r * n_out, n_out);
          norms[r] += delta * squared_norm(in + r * n_in, n_in) + (layer.bias_count ? delta : 0.0);
        }
        continue;
      }
      const ConvGeometry g = geometry(layer);
      const int P = g.positions(), K = g.patch(), F = g.filters;
      T* gradient = b_.filter_gradient.data();
      for (int r = 0; r < rows; ++r) {
        const T* d = d_out + std::size_t(r) * P * F;
        const T* col = columns(l, in, r, 1, b_.col[l]);
        gemm<T>(true, false, F, K, P, T(1), d, F, col, K, T(0), gradient, K);
        double square = squared_norm(gradient, std::size_t(F) * K);
        if (layer.bias_count)
          for (int f = 0; f < F; ++f) {
            double sum = 0.0;
            for (int t = 0; t < P; ++t) sum += d[std::size_t(t) * F + f];
            square += sum * sum;
          }
        norms[r] += square;
      }
    }
  }

  // After per_row_squared_norms: out += sum_r scale_r g_r, by scaling each layer's deltas.
  void add_scaled_gradients(const T* x, int rows, const double* scale, T* out) {
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const Layer& layer = layers_[l];
      if (!layer.parametric()) continue;
      T* d_out = delta_[l];
      const std::size_t per_row = layer.out.size();
      for (int r = 0; r < rows; ++r)
        for (std::size_t j = 0; j < per_row; ++j)
          d_out[r * per_row + j] *= static_cast<T>(scale[r]);
      const T* in = l ? act_[l - 1] : x;
      if (layer.kind == LayerKind::dense) {
        const int n_in = static_cast<int>(layer.in.size()), n_out = static_cast<int>(per_row);
        gemm<T>(true, false, n_out, n_in, rows, T(1), d_out, n_out, in, n_in, T(1),
                out + layer.weights, n_in);
        if (layer.bias_count) add_column_sums(d_out, rows, n_out, T(1), T(1), out + layer.biases);
      } else {
        filter_gradient(l, in, d_out, rows, T(1), T(1), out + layer.weights);
        if (layer.bias_count)
          add_column_sums(d_out, std::size_t(rows) * layer.out.height * layer.out.width,
                          layer.out.channels, T(1), T(1), out + layer.biases);
      }
    }
  }

 private:
  // d_in = d_out W for a dense layer (rows x n_out times n_out x n_in). With AVX-512, a float
  // mini-batch against a wide layer goes to small_rows_times, which reads W once where sgemm
  // would pack it (2x sgemm on the CNN's 512 x 3136 layer, as measured when it was written). With
  // AVX2 its 16-lane accumulators take two registers each and spill: 10 ms against OpenBLAS
  // sgemm's 0.9 ms on this layer (Zen, one core), so sgemm it is.
  static void dense_input_delta(const T* d_out, int rows, int n_out, const T* w, int n_in,
                                T* d_in) {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>)
      if (rows <= kSmallRows && n_in >= 512)
        return small_rows_times(d_out, n_out, rows, w, n_in, n_out, n_in, d_in, n_in);
#endif
    gemm<T>(false, false, rows, n_in, n_out, T(1), d_out, n_out, w, n_in, T(0), d_in, n_in);
  }

  // A parametric layer's output (rows x n, n its channels) gets its biases and, when the next
  // layer is an activation working in place, that activation in the same pass. Returns the layers
  // done beyond l (1 when the activation was applied here).
  std::size_t finish_output(std::size_t l, const T* theta, T* out, std::size_t rows, int n) {
    const Layer& layer = layers_[l];
    const T* bias = layer.bias_count ? theta + layer.biases : nullptr;
    const bool fused =
        l + 1 < layers_.size() && act_[l + 1] == out &&
        (layers_[l + 1].kind == LayerKind::relu || layers_[l + 1].kind == LayerKind::tanh);
    const bool relu = fused && layers_[l + 1].kind == LayerKind::relu;
    for (std::size_t r = 0; r < rows; ++r) {
      T* __restrict row = out + r * n;
      if (bias)
        for (int j = 0; j < n; ++j) row[j] += bias[j];
      if (relu)
        for (int j = 0; j < n; ++j) row[j] = row[j] > T(0) ? row[j] : T(0);
      else if (fused)
        for (int j = 0; j < n; ++j) row[j] = std::tanh(row[j]);
    }
    return fused ? 1 : 0;
  }

  // Winograd runs in the float passes only: the double passes are the exact ones (docs/math.md
  // §10).
  static bool winograd(const Layer& layer) {
    return std::is_same_v<T, float> && layer.winograd;
  }

  static double squared_norm(const T* v, std::size_t n) {
    double sum = 0.0;
    for (std::size_t j = 0; j < n; ++j) sum += double(v[j]) * double(v[j]);
    return sum;
  }

  // Calls work(first image, images) over the block in the convolution's groups of
  // Layer::conv_rows images.
  template <class Work>
  void for_each_images(std::size_t l, int rows, Work&& work) const {
    const int step = layers_[l].conv_rows;
    for (int r0 = 0; r0 < rows; r0 += step) work(r0, std::min(step, rows - r0));
  }

  // The im2col matrix of images [r0, r0 + n) of `in` for convolution l, made into `buffer`.
  const T* columns(std::size_t l, const T* in, int r0, int n, std::vector<T>& buffer) {
    const ConvGeometry g = geometry(layers_[l]);
    im2col(in + r0 * g.input_size(), n, g, buffer.data());
    return buffer.data();
  }

  // d_in of convolution l: (delta W) through col2im, image group by image group.
  void convolution_input_delta(std::size_t l, const T* theta, const T* d_out, int rows, T* d_in) {
    const Layer& layer = layers_[l];
    const ConvGeometry g = geometry(layer);
    if (winograd(layer))
      return winograd_convolution_adjoint(d_out, rows, g, theta + layer.weights, d_in, b_.winograd);
    for_each_images(l, rows, [&](int r0, int n) {
      T* dcol = b_.dcol.data();
      gemm<T>(false, false, n * g.positions(), g.patch(), g.filters, T(1),
              d_out + r0 * layer.out.size(), g.filters, theta + layer.weights, g.patch(), T(0),
              dcol, g.patch());
      col2im(dcol, n, g, d_in + r0 * layer.in.size());
    });
  }

  // target <- beta target + alpha sum over the block of delta^T col(in) for convolution l (one
  // GEMM per image group; beta applies once). `directional`: the columns of R{input} (r_col).
  void filter_gradient(std::size_t l, const T* in, const T* d_out, int rows, T alpha, T beta,
                       T* target, bool directional = false) {
    const Layer& layer = layers_[l];
    const ConvGeometry g = geometry(layer);
    if (winograd(layer) && !directional)
      return winograd_filter_gradient(in, d_out, rows, g, alpha, beta, target, b_.winograd);
    for_each_images(l, rows, [&](int r0, int n) {
      const T* col = columns(l, in, r0, n, directional ? b_.r_col[l] : b_.col[l]);
      gemm<T>(true, false, g.filters, g.patch(), n * g.positions(), alpha,
              d_out + r0 * layer.out.size(), g.filters, col, g.patch(), r0 == 0 ? beta : T(1),
              target, g.patch());
    });
  }

  const std::vector<Layer>& layers_;
  PassBuffers<T>& b_;
  int classes_;
  bool argmax_needed_ = false;  // a backward or R-operator pass follows the forward one
  // Per layer: its output, d loss / d output and their R-operator counterparts (an activation's
  // and flatten's are the layer below's).
  std::vector<T*> act_, delta_, r_act_, r_delta_;
};

// Rows of `data` (by index) converted to T: from the codes when the rows have them.
template <class T>
void gather_rows(const TrainingRows& data, int width, const std::int64_t* rows, int count, T* out) {
  if (data.codes) {
    const ByteCoding& coding = *data.coding;
    const bool single = std::is_same_v<T, float> && !coding.single_step.empty();
    for (int b = 0; b < count; ++b) {
      const std::uint8_t* k = data.codes + std::size_t(rows[b]) * width;
      T* row = out + std::size_t(b) * width;
      if (single) {
        for (int j = 0; j < width; ++j)
          row[j] = static_cast<T>(coding.single_offset[j] + coding.single_step[j] * float(k[j]));
      } else {
        for (int j = 0; j < width; ++j)
          row[j] = static_cast<T>(coding.offset[j] + coding.step[j] * double(k[j]));
      }
    }
    return;
  }
  for (int b = 0; b < count; ++b) {
    const double* x = data.features + std::size_t(rows[b]) * width;
    std::copy(x, x + width, out + std::size_t(b) * width);
  }
}

// rows x width doubles as T: the doubles themselves for T = double.
template <class T>
const T* as_scalar(const double* x, std::size_t count, T* buffer) {
  if constexpr (std::is_same_v<T, double>) {
    return x;
  } else {
    for (std::size_t i = 0; i < count; ++i) buffer[i] = static_cast<T>(x[i]);
    return buffer;
  }
}

template <class T>
LossAndAccuracy loss_sum_in(const Network& network, const double* x, const std::int32_t* y,
                            std::size_t rows, const T* theta, Workspace& work) {
  const std::size_t block = network.evaluation_rows(), D = network.features();
  const int C = network.classes();
  Passes<T> passes(network.layers(), C, false, false, pass_buffers<T>(work), std::min(rows, block));
  auto& buffers = pass_buffers<T>(work);
  LossAndAccuracy result;
  for (std::size_t start = 0; start < rows; start += block) {
    const int n = static_cast<int>(std::min(block, rows - start));
    const T* input = as_scalar<T>(x + start * D, std::size_t(n) * D, passes.input());
    passes.forward(theta, input, n);
    double* z = buffers.logits.data();
    std::copy(passes.logits(), passes.logits() + std::size_t(n) * C, z);
    result.correct += correct_rows(z, n, C, y + start);
    result.loss_sum = log_loss_rows(z, n, C, y + start, result.loss_sum);
  }
  return result;
}

template <class T>
void sgd_epoch_in(const Network& network, const TrainingRows& data, const std::int64_t* order,
                  int batch_size, double learning_rate, T* theta, Workspace& work,
                  const StepTerms& terms) {
  const int D = network.features(), C = network.classes();
  // Buffers for the largest batch there is: a batch_size above the rows (full-batch steps asked for
  // with a huge value) must not allocate for rows that do not exist (issue 41: an OOM kill).
  Passes<T> passes(network.layers(), C, true, false, pass_buffers<T>(work),
                   std::min(static_cast<std::size_t>(batch_size), data.rows));
  const std::size_t p = network.parameters();
  // theta <- (1 - lr (l2 + proximal)) theta - (lr / |B|) sum_B grad + lr proximal center
  // - lr correction, every term at the old theta (as the logistic model's step).
  const double* center = terms.center;
  const double proximal = terms.proximal;
  const T shrink = static_cast<T>(1.0 - learning_rate * (network.l2() + (center ? proximal : 0.0)));
  for (std::size_t start = 0; start < data.rows; start += batch_size) {
    const int batch = static_cast<int>(std::min<std::size_t>(batch_size, data.rows - start));
    gather_rows(data, D, order + start, batch, passes.input());
    passes.forward(theta, passes.input(), batch);
    std::int32_t* labels = work.batch_labels.data();
    for (int b = 0; b < batch; ++b) labels[b] = data.labels[order[start + b]];
    cross_entropy_delta(passes.logits(), batch, C, labels, 1.0, passes.logit_delta());
    passes.backward(theta, passes.input(), batch, theta, static_cast<T>(-learning_rate / batch),
                    shrink);
    if (center)
      for (std::size_t k = 0; k < p; ++k)
        theta[k] += static_cast<T>(learning_rate * proximal) * static_cast<T>(center[k]);
    if (terms.correction)
      for (std::size_t k = 0; k < p; ++k)
        theta[k] -= static_cast<T>(learning_rate) * static_cast<T>(terms.correction[k]);
  }
}

std::string layer_text(const Layer& layer) {
  switch (layer.kind) {
    case LayerKind::dense:
      return fmt::format("dense {}", layer.out.size());
    case LayerKind::conv2d:
      return fmt::format("conv {}x{}x{}{}", layer.kernel, layer.kernel, layer.out.channels,
                         layer.pad ? " same" : " valid");
    case LayerKind::relu:
      return "relu";
    case LayerKind::tanh:
      return "tanh";
    case LayerKind::max_pool:
      return "maxpool 2x2";
    case LayerKind::flatten:
      return "flatten";
  }
  return "";
}

}  // namespace

// ---- Specs -----------------------------------------------------------------------------------

NetworkSpec NetworkSpec::mlp(int inputs, const std::vector<int>& hidden, Activation activation,
                             int classes, bool bias) {
  NetworkSpec spec;
  spec.type = "mlp";
  spec.input = {1, 1, inputs};
  spec.bias = bias;
  spec.initialization =
      activation == Activation::relu ? Initialization::he : Initialization::glorot;
  const LayerKind act = activation == Activation::relu ? LayerKind::relu : LayerKind::tanh;
  for (int width : hidden) {
    spec.layers.push_back({LayerKind::dense, width});
    spec.layers.push_back({act});
  }
  spec.layers.push_back({LayerKind::dense, classes});
  return spec;
}

NetworkSpec NetworkSpec::cnn(Shape input, const std::vector<int>& filters, int kernel,
                             Padding padding, bool pool, const std::vector<int>& hidden,
                             Activation activation, int classes, bool bias) {
  NetworkSpec spec = mlp(0, hidden, activation, classes, bias);
  spec.type = "cnn";
  spec.input = input;
  const LayerKind act = activation == Activation::relu ? LayerKind::relu : LayerKind::tanh;
  std::vector<LayerSpec> front;
  for (int count : filters) {
    front.push_back({LayerKind::conv2d, count, kernel, padding});
    front.push_back({act});
    if (pool) front.push_back({LayerKind::max_pool});
  }
  front.push_back({LayerKind::flatten});
  spec.layers.insert(spec.layers.begin(), front.begin(), front.end());
  return spec;
}

// ---- Network ---------------------------------------------------------------------------------

Network::Network(const NetworkSpec& spec, int classes, double l2)
    : spec_(spec), classes_(classes), l2_(l2) {
  if (spec.layers.empty() || spec.layers.back().kind != LayerKind::dense ||
      spec.layers.back().units != classes)
    throw std::invalid_argument("a network ends with a dense layer of one output per class");
  Shape shape = spec.input;
  std::size_t widest_activation = shape.size();
  for (const LayerSpec& s : spec.layers) {
    Layer layer;
    layer.kind = s.kind;
    layer.in = shape;
    switch (s.kind) {
      case LayerKind::dense:
        layer.out = {1, 1, s.units};
        layer.weight_count = std::size_t(s.units) * shape.size();
        break;
      case LayerKind::conv2d:
        layer.kernel = s.kernel;
        layer.pad = s.padding == Padding::same ? (s.kernel - 1) / 2 : 0;
        layer.out = {shape.height + 2 * layer.pad - s.kernel + 1,
                     shape.width + 2 * layer.pad - s.kernel + 1, s.units};
        if (layer.out.height < 1 || layer.out.width < 1)
          throw std::invalid_argument(
              fmt::format("a {}x{} valid convolution does not fit a {}x{} input", s.kernel,
                          s.kernel, shape.height, shape.width));
        layer.weight_count = std::size_t(s.units) * s.kernel * s.kernel * shape.channels;
        break;
      case LayerKind::max_pool:
        layer.out = {shape.height / 2, shape.width / 2, shape.channels};
        if (layer.out.height < 1 || layer.out.width < 1)
          throw std::invalid_argument(
              fmt::format("2x2 max-pooling does not fit a {}x{} input", shape.height, shape.width));
        break;
      case LayerKind::flatten:
        layer.out = {1, 1, static_cast<int>(shape.size())};
        break;
      case LayerKind::relu:
      case LayerKind::tanh:
        layer.out = shape;
        break;
    }
    if (layer.parametric()) {
      layer.weights = parameters_;
      parameters_ += layer.weight_count;
      layer.bias_count = spec.bias ? std::size_t(layer.out.channels) : 0;
      layer.biases = parameters_;
      parameters_ += layer.bias_count;
    }
    widest_activation = std::max(widest_activation, layer.out.size());
    shape = layer.out;
    layers_.push_back(layer);
  }
  // Blocks of about 8 MB of doubles in the widest activation (the dense layers' GEMMs then
  // multiply tens to hundreds of rows); the convolutions work through a block a few images at a
  // time, about 2 MB of im2col columns each (Passes).
  block_rows_ = std::clamp<std::size_t>((std::size_t(1) << 20) / widest_activation, 1, 256);
  // The forward-only evaluation keeps no deltas: blocks four times larger (about 16 MB of float
  // activations for the CNN), for the dense layers' GEMMs.
  evaluation_rows_ = std::clamp<std::size_t>((std::size_t(1) << 22) / widest_activation, 1, 256);
  for (Layer& layer : layers_)
    if (layer.kind == LayerKind::conv2d) {
      const std::size_t columns = std::size_t(layer.out.height) * layer.out.width * layer.kernel *
                                  layer.kernel * layer.in.channels;
      layer.conv_rows =
          static_cast<int>(std::clamp<std::size_t>((std::size_t(1) << 19) / columns, 1, 256));
      layer.winograd = spec.convolution == ConvolutionMethod::winograd &&
                       winograd_applies({layer.in.height, layer.in.width, layer.in.channels,
                                         layer.kernel, layer.pad, layer.out.channels});
    }
}

std::string Network::describe() const {
  std::string text = fmt::format("{} {}x{}x{}", spec_.type, spec_.input.height, spec_.input.width,
                                 spec_.input.channels);
  for (const Layer& layer : layers_) text += " -> " + layer_text(layer);
  return text;
}

std::vector<ParameterBlock> Network::parameter_blocks() const {
  std::vector<ParameterBlock> blocks;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = layers_[l];
    if (!layer.parametric()) continue;
    const std::string name =
        fmt::format("layer{}_{}", l, layer.kind == LayerKind::dense ? "dense" : "conv");
    std::vector<int> shape{layer.out.channels, static_cast<int>(layer.in.size())};
    if (layer.kind == LayerKind::conv2d)
      shape = {layer.out.channels, layer.kernel, layer.kernel, layer.in.channels};
    blocks.push_back({name + "_weights", layer.weights, layer.weight_count, shape});
    if (layer.bias_count)
      blocks.push_back({name + "_biases", layer.biases, layer.bias_count, {layer.out.channels}});
  }
  return blocks;
}

bool Network::convex() const {
  return layers_.size() == 1;  // one dense layer: multinomial logistic regression
}

void Network::initialize(std::uint64_t seed, double* theta) const {
  std::fill(theta, theta + parameters_, 0.0);
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = layers_[l];
    if (!layer.parametric()) continue;
    const int k2 = layer.kind == LayerKind::conv2d ? layer.kernel * layer.kernel : 1;
    const double fan_in =
        double(k2) * (layer.kind == LayerKind::conv2d ? layer.in.channels : layer.in.size());
    const double fan_out = double(k2) * layer.out.channels;
    Stream stream(seed, purpose::model_init, l);
    double* weights = theta + layer.weights;
    if (spec_.initialization == Initialization::he) {
      // He et al. 2015: N(0, 2 / fan_in), for ReLU layers.
      stream.fill_normal(std::span<double>(weights, layer.weight_count));
      const double scale = std::sqrt(2.0 / fan_in);
      for (std::size_t k = 0; k < layer.weight_count; ++k) weights[k] *= scale;
    } else {
      // Glorot & Bengio 2010: U(-a, a) with a = sqrt(6 / (fan_in + fan_out)), for tanh layers.
      const double limit = std::sqrt(6.0 / (fan_in + fan_out));
      for (std::size_t k = 0; k < layer.weight_count; ++k)
        weights[k] = (2.0 * stream.uniform() - 1.0) * limit;
    }
  }
}

LossAndAccuracy Network::loss_sum(const double* x, const std::int32_t* y, std::size_t rows,
                                  const double* theta, Workspace& work) const {
  return loss_sum_in<double>(*this, x, y, rows, theta, work);
}

LossAndAccuracy Network::fast_loss_sum(const double* x, const std::int32_t* y, std::size_t rows,
                                       const double* theta, Workspace& work) const {
  std::vector<float>& single = pass_buffers<float>(work).theta;
  single.assign(theta, theta + parameters_);
  return loss_sum_in<float>(*this, x, y, rows, single.data(), work);
}

double Network::gradient_sum(const double* x, const std::int32_t* y, std::size_t rows,
                             const double* theta, double* gradient, Workspace& work) const {
  return loss_gradient_sum(x, rows, LabelCrossEntropy(y), theta, gradient, work);
}

void Network::hessian_vector_sum(const double* x, const std::int32_t* y, std::size_t rows,
                                 const double* theta, const double* v, double* out,
                                 Workspace& work) const {
  loss_hessian_vector_sum(x, rows, LabelCrossEntropy(y), theta, v, out, work);
}

double Network::loss_gradient_sum(const double* x, std::size_t rows, const LogitLoss& loss,
                                  const double* theta, double* gradient, Workspace& work) const {
  if (gradient) std::fill(gradient, gradient + parameters_, 0.0);
  const std::size_t D = features();
  Passes<double> passes(layers_, classes_, gradient != nullptr, false, pass_buffers<double>(work),
                        std::min(rows, block_rows_));
  double sum = 0.0;
  for (std::size_t start = 0; start < rows; start += block_rows_) {
    const int n = static_cast<int>(std::min(block_rows_, rows - start));
    const double* input = x + start * D;
    passes.forward(theta, input, n);
    sum = loss.gradient(start, n, classes_, passes.logits(),
                        gradient ? passes.logit_delta() : nullptr, sum);
    if (gradient) passes.backward(theta, input, n, gradient, 1.0, 1.0);
  }
  return sum;
}

void Network::loss_hessian_vector_sum(const double* x, std::size_t rows, const LogitLoss& loss,
                                      const double* theta, const double* v, double* out,
                                      Workspace& work) const {
  std::fill(out, out + parameters_, 0.0);
  const std::size_t D = features();
  Passes<double> passes(layers_, classes_, true, true, pass_buffers<double>(work),
                        std::min(rows, block_rows_));
  for (std::size_t start = 0; start < rows; start += block_rows_) {
    const int n = static_cast<int>(std::min(block_rows_, rows - start));
    const double* input = x + start * D;
    passes.forward(theta, input, n);
    passes.r_forward(theta, v, input, n);
    // The head: delta = dL/dz and R{delta} = (d^2L/dz^2) R{z} (docs/math.md §10).
    loss.hessian(start, n, classes_, passes.logits(), passes.r_logits(), passes.logit_delta(),
                 passes.r_logit_delta());
    passes.r_backward(theta, v, input, n, out);
  }
}

void network_hessian_vector_block_sum(const Network& network, const double* x,
                                      const std::int32_t* y, std::size_t rows, const double* theta,
                                      const double* v, int k, double* out, Workspace& work) {
  const std::size_t p = network.parameters(), block = network.block_rows();
  std::fill(out, out + static_cast<std::size_t>(k) * p, 0.0);
  const std::size_t D = network.features();
  const int C = network.classes();
  const LabelCrossEntropy loss(y);
  Passes<double> passes(network.layers(), C, true, true, pass_buffers<double>(work),
                        std::min(rows, block));
  for (std::size_t start = 0; start < rows; start += block) {
    const int n = static_cast<int>(std::min(block, rows - start));
    const double* input = x + start * D;
    // The activations at theta do not depend on the direction: the R passes only read them.
    passes.forward(theta, input, n);
    for (int j = 0; j < k; ++j) {
      const double* vj = v + static_cast<std::size_t>(j) * p;
      passes.r_forward(theta, vj, input, n);
      loss.hessian(start, n, C, passes.logits(), passes.r_logits(), passes.logit_delta(),
                   passes.r_logit_delta());
      passes.r_backward(theta, vj, input, n, out + static_cast<std::size_t>(j) * p);
    }
  }
}

void Network::directional_logits(const double* x, std::size_t rows, const double* theta,
                                 const double* v, double* z, double* r_z, Workspace& work) const {
  const std::size_t D = features(), C = classes_;
  Passes<double> passes(layers_, classes_, false, true, pass_buffers<double>(work),
                        std::min(rows, block_rows_));
  for (std::size_t start = 0; start < rows; start += block_rows_) {
    const int n = static_cast<int>(std::min(block_rows_, rows - start));
    passes.forward(theta, x + start * D, n);
    passes.r_forward(theta, v, x + start * D, n);
    std::copy(passes.logits(), passes.logits() + n * C, z + start * C);
    std::copy(passes.r_logits(), passes.r_logits() + n * C, r_z + start * C);
  }
}

void Network::logits(const double* x, std::size_t rows, const double* theta, double* out,
                     Workspace& work) const {
  const std::size_t D = features();
  Passes<double> passes(layers_, classes_, false, false, pass_buffers<double>(work),
                        std::min(rows, evaluation_rows_));
  for (std::size_t start = 0; start < rows; start += evaluation_rows_) {
    const int n = static_cast<int>(std::min(evaluation_rows_, rows - start));
    passes.forward(theta, x + start * D, n);
    std::copy(passes.logits(), passes.logits() + std::size_t(n) * classes_, out + start * classes_);
  }
}

void Network::head_inputs(const double* x, std::size_t rows, const double* theta, double* out,
                          Workspace& work) const {
  const std::size_t D = features(), W = static_cast<std::size_t>(head_width());
  // The last layer is dense; its input is the output of the layer below it (a fused activation
  // works in place on that layer's buffer, so that buffer holds the activated values).
  if (layers_.size() < 2) {  // no hidden layer: the inputs themselves
    std::copy(x, x + rows * D, out);
    return;
  }
  const std::size_t below = layers_.size() - 2;
  Passes<double> passes(layers_, classes_, false, false, pass_buffers<double>(work),
                        std::min(rows, evaluation_rows_));
  for (std::size_t start = 0; start < rows; start += evaluation_rows_) {
    const int n = static_cast<int>(std::min(evaluation_rows_, rows - start));
    passes.forward(theta, x + start * D, n);
    std::copy(passes.activation(below), passes.activation(below) + std::size_t(n) * W,
              out + start * W);
  }
}

void Network::clipped_gradient_sum(const double* x, const std::int32_t* y, std::size_t rows,
                                   const double* theta, double clip, double* out, Workspace& work,
                                   double* norms) const {
  std::fill(out, out + parameters_, 0.0);
  const std::size_t D = features();
  Passes<double> passes(layers_, classes_, true, false, pass_buffers<double>(work),
                        std::min(rows, block_rows_));
  double* scale = passes.row_scale();
  for (std::size_t start = 0; start < rows; start += block_rows_) {
    const int n = static_cast<int>(std::min(block_rows_, rows - start));
    const double* input = x + start * D;
    passes.forward(theta, input, n);
    cross_entropy_delta(passes.logits(), n, classes_, y + start, 1.0, passes.logit_delta());
    passes.backward(theta, input, n, nullptr, 0.0, 0.0);
    passes.per_row_squared_norms(input, n);
    const double* squares = passes.squared_norms();
    for (int r = 0; r < n; ++r) {
      const double norm = std::sqrt(squares[r]);
      if (norms) norms[start + r] = norm;
      scale[r] = norm > clip ? clip / norm : 1.0;
    }
    passes.add_scaled_gradients(input, n, scale, out);
  }
}

void Network::visit_curvature_directions(const double* x, std::size_t rows, const double* theta,
                                         Workspace& work, const CurvatureVisitor& visit) const {
  const std::size_t D = features(), C = static_cast<std::size_t>(classes_);
  Passes<double> passes(layers_, classes_, true, false, pass_buffers<double>(work),
                        std::min(rows, block_rows_));
  std::vector<double>& p = pass_buffers<double>(work).logits;
  for (std::size_t start = 0; start < rows; start += block_rows_) {
    const int n = static_cast<int>(std::min(block_rows_, rows - start));
    const double* input = x + start * D;
    passes.forward(theta, input, n);
    std::copy(passes.logits(), passes.logits() + std::size_t(n) * C, p.begin());
    softmax_probabilities(p.data(), std::size_t(n), classes_);
    for (std::size_t c = 0; c < C; ++c) {
      double* delta = passes.logit_delta();
      for (int r = 0; r < n; ++r) {
        const double* pr = p.data() + r * C;
        const double root = std::sqrt(pr[c]);
        for (std::size_t j = 0; j < C; ++j)
          delta[r * C + j] = root * ((j == c ? 1.0 : 0.0) - pr[j]);
      }
      passes.backward(theta, input, n, nullptr, 0.0, 0.0);
      for (std::size_t l = 0; l < layers_.size(); ++l) {
        const Layer& layer = layers_[l];
        const double* in = l ? passes.activation(l - 1) : input;
        if (layer.kind == LayerKind::dense) {
          visit(l, n, static_cast<int>(c), in, passes.output_delta(l));
        } else if (layer.kind == LayerKind::conv2d) {
          // A group of conv_rows images at a time, so that the im2col rows stay in the layer's
          // column buffer (about 4 MB of doubles) whatever the block; the deltas are NHWC, one
          // row of filters per (image, position), in the im2col rows' order.
          const std::size_t positions = std::size_t(layer.out.height) * layer.out.width;
          for (int r0 = 0; r0 < n; r0 += layer.conv_rows) {
            const int images = std::min(layer.conv_rows, n - r0);
            visit(l, images * static_cast<int>(positions), static_cast<int>(c),
                  passes.patch_rows(l, in, r0, images),
                  passes.output_delta(l) + std::size_t(r0) * layer.out.size());
          }
        }
      }
    }
  }
}

double Network::batch_bytes(std::size_t rows) const {
  // Passes' buffers in sgd_epoch_in: every layer not worked in place on the one below keeps its
  // outputs and their deltas, in float at least.
  double values = 0.0;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const LayerKind kind = layers_[l].kind;
    const bool in_place =
        l > 0 && (kind == LayerKind::relu || kind == LayerKind::tanh || kind == LayerKind::flatten);
    if (!in_place) values += 2.0 * static_cast<double>(layers_[l].out.size());
  }
  return sizeof(float) * values * static_cast<double>(rows);
}

void Network::sgd_epoch(const TrainingRows& data, const std::int64_t* order, int batch_size,
                        double learning_rate, double* theta, Workspace& work,
                        const StepTerms& terms, const double* start) const {
  if (start) std::copy(start, start + parameters_, theta);
  grow(work.batch_labels, std::min(static_cast<std::size_t>(batch_size), data.rows));
  sgd_epoch_in<double>(*this, data, order, batch_size, learning_rate, theta, work, terms);
}

void Network::sgd_epoch(const TrainingRows& data, const std::int64_t* order, int batch_size,
                        double learning_rate, float* theta, Workspace& work, const StepTerms& terms,
                        const float* start) const {
  if (start) std::copy(start, start + parameters_, theta);
  grow(work.batch_labels, std::min(static_cast<std::size_t>(batch_size), data.rows));
  sgd_epoch_in<float>(*this, data, order, batch_size, learning_rate, theta, work, terms);
}

void Network::gradient_step(const TrainingRows& data, double learning_rate, double* theta,
                            Workspace& work, const StepTerms& terms) const {
  std::vector<double>& gradient = work.gradient;
  gradient.resize(parameters_);
  gradient_sum(data.features, data.labels, data.rows, theta, gradient.data(), work);
  full_batch_step(gradient.data(), 1.0 / static_cast<double>(data.rows), l2_, learning_rate, terms,
                  parameters_, theta);
}

}  // namespace fluence
