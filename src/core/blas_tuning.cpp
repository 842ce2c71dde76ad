#include "fluence/core/blas_tuning.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

extern "C" char* openblas_get_corename(void);

namespace fluence {

namespace {
std::string cpu_flags() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("flags", 0) == 0) return line + " ";
  return "";
}
}  // namespace

void select_blas_core(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("FLUENCE_KEEP_BLAS_CORE")) return;
  const char* core = openblas_get_corename();
  if (!core || std::strcmp(core, "Prescott") != 0) return;
  const std::string flags = cpu_flags();
  const char* better = flags.find(" avx512f ") != std::string::npos ? "SkylakeX"
                       : flags.find(" avx2 ") != std::string::npos  ? "Haswell"
                                                                    : nullptr;
  if (!better) return;
  setenv("OPENBLAS_CORETYPE", better, 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then carry on with the slow kernels
}

}  // namespace fluence
