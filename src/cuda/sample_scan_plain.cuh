// Kernel 1 of nt_sample for plain rows (temperature only): Gumbel-max over one
// chunk of one row, with pruning (sample_common.cuh, core/word_floor.h).
#pragma once

#include <cub/block/block_reduce.cuh>

#include "cuda/sample_common.cuh"
#include "cuda/sample_tiles.cuh"

namespace nt::cuda {

// Gumbel-max over a thread's tile. Philox runs for the thread's groups
// together, once any lane of the warp has a group that may still win. The
// tokens whose words then reach their group's floor are taken one per lane
// per round (the exact score and the two logs once per round). After each
// round the lanes share their bounds (every bound is a value some token
// reached).
template <int U, int G>
__device__ __forceinline__ void gumbel_tile(GumbelBest& g, const RowCfg& c, const u32* floors,
                                            u32 tile, const float (&x)[U][G]) {
  constexpr int N = U * G;
  constexpr int kGroups = N / 4;
  static_assert(N <= 32 && N % 4 == 0, "pending tokens are one bit each, groups of 4");
  const u32 tid = threadIdx.x;
  u32 word[N];
  u32 pending = 0;
  float s_top[kGroups];
  bool needed[kGroups];
  bool any_needed = false;
#pragma unroll
  for (int q = 0; q < kGroups; ++q) {
    const float* x4 = &x[(4 * q) / G][(4 * q) % G];
    s_top[q] = score_upper(fmaxf(fmaxf(x4[0], x4[1]), fmaxf(x4[2], x4[3])), c);
    needed[q] = s_top[q] + NT_GUMBEL_MAX >= g.bound;  // false for a group of NaNs
    any_needed |= needed[q];
  }
  if (!__any_sync(kFullMask, any_needed)) return;
  const float floor_base = word_floor_base(g.bound);
#pragma unroll
  for (int q = 0; q < kGroups; ++q) {
    const int u = (4 * q) / G, j0 = (4 * q) % G;
    const u32 t0 = tile + (u32(u) * kScanThreads + tid) * G + u32(j0);
    const nt_philox_block b = nt_token_block(c.seed, c.offset, c.tag, t0 >> 2);
    const u32 floor = word_floor_at(floors, floor_base, s_top[q]);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      word[4 * q + j] = b.v[j];
      if (needed[q] && b.v[j] >= floor) pending |= 1u << (4 * q + j);
    }
  }
  while (__any_sync(kFullMask, pending != 0)) {
    if (pending != 0) {
      const int i = __ffs(pending) - 1;
      pending &= pending - 1;
      float xi = 0.0f;
      u32 wi = 0;
#pragma unroll
      for (int k = 0; k < N; ++k)  // selects, not a dynamically indexed (local) array
        if (k == i) {
          xi = x[k / G][k % G];
          wi = word[k];
        }
      // The bound may have risen since the word was checked; this token's
      // own score bound is tighter than its group's.
      if (wi >= word_floor(floors, g.bound, score_upper(xi, c))) {
        const u32 t = tile + (u32(i / G) * kScanThreads + tid) * G + u32(i % G);
        gumbel_token(g, c, xi, wi, t, [](float, u32) { return true; });
      }
    }
    g.bound = warp_max(g.bound);
  }
}

template <nt_dtype DT, bool VEC, int DEPTH>
__device__ void scan_plain(const SampleArgs& a, const RowCfg& c, u32 row, int chunk,
                           const typename LogitTraits<DT>::Storage* rowp, int64_t begin,
                           int64_t end) {
  using ReduceU64 = cub::BlockReduce<u64, kScanThreads>;
  using ReduceU32 = cub::BlockReduce<u32, kScanThreads>;
  __shared__ u32 floors[kWordFloorSlots];
  __shared__ u32 shared_key;  // the highest bound (as a key) any warp has published
  __shared__ union {
    typename ReduceU64::TempStorage r64;
    typename ReduceU32::TempStorage r32;
  } tmp;
  build_word_floors<kScanThreads>(floors);
  if (threadIdx.x == 0) shared_key = NT_KEY_NEG_INF;
  __syncthreads();
  GumbelBest g;
  scan_tile_loop<DT, VEC, DEPTH>(rowp, begin, end, [&](u32 tile, const auto& x, bool last) {
    gumbel_tile(g, c, floors, tile, x);
    if (last) return;
    // The warps share their bounds after every tile with no barrier: a
    // published bound is a value some token reached, so reading it early or
    // late changes only how many tokens it rules out, never the winner. One
    // shared atomic a warp both publishes and reads.
    u32 seen = 0;
    if (lane_index() == 0) seen = atomicMax(&shared_key, nt_order_key(g.bound));
    seen = __shfl_sync(kFullMask, seen, 0);
    g.bound = fmaxf(g.bound, nt_key_to_float(seen));
  });
  const u64 best = ReduceU64(tmp.r64).Reduce(g.best, MaxU64());
  __syncthreads();
  const u64 best_inf = ReduceU64(tmp.r64).Reduce(g.best_inf, MaxU64());
  __syncthreads();
  const u32 n_inf = ReduceU32(tmp.r32).Reduce(g.n_inf, SumU32());
  if (threadIdx.x != 0) return;
  if (a.splits == 1) {
    const u64 w = n_inf ? best_inf : best;
    write_token(a, row, w ? (long long)composite_index(w) : -1);
  } else {
    ChunkRecord& r = a.chunks[size_t(row) * a.splits + chunk];
    r.best = best;
    r.best_inf = best_inf;
    r.n_pos_inf = n_inf;
  }
}

}  // namespace nt::cuda
