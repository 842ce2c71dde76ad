#include "fluence/core/mpi.hpp"

#include <fmt/format.h>
#include <slepcsys.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

#include "fluence/core/error.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

extern "C" void openblas_set_num_threads(int);

namespace fluence {

namespace {

// PETSc's own words for the error being raised (its first frame), kept for petsc_check.
std::string petsc_message;
// The exception a guarded callback raised inside PETSc, rethrown by petsc_check.
std::exception_ptr callback_exception;

// Replaces PETSc's default handler, which prints a traceback of every frame on every rank: the
// error becomes one line through petsc_check's exception instead.
PetscErrorCode keep_petsc_message(MPI_Comm, int, const char* function, const char*,
                                  PetscErrorCode code, PetscErrorType type, const char* message,
                                  void*) {
  if (type == PETSC_ERROR_INITIAL)
    petsc_message = fmt::format("{} (in {})", message ? message : "", function ? function : "?");
  return code;
}

}  // namespace

std::string take_petsc_message() {
  std::string message;
  message.swap(petsc_message);
  return message;
}

int guarded_callback(const std::function<void()>& work) {
  try {
    work();
    return 0;
  } catch (...) {
    callback_exception = std::current_exception();
    return PETSC_ERR_USER;
  }
}

void petsc_check(int error_code, const char* what) {
  if (error_code == 0) return;
  const std::string message = take_petsc_message();
  if (callback_exception) std::rethrow_exception(std::exchange(callback_exception, nullptr));
  throw RuntimeError(fmt::format("PETSc/SLEPc call failed: {} (error code {}){}", what, error_code,
                                 message.empty() ? "" : ": " + message_excerpt(message, 480)));
}

Environment::Environment(int* argc, char*** argv) {
  // One BLAS thread per rank: ranks are the unit of parallelism (brief, "Performance").
  openblas_set_num_threads(1);
  petsc_check(SlepcInitialize(argc, argv, nullptr, nullptr), "SlepcInitialize");
  petsc_check(PetscPushErrorHandler(keep_petsc_message, nullptr), "PetscPushErrorHandler");
}

Environment::~Environment() {
#if defined(__SANITIZE_ADDRESS__)
  // The sanitizer build (`make sanitize`) looks for leaks here, once, instead of at exit: every
  // object of Fluence's is gone, while MPI, PETSc and HDF5 still hold their state. After finalize,
  // what they leave for the operating system by design would be reported, from Open MPI components
  // that finalize has unloaded, so that no suppression could name them.
  __lsan_do_leak_check();
#endif
  SlepcFinalize();
}

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

std::string broadcast_string(const std::string& value, int root) {
  long length = static_cast<long>(value.size());
  MPI_Bcast(&length, 1, MPI_LONG, root, MPI_COMM_WORLD);
  std::string out = world_rank() == root ? value : std::string(length, '\0');
  MPI_Bcast(out.data(), static_cast<int>(length), MPI_CHAR, root, MPI_COMM_WORLD);
  return out;
}

std::vector<std::string> rank_hosts() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  std::vector<char> names(static_cast<std::size_t>(world_size()) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME,
                MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> hosts;
  for (std::size_t offset = 0; offset < names.size(); offset += MPI_MAX_PROCESSOR_NAME)
    hosts.emplace_back(names.data() + offset,
                       strnlen(names.data() + offset, MPI_MAX_PROCESSOR_NAME));
  return hosts;
}

int shared_memory_nodes() {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank(), MPI_INFO_NULL, &node);
  int node_rank = 0;
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_free(&node);
  int leaders = node_rank == 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &leaders, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return leaders;
}

void collective_check(const std::function<void()>& work) {
  std::string message;
  int failed_rank = world_size();
  try {
    work();
  } catch (const std::bad_alloc&) {
    // Input that asks for more memory than there is (data.synthetic.rows = 2e9) is the user's to
    // change: say so in words, not as "std::bad_alloc".
    message = kOutOfMemory;
    failed_rank = world_rank();
  } catch (const std::exception& error) {
    message = error.what();
    failed_rank = world_rank();
  }
  int first_failed = failed_rank;
  MPI_Allreduce(&failed_rank, &first_failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first_failed == world_size()) return;
  message = broadcast_string(message, first_failed);
  if (world_size() > 1 && first_failed != 0)
    message += " (on rank " + std::to_string(first_failed) + ")";
  throw InputError(message);
}

namespace {
struct GatherLayout {
  std::vector<int> counts, displacements;
  int total_items = 0;
};

GatherLayout gather_layout(int local_items, int width) {
  GatherLayout layout;
  const int size = world_size();
  std::vector<int> items(size);
  MPI_Allgather(&local_items, 1, MPI_INT, items.data(), 1, MPI_INT, MPI_COMM_WORLD);
  layout.counts.resize(size);
  layout.displacements.resize(size);
  int offset = 0;
  for (int r = 0; r < size; ++r) {
    layout.counts[r] = items[r] * width;
    layout.displacements[r] = offset;
    offset += layout.counts[r];
    layout.total_items += items[r];
  }
  return layout;
}
}  // namespace

void ordered_sum(std::span<const double> local, int local_items, int width,
                 std::span<double> result) {
  GatherLayout layout = gather_layout(local_items, width);
  const bool root = world_rank() == 0;
  std::vector<double> gathered(root ? static_cast<std::size_t>(layout.total_items) * width : 0);
  MPI_Gatherv(local.data(), local_items * width, MPI_DOUBLE, gathered.data(), layout.counts.data(),
              layout.displacements.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (root) {
    std::fill(result.begin(), result.end(), 0.0);
    for (int item = 0; item < layout.total_items; ++item) {
      const double* row = gathered.data() + static_cast<std::size_t>(item) * width;
      for (int k = 0; k < width; ++k) result[k] += row[k];
    }
  }
  MPI_Bcast(result.data(), width, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

void chain_sum(int local_items, std::span<double> result,
               const std::function<void(int, std::span<double>)>& add_item) {
  const int rank = world_rank(), size = world_size();
  const int width = static_cast<int>(result.size());
  // Association ((0 + item0) + item1) + ... exactly as ordered_sum, so both agree bitwise.
  if (rank == 0)
    std::fill(result.begin(), result.end(), 0.0);
  else
    MPI_Recv(result.data(), width, MPI_DOUBLE, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int item = 0; item < local_items; ++item) add_item(item, result);
  if (rank + 1 < size) MPI_Send(result.data(), width, MPI_DOUBLE, rank + 1, 0, MPI_COMM_WORLD);
  MPI_Bcast(result.data(), width, MPI_DOUBLE, size - 1, MPI_COMM_WORLD);
}

std::vector<double> ordered_allgather(std::span<const double> local, int local_items, int width) {
  GatherLayout layout = gather_layout(local_items, width);
  std::vector<double> gathered(static_cast<std::size_t>(layout.total_items) * width);
  MPI_Allgatherv(local.data(), local_items * width, MPI_DOUBLE, gathered.data(),
                 layout.counts.data(), layout.displacements.data(), MPI_DOUBLE, MPI_COMM_WORLD);
  return gathered;
}

}  // namespace fluence
