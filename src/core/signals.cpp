#include "fluence/core/signals.hpp"

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <csignal>

namespace fluence {

namespace {

volatile std::sig_atomic_t stop_signal = 0;
long fine_boundaries = 0, test_stop_inside = 0;

// After a stop request a rank must never block on its output: Open MPI's mpirun stops reading the
// ranks' output pipes when it is signalled, and a rank blocked writing a progress line to a full
// pipe would neither reach the checkpoint nor exit before mpirun's SIGKILL. From the signal on,
// stdout and stderr are non-blocking: a line that does not fit is dropped (stdio records the
// error; nothing reads it), and a write already blocked when the signal arrives is restarted
// (SA_RESTART) against the non-blocking descriptor and returns at once.
void stop_blocking_output() {
  for (int descriptor : {STDOUT_FILENO, STDERR_FILENO}) {
    const int flags = fcntl(descriptor, F_GETFL);
    if (flags != -1) fcntl(descriptor, F_SETFL, flags | O_NONBLOCK);
  }
}

extern "C" void record_stop_signal(int signal) {
  stop_signal = signal;
  stop_blocking_output();  // fcntl is async-signal-safe
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = record_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  // SIGHUP too: a rank whose terminal or ssh session goes away (a run started by hand on a node)
  // was ended by its default action, losing the work since the last checkpoint; it is a stop
  // request like TERM.
  for (int signal : {SIGTERM, SIGUSR1, SIGINT, SIGHUP}) sigaction(signal, &action, nullptr);
}

bool stop_requested_anywhere() {
  int local = stop_signal != 0 ? 1 : 0, any = 0;
  MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  return any != 0;
}

bool stop_signal_received() {
  return stop_signal != 0;
}

int received_stop_signal() {
  return static_cast<int>(stop_signal);
}

bool stop_signal_inside_unit() {
  // The testing aid delivers a real signal: the same path as SLURM's USR1.
  if (++fine_boundaries == test_stop_inside) std::raise(SIGUSR1);
  return stop_signal != 0;
}

bool stop_inside_unit_anywhere() {
  int local = stop_signal_inside_unit() ? 1 : 0, any = 0;
  MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  return any != 0;
}

void arm_test_stop_inside(long boundary) {
  test_stop_inside = boundary;
  fine_boundaries = 0;
}

}  // namespace fluence
