// Kernel 3 of nt_sample: the rows the merges flagged (see sample_common.cuh),
// in one cooperative launch on a grid sized for the chip. Its phases, each
// shared out over the whole grid, with a grid sync after each of the first three:
//  1-3  the large keep-set path (sample_large_keep.cuh) for the rows the
//       merges listed for it: hist, collect, finish;
//  4    the exact fallback below for the rows still flagged: those the large
//       path does not take and those it left flagged.
// Outside clusters the merges list every row they flag, so a launch with
// nothing flagged reads one count and returns, and a launch with nothing
// listed for the large path goes straight to the fallback (the flags are
// final). A cluster launch lists nothing: its rows' CTAs run the same phases
// for their own row (resolve_row_in_cluster, below) and this kernel does not run.
#pragma once

#include <cooperative_groups.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda/sample_common.cuh"
#include "cuda/sample_large_keep.cuh"

namespace nt::cuda {

// Whether composite v's first `depth` bits are `prefix`.
__device__ __forceinline__ bool prefix_matches(u64 v, u64 prefix, int depth) {
  return depth == 0 || (v >> (64 - depth)) == prefix;
}

// ---- phase 4: exact resolution of a flagged row over the whole row -----------

struct Threshold {
  u64 prefix;
  int depth;  // 0: no cut
  u64 above_mass, bucket_mass;
};

struct FallbackShared {
  MassScratch first, deeper;
  u32 floors[kWordFloorSlots];
  u32 shared_u32[2];
  u64 shared_u64[2];
  union {
    cub::BlockReduce<u32, kLargeThreads>::TempStorage r32;
    cub::BlockReduce<u64, kLargeThreads>::TempStorage r64;
    cub::BlockScan<u64, kLargeThreads>::TempStorage scan;
  } tmp;
};

// The token of a row the merges flagged, by radix descents over the whole
// row on the kernel's kLargeThreads threads, unless the large keep-set path
// resolved it (its flag cleared). Block-uniform returns.
template <nt_dtype DT, bool VEC>
__device__ void fallback_row(const SampleArgs& a, u32 row, FallbackShared& sh) {
  constexpr int NT = kLargeThreads;
  using S = typename LogitTraits<DT>::Storage;
  using ReduceU32 = cub::BlockReduce<u32, NT>;
  using ReduceU64 = cub::BlockReduce<u64, NT>;
  using ScanU64 = cub::BlockScan<u64, NT>;
  const RowState st = a.row_states[row];
  if (!st.fallback) return;
  const RowCfg c = load_row_cfg(a, row);

  MassScratch& first = sh.first;
  MassScratch& deeper = sh.deeper;
  u32* floors = sh.floors;
  u32* shared_u32 = sh.shared_u32;
  u64* shared_u64 = sh.shared_u64;
  auto& tmp = sh.tmp;
  const int tid = int(threadIdx.x);
  const int64_t vocab = a.vocab;
  const S* rowp = static_cast<const S*>(a.logits) + int64_t(row) * a.row_stride;
  const bool inf_rule = st.n_pos_inf > 0;
  const float s_max = st.s_max;
  const u64 one = 1ull << a.mass_bits;
  const bool min_p_on = c.p.min_p > 0.0f;

  auto in_set = [&](float s) { return inf_rule ? s == INFINITY : s != -INFINITY; };
  auto mass_of = [&](float s) -> u64 {
    return inf_rule ? one : fixed_mass(expf(s - s_max), a.mass_bits);
  };
  auto clear = [&](MassScratch& h) {
    for (int i = tid; i < 256; i += NT) {
      h.cnt[i] = 0;
      h.mass[i] = 0;
    }
  };
  // Histogram of the digit below `prefix` (depth bits) of every matching composite.
  auto build = [&](MassScratch& h, u64 prefix, int depth, u32* min_p_count) {
    visit_tokens<DT, VEC, NT>(rowp, 0, vocab, [&](u32 t0, const float (&x)[4]) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float s = nt_scaled_score(x[j], c.p.temperature);
        int digit = -1;
        u64 m = 0;
        if (u32(t0 + j) < u32(vocab) && in_set(s)) {
          const u64 cv = composite(nt_order_key(s), t0 + u32(j));
          if (prefix_matches(cv, prefix, depth)) {
            digit = int(u32(cv >> (56 - depth)) & 0xFFu);
            if (inf_rule) {
              m = one;
            } else {
              const float p = expf(s - s_max);
              m = fixed_mass(p, a.mass_bits);
              if (min_p_count && min_p_on && p >= c.p.min_p) ++*min_p_count;
            }
          }
        }
        warp_add_mass(h, digit, m);
      }
    });
  };
  // Smallest prefix of the order whose count reaches count_target or whose
  // mass reaches mass_target, as (prefix, depth) of its last element.
  auto descend = [&](u32 count_target, u64 mass_target) -> Threshold {
    MassScratch* h = &first;
    u64 prefix = 0;
    int depth = 0;
    u32 base_count = 0;
    u64 base_mass = 0;
    for (;;) {
      if (tid < 32) choose_bucket_by_targets(*h, base_count, base_mass, count_target, mass_target);
      __syncthreads();
      const u32 found = h->found, count = h->count, digit = h->digit;
      base_count = h->above_count;
      base_mass = h->above_mass;
      const u64 bucket_mass = h->bucket_mass;
      __syncthreads();
      if (!found) return {0, 0, 0, 0};
      prefix = (prefix << 8) | digit;
      depth += 8;
      if (count == 1 || depth == 64) return {prefix, depth, base_mass, bucket_mass};
      clear(deeper);
      __syncthreads();
      build(deeper, prefix, depth, nullptr);
      __syncthreads();
      h = &deeper;
    }
  };

  clear(first);
  __syncthreads();
  u32 min_p_local = 0;
  build(first, 0, 0, &min_p_local);
  __syncthreads();
  const u32 n_m = ReduceU32(tmp.r32).Reduce(min_p_local, SumU32());
  if (tid < 32) {
    u32 cnt = 0;
    u64 mass = 0;
    for (int i = int(lane_index()); i < 256; i += 32) {
      cnt += first.cnt[i];
      mass += first.mass[i];
    }
    cnt = warp_sum(cnt);
    mass = warp_sum(mass);
    if (tid == 0) {
      shared_u32[0] = cnt;
      shared_u32[1] = n_m;
      shared_u64[0] = mass;
    }
  }
  __syncthreads();
  const u32 set_count = shared_u32[0];
  const u64 set_mass = shared_u64[0];
  Threshold cut = {0, 0, 0, 0};
  if (!inf_rule) {
    u64 z = set_mass;
    if (top_p_needs_top_k_mass(c, a.joint != 0, set_count)) {
      const Threshold k_cut = descend(u32(c.p.top_k), ~0ull);
      z = k_cut.above_mass + k_cut.bucket_mass;
    }
    const CutTargets t = cut_targets(c, shared_u32[1], z);
    if (t.count < set_count || t.mass <= set_mass) cut = descend(t.count, t.mass);
  }
  auto kept = [&](u64 cv) { return cut.depth == 0 || (cv >> (64 - cut.depth)) >= cut.prefix; };
  // The same set as one composite threshold, for nt_sample_logprobs.
  if (tid == 0) a.row_states[row].keep_cut = cut.depth == 0 ? 0ull : cut.prefix << (64 - cut.depth);

  if (!c.has_u) {
    build_word_floors<NT>(floors);
    __syncthreads();
    GumbelBest g;
    visit_tokens<DT, VEC, NT>(rowp, 0, vocab, [&](u32 t0, const float (&x)[4]) {
      gumbel_group(g, c, floors, t0, x, [&](float s, u32 t) {
        return t < u32(vocab) && in_set(s) && kept(composite(nt_order_key(s), t));
      });
    });
    const u64 w = ReduceU64(tmp.r64).Reduce(inf_rule ? g.best_inf : g.best, MaxU64());
    if (tid == 0) write_token(a, row, w ? (long long)composite_index(w) : -1);
    return;
  }

  // Explicit draw: contiguous segments per thread, their masses scanned in
  // thread order, then the thread holding the crossing walks its segment.
  const int64_t seg = (((vocab + NT - 1) / NT) + 3) & ~int64_t(3);
  const int64_t lo = min(vocab, int64_t(tid) * seg), hi = min(vocab, lo + seg);
  auto walk = [&](auto&& on_kept) {
    for (int64_t t = lo; t < hi; ++t) {
      const float s = nt_scaled_score(widen<DT>(rowp[t]), c.p.temperature);
      if (in_set(s) && kept(composite(nt_order_key(s), u32(t)))) {
        if (on_kept(u32(t), mass_of(s))) return;
      }
    }
  };
  u64 seg_mass = 0;
  u32 last_plus_one = 0;
  walk([&](u32 t, u64 m) {
    seg_mass += m;
    last_plus_one = t + 1;
    return false;
  });
  u64 before = 0, total = 0;
  ScanU64(tmp.scan).ExclusiveSum(seg_mass, before, total);
  __syncthreads();
  const u32 last = ReduceU32(tmp.r32).Reduce(last_plus_one, [](u32 x, u32 y) { return x > y ? x : y; });
  if (tid == 0) {
    shared_u32[0] = last;  // 0: empty set (cannot happen for a flagged row)
    shared_u32[1] = 0xFFFFFFFFu;
  }
  __syncthreads();
  float u = c.u;
  if (!(u >= 0.0f)) u = 0.0f;
  if (u < 1.0f && total > 0) {
    const u64 target = u64(floor(double(u) * double(total)));  // first running mass > target
    if (before <= target && target < before + seg_mass) {
      u64 run = before;
      walk([&](u32 t, u64 m) {
        run += m;
        if (run > target) {
          shared_u32[1] = t;
          return true;
        }
        return false;
      });
    }
  }
  __syncthreads();
  if (tid == 0) {
    const u32 at = shared_u32[1];
    write_token(a, row, at != 0xFFFFFFFFu ? (long long)at : (long long)shared_u32[0] - 1);
  }
}

// ---- kernel 3 -------------------------------------------------------------------

// Shared memory of one phase at a time.
union FlaggedRowsShared {
  LargeHistShared hist;
  LargeCollectShared collect;
  LargeFinishShared finish;
  FallbackShared fallback;
};

// A flagged row of a cluster launch (SampleArgs::cluster_merge, no
// flagged-row kernel after it), resolved by the row's own CTAs once its
// merge, chunk 0's, is out: each CTA takes its scan chunk (blockIdx.y) as
// the large keep-set path's work item, with cluster barriers where the
// kernel has grid syncs; chunk 0 finishes the row and runs the exact
// fallback where the path does not take the row or leaves it flagged. Called
// by every CTA of the cluster after the scan and the merge; returns unless its
// row (blockIdx.x) is filtered and flagged. It takes its row and chunk from
// the grid again rather than keep them live through the scan's tile loop.
// Cluster-uniform returns.
template <nt_dtype DT, bool VEC>
__device__ void resolve_row_in_cluster(const SampleArgs& a, FlaggedRowsShared& sh) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static_assert(kLargeThreads == kScanThreads, "the row's scan CTAs run its large keep-set path");
  const u32 row = blockIdx.x, chunk = blockIdx.y;
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  cluster.sync();  // the merge's row state and readied histogram are out
  const RowCfg c = load_row_cfg(a, row);
  if (c.cls != kFilteredRow) return;
  const RowState st = a.row_states[row];
  if (!st.fallback) return;
  if (large_keep_takes(c, st)) {
    const int64_t begin = int64_t(chunk) * a.chunk;
    const LargeItem item{row, begin, min(begin + int64_t(a.chunk), int64_t(a.vocab))};
    large_keep_hist_item<DT, VEC>(a, item, sh.hist);
    cluster.sync();  // the row's histogram is final
    build_word_floors<kLargeThreads>(sh.collect.floors);
    large_keep_collect_item<DT, VEC>(a, item, sh.collect);
    cluster.sync();  // the cut, the draw above it and the cut bin's list are final
    if (chunk != 0) return;
    large_keep_finish(a, row, sh.finish);
    __syncthreads();  // the flag as the finish left it
  } else if (chunk != 0) {
    return;
  }
  fallback_row<DT, VEC>(a, row, sh.fallback);
#endif
}

// Launched cooperatively (every CTA resident at once) on at most as many CTAs
// as the chip holds. Every CTA reads the same two counts, so all of them
// return at once or all of them reach every grid sync.
template <nt_dtype DT, bool VEC>
__global__ void __launch_bounds__(kLargeThreads, 2) sample_flagged_rows_kernel(SampleArgs a) {
  __shared__ FlaggedRowsShared sh;
  const LargeKeepArgs& L = a.large;
  const u32 n_flagged = *L.n_flagged;
  if (n_flagged == 0) return;  // nothing flagged: nothing listed either
  const u32 n_listed = *L.n_listed;
  if (n_listed > 0) {
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    large_keep_hist<DT, VEC>(a, sh.hist);
    grid.sync();  // the histograms are final
    large_keep_collect<DT, VEC>(a, sh.collect);
    grid.sync();  // the cuts, draws and lists are final
    for (u32 i = blockIdx.x; i < n_listed; i += gridDim.x) {
      large_keep_finish(a, L.listed[i], sh.finish);
      __syncthreads();  // the row's shared memory is free for the next one
    }
    grid.sync();  // the rows finish resolved are no longer flagged
  }
  for (u32 i = blockIdx.x; i < n_flagged; i += gridDim.x) {
    fallback_row<DT, VEC>(a, L.flagged[i], sh.fallback);
    __syncthreads();  // the row's shared memory is free for the next one
  }
}

}  // namespace nt::cuda
