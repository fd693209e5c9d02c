// The CUDA backend's operations, one source file each (cuda/<op>.cu); device
// templates live in headers beside them.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace nt::cuda {

// Turns a CUDA runtime error into nt::Error naming the op.
inline void check_cuda(cudaError_t err, const char* op) {
  if (err != cudaSuccess)
    fail(NT_ERROR_BACKEND, std::string(op) + ": CUDA error: " + cudaGetErrorString(err));
}

}  // namespace nt::cuda
