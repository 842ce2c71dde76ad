#pragma once
// Adam (Kingma & Ba 2015) on any model's mini-batch gradients: a central trainer for models fitted
// once on data every rank holds (LIA's frozen body on the warm-up rows, seed 002 §III-B).
#include <cstddef>
#include <cstdint>

#include "fluence/core/rng.hpp"
#include "fluence/model/model.hpp"

namespace fluence {

struct AdamSettings {
  int epochs = 30;
  double learning_rate = 1e-3;  // the step size alpha
  int batch_size = 64;          // clamped to the number of rows
  double l2 = 0.0;              // an L2 term l2/2 ||theta||^2 in the objective
};

/// `settings.epochs` passes of Adam over the rows on (1/|B|) sum_B loss + l2/2 ||theta||^2, each
/// epoch in an order drawn from `stream`, from theta (in/out). Deterministic: the same stream
/// state and theta give the same bits. InputError on settings out of range or no rows.
void adam_fit(const Model& model, const double* x, const std::int32_t* y, std::size_t rows,
              const AdamSettings& settings, Stream& stream, double* theta, Workspace& work);

}  // namespace fluence
