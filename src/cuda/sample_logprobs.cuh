// Device side of nt_sample_logprobs (docs/SEMANTICS.md, "Logprobs with sample"):
// two kernels after nt_sample's on the same stream.
//
//  scan    grid (B, splits): one CTA reads one chunk of one row once: the
//          largest finite value and the sum of exp(v - max) of its values (an
//          online softmax: terms in fp32, sums in fp64), the +inf count, the
//          rank count against the sampled token's value, and the chunk's
//          first n tokens of the logits' order (per-warp sorted lists of 32
//          in registers, merged only when a lane's token beats the list's
//          n-th; then a tree of warp merges over the CTA).
//  finish  grid B, one warp: merges the chunks' records (max, normalizer in
//          fp64, counts, the first n by warp merges) and writes the row's
//          outputs.
//
// Values: raw, the logits (NaN as -inf); processed, the scores of the
// keep-set the sampler drew the token from (RowState::keep_cut for filtered
// rows, every score for plain rows, the token alone for greedy rows). Every
// decision (membership, order, rank) uses the core's exact predicates
// (core/logprobs.h); only the normalizer is rounded.
#pragma once

#include <cub/block/block_reduce.cuh>

#include "core/logprobs.h"
#include "cuda/sample_common.cuh"

namespace nt::cuda {

constexpr int kLogprobThreads = 256;
constexpr int kLogprobCtasPerSm = 3;  // resident scan CTAs an SM is planned for (__launch_bounds__)
constexpr int kLogprobLoads = 4;  // load groups a scan thread has in flight

// One chunk's result (scan -> finish).
struct LogprobChunk {
  double z;       // sum of exp(v - m) over its finite values
  float m;        // largest finite value of the chunk, -inf if none
  u32 n_pos_inf;  // values that are +inf
  u32 rank;       // values at least the sampled token's (nt_logprob_at_least)
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
  if (!r.processed) return x != x ? -INFINITY : x;
  if (r.k.kind == NT_KEEP_ONE) return (long long)i == r.token ? 0.0f : -INFINITY;
  if (x < r.x_floor || !nt_keep_member(r.k, x, i)) return -INFINITY;
  return r.k.kind == NT_KEEP_POS_INF ? INFINITY : nt_scaled_score(x, r.k.temperature);
}

__device__ __forceinline__ float logprob_value(float v, u32 n_pos_inf, float v_max, double log_z) {
  if (n_pos_inf > 0) return v == INFINITY ? float(-log(double(n_pos_inf))) : -INFINITY;
  if (v == -INFINITY) return -INFINITY;
  return float((double(v) - double(v_max)) - log_z);
}

// Running (max, sum of exp(v - max)) of a thread's values: the terms in fp32
// (exp2f), their sum in fp64, so that hundreds of terms a thread add no
// rounding worth the tolerance.
struct MaxSumD {
  float m;
  double z;
};
struct MaxSumDMerge {
  __device__ __forceinline__ MaxSumD operator()(MaxSumD a, MaxSumD b) const {
    if (a.m == -INFINITY) return b;
    if (b.m == -INFINITY) return a;
    const float m = fmaxf(a.m, b.m);
    return {m, a.z * exp2(double(a.m - m) * 1.4426950408889634) +
                   b.z * exp2(double(b.m - m) * 1.4426950408889634)};
  }
};

template <nt_dtype DT, bool VEC>
__global__ void __launch_bounds__(kLogprobThreads, kLogprobCtasPerSm)
    sample_logprobs_scan_kernel(SampleArgs a, LogprobArgs l) {
  using S = typename LogitTraits<DT>::Storage;
  using ReduceMax = cub::BlockReduce<MaxSumD, kLogprobThreads>;
  using ReduceU32 = cub::BlockReduce<u32, kLogprobThreads>;
  constexpr int kWarps = kLogprobThreads / 32;
  constexpr float kLog2e = 1.44269504f;
  __shared__ union {
    typename ReduceMax::TempStorage max_sum;
    typename ReduceU32::TempStorage r32;
  } tmp;
  __shared__ u64 stage[kWarps * 32];
  // Rows from the last, a row's chunks side by side: the sampler's scan read
  // the rows in order, so the last ones are the likeliest to be still in L2.
  const u32 row = l.rows_last_first ? a.rows - 1u - blockIdx.y : blockIdx.x;
  const int chunk = int(l.rows_last_first ? blockIdx.x : blockIdx.y);
  const int64_t begin = int64_t(chunk) * l.chunk;
  const int64_t end = min(begin + int64_t(l.chunk), int64_t(a.vocab));
  const S* rowp = static_cast<const S*>(a.logits) + int64_t(row) * a.row_stride;
  const RowCfg c = load_row_cfg(a, row);
  const long long token = sampled_token(a, row);
  const LogprobRow lr = logprob_row(a, c, row, token, l.processed != 0);
  const float token_base = token >= 0 ? logprob_base(widen<DT>(rowp[token]), u32(token), lr) : -INFINITY;
  const u32 token_key = nt_order_key(token_base);
  const int n = l.n;

  MaxSumD ms{-INFINITY, 0.0};
  u32 n_inf = 0, rank = 0;
  u64 list[1] = {0ull};  // this warp's first 32 composites, element i in lane i
  u64 floor = 0ull;      // the list's element n - 1: only larger composites enter
  auto on_group = [&](u32 t0, const float (&x)[4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const u32 t = t0 + u32(j);
      // Positions past the chunk read as -inf but are another chunk's tokens
      // (a greedy row's token among them): they count here for nothing.
      const float v = int64_t(t) < end ? logprob_base(x[j], t, lr) : -INFINITY;
      if (v == INFINITY) {
        ++n_inf;
      } else if (v > ms.m) {
        ms.z = ms.z * double(exp2f((ms.m - v) * kLog2e)) + 1.0;
        ms.m = v;
      } else if (v != -INFINITY) {
        ms.z += double(exp2f((v - ms.m) * kLog2e));
      }
      rank += (v != -INFINITY && nt_logprob_at_least(nt_order_key(v), token_key)) ? 1u : 0u;
    }
    if (n > 0) {
      // One vote a group in the common case (nothing beats the list's n-th),
      // then one merge per position that has a candidate.
      u64 cv[4], group_best = 0ull;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const u32 t = t0 + u32(j);
        cv[j] = int64_t(t) < end ? composite(nt_order_key(x[j]), t) : 0ull;
        group_best = cv[j] > group_best ? cv[j] : group_best;
      }
      if (__any_sync(kFullMask, group_best > floor)) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          u64 b[1] = {cv[j] > floor ? cv[j] : 0ull};
          if (__any_sync(kFullMask, b[0] != 0ull)) {
            warp_sort_desc<1>(b);
            warp_merge_desc<1>(list, b);
            floor = __shfl_sync(kFullMask, list[0], n - 1);
          }
        }
      }
    }
  };
  // kLogprobLoads groups a thread in flight (one pass over the row: streaming
  // loads), every thread the same number of times (tokens past `end` read as
  // -inf), so the warp collectives above may run inside.
  constexpr int G = group_tokens<DT, VEC>();
  constexpr int64_t kStep = int64_t(kLogprobThreads) * G;
  const int64_t iters = (end - begin + kStep - 1) / kStep;
  for (int64_t it = 0; it < iters; it += kLogprobLoads) {
    float x[kLogprobLoads][G];
#pragma unroll
    for (int u = 0; u < kLogprobLoads; ++u)
      load_group<DT, VEC, true>(rowp, begin + (it + u) * kStep + int64_t(threadIdx.x) * G, end, x[u]);
#pragma unroll
    for (int u = 0; u < kLogprobLoads; ++u) {
      const int64_t t = begin + (it + u) * kStep + int64_t(threadIdx.x) * G;
#pragma unroll
      for (int q = 0; q < G / 4; ++q) {
        const float x4[4] = {x[u][4 * q], x[u][4 * q + 1], x[u][4 * q + 2], x[u][4 * q + 3]};
        on_group(u32(t + 4 * q), x4);
      }
    }
  }

  const MaxSumD total = ReduceMax(tmp.max_sum).Reduce(ms, MaxSumDMerge());
  __syncthreads();
  const u32 total_inf = ReduceU32(tmp.r32).Reduce(n_inf, SumU32());
  __syncthreads();
  const u32 total_rank = ReduceU32(tmp.r32).Reduce(rank, SumU32());
  LogprobChunk* rec = l.chunks + size_t(row) * l.splits + chunk;
  if (threadIdx.x == 0) {
    rec->m = total.m;
    rec->z = total.z;
    rec->n_pos_inf = total_inf;
    rec->rank = total_rank;
  }
  if (n > 0) {
    block_merge_desc<1>(list, stage, 32, kWarps);
    if (threadIdx.x < u32(n)) rec->top[threadIdx.x] = list[0];
  }
}

template <nt_dtype DT>
__global__ void __launch_bounds__(32) sample_logprobs_finish_kernel(SampleArgs a, LogprobArgs l) {
  using S = typename LogitTraits<DT>::Storage;
  const u32 row = blockIdx.x;
  const u32 lane = lane_index();
  const S* rowp = static_cast<const S*>(a.logits) + int64_t(row) * a.row_stride;
  const RowCfg c = load_row_cfg(a, row);
  const long long token = sampled_token(a, row);
  const LogprobRow lr = logprob_row(a, c, row, token, l.processed != 0);
  const LogprobChunk* rec = l.chunks + size_t(row) * l.splits;
  const int n = l.n;

  float m = -INFINITY;
  u32 n_inf = 0, rank = 0;
  for (int i = int(lane); i < l.splits; i += 32) {
    m = fmaxf(m, rec[i].m);
    n_inf += rec[i].n_pos_inf;
    rank += rec[i].rank;
  }
  m = warp_max(m);
  n_inf = warp_sum(n_inf);
  rank = warp_sum(rank);
  double z = 0.0;
  if (m != -INFINITY)
    for (int i = int(lane); i < l.splits; i += 32)
      if (rec[i].m != -INFINITY) z += rec[i].z * exp(double(rec[i].m) - double(m));
  z = warp_sum(z);
  const double log_z = z > 0.0 ? log(z) : 0.0;

  u64 list[1] = {0ull};
  if (n > 0)
    for (int i = 0; i < l.splits; ++i) {
      const u64 b[1] = {int(lane) < n ? rec[i].top[lane] : 0ull};
      warp_merge_desc<1>(list, b);
    }

  int32_t* ids = l.ids + int64_t(row) * l.ids_stride;
  float* values = l.values + int64_t(row) * l.values_stride;
  if (int(lane) < n) {
    const u64 cv = list[0];
    const u32 id = composite_index(cv);
    ids[1 + lane] = cv != 0ull ? int32_t(id) : -1;
    values[1 + lane] =
        cv != 0ull && token >= 0
            ? logprob_value(logprob_base(widen<DT>(rowp[id]), id, lr), n_inf, m, log_z)
            : -INFINITY;
  }
  if (lane == 0) {
    ids[0] = token >= 0 ? int32_t(token) : -1;
    values[0] = token >= 0
                    ? logprob_value(logprob_base(widen<DT>(rowp[token]), u32(token), lr), n_inf, m, log_z)
                    : -INFINITY;
    l.ranks[row] = token >= 0 ? int32_t(rank) : 0;
  }
}

}  // namespace nt::cuda
