// The scan kernels' walk over a chunk of a row: register tiles of 4096 tokens
// with loads in flight, visited in groups of 4 (one Philox block).
#pragma once

#include "cuda/sample_common.cuh"

namespace nt::cuda {

// Runs on_tile(tile, x, last) over the chunk, one tile of 4096 tokens at a time
// (block-uniform; last: no tile follows). x[u][g] is token
// tile + (u * kScanThreads + threadIdx.x) * G + g; tokens past `end` read -inf.
// DEPTH register buffers rotate without copies, so DEPTH - 1 tiles stay in
// flight while one is consumed (DEPTH 2 for register-heavy callers).
template <nt_dtype DT, bool VEC, int DEPTH, class OnTile>
__device__ __forceinline__ void scan_tile_loop(const typename LogitTraits<DT>::Storage* row,
                                               int64_t begin, int64_t end, OnTile&& on_tile) {
  constexpr int G = group_tokens<DT, VEC>();
  constexpr int U = kTokensPerThread / G;
  // 32-bit positions (the vocabulary is below 2^31): 64-bit loop counters
  // cost the filtered scan its last free registers.
  const u32 first = u32(begin), stop = u32(end), tid = threadIdx.x;
  float buf[DEPTH][U][G];
  auto load = [&](u32 tile, float (&x)[U][G]) {
    if (tile >= stop) return;
#pragma unroll
    for (int u = 0; u < U; ++u)
      load_group<DT, VEC, true>(row, tile + (u * kScanThreads + tid) * G, end, x[u]);
  };
#pragma unroll
  for (int d = 0; d < DEPTH; ++d) load(first + u32(d * kTileTokens), buf[d]);
  for (u32 base = first; base < stop; base += u32(DEPTH * kTileTokens)) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      const u32 tile = base + u32(d * kTileTokens);
      if (tile >= stop) break;
      on_tile(tile, buf[d], tile + u32(kTileTokens) >= stop);
      load(tile + u32(DEPTH * kTileTokens), buf[d]);
    }
  }
}

// on_group(t0, x[4]) over a thread's tile in groups of 4 tokens (a Philox block).
template <int U, int G, class OnGroup>
__device__ __forceinline__ void for_each_group(u32 tile, const float (&x)[U][G],
                                               OnGroup&& on_group) {
  const u32 tid = threadIdx.x;
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int q = 0; q < G / 4; ++q) {
      const float x4[4] = {x[u][4 * q], x[u][4 * q + 1], x[u][4 * q + 2], x[u][4 * q + 3]};
      on_group(tile + (u * kScanThreads + tid) * G + 4 * q, x4);
    }
}

}  // namespace nt::cuda
