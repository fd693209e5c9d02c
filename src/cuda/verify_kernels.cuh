// The kernels of verify_draft / verify_tree on CUDA (docs/SEMANTICS.md,
// "Speculative verification"; the host side is cuda/verify.cu, and
// VerifyKernels is declared in cuda/verify_launch.cuh), two on the call's
// stream:
//
//  rows  one CTA per target row a walk may reach (chain: a request's draft
//        positions and bonus row; tree: every node), which resolves the row's
//        keep-set into a RowInfo in the workspace: greedy rows their argmax;
//        sampled rows the cut (the keep-set is every finite token whose
//        (score key, index) composite is >= cut), its fixed-point mass z, and,
//        when it fits, the list of its members.
//        Keep-sets under a top-k of at most kListCap: a pivot score key (a
//        rank of a sample of the row, every 64th token, by radix select), the
//        tokens at or above it (at most kCandCap) collected in the same pass
//        that finds the row's maximum, ranked in shared memory, then the top-p
//        and min-p cuts over that sorted prefix;
//        when the pivot leaves fewer than k or more than kCandCap candidates,
//        a three-digit radix select over the row finds the k-th key instead.
//        Other cut rows bisect the cut over composites, one counting pass a
//        step (exact, slow: meant for top-p without top-k and very large k).
//        Rows without cuts take their mass in one pass.
//  walk  one CTA per request, walking its positions with the RowInfos:
//        acceptance tests are a few integer operations (core/verify.h), a
//        chain's taken for many positions at once, a thread each; a
//        rejection or the bonus draws by Gumbel-max over the keep-set's list,
//        or over the row when it has none, reduced over the CTA.
//
// Every mass and comparison is the integer arithmetic of core/verify.h, so the
// tokens equal the CPU backend's bit for bit.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "core/verify.h"
#include "cuda/block_select.cuh"  // composite keys
#include "cuda/load.cuh"
#include "cuda/ops.cuh"
#include "cuda/verify_launch.cuh"

namespace nt::cuda::verify_kernels {

constexpr int kRowThreads = 256;
constexpr int kRowBlocksPerSM = 4;  // every slot of B = 64 x 4 resident at once on 132 SMs
constexpr int kWalkThreads = 256;
constexpr int kCandCap = 2048;     // candidates at or above a row's pivot
constexpr int kRadixBits = 11;
constexpr int kRadixBins = 1 << kRadixBits;
constexpr int kSamples = kRadixBins;  // most pivot samples of a row

enum : int32_t { kFinite = 0, kEmpty = 1, kInfRow = 2, kGreedy = 3 };

struct MaxU64 {
  __device__ u64 operator()(u64 a, u64 b) const { return a > b ? a : b; }
};
struct SumU64 {
  __device__ u64 operator()(u64 a, u64 b) const { return a + b; }
};

__device__ inline nt_row_params request_params(const VerifyArgs& a, u32 b) {
  return nt_resolve_row_params(param_at(a.temperature, b), param_at(a.top_k, b),
                               param_at(a.top_p, b), param_at(a.min_p, b), int32_t(a.vocab));
}

// Request b's first draft lo and draft count n, clamped as SEMANTICS.md says.
__device__ inline void chain_range(const VerifyArgs& a, u32 b, int64_t* lo, int64_t* n) {
  const int64_t td = a.drafts;
  int64_t l = a.cu[b];
  l = l < 0 ? 0 : (l > td ? td : l);
  int64_t m = int64_t(a.cu[b + 1]) - l;
  const int64_t cap = (td - l) < int64_t(a.width) - 1 ? (td - l) : int64_t(a.width) - 1;
  m = m < 0 ? 0 : (m > cap ? cap : m);
  *lo = l;
  *n = m;
}

// The value of v over the block, in every thread (BlockReduce plus a broadcast).
template <int T, class Op>
__device__ u64 block_fold(typename cub::BlockReduce<u64, T>::TempStorage& tmp, u64* slot, u64 v,
                          Op op) {
  const u64 r = cub::BlockReduce<u64, T>(tmp).Reduce(v, op);
  if (threadIdx.x == 0) *slot = r;
  __syncthreads();
  const u64 out = *slot;
  __syncthreads();
  return out;
}

// ---- rows ------------------------------------------------------------------------

// A target row: its logits, and once pass A is done its top score and mass scale.
template <nt_dtype DT>
struct RowView {
  using S = typename LogitTraits<DT>::Storage;
  const S* x;
  float s_max;
  int bits;
};

// The score of a logit; UNIT_T: temperature 1, where x / 1 == x exactly and
// only NaN needs mapping (to -inf), as nt_scaled_score does.
template <bool UNIT_T>
__device__ __forceinline__ float scaled_score(float x, float temperature) {
  if constexpr (UNIT_T) {
    return x != x ? -INFINITY : x;
  } else {
    return nt_scaled_score(x, temperature);
  }
}

// Calls f(i, s) for every token i < V of row x with its score s. Each thread
// visits its own tokens in increasing index order (the tokens before the row's
// first 16-byte boundary, then 16-byte groups, kUnroll loads in flight a
// step, then the tail), so a strict `>` keeps a thread's first maximum.
template <nt_dtype DT, int T, bool UNIT_T, class F>
__device__ __forceinline__ void for_each_score(const typename LogitTraits<DT>::Storage* x, u32 V,
                                               float temperature, int tid, F&& f) {
  using S = typename LogitTraits<DT>::Storage;
  constexpr int G = LogitTraits<DT>::kVecTokens;  // tokens of 16 bytes
  constexpr int kUnroll = 4;
  const u32 misalign = u32(reinterpret_cast<uintptr_t>(x) & 15u) / u32(sizeof(S));
  u32 head = misalign ? u32(G) - misalign : 0u;
  head = head < V ? head : V;
  if (u32(tid) < head) f(u32(tid), scaled_score<UNIT_T>(widen<DT>(x[tid]), temperature));
  const uint4* body = reinterpret_cast<const uint4*>(x + head);
  const u32 groups = (V - head) / u32(G);
  auto visit_group = [&](u32 g, const uint4& v) {
    const u32 base = head + g * u32(G);
    const u32 w[4] = {v.x, v.y, v.z, v.w};
    if constexpr (DT == NT_F32) {
#pragma unroll
      for (int t = 0; t < 4; ++t) f(base + u32(t), scaled_score<UNIT_T>(__uint_as_float(w[t]), temperature));
    } else {
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        f(base + u32(2 * t), scaled_score<UNIT_T>(widen<DT>(S(w[t] & 0xFFFFu)), temperature));
        f(base + u32(2 * t + 1), scaled_score<UNIT_T>(widen<DT>(S(w[t] >> 16)), temperature));
      }
    }
  };
  u32 g = u32(tid);
  for (; g + u32((kUnroll - 1) * T) < groups; g += u32(kUnroll * T)) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldg(body + g + u32(u * T));
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) visit_group(g + u32(u * T), v[u]);
  }
  for (; g < groups; g += u32(T)) visit_group(g, __ldg(body + g));
  for (u32 i = head + groups * u32(G) + u32(tid); i < V; i += u32(T))
    f(i, scaled_score<UNIT_T>(widen<DT>(x[i]), temperature));
}

// for_each_score with the temperature-1 form picked at run time.
template <nt_dtype DT, int T, class F>
__device__ __forceinline__ void for_each_row_score(const typename LogitTraits<DT>::Storage* x,
                                                   u32 V, float temperature, int tid, F&& f) {
  if (temperature == 1.0f) {
    for_each_score<DT, T, true>(x, V, temperature, tid, f);
  } else {
    for_each_score<DT, T, false>(x, V, temperature, tid, f);
  }
}

// The rank-th largest (rank >= 1) of the n keys held kPerThread a thread (key
// tid + u * kRowThreads in keys[u]): the value the rank-1-th entry of the keys
// sorted largest first holds. A radix select, 8 bits a round: a histogram of
// the keys matching the digits found so far, then one warp finds the digit
// holding the rank-th key from the top. hist needs 256 bins.
template <int kPerThread>
__device__ u32 select_rank_key(const u32 (&keys)[kPerThread], int tid, u32 n, u32 rank, u32* hist,
                               u32* shared2) {
  u32 prefix = 0, remaining = rank;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = tid; i < 256; i += kRowThreads) hist[i] = 0;
    __syncthreads();
    const u32 high_mask = shift == 24 ? 0u : ~0u << (shift + 8);
#pragma unroll
    for (int u = 0; u < kPerThread; ++u) {
      const u32 t = u32(tid + u * kRowThreads);
      if (t < n && (keys[u] & high_mask) == (prefix & high_mask))
        atomicAdd(&hist[(keys[u] >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (tid < 32) {
      // Lane l holds bins 8l .. 8l+7; `above` counts the keys of higher lanes.
      u32 c = 0;
#pragma unroll
      for (int d = 0; d < 8; ++d) c += hist[tid * 8 + d];
      u32 suffix = c;  // lanes l .. 31
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const u32 v = __shfl_down_sync(0xFFFFFFFFu, suffix, o);
        if (tid + o < 32) suffix += v;
      }
      u32 above = suffix - c;
      if (above < remaining && remaining <= suffix) {
        int d = tid * 8 + 7;
        for (; d > tid * 8 && above + hist[d] < remaining; --d) above += hist[d];
        shared2[0] = u32(d);
        shared2[1] = remaining - above;
      }
    }
    __syncthreads();
    prefix |= shared2[0] << shift;
    remaining = shared2[1];
    __syncthreads();
  }
  return prefix;
}

template <nt_dtype DT>
__global__ void __launch_bounds__(kRowThreads, kRowBlocksPerSM) verify_rows_kernel(VerifyArgs a) {
  using Reduce = cub::BlockReduce<u64, kRowThreads>;
  using S = typename LogitTraits<DT>::Storage;
  using Scan = cub::BlockScan<u64, kRowThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ u64 slot;
  __shared__ u32 top_p_len;
  __shared__ u32 hist[kRadixBins];  // radix digits; the pivot's samples first
  __shared__ u64 cand[kCandCap];
  __shared__ u64 sorted[kListCap];
  __shared__ u64 mass[kListCap];  // the top-k's masses, summed: mass[e] = sum of 0 .. e
  __shared__ u32 n_cand, n_top;
  __shared__ u32 radix_shared[2];

  const u32 b = blockIdx.x, j = blockIdx.y;
  const int tid = int(threadIdx.x);
  // The workspace holds one RowInfo and list per (request, position) slot, not
  // per target row: malformed offsets may hand one row to two requests with
  // different parameters.
  const int64_t slot_index = int64_t(b) * gridDim.y + j;
  int64_t row;
  if (a.tree) {
    row = int64_t(b) * a.nodes + j;
  } else {
    int64_t lo, n;
    chain_range(a, b, &lo, &n);
    if (int64_t(j) > n) return;
    row = lo + b + j;
  }
  const nt_row_params p = request_params(a, b);
  RowView<DT> r{static_cast<const S*>(a.target) + row * a.stride, 0.0f, a.bits};
  RowInfo info{};
  info.n_list = -1;
  const u32 V = a.vocab;
  auto fold_max = [&](u64 v) { return block_fold<kRowThreads>(tmp, &slot, v, MaxU64()); };
  auto fold_sum = [&](u64 v) { return block_fold<kRowThreads>(tmp, &slot, v, SumU64()); };
  // Every token of the row with its score, in each thread's index order.
  auto each = [&](auto&& f) { for_each_row_score<DT, kRowThreads>(r.x, V, p.temperature, tid, f); };

  if (p.greedy) {
    // The argmax of the raw logits (NaN as -inf): the first maximum of each thread.
    u32 best_key = NT_KEY_NEG_INF, best_i = 0;
    for_each_score<DT, kRowThreads, true>(r.x, V, 1.0f, tid, [&](u32 i, float s) {
      const u32 k = nt_order_key(s);
      if (k > best_key) {
        best_key = k;
        best_i = i;
      }
    });
    u64 best = best_key > NT_KEY_NEG_INF ? composite(best_key, best_i) : 0;
    best = fold_max(best);
    info.state = best == 0 ? kEmpty : kGreedy;
    info.argmax = best == 0 ? -1 : int32_t(composite_index(best));
    if (tid == 0) a.info[slot_index] = info;
    return;
  }

  // Top-k lists: a pivot score key with, in expectation, about rank x stride
  // tokens at or above it, from the keys of every stride-th token (every
  // finite token is a candidate when the row is short). Only the speed depends
  // on it: the candidates are checked to hold at least k tokens and at most
  // kCandCap, and a miss costs the row four more passes (the radix select
  // below). With e = k / stride samples expected above the k-th key, the rank
  // e + 4 sqrt(e) + 4 keeps both misses rare for small k (each under 1e-6 a row
  // at k = 50, V = 128,256, on independent logits; one slow row sets the time
  // of the whole launch); past k = 400 too many candidates become likely (about
  // 6% of rows at k = 512), and such rows take the radix select.
  const bool k_listable = p.top_k > 1 && p.top_k <= kListCap;
  u32 pivot = NT_KEY_FIRST_FINITE;
  if (k_listable) {
    const u32 stride = V / kSamples >= 64 ? (V + kSamples - 1) / kSamples : 64;
    const u32 n_samples = V / stride;
    const float e = float(p.top_k) / float(stride);
    const u32 rank = u32(ceilf(e + 4.0f * sqrtf(e) + 4.0f));
    if (n_samples >= 16 && rank < n_samples) {
      constexpr int kPerThread = kSamples / kRowThreads;
      // Every load issued before the first score (the division's slow path
      // would otherwise order them).
      float logit[kPerThread];
      u32 keys[kPerThread];
#pragma unroll
      for (int u = 0; u < kPerThread; ++u) {
        const u32 t = u32(tid + u * kRowThreads);
        logit[u] = t < n_samples ? widen<DT>(r.x[t * stride + stride - 1]) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kPerThread; ++u) {
        const u32 t = u32(tid + u * kRowThreads);
        keys[u] = t < n_samples ? nt_order_key(nt_scaled_score(logit[u], p.temperature)) : 0u;
      }
      const u32 k = select_rank_key<kPerThread>(keys, tid, n_samples, rank, hist, radix_shared);
      pivot = k > NT_KEY_FIRST_FINITE ? k : NT_KEY_FIRST_FINITE;
    }
  }

  // Pass A: the top and lowest finite composites, +inf and finite counts, and
  // the candidates at or above the pivot.
  if (tid == 0) n_cand = 0;
  __syncthreads();
  // A thread's top composite is its largest key at its first index, its lowest
  // the smallest key at its last index.
  u32 top_key = 0, top_i = 0, low_key = ~0u, low_i = 0, n_inf_t = 0, n_fin_t = 0;
  each([&](u32 i, float s) {
    if (s == -INFINITY) return;
    const u32 key = nt_order_key(s);
    if (key > top_key) {
      top_key = key;
      top_i = i;
    }
    if (key <= low_key) {
      low_key = key;
      low_i = i;
    }
    n_inf_t += s == INFINITY;
    ++n_fin_t;
    if (k_listable && key >= pivot) {
      const u32 at = atomicAdd(&n_cand, 1u);
      if (at < u32(kCandCap)) cand[at] = composite(key, i);
    }
  });
  const u64 top = fold_max(n_fin_t ? composite(top_key, top_i) : 0);
  const u64 lowest = ~fold_max(n_fin_t ? ~composite(low_key, low_i) : 0);
  const u64 counts = fold_sum((u64(n_inf_t) << 32) | n_fin_t);  // each below 2^32
  const u64 n_inf = counts >> 32, n_fin = counts & 0xFFFFFFFFu;
  if (n_fin == 0) {
    info.state = kEmpty;
    if (tid == 0) a.info[slot_index] = info;
    return;
  }
  if (n_inf > 0) {
    info.state = kInfRow;
    info.cut = composite(NT_KEY_POS_INF, V - 1);
    info.z = n_inf;
    if (tid == 0) a.info[slot_index] = info;
    return;
  }
  r.s_max = nt_key_to_float(composite_key(top));
  info.state = kFinite;
  info.s_max = r.s_max;

  // Tokens at or before `cut` and their mass.
  auto prefix = [&](u64 cut, u64* count) {
    u64 c = 0, m = 0;
    each([&](u32 i, float s) {
      if (s == -INFINITY || composite(nt_order_key(s), i) < cut) return;
      ++c;
      m += nt_mass_of(s, r.s_max, r.bits);
    });
    if (count) *count = fold_sum(c);
    return fold_sum(m);
  };
  // The largest cut in [lo, hi] whose prefix has `need` tokens (or mass).
  auto find_cut = [&](u64 lo, u64 hi, bool by_mass, u64 need) {
    while (lo < hi) {
      const u64 mid = lo + (hi - lo) / 2 + 1;
      u64 c;
      const u64 m = prefix(mid, &c);
      if ((by_mass ? m : c) >= need) lo = mid; else hi = mid - 1;
    }
    return lo;
  };

  const bool k_on = p.top_k > 0 && u64(p.top_k) < n_fin;
  const bool p_on = p.top_p < 1.0f;
  const bool m_on = p.min_p > 0.0f;
  u64 cut = lowest;
  bool listed = false;
  u32 n = n_cand;  // read after the folds' barriers

  if (k_on && k_listable && (n < u32(p.top_k) || n > u32(kCandCap))) {
    // The pivot missed: radix select of the k-th largest score key, 11 + 11 + 10 bits.
    u32 key_prefix = 0, remaining = u32(p.top_k);
    int shift = 32;
    for (int round = 0; round < 3; ++round) {
      const int bits = round < 2 ? kRadixBits : 32 - 2 * kRadixBits;
      shift -= bits;
      for (int i = tid; i < kRadixBins; i += kRowThreads) hist[i] = 0;
      __syncthreads();
      const u32 high_mask = shift + bits >= 32 ? 0u : ~0u << (shift + bits);
      each([&](u32, float s) {
        if (s == -INFINITY) return;
        const u32 k = nt_order_key(s);
        if ((k & high_mask) != (key_prefix & high_mask)) return;
        atomicAdd(&hist[(k >> shift) & ((1u << bits) - 1u)], 1u);
      });
      __syncthreads();
      if (tid == 0) {
        u32 above = 0;
        int d = (1 << bits) - 1;
        for (; d > 0 && above + hist[d] < remaining; --d) above += hist[d];
        radix_shared[0] = u32(d);
        radix_shared[1] = remaining - above;
      }
      __syncthreads();
      key_prefix |= radix_shared[0] << shift;
      remaining = radix_shared[1];
      __syncthreads();
    }
    // Candidates: every finite token with key >= the k-th key.
    if (tid == 0) n_cand = 0;
    __syncthreads();
    each([&](u32 i, float s) {
      if (s == -INFINITY) return;
      const u32 k = nt_order_key(s);
      if (k < key_prefix) return;
      const u32 at = atomicAdd(&n_cand, 1u);
      if (at < u32(kCandCap)) cand[at] = composite(k, i);
    });
    __syncthreads();
    n = n_cand;
  }

  // The candidates are the row's top n, so the k-th largest candidate key is
  // the row's k-th key; the candidates at or above it (k of them, more on
  // ties) are gathered into mass[] and, when they fit the list, rank sorted,
  // largest first (composites are distinct), into sorted[]: its first k are
  // the top-k. Ties that overflow the list leave the row to the bisection.
  u32 m_top = 0;
  if (k_on && k_listable && n >= u32(p.top_k) && n <= u32(kCandCap)) {
    constexpr int kPer = kCandCap / kRowThreads;
    u32 keys[kPer];
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const u32 e = u32(tid + u * kRowThreads);
      keys[u] = e < n ? composite_key(cand[e]) : 0u;
    }
    if (tid == 0) n_top = 0;  // ordered before its atomics by the select's barriers
    const u32 kth = select_rank_key<kPer>(keys, tid, n, u32(p.top_k), hist, radix_shared);
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const u32 e = u32(tid + u * kRowThreads);
      if (e < n && keys[u] >= kth) {
        const u32 at = atomicAdd(&n_top, 1u);
        if (at < u32(kListCap)) mass[at] = cand[e];
      }
    }
    __syncthreads();
    m_top = n_top;
  }

  if (m_top != 0 && m_top <= u32(kListCap)) {
    const u32 nk = u32(p.top_k);
    // Two candidates a thread per sweep, each mass[f] read once for both.
    for (u32 e0 = tid; e0 < m_top; e0 += 2 * kRowThreads) {
      const u32 e1 = e0 + kRowThreads;
      const u64 c0 = mass[e0], c1 = e1 < m_top ? mass[e1] : ~0ull;
      u32 rank0 = 0, rank1 = 0;
      for (u32 f = 0; f < m_top; ++f) {
        const u64 other = mass[f];
        rank0 += other > c0;
        rank1 += other > c1;
      }
      sorted[rank0] = c0;
      if (e1 < m_top) sorted[rank1] = c1;
    }
    __syncthreads();
    {
      // Running sums of the top-k's masses, kListCap / kRowThreads entries a thread.
      constexpr int kPer = kListCap / kRowThreads;
      u64 m[kPer], total = 0;
#pragma unroll
      for (int u = 0; u < kPer; ++u) {
        const u32 e = u32(tid * kPer + u);
        m[u] = e < nk ? nt_mass_of(nt_key_to_float(composite_key(sorted[e])), r.s_max, r.bits)
                      : 0u;
        total += m[u];
      }
      u64 before;
      Scan(scan_tmp).ExclusiveSum(total, before);
#pragma unroll
      for (int u = 0; u < kPer; ++u) {
        const u32 e = u32(tid * kPer + u);
        before += m[u];
        if (e < nk) mass[e] = before;
      }
      if (tid == 0) top_p_len = nk;
    }
    __syncthreads();
    const u64 zk = mass[nk - 1];
    const u64 z_all = (p_on && a.joint) ? prefix(lowest, nullptr) : 0;
    if (p_on && p.top_p != 0.0f) {
      // The shortest prefix whose mass reaches the target (none: all k).
      const u64 target = nt_scale_u64(a.joint ? z_all : zk, p.top_p, 1);
      for (u32 e = tid; e < nk; e += kRowThreads)
        if (mass[e] >= target && (e == 0 || mass[e - 1] < target)) top_p_len = e + 1;
    }
    __syncthreads();
    if (tid == 0) {
      u32 len = nk;
      if (p_on) len = p.top_p == 0.0f ? 1u : top_p_len;
      if (m_on) {  // up to the first token whose probability falls below min_p
        u32 nm = 1;
        while (nm < nk &&
               nt_portable_exp(nt_key_to_float(composite_key(sorted[nm])) - r.s_max) >= p.min_p)
          ++nm;
        len = nm < len ? nm : len;
      }
      slot = sorted[len - 1];
      radix_shared[0] = len;
      info.z = mass[len - 1];  // thread 0 writes the RowInfo
    }
    __syncthreads();
    cut = slot;
    const u32 len = radix_shared[0];
    int32_t* list = a.lists + slot_index * kListCap;
    for (u32 e = tid; e < len; e += kRowThreads) list[e] = int32_t(composite_index(sorted[e]));
    info.n_list = int32_t(len);
    listed = true;
    __syncthreads();
  }

  if (!listed) {
    u64 z_k = 0;
    const u64 z_all = prefix(lowest, nullptr);
    z_k = z_all;
    if (k_on) {
      const u64 cut_k = find_cut(lowest, top, false, u64(p.top_k));
      cut = cut_k > cut ? cut_k : cut;
      z_k = prefix(cut_k, nullptr);
    }
    if (p_on) {
      const u64 cut_p = p.top_p == 0.0f
                            ? top
                            : find_cut(lowest, top, true, nt_scale_u64(a.joint ? z_all : z_k, p.top_p, 1));
      cut = cut_p > cut ? cut_p : cut;
    }
    if (m_on) {  // the prefix ends before the first token below min_p
      u64 fail = 0;
      each([&](u32 i, float s) {
        if (s != -INFINITY && !(nt_portable_exp(s - r.s_max) >= p.min_p)) {
          const u64 c = composite(nt_order_key(s), i);
          fail = fail > c ? fail : c;
        }
      });
      fail = fold_max(fail);
      if (fail != 0 && fail + 1 > cut) cut = fail + 1;
    }
    info.z = (cut == lowest) ? z_all : prefix(cut, nullptr);
  }
  info.cut = cut;
  if (tid == 0) a.info[slot_index] = info;
}

// ---- walk ------------------------------------------------------------------------

template <nt_dtype DT>
struct WalkRow {
  using S = typename LogitTraits<DT>::Storage;
  const S* x;
  RowInfo info;
  float temperature;
  int bits;
  u32 vocab;
  const int32_t* list;

  __device__ float score(u32 i) const { return nt_scaled_score(widen<DT>(x[i]), temperature); }
  __device__ bool member(u32 i, float s) const {
    if (info.state == kInfRow) return s == INFINITY;
    return s != -INFINITY && composite(nt_order_key(s), i) >= info.cut;
  }
  __device__ u64 mass_of_member(float s) const {
    return info.state == kInfRow ? 1ull : nt_mass_of(s, info.s_max, bits);
  }
  // m_x: 0 outside the keep-set or [0, V).
  __device__ u64 mass(int64_t x) const {
    if (x < 0 || x >= int64_t(vocab)) return 0;
    const float s = score(u32(x));
    return member(u32(x), s) ? mass_of_member(s) : 0;
  }
};

template <nt_dtype DT>
__global__ void __launch_bounds__(kWalkThreads) verify_walk_kernel(VerifyArgs a) {
  using Reduce = cub::BlockReduce<u64, kWalkThreads>;
  using S = typename LogitTraits<DT>::Storage;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ u64 slot;
  __shared__ int8_t verdict[kWalkThreads];  // chain: a chunk of positions' outcomes
  __shared__ int32_t verdict_token[kWalkThreads];
  const u32 b = blockIdx.x;
  const int tid = int(threadIdx.x);
  const nt_row_params p = request_params(a, b);
  const uint64_t seed = param_at(a.seed, b);
  const uint64_t offset = param_at(a.offset, b);
  const int per_request = a.seed.per_row != nullptr;
  int32_t* out = a.out_ids + int64_t(b) * a.out_stride;
  int32_t* out_nodes = a.out_nodes ? a.out_nodes + int64_t(b) * a.nodes_stride : nullptr;
  int64_t* tried = a.tree ? a.tried + int64_t(b) * a.nodes : nullptr;
  u32 count = 0;

  // Target row `row` as position (chain) or node (tree) `j` of this request.
  auto row_at = [&](int64_t row, int64_t j) {
    const int64_t slot_index = int64_t(b) * (a.tree ? a.nodes : a.width) + j;
    WalkRow<DT> w;
    w.x = static_cast<const S*>(a.target) + row * a.stride;
    w.info = a.info[slot_index];
    w.temperature = p.temperature;
    w.bits = a.bits;
    w.vocab = a.vocab;
    w.list = a.lists + slot_index * kListCap;
    return w;
  };
  auto emit = [&](int64_t token, int64_t node) {
    if (tid == 0) {
      out[count] = int32_t(token);
      if (out_nodes) out_nodes[count] = int32_t(node);
    }
    ++count;
  };
  // Gumbel-max over the keep-set: from p without `n_ex` tried tokens (and
  // `single`), or over the residual masses when q is given; -1 if none.
  auto draw = [&](const WalkRow<DT>& w, u32 tag, const float* q, const int64_t* ex, u32 n_ex,
                  int64_t single) -> int64_t {
    u64 best = 0;
    float best_v = -INFINITY;  // this thread's best perturbed score so far
    const bool bounded = q == nullptr && w.info.state != kInfRow;
    auto visit = [&](u32 i, float s) {
      if (!w.member(i, s)) return;
      // Below the best so far even with the largest Gumbel value: cannot win,
      // and its Philox block and logs are skipped.
      if (bounded && s + NT_GUMBEL_MAX < best_v) return;
      if (int64_t(i) == single) return;
      for (u32 e = 0; e < n_ex; ++e)
        if (ex[e] == int64_t(i)) return;
      float v;
      if (q) {
        const u64 res = nt_verify_residual(w.mass_of_member(s), q[i], w.info.z);
        if (res == 0) return;
        v = nt_verify_residual_key(res, nt_token_gumbel(seed, offset, tag, i));
      } else {
        v = nt_perturbed_score(w.info.state == kInfRow ? 0.0f : s,
                               nt_token_gumbel(seed, offset, tag, i), w.info.state == kInfRow);
      }
      const u64 c = composite(nt_order_key(v), i);
      if (c > best) {
        best = c;
        best_v = v;
      }
    };
    if (w.info.n_list >= 0) {
      for (int e = tid; e < w.info.n_list; e += kWalkThreads) {
        const u32 i = u32(w.list[e]);
        visit(i, w.score(i));
      }
    } else {
      for_each_row_score<DT, kWalkThreads>(w.x, w.vocab, w.temperature, tid, visit);
    }
    best = block_fold<kWalkThreads>(tmp, &slot, best, MaxU64());
    return best == 0 ? int64_t(-1) : int64_t(composite_index(best));
  };

  if (!a.tree) {
    int64_t lo, n;
    chain_range(a, b, &lo, &n);
    // The positions' outcomes depend on nothing earlier positions decide, so a
    // chunk of them is settled at once, a thread each; the walk then reads them
    // in order and draws at the first that needs a draw.
    enum : int8_t { kStop, kAccept, kGreedyMiss, kDraw };
    bool done = false;
    for (int64_t j0 = 0; j0 <= n && !done; j0 += kWalkThreads) {
      const int64_t mine = j0 + tid;
      if (mine <= n) {
        const WalkRow<DT> w = row_at(lo + b + mine, mine);
        int8_t v = kDraw;
        int32_t token = w.info.argmax;
        if (w.info.state == kEmpty) {
          v = kStop;
        } else if (mine == n) {
          v = w.info.state == kGreedy ? kGreedyMiss : kDraw;
        } else {
          const int64_t x = a.draft_ids[lo + mine];
          if (w.info.state == kGreedy) {
            v = x == w.info.argmax ? kAccept : kGreedyMiss;
          } else {
            const float* q = a.probs ? a.probs + (lo + mine) * a.probs_stride : nullptr;
            const float qx = q ? (x >= 0 && x < int64_t(a.vocab) ? q[x] : 0.0f) : 1.0f;
            const u32 tag = nt_verify_tag(per_request, b, u32(mine));
            const float u = nt_verify_accept_uniform(seed, offset, tag, 0);
            if (nt_verify_accepts(u, qx, w.mass(x), w.info.z)) {
              v = kAccept;
              token = int32_t(x);
            }
          }
        }
        verdict[tid] = v;
        verdict_token[tid] = token;
      }
      __syncthreads();
      const int64_t end = n - j0 < kWalkThreads - 1 ? n - j0 : kWalkThreads - 1;
      for (int64_t e = 0; e <= end; ++e) {
        const int8_t v = verdict[e];
        if (v == kStop) {
          done = true;
          break;
        }
        if (v == kAccept || v == kGreedyMiss) {
          emit(verdict_token[e], -1);
          if (v == kAccept) continue;
          done = true;
          break;
        }
        // A draw: the bonus from p, or after a rejection from the residual.
        const int64_t j = j0 + e;
        const u32 tag = nt_verify_tag(per_request, b, u32(j));
        const WalkRow<DT> w = row_at(lo + b + j, j);
        int64_t t;
        if (j == n) {
          t = draw(w, tag, nullptr, nullptr, 0, -1);
        } else {
          const int64_t x = a.draft_ids[lo + j];
          const float* q = a.probs ? a.probs + (lo + j) * a.probs_stride : nullptr;
          t = q ? draw(w, tag, q, nullptr, 0, -1) : draw(w, tag, nullptr, nullptr, 0, x);
          if (t < 0) t = draw(w, tag, nullptr, nullptr, 0, -1);
        }
        emit(t, -1);
        done = true;
        break;
      }
      __syncthreads();  // verdicts read before the next chunk writes them
    }
  } else {
    const int64_t D = a.nodes;
    const int64_t* cand = a.cand + int64_t(b) * a.cand_stride;
    const int64_t* next = a.next + int64_t(b) * a.next_stride;
    const int64_t* sib = a.sib + int64_t(b) * a.sib_stride;
    auto valid = [&](int64_t v) { return v >= 1 && v < D ? v : int64_t(-1); };
    int64_t node = 0;
    for (;;) {
      const u32 tag = nt_verify_tag(per_request, b, u32(node));
      const WalkRow<DT> w = row_at(int64_t(b) * D + node, node);
      if (w.info.state == kEmpty) break;
      const bool greedy = w.info.state == kGreedy;
      if (count == a.width - 1) {
        emit(greedy ? w.info.argmax : draw(w, tag, nullptr, nullptr, 0, -1), -1);
        break;
      }
      int64_t accepted = -1;
      u32 n_tried = 0;
      u64 remaining = w.info.z;
      int64_t child = valid(next[node]);
      for (int64_t k = 0; child >= 0 && k < D; ++k, child = valid(sib[child])) {
        const int64_t x = cand[child];
        if (greedy) {
          if (x == w.info.argmax) {
            accepted = child;
            break;
          }
          continue;
        }
        bool repeated = false;
        for (u32 e = 0; e < n_tried; ++e) repeated |= tried[e] == x;
        const u64 m = repeated ? 0 : w.mass(x);
        const float u = nt_verify_accept_uniform(seed, offset, tag, u32(k));
        if (nt_verify_accepts(u, 1.0f, m, remaining)) {
          accepted = child;
          break;
        }
        if (!repeated) {
          __syncthreads();  // every thread has read tried[] before it grows
          if (tid == 0) tried[n_tried] = x;
          ++n_tried;
          remaining -= m;
          __syncthreads();
        }
      }
      if (accepted >= 0) {
        emit(cand[accepted], accepted);
        node = accepted;
        continue;
      }
      int64_t t = greedy ? int64_t(w.info.argmax) : draw(w, tag, nullptr, tried, n_tried, -1);
      if (t < 0) t = draw(w, tag, nullptr, nullptr, 0, -1);
      emit(t, -1);
      break;
    }
  }
  for (u32 k = count + tid; k < a.width; k += kWalkThreads) {
    out[k] = -1;
    if (out_nodes) out_nodes[k] = -1;
  }
  if (tid == 0) a.num_emitted[b] = int32_t(count);
}

template <nt_dtype DT>
void VerifyKernels<DT>::launch(const VerifyArgs& a, dim3 rows_grid, cudaStream_t stream,
                               const char* op) {
  verify_rows_kernel<DT><<<rows_grid, kRowThreads, 0, stream>>>(a);
  check_launch(op);
  verify_walk_kernel<DT><<<a.requests, kWalkThreads, 0, stream>>>(a);
  check_launch(op);
}

}  // namespace nt::cuda::verify_kernels
