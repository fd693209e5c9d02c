// Host-side utilities every CUDA op uses: runtime errors as nt::Error, the
// device a call runs on, the device's limits, kernel attributes set once
// (shared-memory opt-in, large clusters), the alignment rows share (vector
// access, kernel choice) and workspace alignment.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "core/check.h"
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

// compute() once per key and process, under a lock (each call site has its
// own cache): kernel attributes and device properties asked of every call.
template <class Key, class Compute>
auto once_per(const Key& key, Compute&& compute) {
  static std::mutex mutex;
  static std::map<Key, decltype(compute())> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(key); it != known.end()) return it->second;
  return known.emplace(key, compute()).first->second;
}

struct DeviceLimits {
  int sm_count = 0;
  int cc_major = 0;
  int max_smem_optin = 0;  // bytes of dynamic + static shared memory a block may opt into
};

// The limits of `device`, read once per device and process.
inline DeviceLimits device_limits(int device, const char* op) {
  return once_per(device, [&] {
    DeviceLimits d;
    check_cuda(cudaDeviceGetAttribute(&d.cc_major, cudaDevAttrComputeCapabilityMajor, device), op);
    check_cuda(cudaDeviceGetAttribute(&d.max_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), op);
    check_cuda(cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, device), op);
    return d;
  });
}

// Sets a kernel attribute once per (kernel, device, attribute, value).
template <class Kernel>
void set_attribute_once(Kernel kernel, cudaFuncAttribute attribute, int value, int device,
                        const char* op) {
  once_per(std::make_tuple(reinterpret_cast<const void*>(kernel), device, int(attribute), value), [&] {
    check_cuda(cudaFuncSetAttribute(kernel, attribute, value), op);
    return true;
  });
}

// Raises a kernel's dynamic shared-memory limit to `bytes` once per
// (kernel, device, bytes).
template <class Kernel>
void allow_dynamic_smem(Kernel kernel, int bytes, int device, const char* op) {
  set_attribute_once(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes, device, op);
}

// Lets a kernel launch clusters above the portable 8 CTAs, once per (kernel, device).
template <class Kernel>
void allow_nonportable_clusters(Kernel kernel, int device, const char* op) {
  set_attribute_once(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1, device, op);
}

// How many blocks of `threads` threads (and `dynamic_smem` bytes) of `kernel`
// one multiprocessor holds at once, asked once per (kernel, device); at least 1.
template <class Kernel>
int resident_blocks(Kernel kernel, int threads, size_t dynamic_smem, int device, const char* op) {
  return once_per(std::make_tuple(reinterpret_cast<const void*>(kernel), device, threads, dynamic_smem),
                  [&] {
                    int blocks = 0;
                    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads,
                                                                            dynamic_smem),
                               op);
                    return std::max(blocks, 1);
                  });
}

// Byte alignment every row of a 2-D view shares, up to 256: the largest power
// of two dividing the base and, for more than one row, the row stride (the
// stride is ignored for a single row, as core/check.cpp does).
inline int64_t row_alignment(const nt_tensor& t) {
  const int64_t elt = static_cast<int64_t>(dtype_size(t.dtype));
  int64_t a = static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data) & 255u);
  a = a == 0 ? 256 : a & -a;
  if (t.ndim == 2 && t.shape[0] > 1) {
    const int64_t stride = (t.row_stride * elt) & 255;
    if (stride != 0) a = std::min(a, stride & -stride);
  }
  return a;
}

// Every row of `t` starts 16-byte aligned, so rows may be read and written 16
// bytes at a time.
inline bool rows_16b_aligned(const nt_tensor& t) { return row_alignment(t) >= 16; }

// Whether `kernel`'s code on `device` came from sm_90+ sources: a build
// without sm_90 code runs on Hopper from older PTX, in which the copy engine's
// instructions (bulk copies, mbarriers) are absent. Asked once per
// (kernel, device); `device` must be current.
inline bool kernel_has_sm90_code(const void* kernel, int device) {
  return once_per(std::make_pair(kernel, device), [&] {
    cudaFuncAttributes attr{};
    const bool built = cudaFuncGetAttributes(&attr, kernel) == cudaSuccess && attr.ptxVersion >= 90;
    (void)cudaGetLastError();
    return built;
  });
}

inline size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Workspace pointers arrive with any alignment; layouts start 256-aligned
// inside the kWorkspaceSlack bytes a size query adds.
constexpr size_t kWorkspaceSlack = 256;
inline char* aligned_workspace(void* workspace) {
  return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(workspace) + 255) & ~uintptr_t(255));
}

}  // namespace nt::cuda
