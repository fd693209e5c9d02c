// quantize_activations on CUDA, one CTA per row: scale = max|x| / 127 over the
// non-NaN entries (1 when that max is 0), q = clamp(rint(x / scale), +-127)
// with IEEE fp32 division and round-half-even; a NaN quotient (a NaN entry,
// or inf / inf) quantizes to 0. Bit-identical to the CPU backend.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/lm_head_device.cuh"
#include "cuda/lm_head_host.cuh"
#include "cuda/lm_head_ops.cuh"

namespace nt::cuda {
namespace {

constexpr int kThreads = 256;

template <nt_dtype kType>
__global__ void __launch_bounds__(kThreads) quantize_kernel(const void* x, int64_t x_stride_bytes,
                                                            int8_t* q, int64_t q_stride,
                                                            float* scale, int64_t cols) {
  __shared__ float warp_max[kThreads / 32];
  const int64_t m = blockIdx.x;
  const void* row = static_cast<const char*>(x) + m * x_stride_bytes;
  float amax = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
    const float v = fabsf(lm_head::widen(row, kType, j));
    if (v > amax) amax = v;  // false for NaN: NaN entries are skipped
  }
  for (int d = 16; d > 0; d >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, d));
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = amax;
  __syncthreads();
  amax = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) amax = fmaxf(amax, warp_max[w]);
  const float s = amax == 0.0f ? 1.0f : __fdiv_rn(amax, 127.0f);
  int8_t* out = q + m * q_stride;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
    const float r = rintf(__fdiv_rn(lm_head::widen(row, kType, j), s));
    out[j] = isnan(r) ? int8_t(0) : int8_t(fminf(fmaxf(r, -127.0f), 127.0f));
  }
  if (threadIdx.x == 0) scale[m] = s;
}

}  // namespace

void quantize_activations(const nt_quantize_activations_args& a, cudaStream_t stream) {
  constexpr const char* op = "quantize_activations";
  const int64_t rows = a.x.shape[0], cols = a.x.shape[1];
  if (rows == 0) return;
  lm_head::require_natural_alignment(op, "x", a.x);
  lm_head::require_natural_alignment(op, "act_scale", a.act_scale);
  DeviceScope guard(a.x.device_id, op);
  const int64_t x_stride = rows > 1 ? a.x.row_stride * int64_t(dtype_size(a.x.dtype)) : 0;
  const int64_t q_stride = rows > 1 ? a.act_q.row_stride : 0;
  int8_t* q = static_cast<int8_t*>(a.act_q.data);
  float* scale = static_cast<float*>(a.act_scale.data);
  const unsigned grid = static_cast<unsigned>(rows);
  switch (a.x.dtype) {
    case NT_F32:
      quantize_kernel<NT_F32><<<grid, kThreads, 0, stream>>>(a.x.data, x_stride, q, q_stride, scale, cols);
      break;
    case NT_BF16:
      quantize_kernel<NT_BF16><<<grid, kThreads, 0, stream>>>(a.x.data, x_stride, q, q_stride, scale, cols);
      break;
    default:
      quantize_kernel<NT_F16><<<grid, kThreads, 0, stream>>>(a.x.data, x_stride, q, q_stride, scale, cols);
      break;
  }
  check_launch(op);
}

}  // namespace nt::cuda
