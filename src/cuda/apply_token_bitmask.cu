// nt_apply_token_bitmask on CUDA. Each thread owns 16-byte vectors of a row (4
// f32 or 8 f16/bf16 tokens) and the mask bits of those tokens: a fully allowed
// vector is not touched, a fully masked one is overwritten with -inf without
// being read, a mixed one is read, merged and written back whole (full sectors,
// not scattered element stores). Unaligned rows take the same path with scalar
// accesses, which never need a read. Mixed vectors are read with plain cached
// loads (not ld.global.cs: the kernel writes the line back). The 16-byte
// stores stream (st.global.cs); the scalar ones are plain.
#include <cstdint>

#include "core/check.h"
#include "core/half.h"
#include "cuda/load.cuh"
#include "cuda/ops.cuh"

namespace nt::cuda {
namespace {

constexpr const char* kOp = "apply_token_bitmask";
constexpr int kThreads = 256;
// Vectors a thread owns: 4 when the grid fills the GPU anyway, else 1, so that
// a few rows (a decode step at B = 1) spread over 4x the SMs: such a call is
// two round trips to memory in series, and more SMs keep more of them in flight.
constexpr int kVectorsPerThreadWide = 4;
// Each block waits on two round trips in series (mask words, then the mixed
// vectors), so throughput follows the blocks resident per SM: 6 (<= 40
// registers) instead of the 4 that 56 registers allowed.
constexpr int kMinBlocksPerSm = 6;
constexpr int kMaxGridRows = 65535;

template <nt_dtype DT>
constexpr uint32_t neg_inf_bits() {
  return DT == NT_F32 ? NT_F32_NEG_INF : DT == NT_F16 ? NT_F16_NEG_INF : NT_BF16_NEG_INF;
}

template <nt_dtype DT>
__device__ __forceinline__ typename LogitTraits<DT>::Storage neg_inf_value() {
  if constexpr (DT == NT_F32)
    return -INFINITY;
  else
    return uint16_t(neg_inf_bits<DT>());
}

struct MaskArgs {
  void* logits;
  int64_t logits_stride;
  int64_t vocab;
  const int32_t* bitmask;
  int64_t bitmask_stride;
  int64_t words;  // W' of the bitmask: tokens >= 32 W' are masked
  const void* indices;
  int indices_i64;
  int64_t selected;  // rows to mask: N with indices, else B
  int64_t rows;
};

// Mask bits of tokens [t, t + G), t a multiple of G (G divides 32).
template <int G>
__device__ __forceinline__ uint32_t mask_bits(const int32_t* mask_row, int64_t words, int64_t t) {
  const int64_t w = t >> 5;
  const uint32_t word = w < words ? uint32_t(__ldg(mask_row + w)) : 0u;
  return (word >> (t & 31)) & ((1u << G) - 1u);
}

template <nt_dtype DT, bool VEC, int VectorsPerThread>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    apply_token_bitmask_kernel(MaskArgs a) {
  using S = typename LogitTraits<DT>::Storage;
  constexpr int G = group_tokens<DT, VEC>();
  constexpr uint32_t kAll = (1u << G) - 1u;
  constexpr uint32_t kNegInf = neg_inf_bits<DT>();
  for (int64_t sel = blockIdx.y; sel < a.selected; sel += gridDim.y) {
    int64_t r = sel;
    if (a.indices) {
      r = a.indices_i64 ? static_cast<const int64_t*>(a.indices)[sel]
                        : static_cast<const int32_t*>(a.indices)[sel];
      if (r < 0 || r >= a.rows) continue;  // documented: out-of-range entries are skipped
    }
    S* row = static_cast<S*>(a.logits) + r * a.logits_stride;
    const int32_t* mask_row = a.bitmask + r * a.bitmask_stride;
    int64_t t[VectorsPerThread];
    uint32_t bits[VectorsPerThread];
#pragma unroll
    for (int u = 0; u < VectorsPerThread; ++u) {
      t[u] = ((int64_t(blockIdx.x) * VectorsPerThread + u) * kThreads + threadIdx.x) * G;
      bits[u] = t[u] < a.vocab ? mask_bits<G>(mask_row, a.words, t[u]) : kAll;
    }
    if constexpr (VEC) {
      uint4 v[VectorsPerThread];
#pragma unroll
      for (int u = 0; u < VectorsPerThread; ++u) {
        v[u] = make_uint4(0u, 0u, 0u, 0u);
        const bool whole = t[u] + G <= a.vocab;
        if (whole && bits[u] != 0u && bits[u] != kAll) v[u] = load16<false>(row + t[u]);
      }
#pragma unroll
      for (int u = 0; u < VectorsPerThread; ++u) {
        if (bits[u] == kAll) continue;
        if (t[u] + G <= a.vocab) {
          uint32_t w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
          if (bits[u] == 0u) {
#pragma unroll
            for (int j = 0; j < 4; ++j) w[j] = DT == NT_F32 ? kNegInf : (kNegInf | (kNegInf << 16));
          } else if constexpr (DT == NT_F32) {
#pragma unroll
            for (int j = 0; j < 4; ++j)
              if (!((bits[u] >> j) & 1u)) w[j] = kNegInf;
          } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              if (!((bits[u] >> (2 * j)) & 1u)) w[j] = (w[j] & 0xFFFF0000u) | kNegInf;
              if (!((bits[u] >> (2 * j + 1)) & 1u)) w[j] = (w[j] & 0x0000FFFFu) | (kNegInf << 16);
            }
          }
          __stcs(reinterpret_cast<uint4*>(row + t[u]), make_uint4(w[0], w[1], w[2], w[3]));
          continue;
        }
        for (int j = 0; j < G && t[u] + j < a.vocab; ++j)
          if (!((bits[u] >> j) & 1u)) row[t[u] + j] = neg_inf_value<DT>();
      }
    } else {
#pragma unroll
      for (int u = 0; u < VectorsPerThread; ++u) {
        if (bits[u] == kAll) continue;
#pragma unroll
        for (int j = 0; j < G; ++j)
          if (t[u] + j < a.vocab && !((bits[u] >> j) & 1u)) row[t[u] + j] = neg_inf_value<DT>();
      }
    }
  }
}

template <nt_dtype DT, bool VEC>
void launch(const MaskArgs& a, int sm_count, cudaStream_t stream) {
  constexpr int G = group_tokens<DT, VEC>();
  const int64_t vectors = (a.vocab + G - 1) / G;
  const int64_t rows = a.selected < kMaxGridRows ? a.selected : kMaxGridRows;
  auto blocks = [&](int per_thread) {
    const int64_t per_block = int64_t(kThreads) * per_thread;
    return (vectors + per_block - 1) / per_block;
  };
  if (blocks(kVectorsPerThreadWide) * rows >= sm_count) {
    apply_token_bitmask_kernel<DT, VEC, kVectorsPerThreadWide>
        <<<dim3(unsigned(blocks(kVectorsPerThreadWide)), unsigned(rows)), kThreads, 0, stream>>>(a);
  } else {
    apply_token_bitmask_kernel<DT, VEC, 1><<<dim3(unsigned(blocks(1)), unsigned(rows)), kThreads, 0, stream>>>(a);
  }
  check_launch(kOp);
}

}  // namespace

void CudaBackend::apply_token_bitmask(const nt_apply_token_bitmask_args& args,
                                      void* stream_handle) {
  const cudaStream_t stream = static_cast<cudaStream_t>(stream_handle);
  const nt_tensor& logits = args.logits;
  MaskArgs a{};
  a.logits = logits.data;
  a.rows = logits.shape[0];
  a.vocab = logits.shape[1];
  a.logits_stride = logits.row_stride;
  a.bitmask = static_cast<const int32_t*>(args.bitmask.data);
  a.bitmask_stride = args.bitmask.row_stride;
  a.words = args.bitmask.shape[1];
  a.indices = present(args.indices) ? args.indices.data : nullptr;
  a.indices_i64 = args.indices.dtype == NT_I64;
  a.selected = a.indices ? args.indices.shape[0] : a.rows;
  if (a.selected == 0 || a.rows == 0) return;
  DeviceScope scope(logits.device_id, kOp);
  const int sm_count = device_limits(logits.device_id, kOp).sm_count;
  with_logit_layout(logits.dtype, rows_16b_aligned(logits), [&](auto layout) {
    launch<decltype(layout)::kDtype, decltype(layout)::kVec>(a, sm_count, stream);
  });
}

}  // namespace nt::cuda
