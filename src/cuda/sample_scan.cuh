// Kernel 1 of nt_sample: one CTA scans one chunk of one row (see sample_common.cuh).
#pragma once

#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>

#include "cuda/sample_common.cuh"
#include "cuda/sample_fallback.cuh"
#include "cuda/sample_launch.cuh"
#include "cuda/sample_merge.cuh"
#include "cuda/sample_scan_plain.cuh"
#include "cuda/sample_tiles.cuh"
#include "cuda/topk_cta.cuh"

namespace nt::cuda {

// ---- kernel 1: scan one chunk ---------------------------------------------------

// A thread meets its tokens in increasing index order, so a strict float
// compare keeps the first of equal maxima (-0 equals +0 and NaN never wins, as
// with ordering keys) at three instructions a token; the composite of the
// thread's winner is formed once, for the block's reduction.
template <nt_dtype DT, bool VEC, int DEPTH>
__device__ void scan_greedy(const SampleArgs& a, u32 row, int chunk,
                            const typename LogitTraits<DT>::Storage* rowp, int64_t begin,
                            int64_t end) {
  using Reduce = cub::BlockReduce<u64, kScanThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  float best_x = -INFINITY;
  u32 best_t = 0;
  scan_tile_loop<DT, VEC, DEPTH>(rowp, begin, end, [&](u32 tile, const auto& x, bool) {
    for_each_group(tile, x, [&](u32 t0, const float (&x4)[4]) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (x4[j] > best_x) {
          best_x = x4[j];
          best_t = t0 + u32(j);
        }
    });
  });
  // 0 for a thread without a finite or +inf logit: below every real composite.
  u64 best = best_x > -INFINITY ? composite(nt_order_key(best_x), best_t) : 0ull;
  best = Reduce(tmp).Reduce(best, MaxU64());
  if (threadIdx.x != 0) return;
  if (a.splits == 1) {
    write_token(a, row, composite_key(best) > NT_KEY_NEG_INF ? (long long)composite_index(best) : -1);
  } else {
    a.chunks[size_t(row) * a.splits + chunk].best = best;
  }
}

// Keeps the top `keep` of buf[0, n) in buf[0, keep); returns the lowest kept.
template <int NT>
__device__ u64 compact_top(u64* buf, int n, u32 keep, u32* count, SelectScratch& sel) {
  const u64 thr = block_select_kth<NT>(buf, n, keep, sel);
  u64 item[kCompactItems];
#pragma unroll
  for (int j = 0; j < kCompactItems; ++j) {
    const int i = j * NT + int(threadIdx.x);
    item[j] = i < n ? buf[i] : 0ull;
  }
  if (threadIdx.x == 0) *count = 0;
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kCompactItems; ++j) {
    const bool take = item[j] >= thr;
    const u32 pos = warp_append(take, count);
    if (take) buf[pos] = item[j];
  }
  __syncthreads();
  return thr;
}

// A lower bound of the chunk's keep-th largest composite from its first tile,
// so that tile appends a few candidates instead of all 4096: each warp offers
// the r-th largest of its lanes' best composites (r = ceil(keep / warps)), and
// the smallest offer has at least r tokens at or above it in every warp, so at
// least keep in the chunk. 0 when some warp has fewer than r real tokens.
// Block-uniform call; keep <= 32 * warps.
template <int U, int G>
__device__ u64 first_tile_floor(u32 tile, const float (&x)[U][G], const RowCfg& c, u32 keep,
                                u64* warp_offer) {
  constexpr int kWarps = kScanThreads / 32;
  float best_x = -INFINITY;
  u32 best_t = 0;
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int g = 0; g < G; ++g)
      if (x[u][g] > best_x) {  // NaN and -inf never
        best_x = x[u][g];
        best_t = tile + (u * kScanThreads + threadIdx.x) * G + g;
      }
  u64 v[1] = {best_x > -INFINITY
                  ? composite(nt_order_key(nt_scaled_score(best_x, c.p.temperature)), best_t)
                  : 0ull};
  warp_sort_desc<1>(v);
  const u32 r = (keep + kWarps - 1) / kWarps;
  const u64 offer = __shfl_sync(kFullMask, v[0], int(r) - 1);
  if (lane_index() == 0) warp_offer[threadIdx.x / 32] = offer;
  __syncthreads();
  u64 floor = ~0ull;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) floor = warp_offer[w] < floor ? warp_offer[w] : floor;
  return floor;
}

// A filtered chunk's record for the merge: its best +inf draw and count, its
// candidate count, whether it dropped any finite token (every dropped one
// ranks below kept_floor), and its (max, mass) when top-p needs the row's.
__device__ __forceinline__ void store_filtered_record(const SampleArgs& a, u32 row, int chunk,
                                                      u64 best_inf, u32 n_pos_inf, u32 n_cand,
                                                      bool truncated, u64 kept_floor,
                                                      MaxSum mass) {
  ChunkRecord& r = a.chunks[size_t(row) * a.splits + chunk];
  r.best_inf = best_inf;
  r.n_pos_inf = n_pos_inf;
  r.n_cand = n_cand;
  r.truncated = truncated;
  r.last = truncated ? kept_floor : 0ull;
  r.max_s = mass.m;
  r.z = mass.z;
}

// A filtered chunk's raw mass (SampleArgs::raw_mass) into its record: the
// block's largest logit, its fp64 sum rescaled to it and its tiles left out.
// Block-uniform call.
__device__ __forceinline__ void store_raw_mass(const SampleArgs& a, u32 row, int chunk,
                                               const RawMass& raw) {
  using ReduceU32 = cub::BlockReduce<u32, kScanThreads>;
  __shared__ union {
    BlockMaxSumStorage<kScanThreads> max_sum;
    typename ReduceU32::TempStorage r32;
  } tmp;
  const MaxSumD total =
      block_max_sum(raw.e.x_max, [&](float top) { return raw_mass_at(raw, top); }, tmp.max_sum);
  __syncthreads();
  const u32 unsummed = ReduceU32(tmp.r32).Reduce(raw.unsummed, SumU32());
  if (threadIdx.x == 0) {
    ChunkRecord& r = a.chunks[size_t(row) * a.splits + chunk];
    r.raw_z = total.z;
    r.raw_max = total.m;
    r.raw_unsummed = unsummed;
  }
}

template <nt_dtype DT, bool VEC, bool RAW, bool MASS>
__device__ void scan_filtered(const SampleArgs& a, const RowCfg& c, u32 row, int chunk,
                              const typename LogitTraits<DT>::Storage* rowp, int64_t begin,
                              int64_t end, u64* buf) {
  using ReduceU64 = cub::BlockReduce<u64, kScanThreads>;
  using ReduceU32 = cub::BlockReduce<u32, kScanThreads>;
  using ReduceMZ = cub::BlockReduce<MaxSum, kScanThreads>;
  __shared__ SelectScratch sel;
  __shared__ u32 count, out_count;
  __shared__ u64 warp_offer[kScanThreads / 32];
  __shared__ union {
    typename ReduceU64::TempStorage r64;
    typename ReduceU32::TempStorage r32;
    typename ReduceMZ::TempStorage rmz;
  } tmp;

  const u32 keep = filtered_keep(a, c);
  const bool need_z = MASS && filtered_needs_mass(a, c);
  const bool tile_filter = filtered_tile_filter(a, c);
  const bool use_floor = tile_filter && keep <= u32(kScanThreads);
  const u32 trigger = min(u32(a.kchunk), max(2 * keep, keep + 64));
  constexpr int G = group_tokens<DT, VEC>();
  const u32 tid = threadIdx.x;
  u64 thr = kNegInfCeiling;  // admit composites above it
  float thr_s = -INFINITY;   // scores whose upper bound is below it cannot pass
  bool truncated = false;    // some finite token was not kept ...
  u64 kept_floor = 0;        // ... and every such token ranks below this
  MaxSum mz = {-INFINITY, 0.0f};
  RawMass raw;
  u32 n_inf = 0;
  u64 best_inf = 0;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();

  scan_tile_loop<DT, VEC, 2>(rowp, begin, end, [&](u32 tile, const auto& x, bool last) {
    if (use_floor && tile == begin) {
      const u64 floor = first_tile_floor(tile, x, c, keep, warp_offer);
      if (floor > kNegInfCeiling) {
        thr = floor - 1;
        thr_s = nt_key_to_float(composite_key(thr));
        truncated = true;
        kept_floor = floor;
      }
    }
    float m = -INFINITY;
    if (RAW || tile_filter)
      for_each_group(tile, x, [&](u32, const float (&x4)[4]) {
        m = fmaxf(fmaxf(m, fmaxf(x4[0], x4[1])), fmaxf(x4[2], x4[3]));
      });
    if constexpr (RAW) tile_raw_mass_add(raw, x, m);
    bool maybe = true;
    if (tile_filter) maybe = score_upper(m, c) >= thr_s;
    // The thread's candidates as bits, then one slot reservation per warp.
    u32 admitted = 0;
    if (maybe) {
#pragma unroll
      for (int i = 0; i < kTokensPerThread; ++i) {
        const float xi = x[i / G][i % G];
        if (!(need_z || score_upper(xi, c) >= thr_s)) continue;
        const float s = nt_scaled_score(xi, c.p.temperature);
        const u32 t = tile + (u32(i / G) * kScanThreads + tid) * G + u32(i % G);
        if (composite(nt_order_key(s), t) > thr) admitted |= 1u << i;
        if (s == INFINITY) {
          ++n_inf;
          const u64 ci = pos_inf_composite(c.seed, c.offset, c.tag, t);
          best_inf = ci > best_inf ? ci : best_inf;
        } else if (need_z && s != -INFINITY) {
          mz = max_sum_add(mz, s);
        }
      }
    }
    // Set by the lane whose reservation ends past the trigger: the largest end
    // is the final count, so the block compacts exactly when count > trigger.
    bool over = false;
    if (__any_sync(kFullMask, admitted != 0)) {
      const u32 mine = u32(__popc(admitted));
      const u32 end_slot = warp_inclusive_sum(mine);
      u32 base = 0;
      if (lane_index() == 31) {
        base = atomicAdd(&count, end_slot);
        over = base + end_slot > trigger;
      }
      u32 pos = __shfl_sync(kFullMask, base, 31) + end_slot - mine;
#pragma unroll
      for (int i = 0; i < kTokensPerThread; ++i) {
        if (!((admitted >> i) & 1u)) continue;
        const u32 t = tile + (u32(i / G) * kScanThreads + tid) * G + u32(i % G);
        buf[pos++] = composite(nt_order_key(nt_scaled_score(x[i / G][i % G], c.p.temperature)), t);
      }
    }
    // After the last tile the final selection below does the same work. One
    // barrier per tile: it also orders this tile's appends before the reads of
    // `count` and `buf` in the compaction.
    if (last) return;
    if (__syncthreads_or(over)) {
      thr = compact_top<kScanThreads>(buf, int(count), keep, &count, sel);
      thr_s = nt_key_to_float(composite_key(thr));
      truncated = true;
      kept_floor = thr;
    }
  });

  __syncthreads();
  const u32 n = count;
  u64* out = a.candidates + (size_t(row) * a.splits + chunk) * size_t(a.kchunk);
  if (n > keep) {
    thr = block_select_kth<kScanThreads>(buf, int(n), keep, sel);
    truncated = true;
    kept_floor = thr;
    if (threadIdx.x == 0) out_count = 0;
    __syncthreads();
    for (int base = 0; base < int(n); base += kScanThreads) {
      const int i = base + int(threadIdx.x);
      const u64 v = i < int(n) ? buf[i] : 0ull;
      const bool take = v >= thr;
      const u32 pos = warp_append(take, &out_count);
      if (take) out[pos] = v;
    }
  } else {
    for (int i = int(threadIdx.x); i < int(n); i += kScanThreads) out[i] = buf[i];
  }

  const u64 bi = ReduceU64(tmp.r64).Reduce(best_inf, MaxU64());
  __syncthreads();
  const u32 ni = ReduceU32(tmp.r32).Reduce(n_inf, SumU32());
  __syncthreads();
  MaxSum total = {-INFINITY, 0.0f};
  if (need_z) total = ReduceMZ(tmp.rmz).Reduce(mz, MaxSumMerge());
  if constexpr (RAW) store_raw_mass(a, row, chunk, raw);
  if (threadIdx.x != 0) return;
  store_filtered_record(a, row, chunk, bi, ni, min(n, keep), truncated, kept_floor, total);
}

// Adds a thread's tile (U x G logits) to its running (max, mass) of finite
// scores: the tile's largest score rescales the sum once, then one exp a token.
template <int U, int G>
__device__ __forceinline__ void tile_mass_add(MaxSum& mz, const float (&x)[U][G], const RowCfg& c) {
  constexpr int N = U * G;
  float s[N];
  float top = -INFINITY;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    s[i] = nt_scaled_score(x[i / G][i % G], c.p.temperature);
    if (s[i] == INFINITY) s[i] = -INFINITY;  // +inf scores are drawn apart, never part of the mass
    top = fmaxf(top, s[i]);
  }
  if (top == -INFINITY) return;
  if (top > mz.m) {
    mz.z *= expf(mz.m - top);
    mz.m = top;
  }
#pragma unroll
  for (int i = 0; i < N; ++i) mz.z += expf(s[i] - mz.m);
}

// The list scan's per-warp state between tiles (warp-uniform).
struct WarpList {
  u64 thr;      // admit composites above it; no token under it is needed
  u32 count;    // entries in the warp's list
  u32 refresh;  // the list is ranked again past this length
};

// Ranks a warp's list (called by the whole warp when it has grown past
// `refresh`): publishes its `rank`-th best (its keep-th when the list could
// overflow during the next tile), raises the bound to the smallest value every
// warp has published, and drops the entries under the bound. Out of line, so
// the scan loop's code stays small.
__device__ __noinline__ inline WarpList rank_warp_list(u64* list, WarpList w, u32 keep,
                                                       u32 rank, u32* hist, u64* warp_floor,
                                                       u64* shared_thr) {
  constexpr int kWarps = kScanThreads / 32;
  constexpr int kRankMax = (kListKeepMax + kWarps - 1) / kWarps;
  const u32 lane = lane_index();
  __syncwarp();
  u64 bound = 0;
  if (w.count > u32(kListTrigger)) {
    bound = topk::warp_compact_ranks(list, int(w.count), int(keep), hist);
    w.count = keep;
  } else {
    // The published value only rises (the warp has seen `rank` tokens at or
    // above both its old and its new one), so an atomic max publishes it and
    // other warps read it without a barrier.
    const u64 mine = topk::warp_rth_largest<kRankMax>(list, int(w.count), int(rank));
    if (lane == 0) atomicMax(&warp_floor[threadIdx.x / 32], mine);
    __syncwarp();
    const u64 f = warp_min(lane < u32(kWarps) ? *static_cast<volatile u64*>(&warp_floor[lane]) : ~0ull);
    if (f > kNegInfCeiling) bound = f - 1;  // every warp has seen `rank` tokens >= f
  }
  if (bound > w.thr) {
    w.thr = bound;
    if (lane == 0) atomicMax(shared_thr, bound);
  }
  w.count = u32(topk::warp_keep_at_or_above(list, int(w.count), w.thr));
  w.refresh = min(u32(kListTrigger), max(u32(kListRefresh), 2 * w.count));
  return w;
}

// The list scan's chunk, handed to the merge: its best min(n, keep) entries,
// sorted descending (so the merge need not select or sort them again), and
// whether any finite token was dropped (every dropped one ranks below
// kept_floor).
struct ListsOut {
  u32 n;  // entries over all warps' lists (each cut to at most keep)
  bool truncated;
  u64 kept_floor;
};

// Every warp sorts its list (at most keep <= 32N entries) in registers, and a
// tree of warp merges (block_merge_desc) leaves the chunk's best 32N in warp
// 0's v, which it writes out. Block-uniform call; each warp's list region
// doubles as its stage.
static_assert(kListKeepMax <= 32 * 4, "lists_out_sorted holds a chunk's keep in four values a lane");
template <int N>
__device__ __forceinline__ ListsOut lists_out_sorted(const u64* list, u32 count, u64* buf,
                                                     u32* warp_count, const u64& shared_thr,
                                                     u32 keep, u64* out, u64 (&v)[N]) {
  constexpr int kWarps = kScanThreads / 32;
  const u32 warp = threadIdx.x / 32, lane = lane_index();
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const u32 i = u32(N) * lane + u32(j);
    v[j] = i < count ? list[i] : 0ull;
  }
  warp_sort_desc<N>(v);
  if (lane == 0) warp_count[warp] = count;
  __syncthreads();  // counts and bound final; every list is in registers
  ListsOut r;
  r.n = 0;
#pragma unroll
  for (int k = 0; k < kWarps; ++k) r.n += warp_count[k];
  // Some finite token was dropped when a bound was ever raised or the lists
  // hold more than keep.
  r.truncated = *static_cast<const volatile u64*>(&shared_thr) > kNegInfCeiling || r.n > keep;
  block_merge_desc<N>(v, buf, kListCap, kWarps);
  const u32 n_out = min(r.n, keep);
  r.kept_floor = 0;
  if (warp == 0) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const u32 i = u32(N) * lane + u32(j);
      if (i < n_out) out[i] = v[j];
    }
    if (r.truncated && n_out > 0) r.kept_floor = warp_element<N>(v, n_out - 1);
  }
  return r;
}

// Filtered rows whose chunk keeps few candidates (keep <= kListKeepMax) and
// whose logits can be compared with a bound (the chunk mass, when top-p needs
// it, is summed beside the lists, by exp2 where exp2_mass_applies, else by
// tile_mass_add): each warp appends to its own list in shared memory and
// ranks it by itself (rank_warp_list), with no block barrier per tile. The admission bound stays block-wide without
// barriers: each warp publishes its r-th best (r = ceil(keep / warps)), so the
// smallest published value has keep tokens at or above it in the chunk and
// bounds the chunk's keep-th best from below. At the end the lists are cut to
// keep each and handed over sorted (lists_out_sorted). Returns whether it drew
// the row's token (block-uniform).
template <nt_dtype DT, bool VEC, bool RAW, bool MASS>
__device__ bool scan_filtered_lists(const SampleArgs& a, const RowCfg& c, u32 row, int chunk,
                                    const typename LogitTraits<DT>::Storage* rowp, int64_t begin,
                                    int64_t end, u64* buf, u32 keep) {
  constexpr int kWarps = kScanThreads / 32;
  __shared__ u64 shared_thr;
  __shared__ u64 warp_floor[kWarps];  // warp w has seen `rank` tokens at or above warp_floor[w]
  __shared__ u32 warp_count[kWarps];
  __shared__ u64 warp_offer[kWarps];
  // Each warp's best +inf draw, +inf count and mass, written before the
  // barrier of lists_out_sorted and combined after it (the mass by warp 0,
  // which alone uses it): the chunk's totals without block reductions of their own.
  __shared__ u64 warp_best_inf[kWarps];
  __shared__ u32 warp_n_inf[kWarps];
  __shared__ MaxSum warp_mass[kWarps];
  constexpr int G = group_tokens<DT, VEC>();
  const u32 tid = threadIdx.x, warp = tid / 32, lane = lane_index();
  const u32 rank = (keep + kWarps - 1) / kWarps;
  const bool need_z = MASS && filtered_needs_mass(a, c);
  const bool exp2_mass = exp2_mass_applies(a, c);
  const float k = kLog2e / c.p.temperature;  // read only where exp2_mass
  MaxSum mz = {-INFINITY, 0.0f};             // the tiles of the exact form
  Exp2Sum e;                                 // the others
  RawMass raw;
  u64* list = buf + size_t(warp) * kListCap;
  u32* hist = reinterpret_cast<u32*>(buf + size_t(kWarps) * kListCap) + size_t(warp) * 256;
  WarpList w{kNegInfCeiling, 0u, u32(kListRefresh)};
  float thr_x = -INFINITY;  // logits below it score below the bound
  u32 n_inf = 0;
  u64 best_inf = 0;
  // The logit bound follows w.thr; it is recomputed only when w.thr rises
  // (warp-uniform: every lane reads the same shared value), not every tile.
  auto follow = [&]() { thr_x = logit_floor(nt_key_to_float(composite_key(w.thr)), c); };
  auto raise = [&](u64 t) {
    if (t > w.thr) {
      w.thr = t;
      follow();
    }
  };
  if (tid == 0) shared_thr = kNegInfCeiling;
  if (tid < u32(kWarps)) {
    warp_floor[tid] = 0;
    warp_count[tid] = 0;
  }
  __syncthreads();

  scan_tile_loop<DT, VEC, 2>(rowp, begin, end, [&](u32 tile, const auto& x, bool) {
    if (tile == begin) {
      const u64 floor = first_tile_floor(tile, x, c, keep, warp_offer);
      if (floor > kNegInfCeiling) {
        raise(floor - 1);
        if (tid == 0) atomicMax(&shared_thr, floor - 1);
      }
    } else {
      raise(*static_cast<volatile u64*>(&shared_thr));
    }
    float m = -INFINITY;
    for_each_group(tile, x, [&](u32, const float (&x4)[4]) {
      m = fmaxf(fmaxf(m, fmaxf(x4[0], x4[1])), fmaxf(x4[2], x4[3]));
    });
    if (need_z && !(exp2_mass && tile_mass_add_exp2(e, x, m, k))) tile_mass_add(mz, x, c);
    if constexpr (RAW) tile_raw_mass_add(raw, x, m);
    bool appended = false;
    if (!(m < thr_x)) {
      u32 pending = 0;
#pragma unroll
      for (int i = 0; i < kTokensPerThread; ++i)
        pending |= x[i / G][i % G] < thr_x ? 0u : 1u << i;
      while (pending) {
        const int i = __ffs(pending) - 1;
        pending &= pending - 1;
        float xi = 0.0f;
#pragma unroll
        for (int k = 0; k < kTokensPerThread; ++k)  // selects, not a local-memory array
          if (k == i) xi = x[k / G][k % G];
        const u32 t = tile + (u32(i / G) * kScanThreads + tid) * G + u32(i % G);
        const float s = nt_scaled_score(xi, c.p.temperature);
        const u64 v = composite(nt_order_key(s), t);
        if (v > w.thr) {
          list[atomicAdd(&warp_count[warp], 1u)] = v;
          appended = true;
        }
        if (s == INFINITY) {
          ++n_inf;
          const u64 ci = pos_inf_composite(c.seed, c.offset, c.tag, t);
          best_inf = ci > best_inf ? ci : best_inf;
        }
      }
    }
    if (!__any_sync(kFullMask, appended)) return;
    __syncwarp();
    w.count = *static_cast<volatile u32*>(&warp_count[warp]);
    // Past kListTrigger the next tile (up to 256 entries) could overflow.
    if (w.count > w.refresh) {
      w = rank_warp_list(list, w, keep, rank, hist, warp_floor, &shared_thr);
      follow();  // rank_warp_list may have raised w.thr
      if (lane == 0) warp_count[warp] = w.count;
      __syncwarp();
    }
  });

  raise(*static_cast<volatile u64*>(&shared_thr));
  w.count = u32(topk::warp_keep_at_or_above(list, int(w.count), w.thr));
  if (w.count > keep) {
    const u64 kth = topk::warp_compact_ranks(list, int(w.count), int(keep), hist);
    w.count = keep;
    if (lane == 0) atomicMax(&shared_thr, kth);  // tokens were dropped
  }
  {
    const u64 warp_bi = warp_max(best_inf);
    const u32 warp_ni = warp_sum(n_inf);
    MaxSum warp_mz = {-INFINITY, 0.0f};
    if (need_z)  // block-uniform
      warp_mz = warp_max_sum(MaxSumMerge()(mz, exp2_sum_at_max(e, c.p.temperature, k)));
    if (lane == 0) {
      warp_best_inf[warp] = warp_bi;
      warp_n_inf[warp] = warp_ni;
      warp_mass[warp] = warp_mz;
    }
  }
  u64* out = a.candidates + (size_t(row) * a.splits + chunk) * size_t(a.kchunk);
  u64 top[2];  // keep <= kWarpTailMax: warp 0 holds the chunk's best, sorted, as the tail takes them
  ListsOut lists;
  if (keep <= kWarpTailMax) {
    lists = lists_out_sorted<2>(list, w.count, buf, warp_count, shared_thr, keep, out, top);
  } else {
    u64 top4[4];
    lists = lists_out_sorted<4>(list, w.count, buf, warp_count, shared_thr, keep, out, top4);
  }
  const u32 n = lists.n, n_out = min(n, keep);
  u64 bi = 0;
  u32 ni = 0;
  // Rolled: it runs once a chunk, instructions each CTA fetches cold at B = 1.
#pragma unroll 1
  for (int i = 0; i < kWarps; ++i) {
    bi = warp_best_inf[i] > bi ? warp_best_inf[i] : bi;
    ni += warp_n_inf[i];
  }
  // The chunk's mass: read by thread 0's record and warp 0's draw only.
  MaxSum total = {-INFINITY, 0.0f};
  if (need_z && warp == 0)
    total = warp_max_sum(lane < u32(kWarps) ? warp_mass[lane] : MaxSum{-INFINITY, 0.0f});
  const bool any_inf = ni != 0;
  if constexpr (RAW) store_raw_mass(a, row, chunk, raw);
  if (tid == 0) {
    // Written in every case: the merge reads it unless the draw below takes the row.
    store_filtered_record(a, row, chunk, bi, ni, n_out, lists.truncated, lists.kept_floor, total);
  }
  // A row of this one chunk that the merge would finish in its sorted warp
  // tail is drawn here from warp 0's registers.
  const bool draw_here = a.merge_in_scan && keep <= kWarpTailMax && merge_of_sorted_lists(a, c) &&
                         n > 0 && warp_tail_draws(c, n_out, any_inf ? 1u : 0u);
  // The mass the merge would sum over one chunk: its z at its own maximum.
  if (draw_here && warp == 0)
    merge_tail_sorted(a, c, row, top, n_out, !lists.truncated, double(total.z),
                      RowState{0u, 0u, 0.0f, 0u});
  return draw_here;
}

// A filtered row's chunk: the list scan where it applies, else the general
// one. Returns whether the row's token was drawn already (block-uniform).
template <nt_dtype DT, bool VEC, bool RAW, bool MASS>
__device__ bool scan_filtered_chunk(const SampleArgs& a, const RowCfg& c, u32 row, int chunk,
                                    const typename LogitTraits<DT>::Storage* rowp, int64_t begin,
                                    int64_t end, u64* buf) {
  if (list_scan_applies(a, c))
    return scan_filtered_lists<DT, VEC, RAW, MASS>(a, c, row, chunk, rowp, begin, end, buf,
                                                   filtered_keep(a, c));
  scan_filtered<DT, VEC, RAW, MASS>(a, c, row, chunk, rowp, begin, end, buf);
  return false;
}

// A row scanned by one CTA is merged by that CTA as soon as its chunk is done.
__device__ __forceinline__ void merge_row_in_scan(const SampleArgs& a, const RowCfg& c, u32 row,
                                                  bool drawn) {
  static_assert(kMergeThreads == kScanThreads, "the merge runs on the scan's threads");
  __syncthreads();  // the chunk's record and candidates, written above, are visible
  if (drawn)
    filtered_row_merged(a, c, row);
  else
    merge_row(a, c, row);
}

// A row's chunks launched as one cluster (sm_90): once every chunk's record
// and candidates are out (the cluster barrier releases each CTA's writes and
// acquires the others'), the row's first CTA merges them as the merge kernel
// would, in the scan's shared memory.
template <int MODE>
__device__ __forceinline__ void merge_row_in_cluster(const SampleArgs& a, const RowCfg& c, u32 row,
                                                     int chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static_assert(kMergeThreads == kScanThreads, "the merge runs on the scan's threads");
  cooperative_groups::this_cluster().sync();
  if (chunk == 0) merge_row<MODE == kFilteredRow || MODE == kAnyRow>(a, c, row);
#endif
}

// RAW (SampleArgs::raw_mass): the filtered scans also sum each chunk's raw
// mass; instantiated for the modes with filtered rows, launched only by raw
// logprobs, so that the sampler alone carries none of its state. MASS = false:
// no row needs its mass (scalar parameters whose top-p, if any, is measured
// on a top-k: SamplePlan::row_mass), so the filtered scans carry none of its state.
// RESOLVE: a cluster launch (SampleArgs::cluster_merge) whose rows may be
// flagged resolves them in the kernel (resolve_row_in_cluster); compiled for
// the mixed-row kernel only (any call whose rows may be flagged can take it),
// since the code it adds costs the tile loop registers.
template <nt_dtype DT, bool VEC, int MODE, bool RAW = false, bool MASS = true, bool RESOLVE = false>
__global__ void __launch_bounds__(kScanThreads, 2) sample_scan_kernel(SampleArgs a) {
  static_assert(!RESOLVE || (MODE == kAnyRow && MASS && !RAW), "one kernel resolves in clusters");
  static_assert(sizeof(FlaggedRowsShared) <= size_t(kScanSmemBytes) &&
                    alignof(FlaggedRowsShared) <= 16,
                "a cluster's flagged row is resolved in its scan's shared memory");
  using S = typename LogitTraits<DT>::Storage;
  extern __shared__ __align__(16) u64 scan_buffer[];  // 16: FlaggedRowsShared's alignment
  const u32 row = blockIdx.x;
  const int chunk = int(blockIdx.y);
  const int64_t begin = int64_t(chunk) * a.chunk;
  const int64_t end = min(begin + int64_t(a.chunk), int64_t(a.vocab));
  const S* rowp = static_cast<const S*>(a.logits) + int64_t(row) * a.row_stride;
  const RowCfg c = load_row_cfg(a, row);
  // The mixed-row kernel carries the filtered path's registers: a third
  // buffer would spill there.
  constexpr int kDepth = MODE == kAnyRow ? 2 : 3;
  if constexpr (MODE == kGreedyRow) {
    scan_greedy<DT, VEC, kDepth>(a, row, chunk, rowp, begin, end);
  } else if constexpr (MODE == kPlainRow) {
    scan_plain<DT, VEC, kDepth>(a, c, row, chunk, rowp, begin, end);
  } else if constexpr (MODE == kFilteredRow) {
    const bool drawn =
        scan_filtered_chunk<DT, VEC, RAW, MASS>(a, c, row, chunk, rowp, begin, end, scan_buffer);
    if (a.merge_in_scan) merge_row_in_scan(a, c, row, drawn);
  } else {
    if (c.cls == kGreedyRow) {
      scan_greedy<DT, VEC, kDepth>(a, row, chunk, rowp, begin, end);
    } else if (c.cls == kPlainRow) {
      scan_plain<DT, VEC, kDepth>(a, c, row, chunk, rowp, begin, end);
    } else {
      const bool drawn =
          scan_filtered_chunk<DT, VEC, RAW, MASS>(a, c, row, chunk, rowp, begin, end, scan_buffer);
      if (a.merge_in_scan) merge_row_in_scan(a, c, row, drawn);
    }
  }
  if (a.cluster_merge) merge_row_in_cluster<MODE>(a, c, row, chunk);
  if constexpr (RESOLVE)
    resolve_row_in_cluster<DT, VEC>(a, *reinterpret_cast<FlaggedRowsShared*>(scan_buffer));
  // Where the merge kernel merges (and appends to the flagged-row kernel's two
  // counts), the scan clears them; clusters list no row. At the end: done at
  // the start, it keeps values live across the filtered scan's tile loop,
  // which then spills.
  if (a.large.rows && !a.merge_in_scan && !a.cluster_merge && row == 0u && chunk == 0 &&
      threadIdx.x == 0) {
    *a.large.n_listed = 0u;
    *a.large.n_flagged = 0u;
  }
}

}  // namespace nt::cuda
