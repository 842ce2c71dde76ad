#pragma once
// Error boundary (docs/architecture.md): pure C++ throws; code calling PETSc uses PetscCall and
// converts at the seam with petsc_check(); main() prints the message on rank 0 and ends every rank.
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fluence {

/// A problem with the user's input (deck, data file, output directory). Raised identically on every
/// rank, or agreed collectively with collective_check(), so all ranks exit cleanly with code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A failure inside the computation (solver breakdown, I/O error, PETSc error).
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A computation that left the finite numbers (a diverged training: a learning rate too large, an
/// overflowing regularization), detected identically on every rank: every rank exits cleanly with
/// code 3 and rank 0 prints the message once.
class DivergenceError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

/// The one message for a failed allocation (std::bad_alloc): during set-up it is the deck's to
/// change (an InputError), elsewhere a runtime failure.
inline constexpr const char* kOutOfMemory =
    "out of memory: the deck's data or model need more memory than this rank could allocate "
    "(use fewer rows, attributes or parameters, or more ranks or nodes)";

/// Converts a PETSc error code into a RuntimeError naming the call site and PETSc's own message
/// (kept by the handler the Environment installs instead of PETSc's printed traceback). When the
/// error comes from a C++ exception that one of Fluence's callbacks raised inside PETSc
/// (guarded_callback), rethrows that exception instead, with its own type and message.
void petsc_check(int error_code, const char* what);

/// Runs a callback's C++ work inside a PETSc (or SLEPc) callback (an operator's product, a
/// preconditioner): an exception must not unwind through PETSc's C frames, which would leave its
/// objects half-updated, so it is kept and the callback returns an error code instead; PETSc
/// then returns the error to the petsc_check around the call that ran the callback, which
/// rethrows the kept exception.
int guarded_callback(const std::function<void()>& work);

/// How much of a user-supplied text (a data field, a deck value, a key) an error message echoes,
/// and how much of a path.
inline constexpr std::size_t kExcerptBytes = 60;
inline constexpr std::size_t kPathExcerptBytes = 240;

/// User-supplied text as an error message shows it: control bytes escaped as \xNN (a NUL would
/// otherwise end the message where it stands) and text longer than `limit` bytes cut there, with
/// "... (N bytes)" telling its length (a 20 MB CSV field is not echoed whole). A cut never splits
/// a UTF-8 character.
std::string message_excerpt(std::string_view text, std::size_t limit = kExcerptBytes);

}  // namespace fluence
