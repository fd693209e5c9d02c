// Phases 1-3 of nt_sample's flagged-row kernel (sample_fallback.cuh): rows
// whose keep-set reaches past the merged candidates (top-p over a flat row),
// resolved in two passes over the row. The merges list these rows; hist and
// collect share out the listed rows' chunks over the kernel's grid, sized for
// the chip (for_each_large_item); a grid sync separates the phases. A cluster
// launch runs the same phases per item on its own row's chunks, with cluster
// barriers (resolve_row_in_cluster).
//
//  hist     per chunk: a count and a fixed-point mass histogram of the row
//           over kLargeBins bins of s_max - s (1/kLargeBinsPerUnit wide; the
//           last bin takes everything further down), added into the row's
//           global histogram; the min-p count beside it.
//  collect  per chunk: finds the bin where the keep-set ends (the same
//           decision for every chunk: the histogram is final), draws the
//           Gumbel-max over the bins above it (each warp pruning with the
//           best value any of its lanes reached) and appends the tokens of
//           that bin (at most kLargeCap, checked before) to the row's list;
//           only logits inside the bin's window of raw logits take the exact
//           test.
//  finish   per listed row, one CTA: sorts the list, cuts it where the count
//           or mass target is reached, draws over the kept part, writes the
//           token and clears the row's flag.
//
// Bins are monotone in the order (s_max - s and the scaling by a power of two
// round monotonically), so every bin above the cut is kept whole and the cut
// inside its bin is the one the radix descent of sample_fallback.cuh finds:
// the same integer masses, the same targets, the same keep-set. Rows this path
// does not take (an explicit draw, +inf scores, a top-p renormalized on a
// top-k that cuts the row, a cut bin over kLargeCap tokens) stay flagged for
// the kernel's last phase, the exact fallback.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda/sample_common.cuh"

namespace nt::cuda {

constexpr int kLargeThreads = 512;
constexpr int kLargeBins = 2048;
constexpr float kLargeBinsPerUnit = 64.0f;  // a power of two: exact scaling
constexpr int kLargeCap = 2048;
constexpr int kLargeItems = kLargeCap / kLargeThreads;
constexpr u32 kNoCut = kLargeBins;

__device__ __forceinline__ int large_bin(float s, float s_max) {
  // fminf also takes NaN (s or s_max infinite) to the last bin, without a branch.
  return int(fminf((s_max - s) * kLargeBinsPerUnit, float(kLargeBins - 1)));
}

__device__ __forceinline__ bool large_keep_takes(const RowCfg& c, const RowState& st) {
  return c.cls == kFilteredRow && st.fallback && st.n_pos_inf == 0 && !c.has_u;
}

// Called by the whole merge CTA after it flagged `row` for this path; lists
// the row for the flagged-row kernel unless a cluster launch resolves its rows
// itself (resolve_row_in_cluster).
__device__ __forceinline__ void large_keep_reset(const SampleArgs& a, u32 row) {
  const LargeKeepArgs& L = a.large;
  uint4* cnt = reinterpret_cast<uint4*>(L.cnt + size_t(row) * kLargeBins);
  uint4* mass = reinterpret_cast<uint4*>(L.mass + size_t(row) * kLargeBins);
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int i = int(threadIdx.x); i < kLargeBins / 4; i += int(blockDim.x)) cnt[i] = zero;
  for (int i = int(threadIdx.x); i < kLargeBins / 2; i += int(blockDim.x)) mass[i] = zero;
  if (threadIdx.x == 0) {
    L.rows[row] = LargeKeepRow{};
    if (!a.cluster_merge) L.listed[atomicAdd(L.n_listed, 1u)] = row;
  }
}

// The hist and collect phases run on a grid sized for the chip, not for the
// batch: its CTAs share out the work items (listed row, chunk) of the rows the
// merges listed, each row cut into as many chunks as fill the grid (at most
// L.splits). Both phases cut the rows alike (the same grid, the same count);
// the kernel runs them only with some row listed.
struct LargeItem {
  u32 row;
  int64_t begin, end;
};
template <class OnItem>
__device__ __forceinline__ void for_each_large_item(const SampleArgs& a, OnItem&& on_item) {
  const LargeKeepArgs& L = a.large;
  const u32 listed = *L.n_listed;
  const int64_t vocab = a.vocab;
  const int64_t wanted = max(1u, min(u32(L.splits), gridDim.x / listed));
  const int64_t chunk = ((vocab + wanted - 1) / wanted + 7) / 8 * 8;  // whole Philox blocks
  const u32 per_row = u32((vocab + chunk - 1) / chunk);
  for (u32 item = blockIdx.x; item < listed * per_row; item += gridDim.x) {
    const int64_t begin = int64_t(item % per_row) * chunk;
    on_item(LargeItem{L.listed[item / per_row], begin, min(begin + chunk, vocab)});
    __syncthreads();  // the item's shared memory is free for the next one
  }
}

// Each phase's shared memory; the kernel holds one phase's at a time (a union).
struct LargeHistShared {
  // A bin's mass as two 32-bit words: shared memory has no 64-bit atomic add
  // (the compiler loops on a 64-bit CAS); the carry out of the low word is
  // seen in the value the 32-bit add returns.
  // Past the bins, one slot a lane takes the adds of its -inf scores, which
  // then need no branch (and the lanes of a warp never meet in one address).
  u32 cnt[kLargeBins + 32], mass_lo[kLargeBins + 32], mass_hi[kLargeBins + 32];
  typename cub::BlockReduce<u32, kLargeThreads>::TempStorage reduce;
};

// Phase 1 (the whole CTA): one item's part of its row's histogram.
template <nt_dtype DT, bool VEC>
__device__ void large_keep_hist_item(const SampleArgs& a, const LargeItem& item, LargeHistShared& sh) {
  const LargeKeepArgs& L = a.large;
  using S = typename LogitTraits<DT>::Storage;
  using ReduceU32 = cub::BlockReduce<u32, kLargeThreads>;
  u32* cnt = sh.cnt;
  u32* mass_lo = sh.mass_lo;
  u32* mass_hi = sh.mass_hi;
  const u32 row = item.row;
  const RowCfg c = load_row_cfg(a, row);
  const float s_max = a.row_states[row].s_max;
  for (int i = int(threadIdx.x); i < kLargeBins; i += kLargeThreads) {
    cnt[i] = 0;
    mass_lo[i] = 0;
    mass_hi[i] = 0;
  }
  __syncthreads();
  const S* rowp = static_cast<const S*>(a.logits) + int64_t(row) * a.row_stride;
  u32 n_min_p = 0;
  const float min_p = c.p.min_p > 0.0f ? c.p.min_p : INFINITY;  // INFINITY: no p reaches it
  const u32 lane = lane_index();
  const double reciprocal = nt_score_reciprocal(c.p.temperature);
  visit_tokens<DT, VEC, kLargeThreads>(rowp, item.begin, item.end, [&](u32, const float (&x)[4]) {
    // The group's four scores first, then their bins, masses and adds without
    // a branch (a -inf score adds to its lane's slot), so that the four
    // tokens' arithmetic and shared-memory round trips overlap.
    float s[4];
    int exact = 1;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const double y = double(x[j]) * reciprocal;
      s[j] = nt_score_from_product(y);
      exact &= nt_score_product_exact(y);
    }
    if (!exact) {
#pragma unroll
      for (int j = 0; j < 4; ++j) s[j] = nt_scaled_score(x[j], c.p.temperature);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float p = expf(s[j] - s_max);
      const int b = s[j] != -INFINITY ? large_bin(s[j], s_max) : kLargeBins + int(lane);
      const u64 m = fixed_mass(p, a.mass_bits);
      n_min_p += p >= min_p ? 1u : 0u;
      atomicAdd(&cnt[b], 1u);
      const u32 lo = u32(m), old_lo = atomicAdd(&mass_lo[b], lo);
      atomicAdd(&mass_hi[b], u32(m >> 32) + (old_lo + lo < old_lo ? 1u : 0u));
    }
  });
  n_min_p = ReduceU32(sh.reduce).Reduce(n_min_p, SumU32());
  if (threadIdx.x == 0 && n_min_p) atomicAdd(&L.rows[row].n_min_p, n_min_p);
  __syncthreads();
  u32* gcnt = L.cnt + size_t(row) * kLargeBins;
  u64* gmass = L.mass + size_t(row) * kLargeBins;
  for (int i = int(threadIdx.x); i < kLargeBins; i += kLargeThreads)
    if (cnt[i]) {
      atomicAdd(&gcnt[i], cnt[i]);
      atomicAdd(&gmass[i], (u64(mass_hi[i]) << 32) + mass_lo[i]);
    }
}

// Phase 1 over the kernel's grid: the listed rows' histograms.
template <nt_dtype DT, bool VEC>
__device__ void large_keep_hist(const SampleArgs& a, LargeHistShared& sh) {
  for_each_large_item(a, [&](const LargeItem& item) { large_keep_hist_item<DT, VEC>(a, item, sh); });
}

// Where the keep-set ends in the row's histogram, or why this path cannot
// tell (ok = 0). Called by every thread; thread i takes bins 4i..4i+3 from
// the row's global histogram, the block scans their counts and masses, and
// the thread whose bins hold the first running total that reaches a target
// writes the cut (thread 0 writes the answer when no bin ends it).
struct LargeCut {
  u32 ok, cut_bin, above_count, count_target;
  u64 above_mass, mass_target;
};
struct LargeCutShared {
  u32 warp_count[kLargeThreads / 32];
  u64 warp_mass[kLargeThreads / 32];
  LargeCut cut;
};

__device__ inline void large_find_cut(const SampleArgs& a, const RowCfg& c, u32 row,
                                      LargeCutShared& sh) {
  constexpr int kPer = kLargeBins / kLargeThreads;
  static_assert(kPer == 4, "a thread's bins are one 16-byte load of counts, two of masses");
  const LargeKeepArgs& L = a.large;
  const u32 tid = threadIdx.x, warp = tid / 32, lane = lane_index();
  const uint4 c4 = reinterpret_cast<const uint4*>(L.cnt + size_t(row) * kLargeBins)[tid];
  const ulonglong2* mass2 = reinterpret_cast<const ulonglong2*>(L.mass + size_t(row) * kLargeBins);
  const ulonglong2 m01 = mass2[2 * tid], m23 = mass2[2 * tid + 1];
  const u32 cnt[kPer] = {c4.x, c4.y, c4.z, c4.w};
  const u64 mass[kPer] = {m01.x, m01.y, m23.x, m23.y};
  const u32 n_min_p = L.rows[row].n_min_p;
  u32 csum = 0;
  u64 msum = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    csum += cnt[j];
    msum += mass[j];
  }
  u32 cincl = csum;
  u64 mincl = msum;
  warp_inclusive_sum_pair(cincl, mincl);
  if (lane == 31) {
    sh.warp_count[warp] = cincl;
    sh.warp_mass[warp] = mincl;
  }
  __syncthreads();
  u32 set_count = 0, crun = cincl - csum;
  u64 set_mass = 0, mrun = mincl - msum;
#pragma unroll
  for (u32 w = 0; w < u32(kLargeThreads / 32); ++w) {
    const u32 wc = sh.warp_count[w];
    const u64 wm = sh.warp_mass[w];
    set_count += wc;
    set_mass += wm;
    if (w < warp) {
      crun += wc;
      mrun += wm;
    }
  }
  LargeCut r{};
  r.ok = !top_p_needs_top_k_mass(c, a.joint != 0, set_count);
  const CutTargets t = cut_targets(c, n_min_p, set_mass);
  r.count_target = t.count;
  r.mass_target = t.mass;
  r.cut_bin = kNoCut;
  auto reached = [&](u32 cc, u64 mm) { return cc >= t.count || mm >= t.mass; };
  // The totals reach a target, and the empty prefix does not: exactly one
  // bin's running total is the first to reach one.
  const bool cut_in_bins = r.ok && (t.count < set_count || t.mass <= set_mass) && !reached(0u, 0ull);
  if (!cut_in_bins && tid == 0) sh.cut = r;
  if (cut_in_bins && reached(crun + csum, mrun + msum) && !reached(crun, mrun)) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (reached(crun + cnt[j], mrun + mass[j])) {
        r.cut_bin = u32(kPer) * tid + u32(j);
        r.above_count = crun;
        r.above_mass = mrun;
        r.ok = cnt[j] <= u32(kLargeCap);
        sh.cut = r;
        break;
      }
      crun += cnt[j];
      mrun += mass[j];
    }
  }
  __syncthreads();
}

// Raw logits outside [lo, hi] hold no token of bin b (none when b is kNoCut).
// The bin's scores lie between its edges s_max - (b + 1) / 64 and s_max - b / 64
// (the last bin open downwards) widened by 1e-5 (|s_max| + 34), far above the
// rounding of s_max - s (|s_max - s| < 32 in a bin that is not the last) and of
// the edges; logit_floor takes those scores to logits (and, by symmetry, -x's
// floor bounds x from above). bound_mode 2 (T subnormal or huge) is not bounded.
struct LogitWindow {
  float lo, hi;
  __device__ __forceinline__ bool may_hold(float x) const { return !(x < lo || x > hi); }
};

__device__ __forceinline__ LogitWindow large_bin_window(const RowCfg& c, float s_max, int b) {
  if (b == int(kNoCut)) return {INFINITY, -INFINITY};
  if (c.bound_mode == 2) return {-INFINITY, INFINITY};
  const float top = s_max - float(b) / kLargeBinsPerUnit;
  const float bottom = b == kLargeBins - 1 ? -INFINITY : s_max - float(b + 1) / kLargeBinsPerUnit;
  const float eps = 1e-5f * (fabsf(s_max) + 34.0f);
  return {logit_floor(bottom - eps, c), -logit_floor(-(top + eps), c)};
}

struct LargeCollectShared {
  u32 floors[kWordFloorSlots];
  LargeCutShared find;
  typename cub::BlockReduce<u64, kLargeThreads>::TempStorage reduce;
};

// Phase 2 (the whole CTA, the histograms final, sh.floors built): one
// item's part of its row's cut, of the draw above it and of the cut bin's list.
template <nt_dtype DT, bool VEC>
__device__ void large_keep_collect_item(const SampleArgs& a, const LargeItem& item,
                                        LargeCollectShared& sh) {
  const LargeKeepArgs& L = a.large;
  using S = typename LogitTraits<DT>::Storage;
  using ReduceU64 = cub::BlockReduce<u64, kLargeThreads>;
  const u32* floors = sh.floors;
  const u32 row = item.row;
  const RowCfg c = load_row_cfg(a, row);
  const float s_max = a.row_states[row].s_max;
  large_find_cut(a, c, row, sh.find);
  const LargeCut cut = sh.find.cut;
  if (!cut.ok) return;
  LargeKeepRow& lk = L.rows[row];
  if (item.begin == 0 && threadIdx.x == 0) {
    lk.cut_bin = cut.cut_bin;
    lk.above_count = cut.above_count;
    lk.above_mass = cut.above_mass;
    lk.count_target = cut.count_target;
    lk.mass_target = cut.mass_target;
    lk.active = 1;
  }
  const S* rowp = static_cast<const S*>(a.logits) + int64_t(row) * a.row_stride;
  const int cut_bin = int(cut.cut_bin);
  const LogitWindow window = large_bin_window(c, s_max, cut_bin);
  u64* list = L.cand + size_t(row) * kLargeCap;
  GumbelBest g;
  visit_tokens<DT, VEC, kLargeThreads>(rowp, item.begin, item.end, [&](u32 t0, const float (&x)[4]) {
    // Token by token, and only in the lanes whose logit may lie in the cut
    // bin: the window holds a small part of the row, so most warps skip each
    // token on one vote.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const bool near_cut = window.may_hold(x[j]);
      if (__any_sync(kFullMask, near_cut)) {
        const float s = near_cut ? nt_scaled_score(x[j], c.p.temperature) : -INFINITY;
        const bool in_cut = s != -INFINITY && large_bin(s, s_max) == cut_bin;
        const u32 slot = warp_append(in_cut, &lk.n_cand);
        if (in_cut) list[slot] = composite(nt_order_key(s), t0 + u32(j));
      }
    }
    gumbel_group(g, c, floors, t0, x, [&](float s, u32) { return large_bin(s, s_max) < cut_bin; });
    // Every lane's bound is a value some token of the row reached, so the
    // warp's largest prunes each lane's draws as well as its own would.
    g.bound = nt_key_to_float(__reduce_max_sync(kFullMask, nt_order_key(g.bound)));
  });
  const u64 best = ReduceU64(sh.reduce).Reduce(g.best, MaxU64());
  if (threadIdx.x == 0 && best) atomicMax(&lk.best, best);
}

// Phase 2 over the kernel's grid: the listed rows' cuts, the draws above them
// and the lists of their cut bins.
template <nt_dtype DT, bool VEC>
__device__ void large_keep_collect(const SampleArgs& a, LargeCollectShared& sh) {
  build_word_floors<kLargeThreads>(sh.floors);
  for_each_large_item(a, [&](const LargeItem& item) { large_keep_collect_item<DT, VEC>(a, item, sh); });
}

struct LargeFinishShared {
  u64 list[kLargeCap];
  u32 length;
  union {
    typename cub::BlockScan<u64, kLargeThreads>::TempStorage scan;
    typename cub::BlockReduce<u64, kLargeThreads>::TempStorage r64;
    typename cub::BlockReduce<u32, kLargeThreads>::TempStorage r32;
  } tmp;
};

// Phase 3 (the whole CTA, the lists final): the token of one listed row,
// unless collect found no cut for it (the row stays flagged). Block-uniform
// returns.
__device__ inline void large_keep_finish(const SampleArgs& a, u32 row, LargeFinishShared& sh) {
  const LargeKeepArgs& L = a.large;
  using ScanU64 = cub::BlockScan<u64, kLargeThreads>;
  using ReduceU64 = cub::BlockReduce<u64, kLargeThreads>;
  using ReduceU32 = cub::BlockReduce<u32, kLargeThreads>;
  const LargeKeepRow lk = L.rows[row];
  if (!lk.active) return;
  const RowCfg c = load_row_cfg(a, row);
  const RowState st = a.row_states[row];
  u64* list = sh.list;
  u32& length = sh.length;
  auto& tmp = sh.tmp;
  const int tid = int(threadIdx.x);
  u64 best = 0;
  u64 keep_cut = 0;  // kNoCut: every score is kept
  if (lk.cut_bin != kNoCut) {
    const int n = int(lk.n_cand);
    int n_sort = 1;
    while (n_sort < n) n_sort <<= 1;
    for (int i = tid; i < n_sort; i += kLargeThreads)
      list[i] = i < n ? L.cand[size_t(row) * kLargeCap + i] : 0ull;
    bitonic_sort_desc<kLargeThreads>(list, n_sort);
    // Element i = kLargeItems * tid + j; the keep-set takes the bin's first
    // `length` elements: one past the last that reaches neither target.
    u64 m[kLargeItems];
#pragma unroll
    for (int j = 0; j < kLargeItems; ++j) {
      const int i = kLargeItems * tid + j;
      const float s = i < n ? nt_key_to_float(composite_key(list[i])) : -INFINITY;
      m[j] = i < n ? fixed_mass(expf(s - st.s_max), a.mass_bits) : 0ull;
    }
    ScanU64(tmp.scan).InclusiveSum(m, m);
    u32 short_of = 0;
#pragma unroll
    for (int j = 0; j < kLargeItems; ++j) {
      const int i = kLargeItems * tid + j;
      short_of += (i < n && lk.above_count + u32(i) + 1 < lk.count_target &&
                   lk.above_mass + m[j] < lk.mass_target)
                      ? 1u
                      : 0u;
    }
    __syncthreads();
    short_of = ReduceU32(tmp.r32).Reduce(short_of, SumU32());
    if (tid == 0) length = min(short_of + 1, u32(n));
    __syncthreads();
    const u32 len = length;
    // The bins above the cut are kept whole: the keep-set ends at the cut
    // bin's element len - 1.
    keep_cut = len > 0 ? list[len - 1] : 0ull;
    for (int i = tid; i < int(len); i += kLargeThreads) {
      const u64 cv = candidate_draw(c, list[i], false);
      best = cv > best ? cv : best;
    }
    __syncthreads();
    best = ReduceU64(tmp.r64).Reduce(best, MaxU64());
  }
  if (tid == 0) {
    best = best > lk.best ? best : lk.best;
    write_token(a, row, best ? (long long)composite_index(best) : -1);
    a.row_states[row].keep_cut = keep_cut;
    a.row_states[row].fallback = 0;
  }
}

}  // namespace nt::cuda
