#pragma once
// Warnings raised by rank-local work reach the console (issue 41: a client's own solve on rank 1
// that did not converge was said nowhere). log::warn prints on rank 0 only, which is right for
// collective work (every rank sees the same thing) and loses what only another rank saw. Work run
// through RankWarnings::keep has its log::warn kept on whichever rank it runs, labelled
// ("client 7: ..."), and gather() -- a collective -- prints every rank's on rank 0 in a fixed
// order: by the label's order key, then by rank, then as raised. With client ids as keys the
// console is then the same for any number of ranks.
#include <string>
#include <utility>
#include <vector>

namespace fluence {

class RankWarnings {
 public:
  RankWarnings() = default;
  RankWarnings(const RankWarnings&) = delete;
  RankWarnings& operator=(const RankWarnings&) = delete;

  /// Runs `work` (rank-local: no collective inside) keeping its warnings, each to be printed as
  /// "warning: <name>: <message>" and ordered by `order` (e.g. the client id).
  template <class Work>
  decltype(auto) keep(std::string name, long order, Work&& work) {
    Keeping keeping(*this, std::move(name), order);
    return std::forward<Work>(work)();
  }

  /// Collective: rank 0 prints every rank's kept warnings in order and returns their lines
  /// (without "warning: "); other ranks return nothing. The kept warnings are cleared.
  std::vector<std::string> gather();

  struct Kept {
    long order = 0;
    std::string line;
  };

 private:
  // Makes log::warn keep into `warnings` while alive (one at a time per process).
  class Keeping {
   public:
    Keeping(RankWarnings& warnings, std::string name, long order);
    ~Keeping();
    Keeping(const Keeping&) = delete;
    Keeping& operator=(const Keeping&) = delete;
  };

  std::vector<Kept> kept_;
  std::string name_;
  long order_ = 0;

  friend void keep_warning(const std::string& message);
};

/// True while work run through RankWarnings::keep is running (log::warn then calls keep_warning).
bool keeping_warnings();
void keep_warning(const std::string& message);

}  // namespace fluence
