#pragma once
// Winograd's minimal filtering for a network's stride-1 convolutions (Lavin & Gray 2016, "Fast
// Algorithms for Convolutional Neural Networks", CVPR): the output is computed in m x m tiles, each
// from a 6 x 6 input tile, as
//   Y = A^T [ sum_c (G W_fc G^T) ⊙ (B^T X_c B) ] A,
// F(4 x 4, 3 x 3) for 3 x 3 kernels and F(2 x 2, 5 x 5) for 5 x 5 kernels, both on the points
// 0, ±1, ±2, ∞ (so the two share B^T). A 5 x 5 convolution then costs 36 multiplications per 4
// outputs and channel pair instead of 100 (2.8x fewer; 3 x 3: 36 per 16 instead of 144, 4x), and
// the 36 element-wise products over the channels are 36 small matrix products. docs/math.md §10
// derives the three passes:
//  - forward: the formula above;
//  - input gradient: the adjoint of a stride-1 convolution is the convolution of the output
//    gradient with the kernels rotated by 180° and input and output channels swapped, with
//    padding r - 1 - pad: the same forward algorithm;
//  - filter gradient: W -> Y is linear in U = G W G^T, so its adjoint is
//    dW_fc = G^T [ sum_tiles (A dY_f A^T) ⊙ (B^T X_c B) ] G: 36 products summed over the tiles.
//
// Floating point: the transforms multiply by small integers (B^T, A^T) and by 1/4, 1/6, 1/24 (G),
// so the result differs from the direct sum by rounding that grows with the transforms' norms:
// about 1e-6 relative in float (tests/model/test_winograd.cpp states the bound it checks). The
// networks use it in their float passes only (local SGD in single precision and the float
// evaluation); the double passes (Hessian-vector products, influence) keep im2col + GEMM.
//
// Determinism: a fixed sequence of operations for given shapes, whatever the thread or rank.
#include <cstddef>
#include <vector>

#include "fluence/model/layers.hpp"

namespace fluence {

/// Whether Winograd is worth running for a convolution: kernel 3 or 5 and at least 8 input and 8
/// output channels (with fewer, the 36 products over the channels are too short to pay for the
/// transforms; a first layer on grey images stays on im2col).
bool winograd_applies(const ConvGeometry& g);

/// Scratch of the Winograd passes, reused from call to call (allocation-free after the first).
template <class T>
struct WinogradScratch {
  std::vector<T> filters;    // 36 x (input channels) x (output channels, padded): U = G W G^T
  std::vector<T> input;      // 36 x tiles x (channels, padded): B^T X B for a block of tiles
  std::vector<T> products;   // 36 x tiles x (filters, padded): the element-wise products
  std::vector<T> gradient;   // 36 x channels x (filters, padded): the filter gradient's sums
  std::vector<T> transform;  // the transforms' per-tile staging
};

/// y (batch x out_height x out_width x filters) = the convolution of x (batch x H x W x C) with w
/// (filters x (ky, kx, c)), without bias: y[b, oy, ox, f] = sum w[f, ky, kx, c] x[b, oy + ky -
/// pad, ox + kx - pad, c]. Requires winograd_applies(g).
template <class T>
void winograd_convolution(const T* x, int batch, const ConvGeometry& g, const T* w, T* y,
                          WinogradScratch<T>& scratch);

/// dx (batch x H x W x C, overwritten) = the adjoint of that convolution applied to dy (batch x
/// out_height x out_width x filters): the input gradient of a convolution layer.
template <class T>
void winograd_convolution_adjoint(const T* dy, int batch, const ConvGeometry& g, const T* w, T* dx,
                                  WinogradScratch<T>& scratch);

/// target (filters x (ky, kx, c)) <- beta target + alpha sum_{b, oy, ox} dy[b, oy, ox, f]
/// x[b, oy + ky - pad, ox + kx - pad, c]: the filter gradient (beta = 0 ignores target).
template <class T>
void winograd_filter_gradient(const T* x, const T* dy, int batch, const ConvGeometry& g, T alpha,
                              T beta, T* target, WinogradScratch<T>& scratch);

}  // namespace fluence
