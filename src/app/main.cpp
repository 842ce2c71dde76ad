#include "fluence/app/cli.hpp"
#include "fluence/core/blas_tuning.hpp"
#include "fluence/core/mpi.hpp"

int main(int argc, char** argv) {
  fluence::select_blas_core(argv);
  auto command_line = fluence::app::parse_command_line(argc, argv);
  if (command_line.exit_code) return *command_line.exit_code;
  std::vector<char*> petsc_argv;
  for (auto& arg : command_line.petsc_args) petsc_argv.push_back(arg.data());
  petsc_argv.push_back(nullptr);
  int petsc_argc = static_cast<int>(command_line.petsc_args.size());
  char** petsc_argv_pointer = petsc_argv.data();
  fluence::Environment environment(&petsc_argc, &petsc_argv_pointer);
  return fluence::app::run_command(command_line);
}
