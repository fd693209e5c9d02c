// Block-level selection over 64-bit composites (ordering key << 32 | ~index):
// one integer order that ranks by score descending, then index ascending, so
// "larger composite" is "ranks first" and every composite of a row is distinct
// and nonzero (an index is below 2^31, so ~index is not 0): 0 can mark padding.
// Radix select here counts with integer atomics only, so its result never
// depends on the order the atomics land in.
#pragma once

#include <cstdint>

#include "core/ordering.h"

namespace nt::cuda {

using u32 = uint32_t;
using u64 = unsigned long long;

constexpr u32 kFullMask = 0xFFFFFFFFu;

__device__ __forceinline__ u32 lane_index() { return threadIdx.x & 31u; }

__device__ __forceinline__ u32 lanes_below() {
  u32 m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}

__device__ __forceinline__ u64 composite(u32 key, u32 index) {
  return (u64(key) << 32) | u64(~index);
}
__device__ __forceinline__ u32 composite_index(u64 c) { return ~u32(c); }
__device__ __forceinline__ u32 composite_key(u64 c) { return u32(c >> 32); }
// Above every composite of a -inf / NaN score: the initial admission threshold.
constexpr u64 kNegInfCeiling = (u64(NT_KEY_NEG_INF) << 32) | 0xFFFFFFFFull;

template <class T>
__device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const T w = __shfl_xor_sync(kFullMask, v, o);
    v = w > v ? w : v;
  }
  return v;
}

template <class T>
__device__ __forceinline__ T warp_min(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const T w = __shfl_xor_sync(kFullMask, v, o);
    v = w < v ? w : v;
  }
  return v;
}

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// Inclusive prefix sum over the warp's lanes, added in lane order.
template <class T>
__device__ __forceinline__ T warp_inclusive_sum(T v) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T w = __shfl_up_sync(kFullMask, v, o);
    if (lane_index() >= u32(o)) v += w;
  }
  return v;
}

// Every lane of the warp calls this; lanes with `take` get distinct slots.
__device__ __forceinline__ u32 warp_append(bool take, u32* counter) {
  const u32 m = __ballot_sync(kFullMask, take);
  if (m == 0) return 0;
  const int leader = __ffs(m) - 1;
  u32 base = 0;
  if (int(lane_index()) == leader) base = atomicAdd(counter, u32(__popc(m)));
  base = __shfl_sync(kFullMask, base, leader);
  return base + u32(__popc(m & lanes_below()));
}

// ---- warp bitonic sort and merges, descending, in registers -------------------
// N elements per lane, element i = N * lane + j held as v[j]; afterwards element
// 0 (lane 0, v[0]) is the largest. No shared memory and no block barrier, so a
// short list (up to 32 * N) is sorted by one warp while the others go on.
// Elements are u64 composites/ranks, or RankedValue (a rank carrying the value
// it was made from, where the rank alone cannot give it back: -0, NaN); the
// order is the rank's, and 0 (the rank of nothing) sorts last.
struct RankedValue {
  u64 rank;
  float value;
};
__device__ __forceinline__ u64 rank_of_element(u64 e) { return e; }
__device__ __forceinline__ u64 rank_of_element(const RankedValue& e) { return e.rank; }
__device__ __forceinline__ u64 shfl_element(u64 e, int lane) { return __shfl_sync(kFullMask, e, lane); }
__device__ __forceinline__ u64 shfl_xor_element(u64 e, int d) { return __shfl_xor_sync(kFullMask, e, d); }
__device__ __forceinline__ RankedValue shfl_element(const RankedValue& e, int lane) {
  return {__shfl_sync(kFullMask, e.rank, lane), __shfl_sync(kFullMask, e.value, lane)};
}
__device__ __forceinline__ RankedValue shfl_xor_element(const RankedValue& e, int d) {
  return {__shfl_xor_sync(kFullMask, e.rank, d), __shfl_xor_sync(kFullMask, e.value, d)};
}

// Puts the larger of x, y first when `desc`, else last.
template <class E>
__device__ __forceinline__ void order_pair(E& x, E& y, bool desc) {
  const bool swap = (rank_of_element(y) > rank_of_element(x)) == desc;
  const E lo = swap ? x : y;
  x = swap ? y : x;
  y = lo;
}

// One half-cleaner step at distance d of a bitonic network over the warp's
// 32N elements; element i ends high when (i & d) == 0 equals desc_of(i).
template <int N, class E, class Desc>
__device__ __forceinline__ void warp_network_step(E (&v)[N], int d, Desc&& desc_of) {
  const u32 lane = lane_index();
  if (d < N) {  // partners in the same lane
#pragma unroll
    for (int j = 0; j < N; ++j)
      if (!(j & d)) order_pair(v[j], v[j | d], desc_of(u32(N) * lane + u32(j)));
    return;
  }
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const u32 i = u32(N) * lane + u32(j);
    const E o = shfl_xor_element(v[j], d / N);
    const bool lower = (i & u32(d)) == 0;
    const bool o_larger = rank_of_element(o) > rank_of_element(v[j]);
    v[j] = (lower == desc_of(i)) == o_larger ? o : v[j];
  }
}

template <int N, class E>
__device__ __forceinline__ void warp_sort_desc(E (&v)[N]) {
  static_assert(N == 1 || N == 2 || N == 4, "one, two or four elements per lane");
#pragma unroll
  for (int k = 2; k <= 32 * N; k <<= 1) {
#pragma unroll
    for (int d = k >> 1; d > 0; d >>= 1)
      warp_network_step<N>(v, d, [&](u32 i) { return (i & u32(k)) == 0; });
  }
}

// The best 32N of two descending warp lists, sorted descending, into a.
// Element i of a against element 32N-1-i of b keeps the best 32N as one
// bitonic sequence (the first step of a bitonic merge), and log2(32N)
// half-cleaners sort it.
template <int N, class E>
__device__ __forceinline__ void warp_merge_desc(E (&a)[N], const E (&b)[N]) {
  const u32 lane = lane_index();
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const E o = shfl_element(b[N - 1 - j], int(31 - lane));
    a[j] = rank_of_element(o) > rank_of_element(a[j]) ? o : a[j];
  }
#pragma unroll
  for (int d = 16 * N; d > 0; d >>= 1) warp_network_step<N>(a, d, [](u32) { return true; });
}

// The best 32N over the descending lists of the block's first `active` warps
// (block-uniform, at most blockDim.x / 32), sorted descending, end in warp 0's
// v; other warps' v are left partly merged. A tree of warp merges, one block
// barrier a level (ceil(log2(active)) of them). Warp w's list passes through
// stage[w * stride, + 32N), which it alone writes.
template <int N, class E>
__device__ __forceinline__ void block_merge_desc(E (&v)[N], E* stage, int stride, int active) {
  const int warp = int(threadIdx.x >> 5);
  const u32 lane = lane_index();
  for (int step = 1; step < active; step <<= 1) {
    if ((warp & (2 * step - 1)) == step && warp < active) {
#pragma unroll
      for (int j = 0; j < N; ++j) stage[warp * stride + N * int(lane) + j] = v[j];
    }
    __syncthreads();
    if ((warp & (2 * step - 1)) == 0 && warp + step < active) {
      E b[N];
#pragma unroll
      for (int j = 0; j < N; ++j) b[j] = stage[(warp + step) * stride + N * int(lane) + j];
      warp_merge_desc<N>(v, b);
    }
  }
}

// Element i (warp-uniform) of a warp list.
template <int N, class E>
__device__ __forceinline__ E warp_element(const E (&v)[N], u32 i) {
  E mine = v[0];
#pragma unroll
  for (int j = 1; j < N; ++j)
    if (i % u32(N) == u32(j)) mine = v[j];
  return shfl_element(mine, int(i / u32(N)));
}

// ---- count-only radix select --------------------------------------------------

// The scratch of a block-wide radix select: the digit's histogram (bin 256:
// lanes with nothing to count) and the digit found.
struct RadixScratch {
  u32 hist[257];
  int digit, above, count;
};

// Given a 256-bin histogram of the current digit, finds (called by a whole
// warp) the digit holding the need-th largest entry, the number of entries in
// higher bins and the count of that bin.
__device__ __forceinline__ void warp_find_digit(const uint32_t* hist, int need, int& digit,
                                                int& above, int& count) {
  const int lane = threadIdx.x & 31;
  uint32_t c[8];
  int local = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    c[j] = hist[255 - 8 * lane - j];  // lane 0 holds the top bins
    local += int(c[j]);
  }
  const int incl = warp_inclusive_sum(local);
  const unsigned ball = __ballot_sync(0xffffffffu, incl >= need);
  const int src = __ffs(ball) - 1;
  int d = 0, a = 0, n = 0;
  if (lane == src) {
    int run = incl - local;
    bool found = false;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (!found && run + int(c[j]) >= need) {
        d = 255 - 8 * lane - j;
        a = run;
        n = int(c[j]);
        found = true;
      }
      run += int(c[j]);
    }
  }
  digit = __shfl_sync(0xffffffffu, d, src);
  above = __shfl_sync(0xffffffffu, a, src);
  count = __shfl_sync(0xffffffffu, n, src);
}

// Block-wide radix select: the rank T such that exactly `need` of the ranks
// visited are >= T (ranks are distinct; 0 marks padding). for_each(f) calls
// f(rank, value) for each of the thread's entries, the same number of times on
// every lane of a warp. Every thread of the block calls it.
template <class ForEach>
__device__ u64 block_rank_threshold(ForEach&& for_each, int need, RadixScratch& s) {
  u64 prefix = 0;
  for (int shift = 56; shift >= 0; shift -= 8) {
    const u64 hi_mask = shift == 56 ? 0ull : (~0ull << (shift + 8));
    for (int b = threadIdx.x; b < 257; b += blockDim.x) s.hist[b] = 0;
    __syncthreads();
    for_each([&](u64 rank, float) {
      const bool mine = rank != 0 && (rank & hi_mask) == prefix;
      const unsigned digit = mine ? (unsigned(rank >> shift) & 255u) : 256u;
      // Scores cluster in a few bins: one atomic per distinct digit per warp.
      const unsigned peers = __match_any_sync(kFullMask, digit);
      if (int(lane_index()) == __ffs(peers) - 1 && digit != 256u)
        atomicAdd(&s.hist[digit], unsigned(__popc(peers)));
    });
    __syncthreads();
    if (threadIdx.x < 32) {
      int digit, above, count;
      warp_find_digit(s.hist, need, digit, above, count);
      if (threadIdx.x == 0) {
        s.digit = digit;
        s.above = above;
        s.count = count;
      }
    }
    __syncthreads();
    need -= s.above;
    prefix |= u64(s.digit) << shift;
    const bool done = s.count == need;
    __syncthreads();  // s.digit/above/count are rewritten by the next pass
    if (done) break;
  }
  return prefix;
}

struct SelectScratch {
  RadixScratch radix;
  u64 result;
};

// The k-th largest (1 <= k <= n) of the distinct nonzero values items[0, n)
// in shared or global memory, written before the call by any thread of the
// block: the smallest value at or above block_rank_threshold's. Every thread
// of the block calls it; it begins and ends with a barrier.
template <int NT>
__device__ u64 block_select_kth(const u64* items, int n, u32 k, SelectScratch& s) {
  const int tid = int(threadIdx.x);
  __syncthreads();
  const u64 t = block_rank_threshold(
      [&](auto&& f) {
        for (int i = tid; i < (n + 31) / 32 * 32; i += NT) f(i < n ? items[i] : 0ull, 0.0f);
      },
      int(k), s.radix);
  if (tid == 0) s.result = ~0ull;
  __syncthreads();
  for (int i = tid; i < n; i += NT)
    if (items[i] >= t) atomicMin(&s.result, items[i]);
  __syncthreads();
  const u64 r = s.result;
  __syncthreads();
  return r;
}

// ---- count + mass histograms (fixed-point masses, order-independent sums) ----

struct MassScratch {
  u32 cnt[256];
  u64 mass[256];
  u32 digit, count, found;
  u32 above_count;
  u64 above_mass, bucket_mass;
};

// Every lane calls it; lanes with digit < 0 add nothing. Lanes sharing a digit
// add once, with their count and mass summed in the warp.
__device__ __forceinline__ void warp_add_mass(MassScratch& s, int digit, u64 mass) {
  u32 pending = __ballot_sync(kFullMask, digit >= 0);
  const u32 lane = lane_index();
  while (pending) {
    const int leader = __ffs(pending) - 1;
    const int d = __shfl_sync(kFullMask, digit, leader);
    const u32 group = __ballot_sync(kFullMask, digit == d) & pending;
    const u64 m = warp_sum<u64>(((group >> lane) & 1u) ? mass : 0ull);
    if (int(lane) == leader) {
      atomicAdd(&s.cnt[d], u32(__popc(group)));
      atomicAdd(&s.mass[d], m);
    }
    pending &= ~group;
  }
}

// Inclusive sums over the warp's lanes of a (count, mass) pair.
__device__ __forceinline__ void warp_inclusive_sum_pair(u32& count, u64& mass) {
  const u32 lane = lane_index();
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const u32 cv = __shfl_up_sync(kFullMask, count, o);
    const u64 mv = __shfl_up_sync(kFullMask, mass, o);
    if (lane >= u32(o)) {
      count += cv;
      mass += mv;
    }
  }
}

// Warp 0: scanning digits 255 down from (base_count, base_mass), the first
// bucket at whose end the count reaches count_target or the mass reaches
// mass_target. found = 0 when no bucket does.
__device__ __forceinline__ void choose_bucket_by_targets(MassScratch& s, u32 base_count,
                                                         u64 base_mass, u32 count_target,
                                                         u64 mass_target) {
  const u32 lane = lane_index();
  auto reached = [&](u32 c, u64 m) {
    return base_count + c >= count_target || base_mass + m >= mass_target;
  };
  u32 c[8], csum = 0;
  u64 m[8], msum = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    c[j] = s.cnt[255 - 8 * lane - j];
    m[j] = s.mass[255 - 8 * lane - j];
    csum += c[j];
    msum += m[j];
  }
  u32 cincl = csum;
  u64 mincl = msum;
  warp_inclusive_sum_pair(cincl, mincl);
  if (lane == 0) s.found = 0;
  __syncwarp();
  u32 crun = cincl - csum;
  u64 mrun = mincl - msum;
  if (reached(cincl, mincl) && !reached(crun, mrun)) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (reached(crun + c[j], mrun + m[j])) {
        s.digit = 255 - 8 * lane - j;
        s.count = c[j];
        s.bucket_mass = m[j];
        s.above_count = base_count + crun;
        s.above_mass = base_mass + mrun;
        s.found = 1;
        break;
      }
      crun += c[j];
      mrun += m[j];
    }
  }
}

// ---- bitonic sort, descending, n a power of two, in shared or global memory --
template <int NT>
__device__ void bitonic_sort_desc(u64* a, int n) {
  __syncthreads();
  for (int k = 2; k <= n; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = int(threadIdx.x); i < n; i += NT) {
        const int p = i ^ j;
        if (p > i) {
          const u64 x = a[i], y = a[p];
          const bool desc = (i & k) == 0;
          if (desc ? x < y : x > y) {
            a[i] = y;
            a[p] = x;
          }
        }
      }
      __syncthreads();
    }
  }
}

}  // namespace nt::cuda
