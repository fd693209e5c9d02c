// pack_weights on CUDA: int8 signs [V, H] -> int32 [V, H/32], bit j of word w
// set iff signs[v, 32w + j] > 0. One warp per word: lane j reads byte j (a
// coalesced 32-byte segment) and the ballot is the word.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/lm_head_host.cuh"
#include "cuda/lm_head_ops.cuh"

namespace nt::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) pack_weights_kernel(const int8_t* signs,
                                                                int64_t signs_stride, int32_t* wq,
                                                                int64_t wq_stride, int64_t rows,
                                                                int64_t words) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t(gridDim.x) * (kThreads / 32);
  for (int64_t w = int64_t(blockIdx.x) * (kThreads / 32) + (threadIdx.x >> 5); w < rows * words;
       w += warps) {
    const int64_t v = w / words, c = w - v * words;
    const unsigned bits = __ballot_sync(0xffffffffu, signs[v * signs_stride + 32 * c + lane] > 0);
    if (lane == 0) wq[v * wq_stride + c] = static_cast<int32_t>(bits);
  }
}

}  // namespace

void pack_weights(const nt_pack_weights_args& a, cudaStream_t stream) {
  constexpr const char* op = "pack_weights";
  const int64_t rows = a.signs.shape[0], words = a.signs.shape[1] / 32;
  if (rows == 0) return;
  lm_head::require_natural_alignment(op, "wq", a.wq);
  DeviceScope guard(a.signs.device_id, op);
  const DeviceLimits dev = device_limits(a.signs.device_id, op);
  const int64_t blocks_needed = (rows * words + kThreads / 32 - 1) / (kThreads / 32);
  const int grid = static_cast<int>(std::min<int64_t>(blocks_needed, int64_t(dev.sm_count) * 16));
  pack_weights_kernel<<<grid, kThreads, 0, stream>>>(
      static_cast<const int8_t*>(a.signs.data), rows > 1 ? a.signs.row_stride : 0,
      static_cast<int32_t*>(a.wq.data), rows > 1 ? a.wq.row_stride : 0, rows, words);
  check_launch(op);
}

}  // namespace nt::cuda
