// Device primitives of the LM-head kernels: tensor-core MMAs and streaming
// loads (sm_80+: the host never launches the kernels that use them on an
// older device; the asynchronous copies are in cuda/async_copy.cuh), and
// small helpers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/half.h"
#include "cuda/async_copy.cuh"
#include "cuda/topk_cta.cuh"
#include "nexttok/nexttok.h"

namespace nt::cuda::lm_head {

// 16 bytes the kernel reads once: skip L1.
__device__ __forceinline__ uint4 ldg_stream(const void* p) {
  uint4 r;
#if __CUDA_ARCH__ >= 800
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
#else
  r = *static_cast<const uint4*>(p);
#endif
  return r;
}

// D = A * B + C, m16n8k16, bf16 or f16 inputs, f32 accumulators.
template <bool kBf16>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1, const float (&c)[4]) {
#if __CUDA_ARCH__ >= 800
#define NT_MMA_16816(TY)                                                                         \
  asm("mma.sync.aligned.m16n8k16.row.col.f32." TY "." TY ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, " \
      "{%8,%9}, {%10,%11,%12,%13};\n"                                                           \
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                          \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),      \
        "f"(c[2]), "f"(c[3]))
  if (kBf16) NT_MMA_16816("bf16");
  else NT_MMA_16816("f16");
#undef NT_MMA_16816
#endif
}

// D = A * B + C, m16n8k32, A unsigned bytes, B signed bytes, s32 accumulators
// (exact: integer MMAs wrap, they never round).
__device__ __forceinline__ void mma_u8s8_16832(int32_t (&d)[4], const uint32_t (&a)[4],
                                               uint32_t b0, uint32_t b1, const int32_t (&c)[4]) {
#if __CUDA_ARCH__ >= 800
  asm(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%11,%12,%13};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c[0]), "r"(c[1]),
        "r"(c[2]), "r"(c[3]));
#endif
}

// D = A * B + C, m16n8k128 over bits: D[i][j] += popcount(A row i AND B
// column j), exact. A holds two words (rows g and g + 8, bits 32t..32t+31 of
// K), B one word (column g, the same K bits); the bit order within a word is
// the same for both, so any packing that A and B share is a valid K order.
__device__ __forceinline__ void mma_and_popc_168128(int32_t (&d)[4], uint32_t a0, uint32_t a1,
                                                    uint32_t b, const int32_t (&c)[4]) {
#if __CUDA_ARCH__ >= 800
  asm(
      "mma.sync.aligned.m16n8k128.row.col.s32.b1.b1.s32.and.popc {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%7,%8,%9,%10};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a0), "r"(a1), "r"(b), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
#endif
}

// An element of an f32/f16/bf16 vector widened exactly to f32.
__device__ __forceinline__ float widen(const void* data, nt_dtype dtype, int64_t i) {
  switch (dtype) {
    case NT_F16: return nt_f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case NT_BF16: return nt_bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    default: return static_cast<const float*>(data)[i];
  }
}

struct BiasArgs {
  const void* data;  // nullptr: no bias
  nt_dtype dtype;
};

__device__ __forceinline__ float add_bias(float score, const BiasArgs& b, int64_t v) {
  return b.data != nullptr ? score + widen(b.data, b.dtype, v) : score;
}

// The fallback kernels' walk (kGenericThreads threads, p their parameters):
// the CTA's vocabulary range in tiles of 64 rows x up to 64 token rows, thread
// (ty, tx) = (tid / 16, tid % 16) owning rows tile_row0 + 4ty + i of token
// rows 4tx + j. score(tile_row0, row_end, ty, tx, acc) accumulates the 4 x 4
// block, and finish(acc[i][j], m, row) is the score the walk's top-k is
// offered (with kScores, stored).
constexpr int kGenericThreads = 256;
constexpr int kGenericTileRows = 64;
template <bool kScores, class Params, class Score, class Finish>
__device__ __forceinline__ void generic_tiles(const Params& p, Score&& score, Finish&& finish) {
  __shared__ topk::CtaShared<kGenericThreads / 32> topk_shared;
  topk::SinkOf<kScores, kGenericThreads / 32> topk(topk_shared, p.cand, p.rows);
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const int row_begin = blockIdx.x * p.rows_per_cta;
  const int row_end = min(p.vocab, row_begin + p.rows_per_cta);
  const int n_tiles = (row_end - row_begin + kGenericTileRows - 1) / kGenericTileRows;
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int tile_row0 = row_begin + tile * kGenericTileRows;
    float acc[4][4] = {};
    score(tile_row0, row_end, ty, tx, acc);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int row = tile_row0 + ty * 4 + i, m = tx * 4 + j;
        if (row < row_end && m < p.rows) topk.offer(m, finish(acc[i][j], m, row), row);
      }
    topk.end_tile(kGenericTileRows, tile == n_tiles - 1);
  }
}

}  // namespace nt::cuda::lm_head
