#pragma once
#include <mpi.h>

#include <functional>
#include <span>
#include <string>
#include <vector>

namespace fluence {

/// One RAII guard initializes and finalizes MPI, PETSc and SLEPc (docs/architecture.md). argc/argv
/// are handed to PETSc so that its options (-log_view, -newton_ksp_monitor, ...) pass through.
class Environment {
 public:
  Environment(int* argc, char*** argv);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;
};

int world_rank();
int world_size();

/// PETSc's message for the error it raised last (its first frame: "Unable to find requested KSP
/// type nosuch (in KSPSetType)"), which the Environment keeps instead of printing PETSc's
/// traceback; empty when none. Taking it clears it.
std::string take_petsc_message();

/// Runs `work` on every rank; if it throws on any rank, every rank throws an InputError carrying
/// the message of the lowest failing rank. Use around set-up steps whose failure may be rank-local
/// (a file one node cannot read) so that no rank is left waiting in a collective.
void collective_check(const std::function<void()>& work);

/// Broadcasts a string from `root`.
std::string broadcast_string(const std::string& value, int root = 0);

/// Collective: every rank's host (MPI_Get_processor_name), in rank order, on every rank.
std::vector<std::string> rank_hosts();

/// Collective: how many nodes MPI_COMM_TYPE_SHARED splits the job into, the nodes whose ranks
/// share the work queues of NodeWorkQueue.
int shared_memory_nodes();

/// Sum of per-item vectors in global item order, identical on every rank and independent of the
/// rank count: rank r holds the contiguous item range [first_item(r), first_item(r+1)) and passes
/// the row-major block `local` (its items × width). Items are gathered to rank 0, summed in item
/// order, and the result broadcast. This is the order-independent reduction that the determinism
/// promise needs.
void ordered_sum(std::span<const double> local, int local_items, int width,
                 std::span<double> result);

/// The same sum, bitwise, as ordered_sum, but passed along the ranks as a running partial sum
/// (rank r adds its items in order to what rank r-1 sent): memory and traffic per rank are one
/// `width` vector, not all items. For wide items such as explicit Hessians. The items are
/// accumulated into `result` one at a time by `add_item(k, result)` for local item k.
void chain_sum(int local_items, std::span<double> result,
               const std::function<void(int, std::span<double>)>& add_item);

/// Gathers per-item values (items × width) in global item order onto every rank.
std::vector<double> ordered_allgather(std::span<const double> local, int local_items, int width);

}  // namespace fluence
