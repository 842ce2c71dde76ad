#include "fluence/core/signals.hpp"

#include <mpi.h>

#include <csignal>

namespace fluence {

namespace {

volatile std::sig_atomic_t stop_signal = 0;

extern "C" void record_stop_signal(int signal) {
  stop_signal = signal;
}

}  // namespace

void install_stop_handlers() {
  for (int signal : {SIGTERM, SIGUSR1, SIGINT}) std::signal(signal, record_stop_signal);
}

bool stop_requested_anywhere() {
  int local = stop_signal != 0 ? 1 : 0, any = 0;
  MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  return any != 0;
}

int received_stop_signal() {
  return static_cast<int>(stop_signal);
}

}  // namespace fluence
