// Exact top-k inside one CTA of a scoring kernel.
//
// Each CTA owns a contiguous vocabulary range and walks it in tiles in
// increasing index order. Per token row m it keeps, in its slice of the
// workspace, a buffer of candidates (value, index) and a threshold key: the
// order key of the k-th best candidate kept so far. A later score whose key is
// not above the threshold cannot enter the top k (an equal key loses the tie,
// its index being larger), so almost every score is rejected in registers.
// Between tiles, a buffer that could overflow during the next tile is cut back
// to its k best by one warp (radix select on the 64-bit rank), which raises
// the threshold. At the end every buffer holds at most k entries and always
// the CTA's own top min(k, rows): the merge over CTAs is exact.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/ordering.h"
#include "cuda/block_select.cuh"

namespace nt::cuda::topk {

struct Candidate {
  float value;  // as computed: a NaN is reported as NaN though it ranks as -inf
  int32_t index;
};

// A candidate's composite (block_select.cuh): larger rank = earlier in the
// order (value desc, index asc); never 0 for a real candidate (the smallest
// key is that of -inf, 0x007FFFFF).
__device__ __forceinline__ uint64_t rank_of(float value, int32_t index) {
  return composite(nt_order_key(value), uint32_t(index));
}
__device__ __forceinline__ int32_t index_of(uint64_t rank) { return int32_t(composite_index(rank)); }

// Where a scoring kernel's candidates go: [grid][mp_stride][cap] entries,
// [grid][mp_stride] final counts, and after them [grid][mp_stride] final
// thresholds (the key every one of the CTA's k best is at or above; 0 when the
// CTA never cut its buffer). The largest threshold over the CTAs bounds the
// row's k-th best from below, so the merge skips every candidate under it.
// A kernel run with ScoreSink (below) writes its scores to `scores` instead.
struct CandidateArgs {
  Candidate* cand;
  int32_t* counts;
  int mp_stride;
  int cap;
  int k;
  float* scores;         // [pass rows][score_stride]: the pass's first row
  int64_t score_stride;
};

constexpr int kMaxRows = 64;

template <int kWarps>
struct CtaShared {
  uint32_t threshold[kMaxRows];
  int32_t count[kMaxRows];
  uint32_t hist[kWarps][256];
};

// Radix select by one warp: the rank T such that exactly `need` of the ranks
// visited by for_each are >= T (ranks are unique; 0 marks padding).
// for_each(f) calls f(rank) for each of the lane's entries.
template <class ForEach>
__device__ uint64_t warp_rank_threshold(ForEach&& for_each, int need, uint32_t* hist) {
  const int lane = threadIdx.x & 31;
  uint64_t prefix = 0;
  for (int shift = 56; shift >= 0; shift -= 8) {
    const uint64_t hi_mask = shift == 56 ? 0ull : (~0ull << (shift + 8));
    for (int b = lane; b < 256; b += 32) hist[b] = 0;
    __syncwarp();
    // One atomic per entry.
    for_each([&](uint64_t rank) {
      if (rank != 0 && (rank & hi_mask) == prefix)
        atomicAdd(&hist[unsigned(rank >> shift) & 255u], 1u);
    });
    __syncwarp();
    int digit, above, count;
    warp_find_digit(hist, need, digit, above, count);
    __syncwarp();
    need -= above;
    prefix |= uint64_t(digit) << shift;
    if (count == need) break;  // every entry with this prefix is in
  }
  return prefix;
}

// A warp's list of at most 32 * kRegEntries candidates in registers: entry
// e of a lane is buf[32 e + lane] (rank 0 past count).
template <int kRegEntries>
__device__ __forceinline__ void warp_load_ranks(const Candidate* buf, int count, uint64_t (&rank)[kRegEntries],
                                                float (&value)[kRegEntries]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int e = 0; e < kRegEntries; ++e) {
    const int i = e * 32 + lane;
    rank[e] = 0;
    value[e] = 0.0f;
    if (i < count) {
      const Candidate c = buf[i];
      rank[e] = rank_of(c.value, c.index);
      value[e] = c.value;
    }
  }
}

// Writes the loaded entries ranked at or above t back to buf[0, n) in their
// order and returns n; min_key: the smallest key written (unchanged if none).
template <int kRegEntries>
__device__ __forceinline__ int warp_store_ranks_at_or_above(Candidate* buf, const uint64_t (&rank)[kRegEntries],
                                                            const float (&value)[kRegEntries], uint64_t t,
                                                            uint32_t& min_key) {
  const int lane = threadIdx.x & 31;
  int base = 0;
#pragma unroll
  for (int e = 0; e < kRegEntries; ++e) {
    const bool keep = rank[e] != 0 && rank[e] >= t;
    const unsigned ball = __ballot_sync(0xffffffffu, keep);
    if (keep) {
      buf[base + __popc(ball & ((1u << lane) - 1u))] = Candidate{value[e], index_of(rank[e])};
      min_key = min(min_key, composite_key(rank[e]));
    }
    base += __popc(ball);
  }
  return base;
}

// Keeps the k best of buf[0, count) in buf[0, k) (any order); returns the
// smallest key kept. Called by one whole warp; count > k. Not inlined (rare).
template <int kRegEntries>
__device__ __noinline__ uint32_t warp_compact(Candidate* buf, int count, int k, uint32_t* hist) {
  const int lane = threadIdx.x & 31;
  uint32_t min_key = 0xFFFFFFFFu;
  if (count <= 32 * kRegEntries) {
    // Common case: the whole buffer fits the warp's registers, one load.
    uint64_t rank[kRegEntries];
    float value[kRegEntries];
    warp_load_ranks<kRegEntries>(buf, count, rank, value);
    const uint64_t t = warp_rank_threshold(
        [&](auto&& f) {
#pragma unroll
          for (int e = 0; e < kRegEntries; ++e) f(rank[e]);
        },
        k, hist);
    warp_store_ranks_at_or_above<kRegEntries>(buf, rank, value, t, min_key);
  } else {
    // Large k: stream the buffer from memory on every radix pass.
    const int rounds = (count + 31) / 32;
    const uint64_t t = warp_rank_threshold(
        [&](auto&& f) {
          for (int r = 0; r < rounds; ++r) {
            const int i = r * 32 + lane;
            uint64_t rank = 0;
            if (i < count) {
              const Candidate c = buf[i];
              rank = rank_of(c.value, c.index);
            }
            f(rank);
          }
        },
        k, hist);
    int base = 0;
    for (int r = 0; r < rounds; ++r) {
      const int i = r * 32 + lane;
      Candidate c{0.0f, 0};
      uint64_t rank = 0;
      if (i < count) {
        c = buf[i];
        rank = rank_of(c.value, c.index);
      }
      const bool keep = rank != 0 && rank >= t;
      const unsigned ball = __ballot_sync(0xffffffffu, keep);
      __syncwarp();  // every lane has read its entry before any slot is rewritten
      if (keep) {
        buf[base + __popc(ball & ((1u << lane) - 1u))] = c;
        min_key = min(min_key, composite_key(rank));
      }
      base += __popc(ball);
    }
  }
  return warp_min(min_key);
}

// Keeps the entries of buf[0, count) at or above `floor` in place (order kept);
// returns how many. Called by one whole warp.
template <class Rank>
__device__ __forceinline__ int warp_keep_at_or_above(Rank* buf, int count, uint64_t floor) {
  const int lane = threadIdx.x & 31;
  int base = 0;
  for (int r = 0; r < (count + 31) / 32; ++r) {
    const int i = r * 32 + lane;
    const uint64_t v = i < count ? uint64_t(buf[i]) : 0ull;
    const bool keep = v != 0 && v >= floor;
    const unsigned ball = __ballot_sync(0xffffffffu, keep);
    __syncwarp();  // every lane has read its entry before any slot is rewritten
    if (keep) buf[base + __popc(ball & ((1u << lane) - 1u))] = Rank(v);
    base += __popc(ball);
  }
  __syncwarp();
  return base;
}

// The rank T such that exactly k of the distinct nonzero ranks buf[0, count)
// are >= T (1 <= k <= count). One whole warp; the buffer is streamed from
// memory on every radix pass, leaving the caller's registers alone.
template <class Rank>
__device__ __noinline__ uint64_t warp_rank_bound(const Rank* buf, int count, int k, uint32_t* hist) {
  const int lane = threadIdx.x & 31;
  const int rounds = (count + 31) / 32;
  return warp_rank_threshold(
      [&](auto&& f) {
        for (int r = 0; r < rounds; ++r) {
          const int i = r * 32 + lane;
          f(i < count ? uint64_t(buf[i]) : 0ull);
        }
      },
      k, hist);
}

// The r-th largest (1 <= r <= R, r <= count) of the distinct nonzero ranks
// buf[0, count), by one whole warp with no shared-memory atomics: each lane
// keeps its own R best in registers, then r rounds of a warp max take the
// overall best.
template <int R, class Rank>
__device__ __noinline__ uint64_t warp_rth_largest(const Rank* buf, int count, int r) {
  const int lane = threadIdx.x & 31;
  uint64_t top[R];  // descending
#pragma unroll
  for (int j = 0; j < R; ++j) top[j] = 0;
  for (int i = lane; i < count; i += 32) {
    const uint64_t v = uint64_t(buf[i]);
#pragma unroll
    for (int j = R - 1; j >= 0; --j) {
      const uint64_t above = j ? top[j - 1] : ~0ull;
      if (v > top[j]) top[j] = v > above ? above : v;
    }
  }
  uint64_t best = 0;
  for (int k = 0; k < r; ++k) {
    best = top[0];
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
      const uint64_t o = __shfl_xor_sync(0xffffffffu, best, d);
      best = o > best ? o : best;
    }
    if (top[0] == best && best != 0) {  // ranks are distinct: one lane
#pragma unroll
      for (int j = 0; j < R - 1; ++j) top[j] = top[j + 1];
      top[R - 1] = 0;
    }
  }
  return best;
}

// Keeps the k largest of the distinct nonzero ranks buf[0, count) in buf[0, k)
// (order kept) and returns the smallest kept. One whole warp; count > k >= 1.
template <class Rank>
__device__ __noinline__ Rank warp_compact_ranks(Rank* buf, int count, int k, uint32_t* hist) {
  const uint64_t t = warp_rank_bound(buf, count, k, hist);
  const int lane = threadIdx.x & 31;
  uint64_t min_kept = ~0ull;
  for (int i = lane; i < count; i += 32) {
    const uint64_t v = uint64_t(buf[i]);
    if (v >= t) min_kept = v < min_kept ? v : min_kept;
  }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    const uint64_t o = __shfl_xor_sync(0xffffffffu, min_kept, d);
    min_kept = o < min_kept ? o : min_kept;
  }
  warp_keep_at_or_above(buf, count, t);
  return Rank(min_kept);
}

// The per-CTA state of a scoring kernel; every method but offer() is called
// by all of its threads: the whole CTA (kBarrier = 0), or threads
// [0, 32 * kWarps) that meet at named barrier kBarrier (the scoring warps of a
// kernel whose other warps only copy data in).
template <int kWarps, int kBarrier = 0>
struct CtaTopk {
  static constexpr int kThreads = 32 * kWarps;
  CtaShared<kWarps>& s;
  Candidate* mine;  // this CTA's [mp_stride][cap] slice
  CandidateArgs args;
  int rows;  // token rows of this pass

  __device__ CtaTopk(CtaShared<kWarps>& shared, const CandidateArgs& a, int pass_rows)
      : s(shared), mine(a.cand + size_t(blockIdx.x) * a.mp_stride * a.cap), args(a),
        rows(pass_rows) {
    for (int m = threadIdx.x; m < kMaxRows; m += stride()) {
      s.threshold[m] = 0u;  // below every key: the first scores all enter
      s.count[m] = 0;
    }
    sync();
  }

  __device__ __forceinline__ static int stride() { return kBarrier == 0 ? int(blockDim.x) : kThreads; }
  __device__ __forceinline__ static void sync() {
    if (kBarrier == 0)
      __syncthreads();
    else
      asm volatile("bar.sync %0, %1;\n" ::"n"(kBarrier), "n"(kThreads) : "memory");
  }

  __device__ __forceinline__ void offer(int m, float score, int32_t index) {
    offer_above(m, s.threshold[m], score, index);
  }

  // offer() against a threshold the caller read (threshold(m)) before its
  // offers; for m < kMaxRows.
  __device__ __forceinline__ uint32_t threshold(int m) const { return s.threshold[m]; }
  __device__ __forceinline__ void offer_above(int m, uint32_t floor, float score, int32_t index) {
    if (nt_order_key(score) > floor) {
      const int slot = atomicAdd(&s.count[m], 1);
      mine[size_t(m) * args.cap + slot] = Candidate{score, index};
    }
  }

  // After every tile: cut back each buffer that could not take `next_rows`
  // more candidates (or, at the end, any buffer above k).
  __device__ void end_tile(int next_rows, bool last) {
    sync();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int m = warp; m < rows; m += kWarps) {
      const int count = s.count[m];
      const bool over = last ? count > args.k : (count > args.cap - next_rows && count > args.k);
      if (over) {
        const uint32_t key = warp_compact<16>(mine + size_t(m) * args.cap, count, args.k, s.hist[warp]);
        if (lane == 0) {
          s.count[m] = args.k;
          s.threshold[m] = key;
        }
      }
    }
    sync();
    if (last)
      for (int m = threadIdx.x; m < rows; m += stride()) {
        args.counts[size_t(blockIdx.x) * args.mp_stride + m] = s.count[m];
        args.counts[(size_t(gridDim.x) + blockIdx.x) * args.mp_stride + m] = int32_t(s.threshold[m]);
      }
  }
};

// The other output of a scoring kernel: every score written out, score
// (m, index) at scores[m * score_stride + index], for the fused heads
// (cuda/lm_head_sample.cu). The interface of CtaTopk, so that one kernel body
// serves both; nothing is selected, so there is nothing to cut or count.
struct ScoreSink {
  float* scores;
  int64_t stride;

  template <class Shared>
  __device__ ScoreSink(Shared&, const CandidateArgs& a, int) : scores(a.scores), stride(a.score_stride) {}
  __device__ __forceinline__ uint32_t threshold(int) const { return 0u; }
  __device__ __forceinline__ void offer(int m, float score, int32_t index) {
    scores[m * stride + index] = score;
  }
  __device__ __forceinline__ void offer_above(int m, uint32_t, float score, int32_t index) {
    offer(m, score, index);
  }
  __device__ __forceinline__ void end_tile(int, bool) {}
};

// The sink of a kernel instantiated for scores (kScores) or for the top-k.
template <bool kScores, int kWarps, int kBarrier = 0>
using SinkOf = std::conditional_t<kScores, ScoreSink, CtaTopk<kWarps, kBarrier>>;

}  // namespace nt::cuda::topk
