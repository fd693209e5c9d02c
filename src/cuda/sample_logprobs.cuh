// Device side of nt_sample_logprobs (docs/SEMANTICS.md, "Logprobs with sample"):
// kernels after nt_sample's on the same stream.
//
//  row     grid B, for batches whose rows the sampler scanned as one chunk
//          each: a filtered row whose first n tokens, rank and normalizer the
//          sampler's chunk candidates (still in the workspace) and records
//          give (processed: the keep-set among the candidates; raw: the
//          chunks' raw mass, summed by the sampler's scans) gets its outputs
//          from them, reading its candidates' logits; any other row is scanned
//          whole by the same CTA, as below, which writes its outputs.
//  scan    grid (B, splits), the other batches: one CTA reads one chunk of one
//          row once, 16
//          tokens a thread an iteration: the largest finite value and the sum
//          of exp(v - max) of its values (an online softmax: one exp a token
//          in fp32, an iteration's 16 terms added pairwise in fp32, the sums in
//          fp64), the +inf count, the rank count against the sampled token's
//          value, and the chunk's first n tokens of the logits' order (per-warp
//          sorted lists of 32 in registers; a token is tested by one float
//          compare against a bound, the largest n-th of the CTA's warp lists,
//          and only a warp with a candidate inserts it (or, with many, merges
//          lane by lane); then a tree of warp merges over the CTA).
//  finish  grid B, one CTA a row: merges the chunks' records (max,
//          normalizer in fp64, counts, the first n by warp merges spread over
//          the CTA's warps) and writes the row's outputs.
//
// Values: raw, the logits (NaN as -inf); processed, the scores of the
// keep-set the sampler drew the token from (RowState::keep_cut for filtered
// rows, every score for plain rows, the token alone for greedy rows). Every
// decision (membership, order, rank) uses the core's exact predicates
// (core/logprobs.h); only the normalizer is rounded.
#pragma once

#include <cfloat>
#include <type_traits>

#include <cub/block/block_reduce.cuh>

#include "core/logprobs.h"
#include "cuda/sample_common.cuh"

namespace nt::cuda {

constexpr int kLogprobThreads = 256;
constexpr int kLogprobCtasPerSm = 4;  // resident scan CTAs an SM is planned for (__launch_bounds__)
constexpr int kLogprobTokens = 16;    // tokens a scan thread loads an iteration (whole load groups)
constexpr int kLogprobInsertLimit = 32;  // most candidates a warp inserts one at a time
constexpr int kLogprobFinishThreads = 256;
constexpr int kLogprobFinishBatch = 8;  // chunk records a finish warp loads at once

// The statistics of a row's values, or of one chunk's.
struct LogprobStats {
  float m;        // largest finite value, -inf if none
  double z;       // sum of exp(v - m) over the finite values
  u32 n_pos_inf;  // values that are +inf
  u32 rank;       // values at least the sampled token's (nt_logprob_at_least)
};

// One chunk's result (scan -> finish).
struct LogprobChunk {
  LogprobStats s;
  u64 top[NT_MAX_LOGPROBS];  // the chunk's first n composites (logit key, index), descending; 0: none
};

struct LogprobArgs {
  int n;          // num_logprobs
  int processed;  // NT_LOGPROBS_PROCESSED
  int splits, chunk;
  int rows_last_first;  // scan grid (splits, B), rows from the last (else (B, splits))
  int32_t* ids;
  int64_t ids_stride;
  float* values;
  int64_t values_stride;
  int32_t* ranks;
  LogprobChunk* chunks;  // [B][splits]
};

// The logprobs kernels' shared memory: the candidates' answer and the scan use
// it one after the other.
struct LogprobShared {
  union {
    cub::BlockReduce<float, kLogprobThreads>::TempStorage f;
    cub::BlockReduce<double, kLogprobThreads>::TempStorage d;
    cub::BlockReduce<u32, kLogprobThreads>::TempStorage r32;
    BlockMaxSumStorage<kLogprobThreads> max_sum;
  } tmp;
  u64 stage[kLogprobThreads];
  u64 cta_bound;
  u32 taken;
  float v_max;
  double log_z, raw_z;
};

__device__ __forceinline__ long long sampled_token(const SampleArgs& a, u32 row) {
  return a.tokens_int32 ? (long long)static_cast<const int32_t*>(a.tokens)[row]
                        : (long long)static_cast<const int64_t*>(a.tokens)[row];
}

// The keep-set row `row` drew `token` from (core/logprobs.h).
__device__ __forceinline__ nt_keep_set drawn_keep_set(const SampleArgs& a, const RowCfg& c, u32 row,
                                                      long long token) {
  nt_keep_set k;
  k.kind = NT_KEEP_EMPTY;
  k.temperature = c.p.temperature;
  k.key = 0u;
  k.index = 0u;
  if (token < 0) return k;
  if (c.cls == kGreedyRow) {
    k.kind = NT_KEEP_ONE;
    return k;
  }
  // Plain rows keep every score (their +inf scores alone when there are any).
  const u64 cut = c.cls == kFilteredRow ? a.row_states[row].keep_cut : 0ull;
  k.kind = NT_KEEP_PREFIX;
  k.key = composite_key(cut);
  k.index = composite_index(cut);
  return k;
}

// What the logprobs pass knows of a row: the mode, the token, its keep-set,
// and a logit below which no token is a member (so most tokens of a filtered
// row are ruled out by one compare, without the division of x / T).
struct LogprobRow {
  bool processed;
  long long token;
  nt_keep_set k;
  float x_floor;  // -inf: every token is tested
};

__device__ __forceinline__ LogprobRow logprob_row(const SampleArgs& a, const RowCfg& c, u32 row,
                                                  long long token, bool processed) {
  LogprobRow r{processed, token, drawn_keep_set(a, c, row, token), -INFINITY};
  const bool finite_cut = r.k.kind == NT_KEEP_PREFIX && r.k.key >= NT_KEY_FIRST_FINITE &&
                          r.k.key < NT_KEY_POS_INF;
  // logit_floor: every x below it scores below the cut's score (not for
  // bound_mode 2, T subnormal or huge, where every token is tested).
  if (processed && finite_cut && c.bound_mode != 2) r.x_floor = logit_floor(nt_key_to_float(r.k.key), c);
  return r;
}

// The value token i's log-probability is taken of; -inf when it has none.
__device__ __forceinline__ float logprob_base(float x, u32 i, const LogprobRow& r) {
  if (r.processed && r.k.kind != NT_KEEP_ONE && x < r.x_floor) return -INFINITY;
  return nt_logprob_base(x, i, r.processed, r.k, nt_i32(r.token));
}

__device__ __forceinline__ float logprob_value(float v, u32 n_pos_inf, float v_max, double log_z) {
  if (n_pos_inf > 0) return v == INFINITY ? float(-log(double(n_pos_inf))) : -INFINITY;
  if (v == -INFINITY) return -INFINITY;
  return float((double(v) - double(v_max)) - log_z);
}

// One CTA a row, for a filtered row with a token drawn, no +inf score and T
// finite. Its first n tokens of the logits' order are the candidates' first n
// when the n-th's score is above every truncated chunk's floor: a dropped
// token scores at most its floor's score, so its logit is below the n-th's
// (x / T is monotone). Processed mode: a keep-set among the candidates (its
// cut at or above the floor) has every member there, and with them the
// normalizer and the rank. Raw mode: the scans summed each chunk's raw mass
// (SampleArgs::raw_mass; none left out), which gives the normalizer, and the
// rank is the candidates' when the token's score is above the floor (every
// dropped logit is below the token's). Such a row's outputs are written here,
// from the candidates and the logits of those tokens, and the answer is true;
// for every other row it is false. Block-uniform decisions.
template <nt_dtype DT>
__device__ __forceinline__ bool logprobs_from_candidates(const SampleArgs& a, const LogprobArgs& l,
                                                         u32 row, LogprobShared& sh) {
  constexpr int kWarps = kLogprobThreads / 32;
  using ReduceF = cub::BlockReduce<float, kLogprobThreads>;
  using ReduceD = cub::BlockReduce<double, kLogprobThreads>;
  using ReduceU32 = cub::BlockReduce<u32, kLogprobThreads>;
  using S = typename LogitTraits<DT>::Storage;
  const u32 lane = lane_index();
  const int warp = int(threadIdx.x >> 5);
  const RowCfg c = load_row_cfg(a, row);
  const long long token = sampled_token(a, row);
  // Filtered rows with a token only (the others have no candidates or row
  // state), and a finite T (T = +inf scores a +inf logit as NaN: the logits'
  // order is then no longer the scores').
  if (c.cls != kFilteredRow || token < 0 || !isfinite(c.p.temperature)) return false;
  const RowState st = a.row_states[row];
  const ChunkRecord* rec = a.chunks + size_t(row) * a.splits;
  const S* rowp = static_cast<const S*>(a.logits) + int64_t(row) * a.row_stride;
  const int n = l.n;
  const bool processed = l.processed != 0;

  // The floor below which the chunks dropped tokens (0: none dropped), and in
  // raw mode the row's raw mass; warp 0, chunks a lane.
  if (warp == 0) {
    u64 floor = 0ull;
    u32 unsummed = 0u;
    float raw_max = -INFINITY;
    for (int k = int(lane); k < a.splits; k += 32) {
      const u64 f = rec[k].truncated ? rec[k].last : 0ull;
      floor = f > floor ? f : floor;
      if (!processed) {
        unsummed += rec[k].raw_unsummed;
        raw_max = fmaxf(raw_max, rec[k].raw_max);
      }
    }
    floor = warp_max(floor);
    bool ok = st.n_pos_inf == 0;
    if (processed) {
      ok = ok && st.keep_cut >= floor;
    } else {
      unsummed = warp_sum(unsummed);
      raw_max = warp_max(raw_max);
      double z = 0.0;
      for (int k = int(lane); k < a.splits; k += 32)
        if (rec[k].raw_max != -INFINITY)
          z += rec[k].raw_z * exp(double(rec[k].raw_max) - double(raw_max));
      z = warp_sum(z);
      const u32 token_key = nt_order_key(nt_scaled_score(widen<DT>(rowp[token]), c.p.temperature));
      ok = ok && a.raw_mass && unsummed == 0u && raw_max != -INFINITY &&
           (floor == 0ull || token_key > composite_key(floor));
      if (lane == 0) {
        sh.v_max = raw_max;
        sh.raw_z = z;
      }
    }
    if (lane == 0) {
      sh.taken = ok;
      sh.stage[0] = floor;
    }
  }
  __syncthreads();
  const u64 floor = sh.stage[0];
  if (!sh.taken) return false;
  __syncthreads();  // stage is the merges' from here on

  const LogprobRow lr = logprob_row(a, c, row, token, processed);
  const float token_base = logprob_base(widen<DT>(rowp[token]), u32(token), lr);
  // The row's candidates, chunk by chunk, 32 slots a batch, the batches of a
  // chunk dealt over the warps (a row has one chunk here).
  // on_batch(composite by score or 0, its index, its logit's value).
  auto for_each_candidate = [&](auto&& on_batch) {
    for (int k = 0; k < a.splits; ++k) {
      const u32 n_cand = rec[k].n_cand;
      const u64* src = a.candidates + (size_t(row) * a.splits + k) * size_t(a.kchunk);
      for (u32 j0 = u32(warp) * 32u; j0 < n_cand; j0 += 32u * kWarps) {  // warp-uniform
        const u32 j = j0 + lane;
        const u64 v = j < n_cand ? src[j] : 0ull;
        const u32 id = composite_index(v);
        const float x = v ? widen<DT>(rowp[id]) : -INFINITY;
        on_batch(v, id, x);
      }
    }
  };
  // The largest value (processed: the keep-set's first member; raw: the
  // records' largest logit), then the normalizer (raw: the records'), the rank
  // and the first 32 of the logits' order.
  float v_max = processed ? -INFINITY : sh.v_max;
  if (processed) {
    for_each_candidate([&](u64 v, u32 id, float x) {
      if (v) v_max = fmaxf(v_max, logprob_base(x, id, lr));
    });
    v_max = ReduceF(sh.tmp.f).Reduce(v_max, MaxF32());
    if (threadIdx.x == 0) sh.v_max = v_max;
    __syncthreads();
    v_max = sh.v_max;
  }
  double z = 0.0;
  u32 rank = 0u;
  u64 list[1] = {0ull};
  for_each_candidate([&](u64 v, u32 id, float x) {
    const float b = v ? logprob_base(x, id, lr) : -INFINITY;
    if (b != -INFINITY) {
      if (processed) z += exp(double(b) - double(v_max));
      rank += b >= token_base ? 1u : 0u;
    }
    u64 b1[1] = {v ? composite(nt_order_key(x), id) : 0ull};
    warp_sort_desc<1>(b1);
    warp_merge_desc<1>(list, b1);
  });
  z = processed ? ReduceD(sh.tmp.d).Sum(z) : sh.raw_z;
  __syncthreads();
  rank = ReduceU32(sh.tmp.r32).Sum(rank);
  if (threadIdx.x == 0) sh.log_z = z > 0.0 ? log(z) : 0.0;
  __syncthreads();
  block_merge_desc<1>(list, sh.stage, 32, kWarps);
  if (warp == 0) {
    // The n-th of the logits' order must score above the floor, or a dropped
    // token could precede it (with no floor every finite score is a
    // candidate, so it must only exist).
    bool first_n_known = true;
    if (n > 0) {
      const u64 nth = __shfl_sync(kFullMask, list[0], n - 1);
      const float s_nth =
          nth ? nt_scaled_score(widen<DT>(rowp[composite_index(nth)]), c.p.temperature) : -INFINITY;
      first_n_known = nth != 0ull && s_nth != -INFINITY &&
                      (floor == 0ull || s_nth > nt_key_to_float(composite_key(floor)));
    }
    if (first_n_known) {
      const double log_z = sh.log_z;
      int32_t* ids = l.ids + int64_t(row) * l.ids_stride;
      float* values = l.values + int64_t(row) * l.values_stride;
      if (int(lane) < n) {
        const u32 id = composite_index(list[0]);
        ids[1 + lane] = int32_t(id);
        const float base = logprob_base(widen<DT>(rowp[id]), id, lr);
        values[1 + lane] = logprob_value(base, 0u, v_max, log_z);
      }
      if (lane == 0) {
        ids[0] = int32_t(token);
        values[0] = logprob_value(token_base, 0u, v_max, log_z);
        l.ranks[row] = int32_t(rank);
      }
    }
    if (lane == 0) sh.taken = first_n_known;
  }
  __syncthreads();
  return sh.taken != 0u;
}

// The statistics of tokens [begin, end) of row `row` (in thread 0) and, when
// n > 0, their first n composites (in warp 0, element i in lane i).
template <nt_dtype DT, bool VEC>
__device__ __forceinline__ LogprobStats scan_logprobs(const SampleArgs& a, const LogprobArgs& l,
                                                      u32 row, u32 begin, u32 end,
                                                      LogprobShared& sh, u64 (&list)[1]) {
  using S = typename LogitTraits<DT>::Storage;
  using ReduceU32 = cub::BlockReduce<u32, kLogprobThreads>;
  constexpr int kWarps = kLogprobThreads / 32;
  constexpr int G = group_tokens<DT, VEC>();
  constexpr int U = kLogprobTokens / G;  // load groups a thread has in flight
  constexpr int K = U * G;
  static_assert(K == kLogprobTokens, "whole load groups");
  u64& cta_bound = sh.cta_bound;
  const S* rowp = static_cast<const S*>(a.logits) + int64_t(row) * a.row_stride;
  const RowCfg c = load_row_cfg(a, row);
  const long long token = sampled_token(a, row);
  const LogprobRow lr = logprob_row(a, c, row, token, l.processed != 0);
  const float token_base = token >= 0 ? logprob_base(widen<DT>(rowp[token]), u32(token), lr) : -INFINITY;
  // Rank: v counts when v != -inf and nt_logprob_at_least(key(v), key(token_base)).
  // No v is NaN, and the keys order non-NaN values as the floats do (-0 == +0),
  // so that is v >= rank_floor as floats.
  const float rank_floor = token_base == -INFINITY ? -FLT_MAX : token_base;
  const int n = l.n;

  float m = -INFINITY;  // the running largest finite value
  double z = 0.0;       // sum of exp(v - m) over the finite values so far
  u32 n_inf = 0, rank = 0;
  const u32 lane = lane_index();
  list[0] = 0ull;  // this warp's first 32 composites, element i in lane i
  // Only composites above `bound` may enter: the largest element n - 1 of any
  // warp's list seen so far (n tokens of the chunk rank at or before it, so
  // no token below it is among the chunk's first n), shared through
  // cta_bound.
  u64 bound = 0ull;
  // A logit below which no composite is above `bound` (NaN while bound is 0
  // or any other key below every score's: then every token is a candidate).
  float bound_x = nt_key_to_float(composite_key(bound));
  if (threadIdx.x == 0) cta_bound = 0ull;
  __syncthreads();

  // kLogprobTokens tokens a thread an iteration, U loads in flight (one pass
  // over the row: streaming loads); every thread runs the same number of
  // iterations (tokens past `end` read as -inf), so the warp collectives may
  // run inside. Token (u, j) of an iteration is group_at(u) + j. The loop is
  // compiled once a mode, so that the raw one carries none of the registers
  // of the processed one's membership tests (the division and its slow path).
  constexpr u32 kStep = kLogprobThreads * G;
  const u32 iters = (end - begin + kStep - 1) / kStep;
  auto scan = [&](auto processed_mode) {
  constexpr bool kProcessed = decltype(processed_mode)::value;
  for (u32 it = 0; it < iters; it += U) {
    const u32 first = begin + it * kStep + threadIdx.x * G;
    auto group_at = [&](int u) { return first + u32(u) * kStep; };
    float x[U][G];
#pragma unroll
    for (int u = 0; u < U; ++u) load_group<DT, VEC, true>(rowp, group_at(u), end, x[u]);

    // The first n of the logits' order: one float compare a token against the
    // bound. A warp whose lanes hold candidates inserts them one at a time
    // (few: the common case) or, when many (the first loads), runs rounds in
    // which every lane offers its best remaining candidate to one warp merge,
    // until no lane has one above the (rising) bound. Either way a candidate
    // enters only when its composite is above the bound.
    if (n > 0) {
      const u64 shared_bound = *reinterpret_cast<volatile u64*>(&cta_bound);
      if (shared_bound > bound) {
        bound = shared_bound;
        bound_x = nt_key_to_float(composite_key(bound));
      }
      u32 candidates = 0;
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < G; ++j) candidates += !(x[u][j] < bound_x) ? 1u : 0u;
      const u32 warp_candidates = __reduce_add_sync(kFullMask, candidates);
      if (warp_candidates != 0u && warp_candidates <= u32(kLogprobInsertLimit)) {
        const u32 warp_first = first - lane * u32(G);  // lane 0's first token
        u32 pending = 0u;  // bit u * G + j: token (u, j) of this lane is a candidate
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int j = 0; j < G; ++j) pending |= !(x[u][j] < bound_x) ? 1u << (u * G + j) : 0u;
        while (true) {
          const u32 from = __ballot_sync(kFullMask, pending != 0u);
          if (from == 0u) break;
          const int src = __ffs(from) - 1;
          const int slot = __ffs(__shfl_sync(kFullMask, pending, src)) - 1;
          if (int(lane) == src) pending &= pending - 1u;
          float mine = x[0][0];
#pragma unroll
          for (int u = 0; u < U; ++u)
#pragma unroll
            for (int j = 0; j < G; ++j) mine = slot == u * G + j ? x[u][j] : mine;
          const float xs = __shfl_sync(kFullMask, mine, src);
          const u32 t = warp_first + u32(src) * u32(G) + u32(slot / G) * kStep + u32(slot % G);
          const u64 cv = t < end ? composite(nt_order_key(xs), t) : 0ull;
          if (cv > bound) {  // warp-uniform
            const u32 before = __popc(__ballot_sync(kFullMask, list[0] > cv));
            const u64 up = __shfl_up_sync(kFullMask, list[0], 1);
            list[0] = lane < before ? list[0] : lane == before ? cv : up;
            const u64 nth = __shfl_sync(kFullMask, list[0], n - 1);
            if (nth > bound) {
              bound = nth;
              bound_x = nt_key_to_float(composite_key(bound));
            }
          }
        }
      } else if (warp_candidates != 0u) {
        u64 taken_below = ~0ull;  // this lane offers its candidates in descending order
        while (true) {
          // The composites are rebuilt each round (a few integer ops a token)
          // rather than held: the empty asm keeps the compiler from hoisting
          // 16 of them (32 registers) out of the loop.
#pragma unroll
          for (int u = 0; u < U; ++u)
#pragma unroll
            for (int j = 0; j < G; ++j) asm volatile("" : "+f"(x[u][j]));
          u64 best = 0ull;
#pragma unroll
          for (int u = 0; u < U; ++u)
#pragma unroll
            for (int j = 0; j < G; ++j) {
              const u32 t = group_at(u) + j;
              const u64 cv = t < end ? composite(nt_order_key(x[u][j]), t) : 0ull;
              best = cv > bound && cv < taken_below && cv > best ? cv : best;
            }
          if (!__any_sync(kFullMask, best != 0ull)) break;
          u64 b[1] = {best};
          warp_sort_desc<1>(b);
          warp_merge_desc<1>(list, b);
          const u64 nth = __shfl_sync(kFullMask, list[0], n - 1);
          bound = nth > bound ? nth : bound;
          taken_below = best;
        }
        bound_x = nt_key_to_float(composite_key(bound));
      }
      if (warp_candidates != 0u && lane == 0 && bound > shared_bound) atomicMax(&cta_bound, bound);
    }

    // The values (in place of the logits). Processed: a load with no logit at
    // or above x_floor has no member (a filtered row's common case: one compare
    // a token).
    bool any_value = true;
    if constexpr (!kProcessed) {
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < G; ++j) x[u][j] = x[u][j] != x[u][j] ? -INFINITY : x[u][j];
    } else {
      bool any_up = false;
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < G; ++j) any_up |= !(x[u][j] < lr.x_floor);
      any_value = any_up || lr.k.kind == NT_KEEP_ONE;
      if (any_value) {
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int j = 0; j < G; ++j) {
            // Positions past the chunk are another chunk's tokens (a greedy
            // row's token among them): they count here for nothing.
            const u32 t = group_at(u) + j;
            x[u][j] = t < end ? logprob_base(x[u][j], t, lr) : -INFINITY;
          }
      }
    }
    if (!any_value) continue;

    // Counts, the load's largest finite value, then its terms exp(v - m)
    // against the running max (rescaled once when the load raises it): one
    // exp a token, K terms added pairwise in fp32, their sum in fp64.
    float top = -INFINITY;
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < G; ++j) {
        const float v = x[u][j];
        rank += v >= rank_floor ? 1u : 0u;
        n_inf += v == INFINITY ? 1u : 0u;
        x[u][j] = v == INFINITY ? -INFINITY : v;
        top = fmaxf(top, x[u][j]);
      }
    if (top > m) {
      z *= double(exp2_ftz((m - top) * kLog2e));
      m = top;
    }
    if (m != -INFINITY) {
      float terms[K];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < G; ++j) terms[u * G + j] = exp2_ftz((x[u][j] - m) * kLog2e);
      z += double(pairwise_sum(terms));
    }
  }
  };
  if (lr.processed) scan(std::true_type{});
  else scan(std::false_type{});

  const MaxSumD total = block_max_sum(
      m, [&](float top) { return z * exp2(double(m - top) * 1.4426950408889634); }, sh.tmp.max_sum);
  __syncthreads();
  const u32 total_inf = ReduceU32(sh.tmp.r32).Reduce(n_inf, SumU32());
  __syncthreads();
  const u32 total_rank = ReduceU32(sh.tmp.r32).Reduce(rank, SumU32());
  if (n > 0) block_merge_desc<1>(list, sh.stage, 32, kWarps);
  return LogprobStats{total.m, total.z, total_inf, total_rank};
}

// Warp 0 writes row `row`'s outputs from its statistics (the same in every
// lane, z as log_z) and its first n composites (element i in lane i).
template <nt_dtype DT>
__device__ __forceinline__ void write_logprob_row(const SampleArgs& a, const LogprobArgs& l,
                                                  u32 row, const LogprobStats& s, double log_z,
                                                  u64 first) {
  using S = typename LogitTraits<DT>::Storage;
  const u32 lane = lane_index();
  const S* rowp = static_cast<const S*>(a.logits) + int64_t(row) * a.row_stride;
  const RowCfg c = load_row_cfg(a, row);
  const long long token = sampled_token(a, row);
  const LogprobRow lr = logprob_row(a, c, row, token, l.processed != 0);
  int32_t* ids = l.ids + int64_t(row) * l.ids_stride;
  float* values = l.values + int64_t(row) * l.values_stride;
  if (int(lane) < l.n) {
    const u32 id = composite_index(first);
    ids[1 + lane] = first != 0ull ? int32_t(id) : -1;
    values[1 + lane] =
        first != 0ull && token >= 0
            ? logprob_value(logprob_base(widen<DT>(rowp[id]), id, lr), s.n_pos_inf, s.m, log_z)
            : -INFINITY;
  }
  if (lane == 0) {
    ids[0] = token >= 0 ? int32_t(token) : -1;
    values[0] = token >= 0 ? logprob_value(logprob_base(widen<DT>(rowp[token]), u32(token), lr),
                                           s.n_pos_inf, s.m, log_z)
                           : -INFINITY;
    l.ranks[row] = token >= 0 ? int32_t(s.rank) : 0;
  }
}

// grid B, batches whose rows the sampler scanned as one chunk each: a row's
// outputs from its candidates where they give them, else from one scan of
// the whole row by the same CTA.
template <nt_dtype DT, bool VEC>
__global__ void __launch_bounds__(kLogprobThreads, kLogprobCtasPerSm)
    sample_logprobs_row_kernel(SampleArgs a, LogprobArgs l) {
  __shared__ LogprobShared sh;
  const u32 row = blockIdx.x;
  if (logprobs_from_candidates<DT>(a, l, row, sh)) return;
  u64 list[1];
  LogprobStats s = scan_logprobs<DT, VEC>(a, l, row, 0u, u32(a.vocab), sh, list);
  if (threadIdx.x >= 32) return;
  s.m = __shfl_sync(kFullMask, s.m, 0);
  s.z = __shfl_sync(kFullMask, s.z, 0);
  s.n_pos_inf = __shfl_sync(kFullMask, s.n_pos_inf, 0);
  s.rank = __shfl_sync(kFullMask, s.rank, 0);
  write_logprob_row<DT>(a, l, row, s, s.z > 0.0 ? log(s.z) : 0.0, list[0]);
}

// grid (B, splits): one chunk of one row a CTA, its record for the finish kernel.
template <nt_dtype DT, bool VEC>
__global__ void __launch_bounds__(kLogprobThreads, kLogprobCtasPerSm)
    sample_logprobs_scan_kernel(SampleArgs a, LogprobArgs l) {
  __shared__ LogprobShared sh;
  // Rows from the last, a row's chunks side by side: the sampler's scan read
  // the rows in order, so the last ones are the likeliest to be still in L2.
  const u32 row = l.rows_last_first ? a.rows - 1u - blockIdx.y : blockIdx.x;
  const int chunk = int(l.rows_last_first ? blockIdx.x : blockIdx.y);
  // Token positions in u32: a row has fewer than 2^31 tokens.
  const u32 begin = u32(chunk) * u32(l.chunk);
  const u32 end = u32(min(int64_t(begin) + l.chunk, int64_t(a.vocab)));
  LogprobChunk* rec = l.chunks + size_t(row) * l.splits + chunk;
  u64 list[1];
  const LogprobStats s = scan_logprobs<DT, VEC>(a, l, row, begin, end, sh, list);
  if (threadIdx.x == 0) rec->s = s;
  if (threadIdx.x < u32(l.n)) rec->top[threadIdx.x] = list[0];
}

// One CTA a row: warp 0 merges the records' statistics; the records' lists
// are spread over the warps (kLogprobFinishBatch loads in flight a warp, a
// list merged only when it has an element above the warp's n-th), then a
// tree of warp merges leaves the first n in warp 0, which writes the row.
template <nt_dtype DT>
__global__ void __launch_bounds__(kLogprobFinishThreads) sample_logprobs_finish_kernel(SampleArgs a,
                                                                                      LogprobArgs l) {
  constexpr int kWarps = kLogprobFinishThreads / 32;
  __shared__ u64 stage[kWarps * 32];
  const u32 row = blockIdx.x;
  const u32 lane = lane_index();
  const int warp = int(threadIdx.x >> 5);
  const LogprobChunk* rec = l.chunks + size_t(row) * l.splits;
  const int n = l.n;

  LogprobStats s{-INFINITY, 0.0, 0u, 0u};
  if (warp == 0) {
    for (int i = int(lane); i < l.splits; i += 32) {
      s.m = fmaxf(s.m, rec[i].s.m);
      s.n_pos_inf += rec[i].s.n_pos_inf;
      s.rank += rec[i].s.rank;
    }
    s.m = warp_max(s.m);
    s.n_pos_inf = warp_sum(s.n_pos_inf);
    s.rank = warp_sum(s.rank);
    if (s.m != -INFINITY)
      for (int i = int(lane); i < l.splits; i += 32)
        if (rec[i].s.m != -INFINITY) s.z += rec[i].s.z * exp(double(rec[i].s.m) - double(s.m));
    s.z = warp_sum(s.z);
  }

  u64 list[1] = {0ull};
  if (n > 0) {
    u64 floor = 0ull;
    for (int i0 = warp; i0 < l.splits; i0 += kWarps * kLogprobFinishBatch) {
      u64 b[kLogprobFinishBatch];
#pragma unroll
      for (int k = 0; k < kLogprobFinishBatch; ++k) {
        const int i = i0 + k * kWarps;
        b[k] = i < l.splits && int(lane) < n ? rec[i].top[lane] : 0ull;
      }
#pragma unroll
      for (int k = 0; k < kLogprobFinishBatch; ++k) {
        if (__any_sync(kFullMask, b[k] > floor)) {
          const u64 bk[1] = {b[k]};
          warp_merge_desc<1>(list, bk);
          floor = __shfl_sync(kFullMask, list[0], n - 1);
        }
      }
    }
    block_merge_desc<1>(list, stage, 32, min(kWarps, l.splits));
  }
  if (warp == 0) write_logprob_row<DT>(a, l, row, s, s.z > 0.0 ? log(s.z) : 0.0, list[0]);
}

}  // namespace nt::cuda
