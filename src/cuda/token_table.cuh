// What the penalty and logit-bias kernels share: CSR rows of ids as the device
// reads them (clamped, core/penalties.h), the block-wide check that the lists
// are valid CSRs, an open-addressing table of ids (keys = id + 1, claimed by
// atomicCAS, linear probing, at most half full), the logits' element type, and
// on the host the launch: its table size and one CTA per row.
//
// One CTA handles one row. Its table lives in shared memory when twice the
// row's ids fit the launch's table (sized from the shapes only: 3x the mean
// row, within the device's opt-in limit), else in the workspace at twice the
// row's CSR position, where rows never share slots provided every list is a
// valid CSR (offsets[0] >= 0, non-decreasing, offsets[B] <= N). When it is
// not (device data: the host cannot know), a long row takes the exact
// table-free path instead, O(n^2) in its ids: meant for broken inputs only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/penalties.h"
#include "cuda/device.cuh"
#include "cuda/load.cuh"
#include "nexttok/nexttok.h"

namespace nt::cuda::table {

// A CSR list as a kernel reads it; offsets == nullptr: absent (rows empty).
struct List {
  const void* offsets = nullptr;
  const int32_t* ids = nullptr;
  int64_t n = 0;
  int i64 = 0;
};

inline List list_of(const nt_token_lists& l) {
  List out;
  if (l.offsets.data == nullptr) return out;
  out.offsets = l.offsets.data;
  out.ids = static_cast<const int32_t*>(l.ids.data);
  out.n = l.ids.shape[0];
  out.i64 = l.offsets.dtype == NT_I64;
  return out;
}

__device__ __forceinline__ int64_t offset_at(const List& l, int64_t i) {
  return l.i64 ? __ldg(static_cast<const int64_t*>(l.offsets) + i)
               : int64_t(__ldg(static_cast<const int32_t*>(l.offsets) + i));
}

// Row b's clamped range [*lo, *hi); empty when the list is absent.
__device__ __forceinline__ void row_range(const List& l, int64_t b, int64_t* lo, int64_t* hi) {
  *lo = *hi = 0;
  if (l.offsets == nullptr) return;
  *lo = nt_csr_clamp(offset_at(l, b), 0, l.n);
  *hi = nt_csr_clamp(offset_at(l, b + 1), *lo, l.n);
}

// The row's CSR start as given (0 when absent); meaningful when the list is valid.
__device__ __forceinline__ int64_t row_start(const List& l, int64_t b) {
  return l.offsets == nullptr ? 0 : offset_at(l, b);
}

template <int T>
__device__ __forceinline__ bool share_valid(const List& l, int64_t rows) {
  if (l.offsets == nullptr) return true;
  for (int64_t i = threadIdx.x; i <= rows; i += T) {
    const int64_t v = offset_at(l, i);
    if (i == 0 && v < 0) return false;
    if (i == rows ? v > l.n : offset_at(l, i + 1) < v) return false;
  }
  return true;
}

// Block-wide (every thread must call): both lists are valid CSRs.
template <int T>
__device__ __forceinline__ bool lists_valid(const List& x, const List& y, int64_t rows) {
  return __syncthreads_and(share_valid<T>(x, rows) && share_valid<T>(y, rows)) != 0;
}

// The slot of key in keys[0, cap), claimed if new (shared or global memory).
__device__ __forceinline__ uint32_t claim(uint32_t* keys, uint32_t cap, uint32_t key) {
  uint32_t s = nt_table_home(key, cap);
  for (;;) {
    const uint32_t k = atomicCAS(keys + s, 0u, key);
    if (k == 0u || k == key) return s;
    s = (s + 1u == cap) ? 0u : s + 1u;
  }
}

// A table word after the block's barrier: shared memory, or the workspace read
// past L1 (other threads' atomics were performed in L2).
template <bool SHARED>
__device__ __forceinline__ uint32_t read_slot(const uint32_t* p) {
  if constexpr (SHARED)
    return *p;
  else
    return __ldcg(p);
}

template <nt_dtype DT>
using Elem = typename LogitTraits<DT>::Storage;

// y (already rounded to the dtype) as the dtype's bits.
template <nt_dtype DT>
__device__ __forceinline__ Elem<DT> narrow(float y) {
  if constexpr (DT == NT_F32)
    return y;
  else if constexpr (DT == NT_F16)
    return uint16_t(nt_f32_to_f16(y));
  else
    return uint16_t(nt_f32_to_bf16(y));
}

// ---- host: launch sizing ----------------------------------------------------

constexpr int kMinTableSlots = 1024;
constexpr int kSmemReserve = 1024;  // static shared memory and the runtime's own

// Slots of the launch's shared-memory table: 3x the mean row (so rows up to
// 1.5x the mean fit at half load), at least kMinTableSlots, within the
// device's opt-in limit.
inline uint32_t shared_slots(int64_t ids, int64_t rows, int slot_bytes, const DeviceLimits& d) {
  const int64_t mean = (ids + rows - 1) / rows;
  int64_t want = 3 * mean;
  want = want < kMinTableSlots ? kMinTableSlots : (want + 31) / 32 * 32;
  const int64_t limit = (int64_t(d.max_smem_optin) - kSmemReserve) / slot_bytes;
  return uint32_t(want < limit ? want : limit);
}

// A per-row parameter array must be device memory of the logits' device (or
// memory the device can read: managed, pinned host). The driver is asked only
// while the stream is not capturing a graph: a captured call asks it nothing,
// and its arrays go unchecked.
inline void check_per_row(const char* op, const char* arg, const void* p, int device,
                          bool capturing) {
  if (p == nullptr || capturing) return;
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    fail_argument(op, arg, std::string("is not memory the CUDA runtime knows (") +
                               cudaGetErrorString(e) + ")");
  }
  if (attr.type == cudaMemoryTypeUnregistered)
    fail_argument(op, arg, "points to host memory; a per-row array must be on the logits' device cuda:" +
                               std::to_string(device));
  if (attr.type == cudaMemoryTypeDevice && attr.device != device)
    fail_argument(op, arg, "is on cuda:" + std::to_string(attr.device) + " but 'logits' is on cuda:" +
                               std::to_string(device));
}

inline bool stream_capturing(cudaStream_t stream, const char* op) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream, &status), op);
  return status != cudaStreamCaptureStatusNone;
}

// Launches one CTA per row: kernel = pick(dtype, threads), both as integral
// constants (the logits' dtype; 256 threads a CTA for rows of at least 512
// ids on average, else 128), with `smem` bytes of dynamic shared memory.
template <class Args, class Pick>
void launch_rows(const char* op, nt_dtype dtype, int64_t ids, int64_t rows, size_t smem,
                 int device, cudaStream_t stream, const Args& args, Pick&& pick) {
  const int64_t mean_ids = (ids + rows - 1) / rows;
  auto by_threads = [&](auto dt) {
    auto launch = [&](auto threads) {
      auto kernel = pick(dt, threads);
      if (smem > 48 * 1024) allow_dynamic_smem(kernel, int(smem), device, op);
      kernel<<<unsigned(rows), decltype(threads)::value, smem, stream>>>(args);
      check_launch(op);
    };
    if (mean_ids >= 512) launch(std::integral_constant<int, 256>{});
    else launch(std::integral_constant<int, 128>{});
  };
  switch (dtype) {
    case NT_F32: by_threads(std::integral_constant<nt_dtype, NT_F32>{}); break;
    case NT_F16: by_threads(std::integral_constant<nt_dtype, NT_F16>{}); break;
    case NT_BF16: by_threads(std::integral_constant<nt_dtype, NT_BF16>{}); break;
    default: fail_argument(op, "logits", "has an unsupported dtype");
  }
}

}  // namespace nt::cuda::table
