#include "fluence/core/resume.hpp"

#include <fmt/format.h>

#include "fluence/core/error.hpp"

namespace fluence {

const std::vector<double>& state_array(const StateArrays& state, const std::string& name) {
  const auto found = state.find(name);
  if (found == state.end())
    throw InputError(fmt::format("checkpoint: dataset \"{}\" is missing", name));
  return found->second;
}

const std::vector<double>& state_array(const StateArrays& state, const std::string& name,
                                       std::size_t size) {
  const auto& values = state_array(state, name);
  if (values.size() != size)
    throw InputError(fmt::format("checkpoint: dataset \"{}\" has {} values, this run needs {}",
                                 name, values.size(), size));
  return values;
}

std::vector<char> state_flags(const StateArrays& state, const std::string& name, std::size_t size) {
  std::vector<char> flags(size, 0);
  if (state.find(name) == state.end()) return flags;
  const auto& values = state_array(state, name, size);
  for (std::size_t i = 0; i < size; ++i) flags[i] = values[i] != 0.0 ? 1 : 0;
  return flags;
}

std::vector<double> flags_array(const std::vector<char>& flags) {
  return std::vector<double>(flags.begin(), flags.end());
}

}  // namespace fluence
