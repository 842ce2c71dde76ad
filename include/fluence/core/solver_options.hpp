#pragma once
// The PETSc/SLEPc options given on the command line for the code's solvers, each under its prefix:
// -newton_ksp_* (Newton's CG), -ihvp_ksp_* (the influence IHVPs), -hessian_eps_* (the SLEPc
// spectrum).
#include <string>
#include <vector>

namespace fluence {

inline constexpr const char* kNewtonPrefix = "newton_";
inline constexpr const char* kIhvpPrefix = "ihvp_";
inline constexpr const char* kSpectrumPrefix = "hessian_";
/// The IHVP's Kronecker preconditioner as a PC type name (-ihvp_pc_type kronecker): a PCSHELL
/// (core/krylov.hpp, CgSettings::custom_name).
inline constexpr const char* kKroneckerPcType = "kronecker";
/// A network's K-FAC preconditioner (-ihvp_pc_type kfac; influence/kfac.hpp), a PCSHELL too.
inline constexpr const char* kKfacPcType = "kfac";

/// Registers `name` as a PC type that only names a choice (its solver installs its own PCSHELL
/// when the option selects it), so that -<prefix>pc_type NAME parses. Returns PETSc's error code.
int register_named_pc_type(const char* name);

/// Sets up a throwaway solver of each prefix that `arguments` (the PETSc part of the command line)
/// gives options for, as the run's own solver reads them, so that a bad type or value
/// (-ihvp_ksp_type nosuch, -ihvp_ksp_rtol abc) is refused before the run starts: an InputError,
/// the same on every rank, naming the option, its value and PETSc's reason, instead of PETSc's
/// error stack when the solver is first made, maybe hours into the run.
void check_solver_options(const std::vector<std::string>& arguments);

}  // namespace fluence
