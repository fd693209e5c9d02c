// nt_bitmask_from_allowed on CUDA: one thread per mask word, reading its 32
// bool bytes with two 16-byte loads where the rows are aligned. Bits of tokens
// past V are 0; any nonzero byte counts as allowed.
#include <cstdint>

#include "core/check.h"
#include "cuda/ops.cuh"

namespace nt::cuda {
namespace {

constexpr const char* kOp = "bitmask_from_allowed";
constexpr int kThreads = 256;
constexpr int kMaxGridRows = 65535;

struct PackArgs {
  const uint8_t* allowed;
  int64_t allowed_stride;
  int64_t vocab;
  int32_t* bitmask;
  int64_t bitmask_stride;
  int64_t words;
  int64_t rows;
};

__device__ __forceinline__ uint32_t nonzero_bytes(uint32_t x) {
  uint32_t bits = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) bits |= ((x >> (8 * k)) & 0xFFu) ? (1u << k) : 0u;
  return bits;
}

template <bool VEC>
__global__ void __launch_bounds__(kThreads) bitmask_from_allowed_kernel(PackArgs a) {
  const int64_t w = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (w >= a.words) return;
  const int64_t t = w * 32;
  for (int64_t r = blockIdx.y; r < a.rows; r += gridDim.y) {
    const uint8_t* src = a.allowed + r * a.allowed_stride + t;
    uint32_t bits = 0;
    if (VEC && t + 32 <= a.vocab) {
      const uint4 lo = __ldcs(reinterpret_cast<const uint4*>(src));
      const uint4 hi = __ldcs(reinterpret_cast<const uint4*>(src + 16));
      const uint32_t q[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) bits |= nonzero_bytes(q[j]) << (4 * j);
    } else {
      for (int j = 0; j < 32 && t + j < a.vocab; ++j) bits |= src[j] ? (1u << j) : 0u;
    }
    a.bitmask[r * a.bitmask_stride + w] = int32_t(bits);
  }
}

}  // namespace

void CudaBackend::bitmask_from_allowed(const nt_bitmask_from_allowed_args& args,
                                       void* stream_handle) {
  const cudaStream_t stream = static_cast<cudaStream_t>(stream_handle);
  PackArgs a{};
  a.allowed = static_cast<const uint8_t*>(args.allowed.data);
  a.allowed_stride = args.allowed.row_stride;
  a.rows = args.allowed.shape[0];
  a.vocab = args.allowed.shape[1];
  a.bitmask = static_cast<int32_t*>(args.bitmask.data);
  a.bitmask_stride = args.bitmask.row_stride;
  a.words = args.bitmask.shape[1];
  if (a.rows == 0 || a.words == 0) return;
  DeviceScope scope(args.allowed.device_id, kOp);
  const bool vec = rows_16b_aligned(args.allowed);
  const dim3 grid(unsigned((a.words + kThreads - 1) / kThreads),
                  unsigned(a.rows < kMaxGridRows ? a.rows : kMaxGridRows));
  if (vec)
    bitmask_from_allowed_kernel<true><<<grid, kThreads, 0, stream>>>(a);
  else
    bitmask_from_allowed_kernel<false><<<grid, kThreads, 0, stream>>>(a);
  check_launch(kOp);
}

}  // namespace nt::cuda
