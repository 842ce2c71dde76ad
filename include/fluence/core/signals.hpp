#pragma once
// Graceful stops (docs/operations.md): SIGTERM, SIGUSR1 (SLURM's warning before the time limit,
// `--signal=B:USR1@...`), SIGINT and SIGHUP only set a flag; a long command polls it collectively
// between units of work, writes a checkpoint and exits with kExitStopped. Every rank learns of a
// signal delivered to any one of them, so none is left waiting in a collective.

namespace fluence {

/// Installs the handlers (idempotent).
void install_stop_handlers();
/// Collective: true on every rank when any rank has received a stop signal.
bool stop_requested_anywhere();
/// Local and free (no communication): has this rank received a stop signal? Long work polls it
/// at fine boundaries (a client, a mini-batch, a test chunk) to give up a unit that could not end
/// within the launcher's grace; the ranks then agree collectively (stop_requested_anywhere).
bool stop_signal_received();
/// The signal received on this rank (0 = none), for messages.
int received_stop_signal();

}  // namespace fluence
