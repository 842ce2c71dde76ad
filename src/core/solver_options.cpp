#include "fluence/core/solver_options.hpp"

#include <fmt/format.h>
#include <petscksp.h>
#include <slepceps.h>

#include <cctype>
#include <utility>

#include "fluence/core/error.hpp"
#include "fluence/core/mpi.hpp"

namespace fluence {

namespace {
// A PC type that only names a choice: the solver that reads -<prefix>pc_type NAME replaces the PC
// by its own PCSHELL (ConjugateGradient::use_custom_shell), so creating one sets nothing up.
PetscErrorCode create_named_pc(PC) {
  return 0;
}
}  // namespace

int register_named_pc_type(const char* name) {
  return PCRegister(name, create_named_pc);
}

namespace {

struct Option {
  std::string name, value;  // "-ihvp_ksp_rtol", "abc" ("" for a flag)
};

// The options as PETSc reads the command line: a word after an option is its value unless it is
// the next option ("-5" is a value, "-ksp_monitor" is not).
std::vector<Option> options_of(const std::vector<std::string>& arguments) {
  auto is_name = [](const std::string& word) {
    return word.size() > 1 && word[0] == '-' && std::isalpha(static_cast<unsigned char>(word[1]));
  };
  std::vector<Option> options;
  for (const auto& word : arguments) {
    if (is_name(word))
      options.push_back({word, ""});
    else if (!options.empty() && options.back().value.empty())
      options.back().value = word;
  }
  return options;
}

// The code's own solvers' set-up up to reading the options (core/krylov.cpp: CG; influence/
// spectrum.cpp: Krylov-Schur on a symmetric problem), on a throwaway object; the first failing
// PETSc code, or 0.
PetscErrorCode configure_ksp(const char* prefix) {
  KSP ksp = nullptr;
  PC pc = nullptr;
  PetscErrorCode code = KSPCreate(PETSC_COMM_SELF, &ksp);
  if (!code) code = KSPSetType(ksp, KSPCG);
  if (!code) code = KSPGetPC(ksp, &pc);
  if (!code) code = PCSetType(pc, PCNONE);
  // The run's CG registers its shell preconditioners' names before it reads the options.
  if (!code) code = register_named_pc_type(kKroneckerPcType);
  if (!code) code = register_named_pc_type(kKfacPcType);
  if (!code) code = KSPSetOptionsPrefix(ksp, prefix);
  if (!code) code = KSPSetFromOptions(ksp);
  // Read only at the end of a solve (KSPConvergedReasonViewFromOptions), not by KSPSetFromOptions:
  // asked here so that the check for unused options knows it.
  PetscBool given = PETSC_FALSE;
  if (!code) code = PetscOptionsHasName(nullptr, prefix, "-ksp_converged_reason", &given);
  KSPDestroy(&ksp);
  return code;
}

PetscErrorCode configure_eps(const char* prefix) {
  EPS eps = nullptr;
  PetscErrorCode code = EPSCreate(PETSC_COMM_SELF, &eps);
  if (!code) code = EPSSetProblemType(eps, EPS_HEP);
  if (!code) code = EPSSetType(eps, EPSKRYLOVSCHUR);
  if (!code) code = EPSSetOptionsPrefix(eps, prefix);
  if (!code) code = EPSSetFromOptions(eps);
  // Read only by EPSSolve (MatViewFromOptions on the operators).
  PetscBool given = PETSC_FALSE;
  for (const char* name : {"-eps_view_mat0", "-eps_view_mat1"})
    if (!code) code = PetscOptionsHasName(nullptr, prefix, name, &given);
  EPSDestroy(&eps);
  return code;
}

// The options PETSc's message is about: those whose value it quotes, else all of the prefix.
std::vector<std::string> blamed_options(const std::vector<Option>& given,
                                        const std::string& message) {
  std::vector<std::string> quoted, all;
  for (const auto& option : given) {
    const std::string text =
        message_excerpt(option.value.empty() ? option.name : option.name + " " + option.value);
    all.push_back(text);
    if (!option.value.empty() && message.find(option.value) != std::string::npos)
      quoted.push_back(text);
  }
  return quoted.empty() ? all : quoted;
}

// The options of `given` that nothing has read: no solver of Fluence's, and no part of PETSc or
// SLEPc at their start-up (-log_view, -malloc_debug, -help, ...), queried them. By now every
// solver prefix given has been set up once on a throwaway object, so a misspelt option
// (-ihvp_ksp_rtoll) or one without a solver's prefix (-ksp_type cg) would have no effect.
std::vector<Option> unused_options(const std::vector<Option>& given) {
  std::vector<Option> unused;
  for (const auto& option : given) {
    PetscBool used = PETSC_FALSE;
    petsc_check(PetscOptionsUsed(nullptr, option.name.c_str() + 1, &used), "PetscOptionsUsed");
    if (!used) unused.push_back(option);
  }
  return unused;
}

}  // namespace

void check_solver_options(const std::vector<std::string>& arguments) {
  const std::vector<Option> options = options_of(arguments);
  const std::pair<const char*, PetscErrorCode (*)(const char*)> solvers[] = {
      {kNewtonPrefix, configure_ksp},
      {kIhvpPrefix, configure_ksp},
      {kSpectrumPrefix, configure_eps}};
  for (const auto& [prefix, configure] : solvers) {
    std::vector<Option> given;
    for (const auto& option : options)
      if (option.name.rfind(std::string("-") + prefix, 0) == 0) given.push_back(option);
    if (given.empty()) continue;
    if (configure(prefix) == 0) continue;
    const std::string message = take_petsc_message();
    const std::vector<std::string> blamed = blamed_options(given, message);
    std::string names;
    for (const auto& text : blamed) names += (names.empty() ? "" : ", ") + text;
    throw InputError(fmt::format("PETSc option{} {} {} not allowed: {}",
                                 blamed.size() > 1 ? "s" : "", names,
                                 blamed.size() > 1 ? "are" : "is", message_excerpt(message, 480)));
  }
  const std::vector<Option> unused = unused_options(options);
  if (unused.empty()) return;
  std::string names;
  for (const auto& option : unused)
    names += (names.empty() ? "" : ", ") + message_excerpt(option.name);
  throw InputError(fmt::format(
      "unknown PETSc option{} {}: no solver reads {} (misspelt? Fluence's solvers read "
      "-{}ksp_*, -{}ksp_* and -{}pc_*, -{}eps_* and -{}st_*; PETSc's own such as -log_view "
      "pass; `-help` lists them)",
      unused.size() > 1 ? "s" : "", names, unused.size() > 1 ? "them" : "it", kNewtonPrefix,
      kIhvpPrefix, kIhvpPrefix, kSpectrumPrefix, kSpectrumPrefix));
}

}  // namespace fluence
