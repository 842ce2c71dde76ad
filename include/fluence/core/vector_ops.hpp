#pragma once
// Small dense-vector helpers shared by the iterative solvers (Newton-CG, line searches).
#include <cmath>
#include <cstddef>
#include <vector>

namespace fluence {

// a . b summed in index order (one fixed association, so the same bits on every rank).
inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t k = 0; k < a.size(); ++k) s += a[k] * b[k];
  return s;
}

// ||v||_2, the squares summed in index order.
inline double norm2(const std::vector<double>& v) {
  return std::sqrt(dot(v, v));
}

}  // namespace fluence
