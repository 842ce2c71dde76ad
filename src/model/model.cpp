#include "fluence/model/model.hpp"

namespace fluence {

void Workspace::reserve(std::size_t rows, int classes, int features) {
  const std::size_t need = rows * static_cast<std::size_t>(classes);
  if (logits.size() < need) logits.resize(need);
  if (scratch.size() < need) scratch.resize(need);
  if (batch.size() < rows * static_cast<std::size_t>(features))
    batch.resize(rows * static_cast<std::size_t>(features));
}

}  // namespace fluence
