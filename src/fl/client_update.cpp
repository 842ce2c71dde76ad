// The client update rules' names and SCAFFOLD's control variates (docs/math.md §8.6).
#include "fluence/fl/client_update.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "fluence/core/error.hpp"
#include "fluence/core/mpi.hpp"

namespace fluence {

std::vector<std::string> client_update_names() {
  return {"sgd", "fedprox", "scaffold"};
}

ClientUpdateRule client_update_rule(const std::string& name) {
  if (name == "sgd") return ClientUpdateRule::sgd;
  if (name == "fedprox") return ClientUpdateRule::fedprox;
  if (name == "scaffold") return ClientUpdateRule::scaffold;
  throw InputError(fmt::format(
      "federation.client_update = \"{}\": expected one of \"sgd\", \"fedprox\", \"scaffold\"",
      name));
}

ScaffoldControls::ScaffoldControls(std::size_t p, std::vector<int> hosted_ids, std::int64_t clients)
    : p_(p),
      ids_(std::move(hosted_ids)),
      clients_(clients),
      server_(p, 0.0),
      controls_(ids_.size()) {}

void ScaffoldControls::correction(std::size_t k, double* out) const {
  const std::vector<double>& own = controls_[k];
  if (own.empty()) {
    std::copy(server_.begin(), server_.end(), out);
    return;
  }
  for (std::size_t j = 0; j < p_; ++j) out[j] = server_[j] - own[j];
}

double ScaffoldControls::next(std::size_t k, const double* update, int steps, double learning_rate,
                              double* out) const {
  const std::vector<double>& own = controls_[k];
  if (steps <= 0) {  // no step, nothing learned about the client's drift
    if (own.empty())
      std::fill(out, out + p_, 0.0);
    else
      std::copy(own.begin(), own.end(), out);
    return 0.0;
  }
  const double scale = 1.0 / (static_cast<double>(steps) * learning_rate);
  double largest = 0.0;
  for (std::size_t j = 0; j < p_; ++j) {
    const double old = own.empty() ? 0.0 : own[j];
    // Option II: c_i+ = c_i - c + (theta_t - y) / (K eta_l), theta_t - y = -update.
    out[j] = old - server_[j] - update[j] * scale;
    const double change = std::abs(out[j] - old);
    largest = change > largest ? change : largest;
    if (!std::isfinite(out[j])) largest = std::numeric_limits<double>::infinity();
  }
  return largest;
}

void ScaffoldControls::difference(std::size_t k, const double* next, double* out) const {
  const std::vector<double>& own = controls_[k];
  for (std::size_t j = 0; j < p_; ++j) out[j] = next[j] - (own.empty() ? 0.0 : own[j]);
}

void ScaffoldControls::commit(std::size_t k, const double* next) {
  controls_[k].assign(next, next + p_);
}

void ScaffoldControls::advance(const double* sum) {
  const double inverse = 1.0 / static_cast<double>(clients_);
  for (std::size_t j = 0; j < p_; ++j) server_[j] += sum[j] * inverse;
}

std::vector<double> ScaffoldControls::state() const {
  std::vector<double> local(ids_.size() * p_, 0.0);
  for (std::size_t k = 0; k < ids_.size(); ++k)
    std::copy(controls_[k].begin(), controls_[k].end(), local.begin() + k * p_);
  const std::vector<double> all =
      ordered_allgather(local, static_cast<int>(ids_.size()), static_cast<int>(p_));
  std::vector<double> state = server_;
  state.insert(state.end(), all.begin(), all.end());
  return state;
}

void ScaffoldControls::restore(const std::vector<double>& state) {
  if (state.size() != p_ * static_cast<std::size_t>(clients_ + 1))
    throw InputError(fmt::format(
        "checkpoint: SCAFFOLD's control variates hold {} values, this run needs {} ({} clients "
        "and the server, {} parameters each)",
        state.size(), p_ * static_cast<std::size_t>(clients_ + 1), clients_, p_));
  server_.assign(state.begin(), state.begin() + static_cast<std::ptrdiff_t>(p_));
  for (std::size_t k = 0; k < ids_.size(); ++k) {
    const auto row =
        state.begin() + static_cast<std::ptrdiff_t>(p_ * (static_cast<std::size_t>(ids_[k]) + 1));
    const bool zero = std::all_of(row, row + static_cast<std::ptrdiff_t>(p_),
                                  [](double v) { return v == 0.0 && !std::signbit(v); });
    if (zero)
      controls_[k].clear();
    else
      controls_[k].assign(row, row + static_cast<std::ptrdiff_t>(p_));
  }
}

}  // namespace fluence
