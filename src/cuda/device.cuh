// Host-side utilities every CUDA op uses: runtime errors as nt::Error, the
// device a call runs on, the device's limits, shared-memory opt-in and
// workspace alignment.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "core/error.h"

namespace nt::cuda {

// Turns a CUDA runtime error into nt::Error naming the op.
inline void check_cuda(cudaError_t err, const char* op) {
  if (err != cudaSuccess) fail(NT_ERROR_BACKEND, std::string(op) + ": CUDA error: " + cudaGetErrorString(err));
}

// The launch just made on this thread was accepted.
inline void check_launch(const char* op) { check_cuda(cudaGetLastError(), op); }

// Makes the tensors' device current for the scope of an op and restores the
// caller's afterwards.
class DeviceScope {
 public:
  DeviceScope(int device, const char* op) {
    check_cuda(cudaGetDevice(&previous_), op);
    if (previous_ == device) previous_ = -1;
    else check_cuda(cudaSetDevice(device), op);
  }
  ~DeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

struct DeviceLimits {
  int sm_count = 0;
  int cc_major = 0;
  int max_smem_optin = 0;  // bytes of dynamic + static shared memory a block may opt into
};

// The limits of `device`, read once per device and process.
inline DeviceLimits device_limits(int device, const char* op) {
  constexpr int kMaxDevices = 64;
  static std::mutex mutex;
  static DeviceLimits cache[kMaxDevices];
  if (device < 0 || device >= kMaxDevices) fail(NT_ERROR_BACKEND, std::string(op) + ": device id out of range");
  std::lock_guard<std::mutex> lock(mutex);
  DeviceLimits& d = cache[device];
  if (d.sm_count == 0) {
    DeviceLimits read;
    check_cuda(cudaDeviceGetAttribute(&read.cc_major, cudaDevAttrComputeCapabilityMajor, device), op);
    check_cuda(cudaDeviceGetAttribute(&read.max_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), op);
    check_cuda(cudaDeviceGetAttribute(&read.sm_count, cudaDevAttrMultiProcessorCount, device), op);
    d = read;
  }
  return d;
}

// Raises a kernel's dynamic shared-memory limit to `bytes` once per
// (kernel, device, bytes).
template <class Kernel>
void allow_dynamic_smem(Kernel kernel, int bytes, int device, const char* op) {
  static std::mutex mutex;
  static std::set<std::pair<const void*, std::pair<int, int>>> done;
  const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), std::make_pair(device, bytes));
  std::lock_guard<std::mutex> lock(mutex);
  if (done.count(key) != 0) return;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), op);
  done.insert(key);
}

// Whether `kernel`'s code on `device` came from sm_90+ sources: a build
// without sm_90 code runs on Hopper from older PTX, in which the copy engine's
// instructions (bulk copies, mbarriers) are absent. Asked once per
// (kernel, device); `device` must be current.
inline bool kernel_has_sm90_code(const void* kernel, int device) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, bool> known;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(kernel, device);
  if (auto it = known.find(key); it != known.end()) return it->second;
  cudaFuncAttributes attr{};
  const bool built = cudaFuncGetAttributes(&attr, kernel) == cudaSuccess && attr.ptxVersion >= 90;
  (void)cudaGetLastError();
  known.emplace(key, built);
  return built;
}

inline size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Workspace pointers arrive with any alignment; layouts start 256-aligned
// inside the kWorkspaceSlack bytes a size query adds.
constexpr size_t kWorkspaceSlack = 256;
inline char* aligned_workspace(void* workspace) {
  return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(workspace) + 255) & ~uintptr_t(255));
}

}  // namespace nt::cuda
