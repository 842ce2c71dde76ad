#pragma once
#include <string>
#include <vector>

#include "fluence/fl/problem.hpp"

namespace fluence {

/// Reads /model/theta from a results file on rank 0 and broadcasts it. Collective; InputError on
/// every rank when the file cannot be read or its model is not the one `deck` trains: another
/// shape [C, D], encoded feature names or class names, another value of a key the trained model
/// depends on (the seed, [data], [partition], [model], [ldp], [federation]), or private training
/// (a `fluence train` run with [privacy] or Ditto; these commands train plain FedAvg).
/// With `private_allowed` (an audit of the model), a privately trained one is accepted too.
std::vector<double> read_trained_theta(const std::string& path, const FederatedProblem& problem,
                                       const Deck& deck, bool private_allowed = false);

}  // namespace fluence
