#include "fluence/core/resume.hpp"

#include <fmt/format.h>

#include "fluence/core/error.hpp"
#include "fluence/core/log.hpp"

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

void PartialUnit::restore(const StateArrays& state) {
  key_.clear();
  if (state.count(prefix_ + "/partial") == 0) return;
  const auto& partial = state_array(state, prefix_ + "/partial");
  if (partial.size() < key_size_)
    throw InputError(fmt::format("checkpoint: {}/partial does not fit this run", prefix_));
  key_.assign(partial.begin(), partial.begin() + static_cast<std::ptrdiff_t>(key_size_));
  scalars_.assign(partial.begin() + static_cast<std::ptrdiff_t>(key_size_), partial.end());
  state_ = state_array(state, prefix_ + "/partial_state");
}

const std::vector<double>* PartialUnit::resume(const std::vector<double>& key,
                                               std::vector<double>* scalars) {
  if (key_.empty() || key != key_) return nullptr;
  if (scalars) *scalars = scalars_;
  key_.clear();
  scalars_.clear();
  resumed_ = std::move(state_);
  state_.clear();
  return &resumed_;
}

void PartialUnit::interrupted(std::vector<double> key, const std::vector<double>& scalars,
                              std::vector<double> state, const std::string& name,
                              const std::string& where) {
  if (key.size() != key_size_)
    throw RuntimeError(fmt::format("{}: a partial unit's key has {} values, not {}", prefix_,
                                   key.size(), key_size_));
  key_ = std::move(key);
  scalars_ = scalars;
  state_ = std::move(state);
  log::info("stop inside {}: {} saved", name, where);
}

void PartialUnit::save(StateArrays& state) const {
  if (key_.empty()) return;
  std::vector<double> partial = key_;
  partial.insert(partial.end(), scalars_.begin(), scalars_.end());
  state[prefix_ + "/partial"] = std::move(partial);
  state[prefix_ + "/partial_state"] = state_;
  state[kPartialUnit] = {1.0};
}

}  // namespace fluence
