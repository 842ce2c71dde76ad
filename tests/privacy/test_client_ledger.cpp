// The per-client privacy ledger against a brute force: every client's own list of events composed
// by a fresh accountant of its own, for events on every client, on subsets that cut the classes,
// and for unprotected clients; checkpoint state; and the class count that keeps it cheap.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/core/rng.hpp"
#include "fluence/data/purposes.hpp"
#include "fluence/privacy/accountant.hpp"
#include "fluence/privacy/client_ledger.hpp"

namespace fluence {
namespace {

struct Event {
  double q, z;
  long steps;
};

// Each client's eps by its own accountant, fed its own events in order: what the ledger must
// give, bit for bit (the same accountant code composes the same events).
std::vector<double> brute_force(const std::vector<std::vector<Event>>& events,
                                const std::vector<char>& unprotected, const char* accountant,
                                double delta) {
  std::vector<double> out;
  for (std::size_t i = 0; i < events.size(); ++i) {
    auto a = make_accountant(accountant);
    for (const Event& e : events[i]) a->add_steps(e.q, e.z, e.steps);
    out.push_back(unprotected[i] ? std::numeric_limits<double>::infinity()
                                 : a->epsilon(delta).epsilon);
  }
  return out;
}

TEST(ClientLedger, EveryClientsEpsIsItsOwnHistorysBitwise) {
  for (const char* accountant : {"rdp", "pld"}) {
    const int n = 40;
    ClientLedger ledger(n, accountant);
    std::vector<std::vector<Event>> events(n);
    std::vector<char> unprotected(n, 0);
    Stream stream(7, purpose::synthetic_rows);
    auto record = [&](const std::vector<std::int64_t>& members, Event e) {
      ledger.add_steps(members, e.q, e.z, e.steps);
      if (members.empty())
        for (auto& list : events) list.push_back(e);
      for (auto id : members) events[id].push_back(e);
    };
    record({}, {0.1, 1.2, 5});
    // A random subset (cuts the one class), then another that cuts both.
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<std::int64_t> subset;
      for (int i = 0; i < n; ++i)
        if (stream.uniform() < 0.5) subset.push_back(i);
      record(subset, {0.2, 0.9, 3 + pass});
    }
    const std::vector<std::int64_t> opted = {3, 17, 31};
    ledger.unprotect(opted);
    for (auto id : opted) unprotected[id] = 1;
    record({}, {0.1, 1.2, 2});
    EXPECT_EQ(ledger.epsilon(1e-5), brute_force(events, unprotected, accountant, 1e-5))
        << accountant;
    // Four histories at most (the two subset events cut every class at most in two each), each
    // split again at most once by the unprotected clients: 8 classes.
    EXPECT_LE(ledger.classes(), 8) << accountant;
    // A restored ledger answers with the same bits and keeps composing the same way.
    ClientLedger restored(n, accountant);
    restored.restore(ledger.state());
    record({1, 2}, {0.3, 2.0, 1});
    restored.add_steps(std::vector<std::int64_t>{1, 2}, 0.3, 2.0, 1);
    EXPECT_EQ(restored.epsilon(1e-6), brute_force(events, unprotected, accountant, 1e-6));
  }
}

// A run's rounds touch every client: one class however many clients, so a round costs O(1); a
// subset event costs O(subset) and makes two classes.
TEST(ClientLedger, AMillionClientsStayOneClassUntilASubsetSplitsThem) {
  const std::int64_t n = 1'000'000;
  ClientLedger ledger(n, "rdp");
  for (int round = 0; round < 100; ++round) ledger.add_steps({}, 0.01, 1.0, 1);
  EXPECT_EQ(ledger.classes(), 1);
  std::vector<std::int64_t> half;
  for (std::int64_t i = 0; i < n; i += 2) half.push_back(i);
  ledger.add_steps(half, 0.01, 1.0, 1);
  EXPECT_EQ(ledger.classes(), 2);
  const std::vector<double> eps = ledger.epsilon(1e-5);
  // 101 (or 100) single steps against one call of that many: RDP sums one step's value 101 times
  // rather than multiplying it, a few ulps apart (1e-12 relative).
  const double once_101 = accountant_epsilon("rdp", 0.01, 1.0, 101, 1e-5).epsilon;
  const double once_100 = accountant_epsilon("rdp", 0.01, 1.0, 100, 1e-5).epsilon;
  EXPECT_NEAR(eps[0], once_101, 1e-12 * once_101);
  EXPECT_NEAR(eps[1], once_100, 1e-12 * once_100);
  EXPECT_LT(eps[1], eps[0]);
}

TEST(ClientLedger, RefusesForeignClientsAndStateOfAnotherRun) {
  ClientLedger ledger(5, "rdp");
  EXPECT_THROW(ledger.add_steps(std::vector<std::int64_t>{5}, 0.1, 1.0, 1), InputError);
  ClientLedger other(6, "rdp");
  EXPECT_THROW(other.restore(ledger.state()), InputError);
  EXPECT_THROW(ClientLedger(3, "moments"), InputError);
}

}  // namespace
}  // namespace fluence
