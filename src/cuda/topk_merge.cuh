// Second stage of the exact top-k of the LM heads: one CTA per token row
// merges the candidates every scoring CTA kept for that row (at most k each),
// finds the k-th best by a radix select on the 64-bit rank, gathers the k
// winners and sorts them (bitonic, k <= 2048) into values/indices. Candidates
// under the largest of the CTAs' final thresholds are dropped on load, and
// when the rest fit they sit in shared memory for the radix passes. Merges of
// k <= 64 whose lists fit shared memory take merge_few_winners_kernel (below)
// instead: a bound from the lists' maxima, then the few candidates above it
// placed by counting (or, when many pass, warp sorts and a tree of warp
// merges), no radix select.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "cuda/async_copy.cuh"
#include "cuda/block_select.cuh"
#include "cuda/device.cuh"
#include "cuda/topk_cta.cuh"
#include "nexttok/nexttok.h"

namespace nt::cuda::topk {

constexpr int kMergeThreads = 1024;
constexpr int kMergeSortMax = 2048;       // k <= 2048
constexpr int kMergeMaxResident = 16384;  // candidates held in shared memory, at most
constexpr int kMergeMaxGrid = kMergeThreads;  // scoring CTAs: one count per thread
constexpr int kMergeSegBatch = 4;  // segments a warp loads before it uses any

struct MergeArgs {
  const Candidate* cand;
  const int32_t* counts;
  int grid, mp_stride, cap, k;
  float* values;
  int64_t values_stride;
  int64_t* indices;
  int64_t indices_stride;
  int resident;  // candidate capacity of the dynamic shared memory
};

// Scoring CTA c's final count for token row m, and its final threshold
// (CandidateArgs, topk_cta.cuh).
__device__ __forceinline__ const int32_t* cta_count_slot(const MergeArgs& a, int c, int m) {
  return a.counts + size_t(c) * a.mp_stride + m;
}
__device__ __forceinline__ int cta_count(const MergeArgs& a, int c, int m) { return *cta_count_slot(a, c, m); }
__device__ __forceinline__ uint32_t cta_threshold(const MergeArgs& a, int c, int m) {
  return reinterpret_cast<const uint32_t*>(a.counts)[(size_t(a.grid) + c) * a.mp_stride + m];
}

struct MergeShared {
  RadixScratch radix;
  int gathered;
  uint32_t floor_key;
  int warp_start[32];
  int offset[kMergeMaxGrid + 1];  // segment c's first candidate in the row's stored order
};

// A template so that every file including this header shares one kernel.
template <int kThreads = kMergeThreads>
__global__ void __launch_bounds__(kThreads) merge_topk_kernel(MergeArgs a) {
  static_assert(kThreads >= kMergeMaxGrid && kThreads <= 1024, "one scoring CTA per thread");
  extern __shared__ __align__(16) unsigned char merge_smem[];
  __shared__ MergeShared s;
  uint64_t* sort_rank = reinterpret_cast<uint64_t*>(merge_smem);
  float* sort_value = reinterpret_cast<float*>(merge_smem + kMergeSortMax * 8);
  uint64_t* res_rank = reinterpret_cast<uint64_t*>(merge_smem + kMergeSortMax * 12);
  float* res_value = reinterpret_cast<float*>(merge_smem + kMergeSortMax * 12 + a.resident * 8);

  const int m = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  constexpr int kWarps = kThreads / 32;
  const Candidate* cand = a.cand + size_t(m) * a.cap;  // segment c at + c*mp_stride*cap
  const size_t seg_stride = size_t(a.mp_stride) * a.cap;
  auto seg_count = [&](int c) { return cta_count(a, c, m); };

  // Thread c reads CTA c's count and final threshold (grid <= kThreads, one
  // round of loads): the segments' offsets, and the largest threshold, under
  // which no candidate is among the row's k best (that CTA alone holds k at or
  // above it).
  const int c_own = int(threadIdx.x);
  const int n_own = c_own < a.grid ? seg_count(c_own) : 0;
  uint32_t floor_key = warp_max(c_own < a.grid ? cta_threshold(a, c_own, m) : 0u);
  const int incl = warp_inclusive_sum(n_own);
  if (threadIdx.x == 0) {
    s.floor_key = 0;
    s.gathered = 0;
  }
  if (lane == 31) s.warp_start[warp] = incl;
  __syncthreads();
  if (lane == 0) atomicMax(&s.floor_key, floor_key);
  if (warp == 0) {
    const int total = lane < kWarps ? s.warp_start[lane] : 0;
    s.warp_start[lane] = warp_inclusive_sum(total) - total;
  }
  __syncthreads();
  const int start = s.warp_start[warp] + incl - n_own;
  if (c_own < a.grid) s.offset[c_own] = start;
  if (c_own == a.grid - 1) s.offset[a.grid] = start + n_own;
  __syncthreads();
  floor_key = s.floor_key;
  auto admitted = [&](uint64_t rank) { return rank != 0 && composite_key(rank) >= floor_key; };

  // Every stored candidate, one warp per CTA segment: f(rank, value), rank 0
  // for padding lanes and for candidates under the floor (uniform per warp).
  auto for_each_stored = [&](auto&& f) {
    for (int c = warp; c < a.grid; c += kWarps) {
      const int n = seg_count(c);
      const Candidate* seg = cand + size_t(c) * seg_stride;
      for (int i0 = 0; i0 < n; i0 += 32) {
        const int i = i0 + lane;
        Candidate e{0.0f, 0};
        if (i < n) e = seg[i];
        const uint64_t rank = i < n ? rank_of(e.value, e.index) : 0ull;
        f(admitted(rank) ? rank : 0ull, e.value);
      }
    }
  };

  // The admitted candidates into shared memory (in any order: the selection
  // and the final sort do not depend on it). Warp w takes segments w,
  // w + kWarps, ... and issues the first 64 loads of kMergeSegBatch segments
  // before it uses any. If they do not fit, the selection streams them from
  // the workspace instead.
  //
  // append_admitted: the admitted ones of a lane's N candidates (in[j] false:
  // none) into the resident set, one shared-memory atomic per warp for all N.
  auto append_admitted = [&](const auto& e, const auto& in) {
    constexpr int N = sizeof(in) / sizeof(in[0]);
    uint64_t rank[N];
    unsigned ball[N];
    int admitted_here = 0;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const uint64_t r = in[j] ? rank_of(e[j].value, e[j].index) : 0ull;
      rank[j] = admitted(r) ? r : 0ull;
      ball[j] = __ballot_sync(0xffffffffu, rank[j] != 0);
      admitted_here += __popc(ball[j]);
    }
    int at = 0;
    if (lane == 0 && admitted_here != 0) at = atomicAdd(&s.gathered, admitted_here);
    at = __shfl_sync(0xffffffffu, at, 0);
    const unsigned below = (1u << lane) - 1u;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int slot = at + __popc(ball[j] & below);
      if (rank[j] != 0 && slot < a.resident) {
        res_rank[slot] = rank[j];
        res_value[slot] = e[j].value;
      }
      at += __popc(ball[j]);
    }
  };
  for (int c0 = warp; c0 < a.grid; c0 += kWarps * kMergeSegBatch) {
    // The first 64 of each segment: [2b + h] is candidate 32h + lane of segment c0 + b * kWarps.
    Candidate e[2 * kMergeSegBatch];
    bool in[2 * kMergeSegBatch];
    int n[kMergeSegBatch];
#pragma unroll
    for (int b = 0; b < kMergeSegBatch; ++b) {
      const int c = c0 + b * kWarps;
      n[b] = c < a.grid ? s.offset[c + 1] - s.offset[c] : 0;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = 32 * h + lane;
        in[2 * b + h] = i < n[b];
        e[2 * b + h] = in[2 * b + h] ? cand[size_t(c) * seg_stride + i] : Candidate{0.0f, 0};
      }
    }
    append_admitted(e, in);
#pragma unroll
    for (int b = 0; b < kMergeSegBatch; ++b) {
      // The rest of a segment longer than 64 (k > 64).
      const int c = c0 + b * kWarps;
      for (int i0 = 64; i0 < n[b]; i0 += 32) {
        const int i = i0 + lane;
        const bool in_tail[1] = {i < n[b]};
        const Candidate e_tail[1] = {in_tail[0] ? cand[size_t(c) * seg_stride + i] : Candidate{0.0f, 0}};
        append_admitted(e_tail, in_tail);
      }
    }
  }
  __syncthreads();
  const int total = s.gathered;
  const bool resident = total <= a.resident;
  __syncthreads();  // s.gathered is reused by the final gather
  if (threadIdx.x == 0) s.gathered = 0;

  auto for_each = [&](auto&& f) {
    if (resident) {
      const int padded = (total + 31) & ~31;
      for (int base = 0; base < padded; base += blockDim.x) {
        const int i = base + int(threadIdx.x);
        if (base + warp * 32 >= padded) break;  // whole warp past the end
        const bool ok = i < total;
        f(ok ? res_rank[i] : 0ull, ok ? res_value[i] : 0.0f);
      }
    } else {
      for_each_stored(f);
    }
  };

  const uint64_t threshold = block_rank_threshold(for_each, a.k, s.radix);

  for_each([&](uint64_t rank, float value) {
    if (rank != 0 && rank >= threshold) {
      const int slot = atomicAdd(&s.gathered, 1);
      sort_rank[slot] = rank;
      sort_value[slot] = value;
    }
  });
  __syncthreads();
  int padded = 1;
  while (padded < a.k) padded <<= 1;
  for (int i = a.k + int(threadIdx.x); i < padded; i += blockDim.x) {
    sort_rank[i] = 0ull;
    sort_value[i] = 0.0f;
  }
  for (int size = 2; size <= padded; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      __syncthreads();
      for (int i = threadIdx.x; i < padded / 2; i += blockDim.x) {
        const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
        const bool descending = (lo & size) == 0;
        const uint64_t rl = sort_rank[lo], rh = sort_rank[hi];
        if ((rl < rh) == descending) {
          sort_rank[lo] = rh;
          sort_rank[hi] = rl;
          const float v = sort_value[lo];
          sort_value[lo] = sort_value[hi];
          sort_value[hi] = v;
        }
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < a.k; i += blockDim.x) {
    a.values[size_t(m) * a.values_stride + i] = sort_value[i];
    a.indices[size_t(m) * a.indices_stride + i] = int64_t(index_of(sort_rank[i]));
  }
}

// ---- the merge of a few winners (k <= 64) -------------------------------------
// One CTA over the lists of every scoring CTA (each at most k entries,
// unsorted), copied first into shared memory with their counts by cp.async.
// Bound: the k-th largest of the lists' maximum keys is reached by k lists, so
// no candidate under it is among the k best. When at most kRankedMax pass
// (about k do on continuous scores), each finds its place by counting those
// above it (composites are distinct), with no sort; up to kSurvivorCap, warps
// sort them, 64 a warp, and a tree of warp merges (block_select.cuh) takes
// their best k; past that, every warp merges its lists' passing entries into a
// running best instead. Ranks carry their values (RankedValue), so NaN and -0
// come out as computed. A template so that every file including this header
// shares one kernel.
constexpr int kFewWinnersMaxK = 64;
constexpr int kFewWinnersThreads = 1024;
constexpr int kFewWinnersWarps = kFewWinnersThreads / 32;
constexpr int kRankedMax = 256;  // survivors placed by counting: each reads them all
constexpr int kSurvivorCap = kFewWinnersWarps * 64;  // one sorting warp per 64

struct FewWinnersShared {
  union {
    uint32_t list_max[kMergeMaxGrid];    // each list's largest key (0: empty), until the bound
    RankedValue survivor[kSurvivorCap];  // from then on; also each sorting warp's tree stage
  };
  uint32_t bound_key;
  uint32_t survivors;
};

// Dynamic shared memory of merge_few_winners_kernel: every list's k slots,
// then the lists' counts.
inline int few_winners_smem_bytes(int grid, int k) {
  return int((size_t(grid) * size_t(k) * sizeof(Candidate) + size_t(grid) * sizeof(int32_t) + 15) / 16 * 16);
}

template <int kThreads = kFewWinnersThreads>
__global__ void __launch_bounds__(kThreads) merge_few_winners_kernel(MergeArgs a) {
  constexpr int kWarps = kThreads / 32;
  static_assert(kWarps == kFewWinnersWarps, "the shared layout's warps");
  __shared__ FewWinnersShared s;
  extern __shared__ __align__(16) unsigned char few_winners_smem[];
  Candidate* lists = reinterpret_cast<Candidate*>(few_winners_smem);  // [grid][k]
  int32_t* counts = reinterpret_cast<int32_t*>(lists + size_t(a.grid) * a.k);
  const int m = blockIdx.x, lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), k = a.k;
  const size_t seg_stride = size_t(a.mp_stride) * a.cap;
  const Candidate* cand = a.cand + size_t(m) * a.cap;
  if (threadIdx.x == 0) {
    s.survivors = 0;
    s.bound_key = 0u;
  }
  // A list's slots up to min(k, cap) are copied whatever its count (a count
  // never exceeds either); those past the count are never read.
  const int slots = min(k, a.cap);
  for (int c = warp; c < a.grid; c += kWarps)
    for (int i = lane; i < slots; i += 32) cp_async(&lists[c * k + i], &cand[size_t(c) * seg_stride + i], 8, 8);
  for (int c = int(threadIdx.x); c < a.grid; c += kThreads)
    cp_async(&counts[c], cta_count_slot(a, c, m), 4, 4);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  // Entry i of list c as a rank, 0 past its count.
  auto entry = [&](int c, int i, int n) {
    RankedValue e{0ull, 0.0f};
    if (i < n) {
      const Candidate x = lists[c * k + i];
      e = {rank_of(x.value, x.index), x.value};
    }
    return e;
  };
  auto list_length = [&](int c) { return min(counts[c], k); };

  for (int c = warp; c < a.grid; c += kWarps) {
    const int n = list_length(c);
    uint32_t key = 0u;  // real keys are at least NT_KEY_NEG_INF, above 0
    for (int i = lane; i < n; i += 32) key = max(key, nt_order_key(lists[c * k + i].value));
    key = __reduce_max_sync(0xffffffffu, key);
    if (lane == 0) s.list_max[c] = key;
  }
  __syncthreads();
  // The k-th largest list maximum (equal ones taken in list order, so exactly
  // one list is the k-th); 0, letting everything pass, with fewer than k lists.
  for (int c = int(threadIdx.x); c < a.grid; c += kThreads) {
    const uint32_t mine = s.list_max[c];
    int above = 0;
    for (int d = 0; d < a.grid; ++d) {
      const uint32_t other = s.list_max[d];
      above += (other > mine || (other == mine && d < c)) ? 1 : 0;
    }
    if (above == k - 1) s.bound_key = mine;
  }
  __syncthreads();
  const uint64_t bound = uint64_t(s.bound_key) << 32;  // a rank at or above it: a key at or above bound_key
  const unsigned below = (1u << lane) - 1u;
  const int entries = a.grid * slots;
  for (int base = warp * 32; base < entries; base += kThreads) {  // warp-uniform trips
    const int e = base + lane;
    RankedValue v{0ull, 0.0f};
    if (e < entries) {
      const int c = e / slots;
      v = entry(c, e - c * slots, list_length(c));
    }
    const bool pass = v.rank != 0 && v.rank >= bound;
    const unsigned ball = __ballot_sync(0xffffffffu, pass);
    if (ball == 0u) continue;
    uint32_t at = 0;
    if (lane == 0) at = atomicAdd(&s.survivors, uint32_t(__popc(ball)));
    at = __shfl_sync(0xffffffffu, at, 0) + uint32_t(__popc(ball & below));
    if (pass && at < uint32_t(kSurvivorCap)) s.survivor[at] = v;
  }
  __syncthreads();
  const int passed = int(s.survivors);
  // Output place i; a rank of 0 (fewer candidates than k) comes out as value 0
  // and index_of(0).
  auto put = [&](int i, RankedValue e) {
    a.values[size_t(m) * a.values_stride + i] = e.value;
    a.indices[size_t(m) * a.indices_stride + i] = int64_t(index_of(e.rank));
  };
  if (passed <= kRankedMax) {
    for (int i = int(threadIdx.x); i < passed; i += kThreads) {
      const RankedValue e = s.survivor[i];
      int place = 0;
#pragma unroll 4
      for (int j = 0; j < passed; ++j) place += s.survivor[j].rank > e.rank ? 1 : 0;
      if (place < k) put(place, e);
    }
    for (int i = passed + int(threadIdx.x); i < k; i += kThreads) put(i, RankedValue{0ull, 0.0f});
    return;
  }
  RankedValue best[2] = {{0ull, 0.0f}, {0ull, 0.0f}};
  if (passed <= kSurvivorCap) {
    const int active = (passed + 63) / 64;
    if (warp < active) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int i = warp * 64 + 2 * lane + j;
        if (i < passed) best[j] = s.survivor[i];
      }
      warp_sort_desc<2>(best);
    }
    block_merge_desc<2>(best, s.survivor, 64, active);
  } else {
    // Each warp merges its lists' passing entries into its running best.
    uint64_t kth = bound > 0 ? bound - 1 : 0;
    for (int c = warp; c < a.grid; c += kWarps) {
      const int n = list_length(c);
      RankedValue rv[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        rv[j] = entry(c, 2 * lane + j, n);
        if (rv[j].rank <= kth) rv[j].rank = 0ull;
      }
      if (!__any_sync(0xffffffffu, rv[0].rank != 0 || rv[1].rank != 0)) continue;
      warp_sort_desc<2>(rv);
      warp_merge_desc<2>(best, rv);
      const uint64_t now = warp_element<2>(best, uint32_t(k - 1)).rank;
      kth = now > kth ? now : kth;
    }
    __syncthreads();  // the survivor slots become the tree's stage
    block_merge_desc<2>(best, s.survivor, 64, kWarps);
  }
  if (warp == 0) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int i = 2 * lane + j;
      if (i < k) put(i, best[j]);
    }
  }
}

// Dynamic shared memory of merge_topk_kernel for `resident` candidates.
inline int merge_smem_bytes(int resident) { return kMergeSortMax * 12 + resident * 12; }

// The largest resident capacity a device with `max_smem_optin` bytes allows.
inline int merge_resident_capacity(int max_smem_optin) {
  const int room = max_smem_optin - int(sizeof(MergeShared)) - merge_smem_bytes(0) - 256;
  const int n = room / 12 / 32 * 32;
  return n < 0 ? 0 : (n < kMergeMaxResident ? n : kMergeMaxResident);
}

// The merges of one scoring call (shared by the dense and the binary head):
// its candidate buffers and grid, and the merges' dynamic shared memory on
// the device -- the sorting merge's resident candidates and bytes, and the
// most the few-winners merge may take (the same total with its own static
// layout), both kernels' limits raised once per device. Made before the
// call's first launch, so a grid the merge cannot take fails before any.
struct MergeCall {
  CandidateArgs cand;
  int grid;
  int resident, sort_smem, few_winners_smem;
  const char* op;

  MergeCall(const CandidateArgs& c, int scoring_grid, int device, const DeviceLimits& dev, const char* op_name)
      : cand(c), grid(scoring_grid), op(op_name) {
    if (grid > kMergeMaxGrid)
      fail(NT_ERROR_UNSUPPORTED, std::string(op) + ": the merge takes at most " + std::to_string(kMergeMaxGrid) +
                                     " scoring CTAs, got " + std::to_string(grid));
    resident = merge_resident_capacity(dev.max_smem_optin);
    sort_smem = merge_smem_bytes(resident);
    few_winners_smem = sort_smem + int(sizeof(MergeShared)) - int(sizeof(FewWinnersShared));
    allow_dynamic_smem(merge_topk_kernel<>, sort_smem, device, op);
    allow_dynamic_smem(merge_few_winners_kernel<>, few_winners_smem, device, op);
  }

  // The k best of a pass's candidates into rows [m0, m0 + rows) of the outputs.
  void merge(const nt_tensor& values, const nt_tensor& indices, int64_t m0, int rows, cudaStream_t stream) const {
    MergeArgs a{};
    a.cand = cand.cand;
    a.counts = cand.counts;
    a.grid = grid;
    a.mp_stride = cand.mp_stride;
    a.cap = cand.cap;
    a.k = cand.k;
    a.values = static_cast<float*>(values.data) + m0 * values.row_stride;
    a.values_stride = values.row_stride;
    a.indices = static_cast<int64_t*>(indices.data) + m0 * indices.row_stride;
    a.indices_stride = indices.row_stride;
    a.resident = resident;
    // The few-winners merge holds every list in shared memory: it takes the
    // merges whose lists fit what the device allows the sorting merge.
    const bool few = cand.k <= kFewWinnersMaxK;
    const int few_bytes = few ? few_winners_smem_bytes(grid, cand.k) : 0;
    if (few && few_bytes <= few_winners_smem)
      merge_few_winners_kernel<><<<rows, kFewWinnersThreads, size_t(few_bytes), stream>>>(a);
    else
      merge_topk_kernel<><<<rows, kMergeThreads, size_t(sort_smem), stream>>>(a);
    check_launch(op);
  }
};

}  // namespace nt::cuda::topk
