#pragma once
// The synthetic federation the MPI tests build their problems from, written once: a deck's `seed`,
// [data.synthetic] and [partition] from the numbers a test chooses, and the [model] and
// [federation] of a logistic model trained to its exact minimizer (where influence functions
// linearize). A test appends its own sections to the text.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

namespace fluence::testing {

struct SyntheticFederation {
  int seed;
  long rows;
  int numeric;
  std::vector<int> categorical;  // each categorical attribute's number of values
  int classes;
  int clients;
  std::string partition = "";  // further [partition] lines, e.g. "scheme = \"dirichlet\"\n"
  std::string synthetic = "";  // further [data.synthetic] lines, e.g. "signal = 1.5\n"
};

/// `seed`, [data.synthetic] and [partition] of `federation` as deck text.
inline std::string synthetic_deck(const SyntheticFederation& federation) {
  return fmt::format(
      "seed = {}\n[data.synthetic]\nrows = {}\nnumeric = {}\ncategorical = [{}]\nclasses = {}\n"
      "{}[partition]\nclients = {}\n{}",
      federation.seed, federation.rows, federation.numeric, fmt::join(federation.categorical, ", "),
      federation.classes, federation.synthetic, federation.clients, federation.partition);
}

/// [model] with L2 `l2` (the logistic model by default) and [federation]: `rounds` FedAvg rounds,
/// then the Newton polish to a gradient norm below `tolerance`, with further [federation] lines.
inline std::string polished_model(double l2, int rounds, double tolerance,
                                  const std::string& federation = "") {
  return fmt::format(
      "[model]\nl2 = {}\n[federation]\nrounds = {}\npolish = \"newton\"\ntolerance = {}\n{}", l2,
      rounds, tolerance, federation);
}

}  // namespace fluence::testing
