// fluence validate DECK: check a deck (and, unless --no-data, its data, partition and LDP plan),
// echo the resolved settings on rank 0, run nothing.
#include <algorithm>

#include "fluence/app/cli.hpp"
#include "fluence/core/config.hpp"
#include "fluence/core/log.hpp"
#include "fluence/core/mpi.hpp"
#include "fluence/fl/problem.hpp"

namespace fluence::app {

int run_validate(const CommandLine& command_line) {
  Deck deck = Deck::from_file(command_line.deck, command_line.sets);
  log::info("# {}: deck is valid. Resolved settings (defaults filled in):\n", command_line.deck);
  log::info("{}", deck.resolved_toml());
  if (command_line.skip_data) return 0;
  const FederatedProblem problem = build_problem(deck);
  const auto sizes = problem.client_sizes();
  const auto [smallest, largest] = std::minmax_element(sizes.begin(), sizes.end());
  log::info("\n# data: {} training rows, {} test rows, {} encoded features, {} classes",
            problem.data.train.rows, problem.data.test.rows, problem.encoding.width(),
            problem.data.train.classes());
  log::info("# partition: {} clients of {} to {} rows over {} rank(s); model has {} parameters",
            sizes.size(), *smallest, *largest, world_size(), problem.model->parameters());
  return 0;
}

}  // namespace fluence::app
