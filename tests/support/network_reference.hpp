#pragma once
// A network's forward pass and loss written as plain loops over one row at a time, independent of
// the GEMM/im2col kernels: the reference the network tests compare with. It reads only the layer
// list (kinds, shapes and parameter offsets: the documented layout of theta).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "fluence/model/network.hpp"

namespace fluence::testing {

/// The output of the first `layers` layers for one row.
inline std::vector<double> reference_activations_row(const Network& network, const double* x,
                                                     const double* theta, std::size_t layers) {
  std::vector<double> a(x, x + network.features());
  for (std::size_t l = 0; l < layers; ++l) {
    const Layer& layer = network.layers()[l];
    std::vector<double> z(layer.out.size());
    switch (layer.kind) {
      case LayerKind::dense:
        for (std::size_t o = 0; o < z.size(); ++o) {
          double sum = layer.bias_count ? theta[layer.biases + o] : 0.0;
          for (std::size_t i = 0; i < a.size(); ++i)
            sum += theta[layer.weights + o * a.size() + i] * a[i];
          z[o] = sum;
        }
        break;
      case LayerKind::conv2d: {
        const int H = layer.in.height, W = layer.in.width, C = layer.in.channels, k = layer.kernel;
        for (int oy = 0; oy < layer.out.height; ++oy)
          for (int ox = 0; ox < layer.out.width; ++ox)
            for (int f = 0; f < layer.out.channels; ++f) {
              double sum = layer.bias_count ? theta[layer.biases + f] : 0.0;
              for (int ky = 0; ky < k; ++ky)
                for (int kx = 0; kx < k; ++kx)
                  for (int c = 0; c < C; ++c) {
                    const int iy = oy + ky - layer.pad, ix = ox + kx - layer.pad;
                    if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                    sum += theta[layer.weights + ((std::size_t(f) * k + ky) * k + kx) * C + c] *
                           a[(std::size_t(iy) * W + ix) * C + c];
                  }
              z[(std::size_t(oy) * layer.out.width + ox) * layer.out.channels + f] = sum;
            }
        break;
      }
      case LayerKind::relu:
        for (std::size_t i = 0; i < z.size(); ++i) z[i] = std::max(a[i], 0.0);
        break;
      case LayerKind::tanh:
        for (std::size_t i = 0; i < z.size(); ++i) z[i] = std::tanh(a[i]);
        break;
      case LayerKind::max_pool: {
        const int W = layer.in.width, C = layer.in.channels;
        for (int oy = 0; oy < layer.out.height; ++oy)
          for (int ox = 0; ox < layer.out.width; ++ox)
            for (int c = 0; c < C; ++c) {
              double best = -INFINITY;
              for (int dy = 0; dy < 2; ++dy)
                for (int dx = 0; dx < 2; ++dx)
                  best = std::max(best, a[(std::size_t(2 * oy + dy) * W + 2 * ox + dx) * C + c]);
              z[(std::size_t(oy) * layer.out.width + ox) * C + c] = best;
            }
        break;
      }
      case LayerKind::flatten:
        z = a;
        break;
    }
    a = std::move(z);
  }
  return a;
}

inline std::vector<double> reference_logits_row(const Network& network, const double* x,
                                                const double* theta) {
  return reference_activations_row(network, x, theta, network.layers().size());
}

/// Sum over rows of log-sum-exp(logits) - logit_label.
inline double reference_loss_sum(const Network& network, const double* x, const std::int32_t* y,
                                 std::size_t rows, const double* theta) {
  double total = 0.0;
  for (std::size_t r = 0; r < rows; ++r) {
    const auto z = reference_logits_row(network, x + r * network.features(), theta);
    const double top = *std::max_element(z.begin(), z.end());
    double sum = 0.0;
    for (double v : z) sum += std::exp(v - top);
    total += top + std::log(sum) - z[y[r]];
  }
  return total;
}

}  // namespace fluence::testing
