// Per-client privacy ledger (docs/math.md §7.3).
#include "fluence/privacy/client_ledger.hpp"

#include <fmt/format.h>

#include <limits>

#include "fluence/core/error.hpp"

namespace fluence {

ClientLedger::ClientLedger(std::int64_t clients, std::string accountant)
    : accountant_(std::move(accountant)) {
  if (clients < 0 || clients > std::numeric_limits<std::int32_t>::max())
    throw InputError(fmt::format("privacy ledger: {} clients is out of range", clients));
  class_of_.assign(static_cast<std::size_t>(clients), 0);
  classes_.push_back({make_accountant(accountant_), false, clients});
}

template <class Change>
void ClientLedger::apply(std::span<const std::int64_t> members, const Change& change) {
  if (members.empty()) {
    for (Class& c : classes_)
      if (c.size > 0) change(c);
    return;
  }
  std::vector<std::int64_t> hits(classes_.size(), 0);
  for (const std::int64_t id : members) {
    if (id < 0 || id >= clients())
      throw InputError(fmt::format("privacy ledger: client {} is not among its {}", id, clients()));
    ++hits[static_cast<std::size_t>(class_of_[static_cast<std::size_t>(id)])];
  }
  // A class cut by `members` splits: its members among them move to a copy (same history), which
  // then takes the change with the classes wholly inside.
  std::vector<std::int32_t> split(classes_.size(), -1);
  const std::size_t existing = classes_.size();
  for (std::size_t c = 0; c < existing; ++c) {
    if (hits[c] == 0) continue;
    if (hits[c] == classes_[c].size) {
      change(classes_[c]);
      continue;
    }
    Class copy{make_accountant(accountant_), classes_[c].unprotected, hits[c]};
    copy.accountant->restore(classes_[c].accountant->state());
    change(copy);
    classes_[c].size -= hits[c];
    split[c] = static_cast<std::int32_t>(classes_.size());
    classes_.push_back(std::move(copy));
  }
  for (const std::int64_t id : members) {
    std::int32_t& c = class_of_[static_cast<std::size_t>(id)];
    if (split[static_cast<std::size_t>(c)] >= 0) c = split[static_cast<std::size_t>(c)];
  }
}

void ClientLedger::add_steps(std::span<const std::int64_t> members, double sampling_rate,
                             double noise_multiplier, long steps) {
  apply(members,
        [&](Class& c) { c.accountant->add_steps(sampling_rate, noise_multiplier, steps); });
}

void ClientLedger::unprotect(std::span<const std::int64_t> members) {
  apply(members, [](Class& c) { c.unprotected = true; });
}

std::vector<double> ClientLedger::epsilon(double delta) const {
  std::vector<double> by_class(classes_.size(), 0.0);
  for (std::size_t c = 0; c < classes_.size(); ++c)
    if (classes_[c].size > 0)
      by_class[c] = classes_[c].unprotected ? std::numeric_limits<double>::infinity()
                                            : classes_[c].accountant->epsilon(delta).epsilon;
  std::vector<double> out(class_of_.size());
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = by_class[static_cast<std::size_t>(class_of_[i])];
  return out;
}

int ClientLedger::classes() const {
  int used = 0;
  for (const Class& c : classes_) used += c.size > 0;
  return used;
}

// [clients, classes, then per class: unprotected, size, state length, state..., then every
// client's class].
std::vector<double> ClientLedger::state() const {
  std::vector<double> out = {static_cast<double>(clients()), static_cast<double>(classes_.size())};
  for (const Class& c : classes_) {
    const std::vector<double> s = c.accountant->state();
    out.insert(out.end(), {c.unprotected ? 1.0 : 0.0, static_cast<double>(c.size),
                           static_cast<double>(s.size())});
    out.insert(out.end(), s.begin(), s.end());
  }
  out.insert(out.end(), class_of_.begin(), class_of_.end());
  return out;
}

void ClientLedger::restore(const std::vector<double>& state) {
  auto fail = [&] {
    return InputError(
        fmt::format("checkpoint: the privacy ledger's state does not fit {} clients ({} values)",
                    clients(), state.size()));
  };
  std::size_t at = 0;
  auto next = [&] {
    if (at >= state.size()) throw fail();
    return state[at++];
  };
  if (next() != static_cast<double>(clients())) throw fail();
  const double count = next();
  if (!(count >= 1 && count <= static_cast<double>(clients()) + 1)) throw fail();
  std::vector<Class> classes;
  for (std::size_t c = 0; c < static_cast<std::size_t>(count); ++c) {
    Class restored{make_accountant(accountant_), next() != 0.0, 0};
    restored.size = static_cast<std::int64_t>(next());
    const auto length = static_cast<std::size_t>(next());
    if (length > state.size() - at) throw fail();
    restored.accountant->restore(
        std::vector<double>(state.begin() + static_cast<std::ptrdiff_t>(at),
                            state.begin() + static_cast<std::ptrdiff_t>(at + length)));
    at += length;
    classes.push_back(std::move(restored));
  }
  if (state.size() - at != class_of_.size()) throw fail();
  std::vector<std::int32_t> class_of(class_of_.size());
  for (std::size_t i = 0; i < class_of.size(); ++i) {
    const double c = state[at + i];
    if (!(c >= 0 && c < count)) throw fail();
    class_of[i] = static_cast<std::int32_t>(c);
  }
  classes_ = std::move(classes);
  class_of_ = std::move(class_of);
}

}  // namespace fluence
