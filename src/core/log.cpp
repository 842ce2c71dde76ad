#include "fluence/core/log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "fluence/core/error.hpp"
#include "fluence/core/mpi.hpp"

namespace fluence::log {

bool is_root() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return !initialized || world_rank() == 0;
}

namespace {
// A line and its newline in one write: stderr is unbuffered, and mpirun forwards a rank's stdout
// and stderr apart, so a newline written on its own let a stdout line land between a warning and
// its newline ("... residual 2.3e-01influence: 20 clients scored"), seen under load.
void write_whole_line(std::string text, std::FILE* stream) {
  text += '\n';
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
}
}  // namespace

void write_line(const std::string& line) {
  write_whole_line(line, stdout);
}

void write_error(const std::string& line) {
  // The last guard of message hygiene, whatever a message quotes: one line (control bytes
  // escaped), of bounded length.
  constexpr std::size_t kLongestLine = 4096;
  write_whole_line(message_excerpt(line, kLongestLine), stderr);
}

}  // namespace fluence::log

namespace fluence {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const long total = static_cast<long>(std::lround(seconds));
  if (total < 3600) return fmt::format("{}m{:02d}s", total / 60, static_cast<int>(total % 60));
  return fmt::format("{}h{:02d}m", total / 3600, static_cast<int>((total % 3600) / 60));
}

std::string format_eta(double elapsed, long done, long total) {
  if (done <= 0) return "?";
  return format_duration(elapsed / static_cast<double>(done) * static_cast<double>(total - done));
}

void ProgressLine::done(long count) {
  if (!enabled_ || total_ < 2) return;
  const long every = std::max(1L, total_ / 10);
  if (count % every != 0 && count != total_) return;
  const double elapsed = clock_.seconds();
  log::info("  {} {:>5d}/{}  elapsed {}  ETA {}", what_, count, total_, format_duration(elapsed),
            format_eta(elapsed, count, total_));
}

}  // namespace fluence
