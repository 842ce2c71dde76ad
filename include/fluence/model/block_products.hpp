#pragma once
// Hessian products for k vectors at once (influence.block_size, docs/math.md §3.3): `v` and `out`
// hold k vectors of p parameters, one after another (k x p row-major, i.e. the p x k block
// column-major), both overwritten/read whole.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fluence/model/model.hpp"

namespace fluence {

class SoftmaxRegression;
class Network;

/// Softmax regression at cached probabilities (rows x C): the k stacked C x D weight blocks form
/// a kC x D matrix, so each pass is one GEMM with kC columns (the directional logits X V^T, then
/// the update A^T X). Equal to k products hessian_vector_sum_at to rounding, not bitwise: the
/// GEMMs block the sums differently.
void softmax_hessian_vector_block_at(const SoftmaxRegression& model, const double* x,
                                     std::size_t rows, const double* probabilities, const double* v,
                                     int k, double* out, std::vector<double>& scratch);

/// A network's R-operator for k directions: one forward pass per block of rows at theta, shared
/// by the k directional passes (which only read its activations). Bitwise k products
/// hessian_vector_sum: each direction runs the same operations in the same order.
void network_hessian_vector_block_sum(const Network& network, const double* x,
                                      const std::int32_t* y, std::size_t rows, const double* theta,
                                      const double* v, int k, double* out, Workspace& work);

}  // namespace fluence
