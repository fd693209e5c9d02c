// The CUDA backend's operations, one source file each (cuda/<op>.cu); device
// templates live in headers beside them.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "core/error.h"
#include "nexttok/nexttok.h"

namespace nt::cuda {

// Turns a CUDA runtime error into nt::Error naming the op.
inline void check_cuda(cudaError_t err, const char* op) {
  if (err != cudaSuccess)
    fail(NT_ERROR_BACKEND, std::string(op) + ": CUDA error: " + cudaGetErrorString(err));
}

// Whether `kernel`'s code on `device` came from sm_90+ sources: a build without
// sm_90 code runs on Hopper from older PTX, in which the copy engine's
// instructions (bulk copies, mbarriers) compiled to nothing. `known` caches
// the answer per device (0 unknown, 1 no, 2 yes).
inline bool kernel_has_sm90_code(const void* kernel, int device, std::atomic<int> (&known)[64]) {
  if (device >= 0 && device < 64 && known[device].load() != 0) return known[device].load() == 2;
  cudaFuncAttributes attr{};
  const bool built = cudaFuncGetAttributes(&attr, kernel) == cudaSuccess && attr.ptxVersion >= 90;
  (void)cudaGetLastError();
  if (device >= 0 && device < 64) known[device].store(built ? 2 : 1);
  return built;
}

// Makes the tensors' device current for the scope of an op and restores the
// caller's afterwards.
class DeviceScope {
 public:
  DeviceScope(int device, const char* op) {
    check_cuda(cudaGetDevice(&previous_), op);
    if (previous_ == device) {
      previous_ = -1;
    } else {
      check_cuda(cudaSetDevice(device), op);
    }
  }
  ~DeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

// Grammar mask (cuda/apply_token_bitmask.cu, cuda/bitmask_from_allowed.cu).
void apply_token_bitmask(const nt_apply_token_bitmask_args& a, cudaStream_t stream);
void bitmask_from_allowed(const nt_bitmask_from_allowed_args& a, cudaStream_t stream);

// Sampling (cuda/sample.cu); the workspace layout depends on B, V and the
// device's multiprocessor count only.
size_t sample_workspace_size(const nt_sample_args& a);
void sample(const nt_sample_args& a, void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace nt::cuda
