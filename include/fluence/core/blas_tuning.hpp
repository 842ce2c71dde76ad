#pragma once
namespace fluence {

/// Debian 12's OpenBLAS 0.3.21 does not recognise recent Intel cores (e.g. Sapphire Rapids) and
/// falls back to its "Prescott" SSE3 kernels, about 5x slower for dgemm. The kernel is chosen when
/// the library loads, so when it reports Prescott on a CPU with AVX2/AVX-512 and the user has not
/// set OPENBLAS_CORETYPE, this re-executes the program (before MPI starts; same PID, so launchers
/// are unaffected) with OPENBLAS_CORETYPE=SkylakeX or Haswell. FLUENCE_KEEP_BLAS_CORE=1 disables
/// it.
void select_blas_core(char** argv);

}  // namespace fluence
