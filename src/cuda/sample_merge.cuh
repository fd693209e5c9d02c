// The merge of one row's chunks (see sample_common.cuh), on one CTA: the merge
// kernel's (cuda/sample.cu) or a scan CTA's (cuda/sample_scan.cuh).
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda/sample_common.cuh"
#include "cuda/sample_large_keep.cuh"

namespace nt::cuda {

// ---- the merge of a row's chunks ---------------------------------------------------

__device__ inline void merge_argmax(const SampleArgs& a, const RowCfg& c, u32 row) {
  if (threadIdx.x >= 32) return;
  u64 best = 0, best_inf = 0;
  u32 n_inf = 0;
  for (int k = int(lane_index()); k < a.splits; k += 32) {
    const ChunkRecord& r = a.chunks[size_t(row) * a.splits + k];
    best = r.best > best ? r.best : best;
    if (c.cls == kPlainRow) {
      best_inf = r.best_inf > best_inf ? r.best_inf : best_inf;
      n_inf += r.n_pos_inf;
    }
  }
  best = warp_max(best);
  best_inf = warp_max(best_inf);
  n_inf = warp_sum(n_inf);
  if (lane_index() != 0) return;
  if (c.cls == kGreedyRow) {
    write_token(a, row, composite_key(best) > NT_KEY_NEG_INF ? (long long)composite_index(best) : -1);
  } else {
    const u64 w = n_inf ? best_inf : best;
    write_token(a, row, w ? (long long)composite_index(w) : -1);
  }
}

struct MergeInfo {
  u32 offset[kMaxSplits + 1];
  u32 n_total, n_inf, any_truncated, m_out;
  u64 valid_floor, best_inf;
  double z_full;
  u32 counter;
};

// The relative error bound of a row mass the chunks summed by exp2
// (exp2_mass_applies), 0 for the exact form. Against exp(s - s_max) of the
// scores s = x / T, a term 2^(x k - b) (Exp2Sum) carries the rounding of k
// and of the multiply-add, both relative to s_max - s (b's own rounding
// cancels when the thread's sum is rescaled to its largest logit), the
// roundings of x / T the scores carry (relative to |s| <= |s_max| + s_max - s)
// and the SFU's exp2 (2^-22); the mass-weighted mean of s_max - s is at most
// ln V. The sums (pairwise per tile, a thread's tile sums one after another,
// then block and row), the multiply-add of a term up to 2^32 above b and the
// rescalings add less than 2^-24 x (200 + the tiles a thread sums).
__device__ __forceinline__ double row_mass_error(const SampleArgs& a, const RowCfg& c,
                                                 float s_max) {
  if (!exp2_mass_applies(a, c)) return 0.0;
  const double tiles = double((int64_t(a.chunk) + kTileTokens - 1) / kTileTokens);
  return 0x1p-24 * (2.0 * fabs(double(s_max)) + 8.0 * log(double(a.vocab)) + 256.0 + tiles);
}

// The keep-set length from the row's sorted candidates (m of them), 0 when they
// cannot decide it (the fallback then does). z_err bounds z_full's relative
// error (row_mass_error). count_pass(): candidates with
// p >= min_p; prefix_at(i): running mass through candidate i; count_below(
// target, lim): i < lim whose running mass is below target. Block-uniform
// control flow, so the callbacks may hold block barriers.
template <class CountPass, class PrefixAt, class CountBelow>
__device__ __forceinline__ u32 keep_length(const RowCfg& c, bool joint, u32 m, bool known_all,
                                           double z_full, double z_err, CountPass&& count_pass,
                                           PrefixAt&& prefix_at, CountBelow&& count_below) {
  // n_k: exact when it is within the candidates
  u32 nk = c.p.top_k ? u32(c.p.top_k) : kNoLimit;
  if (known_all) nk = min(nk, m);
  bool exact_any = nk <= m;
  u32 len = nk <= m ? nk : kNoLimit;
  // n_m: the count of p >= min_p; when every candidate passes, only a lower bound
  if (c.p.min_p > 0.0f) {
    const u32 pass = count_pass();
    if (pass < m || known_all) {
      len = min(len, pass);
      exact_any = true;
    }
  }
  if (c.p.top_p < 1.0f) {
    if (c.p.top_p <= 0.0f) {
      len = min(len, 1u);
      exact_any = true;
    } else {
      double z = z_full, err = z_err;
      if (!joint && c.p.top_k != 0) {
        if (nk > m) return 0;  // the top-k set's mass is not known
        z = prefix_at(nk - 1);
        err = 0.0;
      } else if (known_all) {  // every finite token is a candidate
        z = prefix_at(m - 1);
        err = 0.0;
      }
      const u32 lim = min(nk, m);
      const double target = double(c.p.top_p) * z;
      const u32 below = count_below(target * (1.0 - err), lim);
      // A cut that moves within the mass's error is left to the fallback.
      if (err > 0.0 && count_below(target * (1.0 + err), lim) != below) return 0;
      if (below < lim) {
        len = min(len, below + 1);
        exact_any = true;
      } else if (nk <= m || known_all) {  // never reached (rounding): all of the range
        len = min(len, lim);
        exact_any = true;
      }
    }
  }
  return (exact_any && len <= m) ? len : 0u;
}

// Lists this short are sorted, cut and drawn from by one warp in registers.
constexpr u32 kWarpTailMax = 64;  // two per lane

// Rows of m candidates (n_inf of them +inf) that merge_tail_sorted draws.
__device__ __forceinline__ bool warp_tail_draws(const RowCfg& c, u32 m, u32 n_inf) {
  return m <= kWarpTailMax && !c.has_u && n_inf == 0;
}

// The end of merge_filtered for m <= kWarpTailMax candidates, sorted
// descending in one warp's registers (element i = 2 * lane + j in v[j], zero
// past m), no +inf score (those rows are drawn before) and a Gumbel draw; the
// same decisions as the block version. A lane's running mass is its
// predecessors' total plus its own pair.
__device__ inline void merge_tail_sorted(const SampleArgs& a, const RowCfg& c, u32 row,
                                         const u64 (&v)[2], u32 m, bool known_all, double z_full,
                                         RowState state) {
  const u32 lane = lane_index();
  const float s_max = nt_key_to_float(composite_key(__shfl_sync(kFullMask, v[0], 0)));
  float pv[2];
  double pm[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const bool in = 2 * lane + j < m;
    const float s = in ? nt_key_to_float(composite_key(v[j])) : -INFINITY;
    pv[j] = in ? expf(s - s_max) : 0.0f;
  }
  pm[0] = pv[0];
  pm[1] = double(pv[0]) + double(pv[1]);
  const double incl = warp_inclusive_sum(pm[1]);
  const double before = __shfl_up_sync(kFullMask, incl, 1);
  pm[0] += lane ? before : 0.0;
  pm[1] = incl;
  auto prefix_at = [&](u32 i) {  // warp-uniform i < 64
    const double p0 = __shfl_sync(kFullMask, pm[0], int(i / 2));
    const double p1 = __shfl_sync(kFullMask, pm[1], int(i / 2));
    return (i & 1u) ? p1 : p0;
  };

  const u32 length = keep_length(
      c, a.joint != 0, m, known_all, z_full, row_mass_error(a, c, s_max),
      [&] {
        u32 pass = 0;
#pragma unroll
        for (int j = 0; j < 2; ++j) pass += (2 * lane + j < m && pv[j] >= c.p.min_p) ? 1u : 0u;
        return warp_sum(pass);
      },
      prefix_at,
      [&](double target, u32 lim) {
        u32 below = 0;
#pragma unroll
        for (int j = 0; j < 2; ++j) below += (2 * lane + j < lim && pm[j] < target) ? 1u : 0u;
        return warp_sum(below);
      });
  if (length == 0) {
    if (lane == 0) {
      state.fallback = 1;
      state.s_max = s_max;
      a.row_states[row] = state;
    }
    return;
  }
  u64 best = 0;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    if (2 * lane + j < length) {
      const u64 cv = candidate_draw(c, v[j], false);
      best = cv > best ? cv : best;
    }
  }
  best = warp_max(best);
  // The keep-set's last member, element length - 1.
  state.keep_cut = __shfl_sync(kFullMask, ((length - 1) & 1u) ? v[1] : v[0], int((length - 1) / 2));
  if (lane == 0) {
    write_token(a, row, (long long)composite_index(best));
    a.row_states[row] = state;
  }
}

// merge_tail_sorted over top[0, m) (sorted descending when `sorted`).
__device__ __forceinline__ void merge_tail_warp(const SampleArgs& a, const RowCfg& c, u32 row,
                                                const u64* top, u32 m, bool known_all, double z_full,
                                                RowState state, bool sorted) {
  const u32 lane = lane_index();
  u64 v[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) v[j] = 2 * lane + j < m ? top[2 * lane + j] : 0ull;
  if (!sorted) warp_sort_desc<2>(v);
  merge_tail_sorted(a, c, row, v, m, known_all, z_full, state);
}

// The row's best 32N candidates at or above the floor into top[0, got),
// sorted descending, from chunk lists the list scan handed over sorted: warp
// w merges chunks w, w + 16, ... in registers, then a tree of warp merges
// (block_merge_desc). Block-uniform call; returns got. `stage` holds
// min(splits, 16) * 32N entries.
template <int N>
__device__ u32 merge_sorted_lists(const SampleArgs& a, u32 row, MergeInfo& info, u64 floor,
                                  u64* stage, u64* top) {
  constexpr int kWarps = kMergeThreads / 32;
  const int warp = int(threadIdx.x >> 5);
  const u32 lane = lane_index();
  u64 v[N];
#pragma unroll
  for (int j = 0; j < N; ++j) v[j] = 0ull;
  for (int k = warp; k < a.splits; k += kWarps) {
    const u32 nk = info.offset[k + 1] - info.offset[k];
    const u64* src = a.candidates + (size_t(row) * a.splits + k) * size_t(a.kchunk);
    u64 b[N];
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const u32 i = u32(N) * lane + u32(j);
      const u64 x = i < nk ? src[i] : 0ull;
      b[j] = x >= floor ? x : 0ull;  // under the floor: an exact prefix stays (merge_filtered)
    }
    warp_merge_desc<N>(v, b);
  }
  block_merge_desc<N>(v, stage, 32 * N, min(a.splits, kWarps));
  if (warp == 0) {
    u32 got = 0;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      if (v[j] != 0ull) top[u32(N) * lane + u32(j)] = v[j];
      got += v[j] != 0ull ? 1u : 0u;
    }
    got = warp_sum(got);
    if (lane == 0) info.m_out = got;
  }
  __syncthreads();
  return info.m_out;
}

__device__ inline void merge_filtered(const SampleArgs& a, const RowCfg& c, u32 row) {
  using Scan = cub::BlockScan<double, kMergeThreads>;
  using ReduceU64 = cub::BlockReduce<u64, kMergeThreads>;
  using ReduceU32 = cub::BlockReduce<u32, kMergeThreads>;
  extern __shared__ u64 merge_smem[];
  u64* cand = merge_smem;
  u64* top = merge_smem + size_t(a.splits) * a.kchunk;
  __shared__ MergeInfo info;
  __shared__ SelectScratch sel;
  __shared__ double prefix[kSortCap];
  __shared__ union {
    typename Scan::TempStorage scan;
    typename ReduceU64::TempStorage r64;
    typename ReduceU32::TempStorage r32;
  } tmp;
  const int tid = int(threadIdx.x);
  const bool need_z = filtered_needs_mass(a, c);
  const ChunkRecord* rec = a.chunks + size_t(row) * a.splits;

  if (tid < 32) {
    const int lane = int(lane_index());
    const int k0 = lane, k1 = lane + 32;
    ChunkRecord r0{}, r1{};
    if (k0 < a.splits) r0 = rec[k0];
    if (k1 < a.splits) r1 = rec[k1];
    // Chunk offsets in chunk order: lanes' first chunks, then their second ones.
    u32 i0 = r0.n_cand, i1 = r1.n_cand;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {  // both sums in one chain of shuffles
      const u32 v0 = __shfl_up_sync(kFullMask, i0, o), v1 = __shfl_up_sync(kFullMask, i1, o);
      if (lane >= o) {
        i0 += v0;
        i1 += v1;
      }
    }
    const u32 total0 = __shfl_sync(kFullMask, i0, 31), total1 = __shfl_sync(kFullMask, i1, 31);
    info.offset[k0] = i0 - r0.n_cand;
    info.offset[k1] = total0 + i1 - r1.n_cand;
    if (lane == 0) info.offset[kMaxSplits] = total0 + total1;
    const u64 f0 = r0.truncated ? r0.last : 0ull, f1 = r1.truncated ? r1.last : 0ull;
    const u64 floor = warp_max(f0 > f1 ? f0 : f1);
    const u32 trunc = warp_sum(r0.truncated + r1.truncated);
    const u32 n_inf = warp_sum(r0.n_pos_inf + r1.n_pos_inf);
    const u64 bi = warp_max(r0.best_inf > r1.best_inf ? r0.best_inf : r1.best_inf);
    // Full mass: sum_k z_k exp(m_k - s_max), terms added in a fixed order.
    float m = -INFINITY;
    if (k0 < a.splits) m = fmaxf(m, r0.max_s);
    if (k1 < a.splits) m = fmaxf(m, r1.max_s);
    m = warp_max(m);
    double z = 0.0;
    if (need_z && m != -INFINITY) {
      if (k0 < a.splits && r0.max_s != -INFINITY) z += double(r0.z) * exp(double(r0.max_s) - double(m));
      if (k1 < a.splits && r1.max_s != -INFINITY) z += double(r1.z) * exp(double(r1.max_s) - double(m));
    }
    z = warp_sum(z);
    if (lane == 0) {
      info.n_total = total0 + total1;
      info.valid_floor = floor;
      info.any_truncated = trunc != 0;
      info.n_inf = n_inf;
      info.best_inf = bi;
      info.z_full = z;
      info.counter = 0;
    }
  }
  __syncthreads();
  const u32 n_total = info.n_total, n_inf = info.n_inf;
  RowState state = {0u, n_inf, 0.0f, 0u};
  if (n_inf > 0 && !c.has_u) {  // +inf tokens: uniform Gumbel draw among them
    if (tid == 0) {
      write_token(a, row, (long long)composite_index(info.best_inf));
      a.row_states[row] = state;
    }
    return;
  }
  if (n_total == 0) {  // every score -inf: empty keep-set
    if (tid == 0) {
      write_token(a, row, -1);
      a.row_states[row] = state;
    }
    return;
  }
  const bool any_truncated = info.any_truncated != 0;
  const u64 floor = any_truncated ? info.valid_floor : 0ull;
  // Chunks of the list scan come sorted: a tree of merges takes the top-k
  // (the best kNucleusCandidates without a top-k).
  const bool sorted = n_inf == 0 && merge_of_sorted_lists(a, c);
  u32 m_count;
  if (sorted) {
    const u32 want = sorted_merge_count(c);
    const u32 got = want <= kWarpTailMax ? merge_sorted_lists<2>(a, row, info, floor, cand, top)
                                         : merge_sorted_lists<4>(a, row, info, floor, cand, top);
    m_count = min(got, want);
  } else {
    // Each thread finds its candidates' chunks by binary search on the offsets
    // (non-decreasing over all kMaxSplits + 1 slots, empty chunks included).
    // Candidates under the highest truncation floor are dropped on load: the
    // ones at or above it are an exact prefix of the row's order (no chunk
    // dropped anything ranking above its floor), and every later step only
    // looks at a prefix no longer than that.
    for (int base = 0; base < int(n_total); base += kMergeThreads) {
      const int i = base + tid;
      u64 v = 0;
      if (i < int(n_total)) {
        int k = 0;
#pragma unroll
        for (int step = kMaxSplits / 2; step > 0; step >>= 1)
          if (info.offset[k + step] <= u32(i)) k += step;
        v = a.candidates[(size_t(row) * a.splits + k) * size_t(a.kchunk) + (u32(i) - info.offset[k])];
      }
      const bool take = i < int(n_total) && v >= floor;
      const u32 pos = warp_append(take, &info.counter);
      if (take) cand[pos] = v;
    }
    __syncthreads();
    const u32 valid = info.counter;
    if (n_inf > 0) {
      if (n_inf > min(valid, u32(kSortCap))) {
        if (tid == 0) {
          state.fallback = 1;
          state.s_max = INFINITY;
          a.row_states[row] = state;
        }
        return;
      }
      m_count = n_inf;
    } else {
      // Without a top-k the keep-set is looked for among the best
      // kNucleusCandidates (a peaked row's nucleus), or kSortCap for an
      // explicit draw (filtered_keep); a longer one is flagged.
      m_count = min(valid, c.p.top_k ? min(u32(kSortCap), u32(c.p.top_k))
                                     : c.has_u ? u32(kSortCap) : u32(kNucleusCandidates));
    }
    // The top m_count candidates into `top`.
    __syncthreads();
    if (tid == 0) info.counter = 0;
    if (m_count < valid) {
      const u64 thr = block_select_kth<kMergeThreads>(cand, int(valid), m_count, sel);
      for (int base = 0; base < int(valid); base += kMergeThreads) {
        const int i = base + tid;
        const u64 v = i < int(valid) ? cand[i] : 0ull;
        const bool take = v >= thr;
        const u32 pos = warp_append(take, &info.counter);
        if (take) top[pos] = v;
      }
    } else {
      for (int i = tid; i < int(valid); i += kMergeThreads) top[i] = cand[i];
    }
  }
  const bool known_all = !any_truncated && m_count == n_total;
  if (warp_tail_draws(c, m_count, n_inf)) {
    __syncthreads();
    if (tid < 32) merge_tail_warp(a, c, row, top, m_count, known_all, info.z_full, state, sorted);
    return;
  }
  int n_sort = 1;
  while (n_sort < int(m_count)) n_sort <<= 1;
  for (int i = int(m_count) + tid; i < n_sort; i += kMergeThreads) top[i] = 0ull;
  if (sorted)
    __syncthreads();
  else
    bitonic_sort_desc<kMergeThreads>(top, n_sort);

  const bool inf_rule = n_inf > 0;
  const float s_max = inf_rule ? INFINITY : nt_key_to_float(composite_key(top[0]));
  // Masses of the sorted candidates and their running sums (fixed order).
  float pv[2];
  double pm[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int i = 2 * tid + j;
    const float s = i < int(m_count) ? nt_key_to_float(composite_key(top[i])) : -INFINITY;
    pv[j] = i < int(m_count) ? (inf_rule ? 1.0f : expf(s - s_max)) : 0.0f;
    pm[j] = pv[j];
  }
  Scan(tmp.scan).InclusiveSum(pm, pm);
  prefix[2 * tid] = pm[0];
  prefix[2 * tid + 1] = pm[1];
  __syncthreads();

  // A block sum of per-thread counts, the same in every thread.
  auto block_count = [&](u32 mine) {
    const u32 total = ReduceU32(tmp.r32).Reduce(mine, SumU32());
    if (tid == 0) info.m_out = total;
    __syncthreads();
    const u32 all = info.m_out;
    __syncthreads();
    return all;
  };
  const u32 length =
      inf_rule ? m_count
               : keep_length(
                     c, a.joint != 0, m_count, known_all, info.z_full,
                     row_mass_error(a, c, s_max),
                     [&] {
                       u32 pass = 0;
#pragma unroll
                       for (int j = 0; j < 2; ++j)
                         pass += (2 * tid + j < int(m_count) && pv[j] >= c.p.min_p) ? 1u : 0u;
                       return block_count(pass);
                     },
                     [&](u32 i) { return prefix[i]; },
                     [&](double target, u32 lim) {
                       u32 below = 0;
#pragma unroll
                       for (int j = 0; j < 2; ++j)
                         below += (u32(2 * tid + j) < lim && prefix[2 * tid + j] < target) ? 1u : 0u;
                       return block_count(below);
                     });
  if (length == 0) {
    if (tid == 0) {
      state.fallback = 1;
      state.s_max = s_max;
      a.row_states[row] = state;
    }
    return;
  }

  state.keep_cut = top[length - 1];  // the keep-set's last member (top is sorted)
  if (!c.has_u) {
    u64 best = 0;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int i = 2 * tid + j;
      if (i < int(length)) {
        const u64 cv = candidate_draw(c, top[i], inf_rule);
        best = cv > best ? cv : best;
      }
    }
    __syncthreads();
    best = ReduceU64(tmp.r64).Reduce(best, MaxU64());
    if (tid == 0) {
      write_token(a, row, (long long)composite_index(best));
      a.row_states[row] = state;
    }
    return;
  }

  // Explicit draw: the keep-set in vocabulary order (sorted by ~index, key kept
  // in the low half), running masses, the first one past u * total.
  __syncthreads();
  for (int i = tid; i < n_sort; i += kMergeThreads) {
    const u64 v = top[i];
    top[i] = i < int(length) ? ((v << 32) | (v >> 32)) : 0ull;
  }
  bitonic_sort_desc<kMergeThreads>(top, n_sort);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int i = 2 * tid + j;
    const float s = i < int(length) ? nt_key_to_float(u32(top[i])) : -INFINITY;
    pm[j] = i < int(length) ? (inf_rule ? 1.0 : double(expf(s - s_max))) : 0.0;
  }
  __syncthreads();
  Scan(tmp.scan).InclusiveSum(pm, pm);
  prefix[2 * tid] = pm[0];
  prefix[2 * tid + 1] = pm[1];
  __syncthreads();
  const double total = prefix[length - 1];
  float u = c.u;
  if (!(u >= 0.0f)) u = 0.0f;
  u32 at = length - 1;
  if (u < 1.0f) {
    const double target = double(u) * total;
    u32 not_past = 0;
#pragma unroll
    for (int j = 0; j < 2; ++j) not_past += (u32(2 * tid + j) < length && prefix[2 * tid + j] <= target) ? 1u : 0u;
    __syncthreads();
    not_past = ReduceU32(tmp.r32).Reduce(not_past, SumU32());
    if (tid == 0) info.m_out = not_past;
    __syncthreads();
    at = min(info.m_out, length - 1);
  }
  if (tid == 0) {
    write_token(a, row, (long long)~u32(top[at] >> 32));
    a.row_states[row] = state;
  }
}

// After a filtered row's merge (or its draw in the scan): a row it flagged is
// readied for the large keep-set path where that path takes it, and listed
// for the flagged-row kernel (for its fallback, and for the large path where
// readied), unless the row's cluster resolves it (resolve_row_in_cluster).
// Every merge that may flag a row (the merge kernel, the scan's merge of a
// one-chunk row or its draw, the cluster's) ends here. Block-uniform call.
__device__ __forceinline__ void filtered_row_merged(const SampleArgs& a, const RowCfg& c, u32 row) {
  if (a.large.rows) {
    __syncthreads();
    const RowState st = a.row_states[row];
    if (!st.fallback) return;
    if (threadIdx.x == 0 && !a.cluster_merge) a.large.flagged[atomicAdd(a.large.n_flagged, 1u)] = row;
    if (large_keep_takes(c, st)) large_keep_reset(a, row);
  }
}

// One row's merge once its chunks' records and candidates are out, on
// kMergeThreads threads: the merge kernel's CTA, or a scan CTA (its own row of
// one chunk, or the first CTA of a row's cluster). FILTERED = false where no
// row can be filtered (the greedy and plain scans), so the filtered merge is
// not compiled there.
template <bool FILTERED = true>
__device__ __forceinline__ void merge_row(const SampleArgs& a, const RowCfg& c, u32 row) {
  if constexpr (FILTERED) {
    if (c.cls == kFilteredRow) {
      merge_filtered(a, c, row);
      filtered_row_merged(a, c, row);
      return;
    }
  }
  if (a.splits > 1) merge_argmax(a, c, row);
}

}  // namespace nt::cuda
