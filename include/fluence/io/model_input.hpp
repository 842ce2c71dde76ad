#pragma once
#include <string>
#include <vector>

#include "fluence/fl/problem.hpp"

namespace fluence {

/// Reads /model/theta from a `fluence train` results file on rank 0 and broadcasts it. Collective;
/// InputError on every rank when the file cannot be read or its model does not match the deck's
/// (shape [C, D], encoded feature names, class names).
std::vector<double> read_trained_theta(const std::string& path, const FederatedProblem& problem);

}  // namespace fluence
