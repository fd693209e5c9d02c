// Kernel 1 of nt_sample for plain rows (temperature only): Gumbel-max over one
// chunk of one row, with pruning (sample_common.cuh, core/word_floor.h).
#pragma once

#include <cub/block/block_reduce.cuh>

#include "cuda/sample_common.cuh"
#include "cuda/sample_tiles.cuh"
#include "cuda/timeline.cuh"

namespace nt::cuda {

// A warp's groups of 4 tokens still waiting for their Philox blocks. A warp
// issues a block's ~50 instructions for all its lanes whenever one lane needs
// it, and on peaked rows ~40% of the groups do (a tile's group where no token
// comes within the Gumbel ceiling of the bound needs none), scattered over the
// lanes: gathering the needed groups of several tiles here gives rounds of 32
// blocks with every lane busy. In the scan's dynamic shared memory (the
// launcher's kGroupQueueBytes).
constexpr int kGroupQueueCap = 64;  // below 32 after each round, plus one group of 32
constexpr int kGroupQueueBytes = (kScanThreads / 32) * kGroupQueueCap * int(sizeof(float4) + sizeof(u32));

// The queue's slots are shared-memory indices (32-bit addresses, no generic
// pointers held in registers): the logits of every warp's slots, then their
// first tokens.
extern __shared__ __align__(16) float4 group_queue_x[];
struct GroupQueue {
  u32 first;  // this warp's first slot
  u32 count;  // warp-uniform
  __device__ __forceinline__ float4& x(u32 slot) const { return group_queue_x[first + slot]; }
  __device__ __forceinline__ u32& t0(u32 slot) const {
    return reinterpret_cast<u32*>(group_queue_x + (kScanThreads / 32) * kGroupQueueCap)[first + slot];
  }
};

__device__ __forceinline__ GroupQueue warp_group_queue() {
  return {(threadIdx.x / 32u) * u32(kGroupQueueCap), 0u};
}

__device__ __forceinline__ float max4(const float (&x)[4]) {
  return fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));  // fmaxf skips NaN logits
}

// One round of Gumbel-max over NG groups a lane: their Philox blocks (run for
// every lane: the warp issues them once any lane needs one, and a lane's
// blocks interleaved hide each other's multiply latency), then the tokens of
// active groups whose words reach their group's floor, taken one per lane per
// step, so a warp runs the exact score and the two logs once per step, not
// once for every token position at which any of its lanes passes. After each
// step the lanes share their bounds (every bound is a value some token
// reached): on a row's first tile, where the bound starts at -inf and every
// token passes, this is what keeps the steps few. A group's largest word is
// checked first: a flat row's floors are within a few millionths of the top
// word, so the per-token bits are rarely needed.
template <int NG>
__device__ __forceinline__ void gumbel_round(GumbelBest& g, const RowCfg& c, const u32* floors,
                                             const bool (&active)[NG], const u32 (&t0)[NG],
                                             const float (&x)[NG][4]) {
  static_assert(NG * 4 <= 32, "pending tokens are one bit each");
  u32 word[NG][4];
  u32 pending = 0;
  const float floor_base = word_floor_base(g.bound);
#pragma unroll
  for (int q = 0; q < NG; ++q) {
    const nt_philox_block b = nt_token_block(c.seed, c.offset, c.tag, t0[q] >> 2);
    const u32 floor = word_floor_at(floors, floor_base, score_upper(max4(x[q]), c));
    const u32 top = max(max(b.v[0], b.v[1]), max(b.v[2], b.v[3]));
#pragma unroll
    for (int j = 0; j < 4; ++j) word[q][j] = b.v[j];
    if (active[q] && top >= floor) {
#pragma unroll
      for (int j = 0; j < 4; ++j) pending |= u32(b.v[j] >= floor) << (4 * q + j);
    }
  }
  while (__any_sync(kFullMask, pending != 0)) {
    if (pending != 0) {
      const int i = __ffs(pending) - 1;
      pending &= pending - 1;
      float xi = 0.0f;
      u32 wi = 0, ti = 0;
#pragma unroll
      for (int k = 0; k < NG * 4; ++k)  // selects, not a dynamically indexed (local) array
        if (k == i) {
          xi = x[k / 4][k % 4];
          wi = word[k / 4][k % 4];
          ti = t0[k / 4] + u32(k % 4);
        }
      // The bound may have risen since the word was checked; this token's
      // own score bound is tighter than its group's.
      if (wi >= word_floor(floors, g.bound, score_upper(xi, c)))
        gumbel_token(g, c, xi, wi, ti, [](float, u32) { return true; });
    }
    g.bound = warp_max(g.bound);
  }
}

// Pops the queue's top 32 groups (count >= 32), or all of them at the end of
// the chunk, and runs their round.
__device__ __forceinline__ void gumbel_queue_round(GumbelBest& g, const RowCfg& c, const u32* floors,
                                                   GroupQueue& queue) {
  const u32 lane = lane_index();
  const u32 n = min(queue.count, 32u);
  queue.count -= n;
  __syncwarp();  // the lanes' appends are visible
  const bool active[1] = {lane < n};
  const u32 at = queue.count + (active[0] ? lane : 0u);
  const float4 v = queue.x(at);
  const u32 t0[1] = {queue.t0(at)};
  __syncwarp();  // read before the next appends overwrite the slots
  const float x[1][4] = {{v.x, v.y, v.z, v.w}};
  gumbel_round<1>(g, c, floors, active, t0, x);
}

// Gumbel-max over a thread's tile: the groups that may still win (their top
// score within the Gumbel ceiling of the warp's bound) go to the warp's queue,
// or straight to one round when at least direct_min of the warp's groups need
// their blocks (a flat row, a row's first tiles), where the queue's stores and
// loads would buy nothing.
template <int U, int G>
__device__ __forceinline__ void gumbel_tile(GumbelBest& g, const RowCfg& c, const u32* floors,
                                            GroupQueue& queue, u32 direct_min, u32 tile,
                                            const float (&x)[U][G]) {
  constexpr int kGroups = U * G / 4;
  const u32 tid = threadIdx.x;
  float x4[kGroups][4];
  u32 t0[kGroups], mask[kGroups];
  bool needed[kGroups];
  u32 n = 0;
#pragma unroll
  for (int q = 0; q < kGroups; ++q) {
    const int u = (4 * q) / G, j0 = (4 * q) % G;
#pragma unroll
    for (int j = 0; j < 4; ++j) x4[q][j] = x[u][j0 + j];
    t0[q] = tile + (u32(u) * kScanThreads + tid) * G + u32(j0);
    needed[q] = score_upper(max4(x4[q]), c) + kGumbelCeiling >= g.bound;  // false for NaNs
    mask[q] = __ballot_sync(kFullMask, needed[q]);
    n += u32(__popc(mask[q]));
  }
  if (n == 0) return;
  if (n >= direct_min) {
    gumbel_round<kGroups>(g, c, floors, needed, t0, x4);
    return;
  }
#pragma unroll
  for (int q = 0; q < kGroups; ++q) {
    if (mask[q] == 0) continue;
    if (needed[q]) {
      const u32 at = queue.count + u32(__popc(mask[q] & lanes_below()));
      queue.x(at) = make_float4(x4[q][0], x4[q][1], x4[q][2], x4[q][3]);
      queue.t0(at) = t0[q];
    }
    queue.count += u32(__popc(mask[q]));
    if (queue.count >= 32) gumbel_queue_round(g, c, floors, queue);
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
  GroupQueue queue = warp_group_queue();
  const u32 direct_min = u32(a.plain_direct_min);
  scan_tile_loop<DT, VEC, DEPTH>(rowp, begin, end, [&](u32 tile, const auto& x, bool last) {
    gumbel_tile(g, c, floors, queue, direct_min, tile, x);
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
  if (queue.count != 0) gumbel_queue_round(g, c, floors, queue);
  NT_TIMELINE_MARK(3);
  const u64 best = ReduceU64(tmp.r64).Reduce(g.best, MaxU64());
  __syncthreads();
  const u64 best_inf = ReduceU64(tmp.r64).Reduce(g.best_inf, MaxU64());
  __syncthreads();
  const u32 n_inf = ReduceU32(tmp.r32).Reduce(g.n_inf, SumU32());
  if (threadIdx.x != 0) return;
  NT_TIMELINE_MARK(5);
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
