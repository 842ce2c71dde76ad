#pragma once
// All console output goes through the rank-0 stream (docs/architecture.md).
#include <fmt/core.h>

#include <chrono>
#include <string>
#include <utility>

#include "fluence/core/rank_warnings.hpp"

namespace fluence::log {

bool is_root();
void write_line(const std::string& line);
void write_error(const std::string& line);

template <class... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  if (is_root()) write_line(fmt::format(format, std::forward<Args>(args)...));
}

/// On rank 0; while a RankWarnings keeps warnings (rank-local work), kept on every rank instead.
template <class... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  if (keeping_warnings())
    keep_warning(fmt::format(format, std::forward<Args>(args)...));
  else if (is_root())
    write_error("warning: " + fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace fluence::log

namespace fluence {

/// Wall-clock seconds since construction.
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

/// Progress of a loop with an ETA, about ten lines per loop (rank 0 prints).
class ProgressLine {
 public:
  ProgressLine(std::string what, long total, bool enabled)
      : what_(std::move(what)), total_(total), enabled_(enabled) {}
  /// `count` of the total steps are done.
  void done(long count);

 private:
  std::string what_;
  long total_;
  bool enabled_;
  Stopwatch clock_;
};

/// Estimated time remaining after `done` of `total` steps taking `elapsed` seconds, as "1m05s".
std::string format_eta(double elapsed, long done, long total);
std::string format_duration(double seconds);

}  // namespace fluence
