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

/// A fine boundary inside a long unit of work (a CG iteration, a Newton step, a LiSSA step;
/// docs/operations.md "Stops inside a unit"): local and free like stop_signal_received, and
/// counted for the testing aid arm_test_stop_inside.
bool stop_signal_inside_unit();
/// Collective: stop_signal_inside_unit on this rank, agreed by every rank (one MPI_Allreduce of
/// an int). For units every rank runs in step (a federated solve or retrain).
bool stop_inside_unit_anywhere();
/// Testing aid (--test-stop-inside K): raise SIGUSR1 on this rank at its K-th fine boundary
/// (K >= 1), so that a test stops a unit at a known point; 0 = never.
void arm_test_stop_inside(long boundary);

}  // namespace fluence
