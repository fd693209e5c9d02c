// Registers the CPU backend (cpu/ops.h).
#include "cpu/ops.h"

namespace nt {

Backend* cpu_backend() {
  static cpu::CpuBackend backend;
  return &backend;
}

}  // namespace nt
