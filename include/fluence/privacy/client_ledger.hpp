#pragma once
// Each client's own eps (docs/math.md §7.3): the steps of the Gaussian mechanism that touched the
// client, composed by the run's accountant, and "unprotected" for a client whose updates leave
// without noise (FeO2's opt-out). Clients with equal histories share a class, and one accountant
// serves a class: a round that applies one event to every client costs O(classes), not O(clients),
// and an event on a subset splits the classes it cuts (O(subset + classes)). So a ledger of 10^6
// clients updates in microseconds a round and is evaluated once per class.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fluence/privacy/accountant.hpp"

namespace fluence {

class ClientLedger {
 public:
  /// `clients` clients (ids 0 .. clients-1), none touched yet; `accountant` a registered name.
  ClientLedger(std::int64_t clients, std::string accountant);
  std::int64_t clients() const { return static_cast<std::int64_t>(class_of_.size()); }
  /// `steps` steps at (q, z) for every client in `members` (ids, each once; empty = every client).
  void add_steps(std::span<const std::int64_t> members, double sampling_rate,
                 double noise_multiplier, long steps);
  /// These clients' updates leave without noise from now on: their eps is inf.
  void unprotect(std::span<const std::int64_t> members);
  /// Each client's eps at `delta` (inf when unprotected; 0 before any step).
  std::vector<double> epsilon(double delta) const;
  /// Classes in use (clients with equal histories).
  int classes() const;
  /// Checkpoint state: the classes (flag, accountant state) and every client's class; restore()
  /// continues bitwise. InputError when it does not fit this ledger's clients.
  std::vector<double> state() const;
  void restore(const std::vector<double>& state);

 private:
  struct Class {
    std::unique_ptr<Accountant> accountant;
    bool unprotected = false;
    std::int64_t size = 0;
  };
  // Applies `change` to every class fully inside `members` and to a split-off copy of every class
  // that `members` cuts.
  template <class Change>
  void apply(std::span<const std::int64_t> members, const Change& change);

  std::string accountant_;
  std::vector<std::int32_t> class_of_;  // per client
  std::vector<Class> classes_;
};

}  // namespace fluence
