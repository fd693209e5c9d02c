// Kernel 1 of nt_sample: one CTA scans one chunk of one row (see sample_common.cuh).
#pragma once

#include <cub/block/block_reduce.cuh>

#include "cuda/sample_common.cuh"

namespace nt::cuda {

// ---- kernel 1: scan one chunk ---------------------------------------------------

// Runs on_group(t0, x[4]) over the chunk, one tile of 4096 tokens at a time,
// and on_tile_end(last) after each tile (block-uniform; last: no tile follows).
// DEPTH register buffers rotate without copies (a copy would wait for the load
// it moves), so DEPTH - 1 tiles stay in flight while one is consumed: with 2
// CTAs of 512 threads per SM and 32 bytes per thread per tile, DEPTH 3 keeps
// 64 KB per SM in flight, what ~4 TB/s at ~1 us latency needs; DEPTH 2 (32 KB)
// suits register-heavy callers.
template <nt_dtype DT, bool VEC, int DEPTH, class OnGroup, class OnTileEnd>
__device__ __forceinline__ void scan_tiles(const typename LogitTraits<DT>::Storage* row,
                                           int64_t begin, int64_t end, OnGroup&& on_group,
                                           OnTileEnd&& on_tile_end) {
  constexpr int G = group_tokens<DT, VEC>();
  constexpr int U = kTokensPerThread / G;
  const int64_t tid = threadIdx.x;
  float buf[DEPTH][U][G];
  auto load = [&](int64_t tile, float (&x)[U][G]) {
    if (tile >= end) return;
#pragma unroll
    for (int u = 0; u < U; ++u)
      load_group<DT, VEC, true>(row, tile + (u * kScanThreads + tid) * G, end, x[u]);
  };
#pragma unroll
  for (int d = 0; d < DEPTH; ++d) load(begin + int64_t(d) * kTileTokens, buf[d]);
  for (int64_t base = begin; base < end; base += int64_t(DEPTH) * kTileTokens) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      const int64_t tile = base + int64_t(d) * kTileTokens;
      if (tile >= end) break;
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int q = 0; q < G / 4; ++q) {
          const float x4[4] = {buf[d][u][4 * q], buf[d][u][4 * q + 1], buf[d][u][4 * q + 2],
                               buf[d][u][4 * q + 3]};
          on_group(u32(tile + (u * kScanThreads + tid) * G + 4 * q), x4);
        }
      on_tile_end(tile + kTileTokens >= end);
      load(tile + int64_t(DEPTH) * kTileTokens, buf[d]);
    }
  }
}

template <nt_dtype DT, bool VEC, int DEPTH>
__device__ void scan_greedy(const SampleArgs& a, u32 row, int chunk,
                            const typename LogitTraits<DT>::Storage* rowp, int64_t begin,
                            int64_t end) {
  using Reduce = cub::BlockReduce<u64, kScanThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  u64 best = 0;
  scan_tiles<DT, VEC, DEPTH>(
      rowp, begin, end,
      [&](u32 t0, const float (&x)[4]) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const u64 c = composite(nt_order_key(x[j]), t0 + u32(j));
          best = c > best ? c : best;
        }
      },
      [](bool) {});
  best = Reduce(tmp).Reduce(best, MaxU64());
  if (threadIdx.x != 0) return;
  if (a.splits == 1) {
    write_token(a, row, composite_key(best) > NT_KEY_NEG_INF ? (long long)composite_index(best) : -1);
  } else {
    a.chunks[size_t(row) * a.splits + chunk].best = best;
  }
}

template <nt_dtype DT, bool VEC, int DEPTH>
__device__ void scan_plain(const SampleArgs& a, const RowCfg& c, u32 row, int chunk,
                           const typename LogitTraits<DT>::Storage* rowp, int64_t begin,
                           int64_t end) {
  using ReduceU64 = cub::BlockReduce<u64, kScanThreads>;
  using ReduceU32 = cub::BlockReduce<u32, kScanThreads>;
  __shared__ float gbound[kGumbelBins];
  __shared__ u32 shared_bound[2];
  __shared__ union {
    typename ReduceU64::TempStorage r64;
    typename ReduceU32::TempStorage r32;
  } tmp;
  build_gumbel_bounds<kScanThreads>(gbound);
  if (threadIdx.x < 2) shared_bound[threadIdx.x] = NT_KEY_NEG_INF;
  __syncthreads();
  GumbelBest g;
  int tile = 0, syncs = 0;
  scan_tiles<DT, VEC, DEPTH>(
      rowp, begin, end,
      [&](u32 t0, const float (&x)[4]) {
        gumbel_group(g, c, gbound, t0, x, [](float, u32) { return true; });
      },
      [&](bool last) {
        // Share the best value reached so far after each of the first 4 tiles,
        // then every 4th (each barrier holds every warp's next loads back; the
        // thread-local bound keeps pruning in between); slots alternate so that
        // a slot is only read between the barrier after its writes and the next.
        ++tile;
        if (last || (tile > 4 && (tile & 3) != 0)) return;
        u32* slot = &shared_bound[syncs++ & 1];
        const u32 key = warp_max<u32>(composite_key(g.best));
        if (lane_index() == 0) atomicMax(slot, key);
        __syncthreads();
        g.bound = fmaxf(g.bound, nt_key_to_float(*slot));
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

template <nt_dtype DT, bool VEC>
__device__ void scan_filtered(const SampleArgs& a, const RowCfg& c, u32 row, int chunk,
                              const typename LogitTraits<DT>::Storage* rowp, int64_t begin,
                              int64_t end, u64* buf) {
  using ReduceU64 = cub::BlockReduce<u64, kScanThreads>;
  using ReduceU32 = cub::BlockReduce<u32, kScanThreads>;
  using ReduceMZ = cub::BlockReduce<MaxSum, kScanThreads>;
  __shared__ SelectScratch sel;
  __shared__ u32 count, out_count;
  __shared__ union {
    typename ReduceU64::TempStorage r64;
    typename ReduceU32::TempStorage r32;
    typename ReduceMZ::TempStorage rmz;
  } tmp;

  const u32 keep = c.p.top_k ? min(u32(c.p.top_k), u32(a.kchunk)) : u32(a.kchunk);
  const bool need_z = c.p.top_p > 0.0f && c.p.top_p < 1.0f && (a.joint || c.p.top_k == 0);
  u64 thr = kNegInfCeiling;  // admit composites above it
  float thr_s = -INFINITY;   // scores whose upper bound is below it cannot pass
  bool truncated = false;
  MaxSum mz = {-INFINITY, 0.0f};
  u32 n_inf = 0;
  u64 best_inf = 0;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();

  scan_tiles<DT, VEC, 2>(
      rowp, begin, end,
      [&](u32 t0, const float (&x)[4]) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const u32 t = t0 + u32(j);
          bool take = false;
          u64 cv = 0;
          if (need_z || score_upper(x[j], c) >= thr_s) {
            const float s = nt_scaled_score(x[j], c.p.temperature);
            cv = composite(nt_order_key(s), t);
            take = cv > thr;
            if (s == INFINITY) {
              ++n_inf;
              const u64 ci =
                  composite(nt_order_key(nt_token_gumbel(c.seed, c.offset, c.tag, t)), t);
              best_inf = ci > best_inf ? ci : best_inf;
            } else if (need_z && s != -INFINITY) {
              mz = max_sum_add(mz, s);
            }
          }
          const u32 pos = warp_append(take, &count);
          if (take) buf[pos] = cv;
        }
      },
      [&](bool last) {
        // After the last tile the final selection below does the same work.
        if (last) return;
        __syncthreads();
        const u32 n = count;
        __syncthreads();
        if (n > u32(a.kchunk)) {
          thr = compact_top<kScanThreads>(buf, int(n), keep, &count, sel);
          thr_s = nt_key_to_float(composite_key(thr));
          truncated = true;
        }
      });

  __syncthreads();
  const u32 n = count;
  u64* out = a.candidates + (size_t(row) * a.splits + chunk) * size_t(a.kchunk);
  if (n > keep) {
    thr = block_select_kth<kScanThreads>(buf, int(n), keep, sel);
    truncated = true;
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
  if (threadIdx.x != 0) return;
  ChunkRecord& r = a.chunks[size_t(row) * a.splits + chunk];
  r.best_inf = bi;
  r.n_pos_inf = ni;
  r.n_cand = min(n, keep);
  r.truncated = truncated;
  r.last = truncated ? thr : 0ull;
  r.max_s = total.m;
  r.z = total.z;
}

template <nt_dtype DT, bool VEC, int MODE>
__global__ void __launch_bounds__(kScanThreads, 2) sample_scan_kernel(SampleArgs a) {
  using S = typename LogitTraits<DT>::Storage;
  extern __shared__ u64 scan_buffer[];
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
    scan_filtered<DT, VEC>(a, c, row, chunk, rowp, begin, end, scan_buffer);
  } else {
    if (c.cls == kGreedyRow)
      scan_greedy<DT, VEC, kDepth>(a, row, chunk, rowp, begin, end);
    else if (c.cls == kPlainRow)
      scan_plain<DT, VEC, kDepth>(a, c, row, chunk, rowp, begin, end);
    else
      scan_filtered<DT, VEC>(a, c, row, chunk, rowp, begin, end, scan_buffer);
  }
}

}  // namespace nt::cuda
