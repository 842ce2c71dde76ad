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
  if (!code) code = KSPSetOptionsPrefix(ksp, prefix);
  if (!code) code = KSPSetFromOptions(ksp);
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
}

}  // namespace fluence
