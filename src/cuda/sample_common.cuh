// Device side of nt_sample (docs/SEMANTICS.md, "Sampling" and
// "Kernel choice"): scan (one CTA per chunk of a row), merge (the chunks of a row;
// flags rows whose keep-set may reach past the candidates), and one cooperative
// kernel for the flagged rows: the large keep-set path, then the exact
// fallback. Every decision uses the core's arithmetic (IEEE division, ordering
// keys, Philox, portable log), so tokens equal the CPU backend's for the same
// keep-set.
#pragma once

#include <cstdint>

#include <cub/block/block_reduce.cuh>

#include "core/ordering.h"
#include "core/sampling.h"
#include "core/word_floor.h"
#include "cuda/block_select.cuh"
#include "cuda/load.cuh"

namespace nt::cuda {

// A row's class (core/sampling.h), or kAnyRow: the scan decides per row.
enum RowClass : int {
  kGreedyRow = NT_ROW_GREEDY, kPlainRow = NT_ROW_PLAIN, kFilteredRow = NT_ROW_FILTERED, kAnyRow
};

constexpr int kScanThreads = 512;
constexpr int kTokensPerThread = 8;
constexpr int kTileTokens = kScanThreads * kTokensPerThread;
constexpr int kMaxChunkCandidates = 1024;
constexpr int kCompactItems = (kMaxChunkCandidates + kTileTokens) / kScanThreads;
// The list scan's per-warp lists (sample_scan.cuh): kListCap entries, ranked
// again when they double since the last ranking (at least kListRefresh), cut
// back to keep when a tile (256 entries per warp) could overflow them.
constexpr int kListKeepMax = 128;
// The candidates a chunk keeps for a row without top-k (top-p or min-p alone):
// two a lane, so that these rows take the warp-tail draws (kWarpTailMax). A
// peaked row's nucleus is a few tokens; a row whose keep-set passes them goes
// to the large keep-set path.
constexpr int kNucleusCandidates = 64;
constexpr int kListCap = 512;
constexpr int kListTrigger = kListCap - 32 * kTokensPerThread;
constexpr int kListRefresh = 16;
constexpr int kMergeThreads = 512;
constexpr int kMaxMerged = 8192;
constexpr int kSortCap = 1024;
constexpr int kMaxSplits = 64;
constexpr u32 kNoLimit = 0xFFFFFFFFu;

// One chunk's result (kernel scan -> merge).
struct ChunkRecord {
  u64 best;      // greedy: argmax composite; plain: Gumbel-max composite of finite scores
  u64 best_inf;  // Gumbel-max composite among +inf scores (plain and filtered rows)
  u64 last;      // truncated chunk: every finite token it did not keep ranks below this
  float max_s;   // filtered rows that need the full mass: max finite score of the chunk
  float z;       // ... and sum of exp(s - max_s) over its finite scores (by exp2,
                 // within row_mass_error, where exp2_mass_applies)
  u32 n_cand;
  u32 n_pos_inf;
  u32 truncated;
  u32 pad;
  // SampleArgs::raw_mass, filtered rows: the chunk's raw mass (RawMass)
  double raw_z;      // sum of exp(x - raw_max) over its finite logits
  float raw_max;     // largest finite logit, -inf if none
  u32 raw_unsummed;  // tiles left out (a +inf or huge logit): the mass is not whole
};

// A filtered row's hand-over from the merge to the flagged-row kernel, and,
// once its token is written, the keep-set it was drawn from (read by
// nt_sample_logprobs, cuda/sample_logprobs.cuh): every score whose composite
// is >= keep_cut (0: every score; with +inf scores those alone, core/logprobs.h).
struct RowState {
  u32 fallback;
  u32 n_pos_inf;
  float s_max;
  u32 pad;
  u64 keep_cut;
};

// A flagged row's state across the large keep-set phases
// (sample_large_keep.cuh); zeroed by the merge when it lists the row for them.
struct LargeKeepRow {
  u64 best;  // Gumbel-max composite over the bins above the cut
  u64 above_mass;
  u64 mass_target;
  u32 n_cand;
  u32 n_min_p;
  u32 cut_bin;  // kNoCut: the whole row is kept
  u32 above_count;
  u32 count_target;
  u32 active;  // 1: this path resolves the row
};

// The flagged-row kernel's lists and the large keep-set path's state.
struct LargeKeepArgs {
  LargeKeepRow* rows;
  u32* cnt;        // [B][kLargeBins]
  u64* mass;       // [B][kLargeBins]
  u64* cand;       // [B][kLargeCap]
  u32* n_listed;   // rows the merges handed to the large keep-set path
  u32* n_flagged;  // rows the merges flagged, the listed ones among them; the
                   // word after n_listed (both cleared before the merges;
                   // unused by cluster launches, which list no row)
  u32* listed;     // [B] the listed rows, in the order they were listed
  u32* flagged;    // [B] the flagged rows, in the order they were flagged
  int splits;      // the most chunks a listed row is cut into
};

struct SampleArgs {
  const void* logits;
  int64_t row_stride;
  int32_t vocab;
  u32 rows;
  nt_param_f32 temperature, top_p, min_p;  // as the call gave them
  nt_param_i32 top_k;
  nt_param_u64 seed, offset;
  const float* uniform;
  int joint;
  int tokens_int32;
  void* tokens;
  int splits;
  int chunk;
  int kchunk;
  int mass_bits;
  int merge_in_scan;  // rows of one chunk: the scan CTA merges (no merge kernel)
  int cluster_merge;  // rows of several chunks: each row's CTAs form one thread-block
                      // cluster and its first CTA merges them (no merge kernel)
  int raw_mass;       // the filtered scans also sum each chunk's raw mass (raw logprobs)
  ChunkRecord* chunks;
  u64* candidates;
  RowState* row_states;
  LargeKeepArgs large;  // rows == nullptr: no row can be flagged
};

struct RowCfg {
  nt_row_params p;
  int cls;
  int has_u;
  float u;
  uint64_t seed, offset;
  u32 tag;
  float rcp_t;
  int bound_mode;  // 0: s = x (T = 1); 1: bound from x * (1/T); 2: exact division
};

__device__ __forceinline__ RowCfg load_row_cfg(const SampleArgs& a, u32 row) {
  RowCfg c;
  const float t = param_at(a.temperature, row), tp = param_at(a.top_p, row),
              mp = param_at(a.min_p, row);
  const int32_t k = param_at(a.top_k, row);
  c.p = nt_resolve_row_params(t, k, tp, mp, a.vocab);
  c.has_u = a.uniform != nullptr;
  c.u = c.has_u ? a.uniform[row] : 0.0f;
  c.cls = nt_row_class(c.p, c.has_u);
  c.seed = param_at(a.seed, row);
  c.offset = param_at(a.offset, row);
  c.tag = nt_row_tag(a.seed.per_row != nullptr, row);
  c.rcp_t = 1.0f / c.p.temperature;
  // The reciprocal bound needs a normal, finite 1/T (relative error 2^-24).
  c.bound_mode = c.p.temperature == 1.0f ? 0 : (fabsf(c.rcp_t) >= 1.17549435e-38f &&
                                                fabsf(c.rcp_t) <= 3.4e38f)
                                                   ? 1
                                                   : 2;
  return c;
}

// The keep-set's end as targets over the row's order (docs/SEMANTICS.md): the
// prefix ends at the first token where the count reaches `count` or the
// fixed-point mass reaches `mass`. z: the mass top-p is measured against.
struct CutTargets {
  u32 count;
  u64 mass;
};

__device__ __forceinline__ CutTargets cut_targets(const RowCfg& c, u32 n_min_p, u64 z) {
  CutTargets t{kNoLimit, ~0ull};
  if (c.p.top_k) t.count = u32(c.p.top_k);
  if (c.p.min_p > 0.0f) t.count = min(t.count, n_min_p);
  if (c.p.top_p < 1.0f) {
    if (c.p.top_p <= 0.0f)
      t.count = 1;
    else
      t.mass = u64(ceil(double(c.p.top_p) * double(z)));
  }
  return t;
}

// Top-p measured on the top-k set (not joint) where top-k cuts the row: z is
// then the mass of the first top_k tokens, not the row's.
__device__ __forceinline__ bool top_p_needs_top_k_mass(const RowCfg& c, bool joint, u32 set_count) {
  return c.p.top_p > 0.0f && c.p.top_p < 1.0f && !joint && c.p.top_k && u32(c.p.top_k) < set_count;
}

// on_group(t0, x[4]) over tokens [begin, end) of a row, G at a time from each of
// NT threads, every thread the same number of times (tokens past `end` read as
// -inf), so warp collectives may run inside. begin is a multiple of 8: groups
// never straddle a Philox block.
template <nt_dtype DT, bool VEC, int NT, class OnGroup>
__device__ __forceinline__ void visit_tokens(const typename LogitTraits<DT>::Storage* row,
                                             int64_t begin, int64_t end, OnGroup&& on_group) {
  constexpr int G = group_tokens<DT, VEC>();
  constexpr int64_t kStep = int64_t(NT) * G;
  const int64_t iters = (end - begin + kStep - 1) / kStep;
  for (int64_t it = 0; it < iters; ++it) {
    const int64_t t = begin + it * kStep + int64_t(threadIdx.x) * G;
    float x[G];
    load_group<DT, VEC, false>(row, t, end, x);
#pragma unroll
    for (int q = 0; q < G / 4; ++q) {
      const float x4[4] = {x[4 * q], x[4 * q + 1], x[4 * q + 2], x[4 * q + 3]};
      on_group(u32(t + 4 * q), x4);
    }
  }
}

// The composite (key of its Gumbel value, index) a +inf score of token t
// competes with among the row's other +inf scores. Out of line (rare; inlined
// Philox would take the scan loops' registers); static: one per translation unit.
static __device__ __noinline__ u64 pos_inf_composite(uint64_t seed, uint64_t offset, u32 tag, u32 t) {
  return composite(nt_order_key(nt_token_gumbel(seed, offset, tag, t)), t);
}

// The Gumbel-max composite of a stored candidate composite (score key, index).
__device__ __forceinline__ u64 candidate_draw(const RowCfg& c, u64 v, bool inf_rule) {
  const u32 idx = composite_index(v);
  const float s = nt_key_to_float(composite_key(v));
  const float g = nt_token_gumbel(c.seed, c.offset, c.tag, idx);
  return composite(nt_order_key(nt_perturbed_score(s, g, inf_rule)), idx);
}

// An upper bound of s = x / T that costs a multiply: x * fl(1/T) is within
// 3 * 2^-24 relative of the quotient, and the margin is 8 ulps. NaN stays NaN
// (compares false everywhere, so NaN logits are skipped, as -inf scores are).
__device__ __forceinline__ float score_upper(float x, const RowCfg& c) {
  if (c.bound_mode == 0) return x;
  if (c.bound_mode == 1) {
    const float q = x * c.rcp_t;
    return q + (fabsf(q) * 4.8e-7f + 1e-37f);
  }
  return x / c.p.temperature;
}

// A logit bound for a score bound s: every logit x < logit_floor(s, c) has
// nt_scaled_score(x, T) < s, so one compare of the raw logit rejects it. For
// T != 1, s * T is moved down by 8 ulps (x / T rounds within half an ulp; the
// product within another); NaN (s * T overflowing) rejects nothing. Not for
// bound_mode 2 (T subnormal or huge), which checks every token.
__device__ __forceinline__ float logit_floor(float s, const RowCfg& c) {
  if (c.bound_mode == 0) return s;
  const float q = s * c.p.temperature;
  return q - (fabsf(q) * 4.8e-7f + 1e-37f);
}

// The word floors of core/word_floor.h as thresholds on whole Philox words
// ((w >> 9) >= f exactly when w >= f << 9), one table per CTA: slot 0 rules
// nothing out, slot 1 + k holds entry k.
constexpr int kWordFloorSlots = NT_WORD_FLOOR_STEPS + 1;
template <int NT>
__device__ void build_word_floors(u32* floors) {
  for (int k = int(threadIdx.x); k < kWordFloorSlots; k += NT)
    floors[k] = k == 0 ? 0u : u32(nt_word_floor_entry(k - 1)) << 9;
}

// The least Philox word with which a token scoring at most s_top may still
// reach `best` (0: any word may).
__device__ __forceinline__ u32 word_floor(const u32* floors, float best, float s_top) {
  return floors[nt_word_floor_index(best, s_top) + 1];
}

// The same lookup in two steps: word_floor_base(best) once per bound, then
// word_floor_at(floors, base, s_top) per group. Its slot is never above
// word_floor's: the margin 1e-3 + 1e-6 (3 |best| + 40) exceeds
// nt_word_floor_index's 1e-3 + 1e-6 (|best| + |s_top|) for every s_top asked
// about (|s_top| <= |best| + 16.75; a group more than 4 above gets slot 0
// either way) by more than these float steps' rounding. best = -inf,
// s_top = +-inf or NaN give slot 0.
__device__ __forceinline__ float word_floor_base(float best) {
  const float margin = 1e-3f + 1e-6f * (3.0f * fabsf(best) + 40.0f);
  return 8.0f * ((best - margin) - NT_WORD_FLOOR_LOW) + 1.0f;
}
__device__ __forceinline__ u32 word_floor_at(const u32* floors, float base, float s_top) {
  // Slot 1 + floor(8 (g - low)) for g = best - margin - s_top, clamped to the table.
  const float k = fminf(fmaxf(fmaf(-8.0f, s_top, base), 0.0f), float(kWordFloorSlots - 1));
  const u32 slot = __float_as_uint(__fadd_rd(k, 8388608.0f)) - 0x4B000000u;
  return floors[slot];
}

__device__ __forceinline__ void write_token(const SampleArgs& a, u32 row, long long token) {
  if (a.tokens_int32)
    static_cast<int32_t*>(a.tokens)[row] = int32_t(token);
  else
    static_cast<int64_t*>(a.tokens)[row] = int64_t(token);
}

// The sampler's fixed-point mass of a probability, rne(p * 2^bits): p <= 1 and
// bits <= 40, so the fp32 product is exact and its conversion rounds the same
// real number an fp64 product would. Unlike core/fixed_mass.h's nt_fixed_mass
// (verification's rule), a p of at most 2^-(bits+1) gets 0, not 1.
__device__ __forceinline__ u64 fixed_mass(float p, int bits) {
  return __float2ull_rn(p * __int_as_float((127 + bits) << 23));
}

struct MaxU64 {
  __device__ __forceinline__ u64 operator()(u64 a, u64 b) const { return a > b ? a : b; }
};
struct MaxF32 {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumU32 {
  __device__ __forceinline__ u32 operator()(u32 a, u32 b) const { return a + b; }
};

// Running (max, sum of exp(s - max)) of scores; merged in a fixed order.
struct MaxSum {
  float m, z;
};
__device__ __forceinline__ MaxSum max_sum_add(MaxSum a, float s) {
  if (s > a.m) return {s, a.z * expf(a.m - s) + 1.0f};
  return {a.m, a.z + expf(s - a.m)};
}
struct MaxSumMerge {
  __device__ __forceinline__ MaxSum operator()(MaxSum a, MaxSum b) const {
    if (a.m == -INFINITY) return b;
    if (b.m == -INFINITY) return a;
    const float m = fmaxf(a.m, b.m);
    return {m, a.z * expf(a.m - m) + b.z * expf(b.m - m)};
  }
};
// The warp's (largest score, sum rescaled to it) from its lanes' pairs: the
// largest first, then each lane's sum rescaled to it once and the sums added
// (a butterfly: every lane gets the same pair, addition being commutative).
__device__ __forceinline__ MaxSum warp_max_sum(MaxSum v) {
  const float m = warp_max(v.m);
  return {m, warp_sum(v.m == -INFINITY ? 0.0f : v.z * expf(v.m - m))};
}

constexpr float kLog2e = 1.44269504f;  // log2(e) rounded to fp32

// 2^x in fp32 by the SFU, subnormal results flushed to zero (a term below
// 2^-126 of the largest is nothing at the promised tolerance); +0 for x = -inf.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The sum of K fp32 terms, pairwise (log2(K) roundings on any term's path).
template <int K>
__device__ __forceinline__ float pairwise_sum(const float (&t)[K]) {
  if constexpr (K == 1) {
    return t[0];
  } else {
    float h[K / 2];
#pragma unroll
    for (int i = 0; i < K / 2; ++i) h[i] = t[2 * i] + t[2 * i + 1];
    return pairwise_sum<K / 2>(h);
  }
}

// A thread's running mass of exp(s - s_max) taken on the logits, with no
// division a token (a multiply-add, a clamp, the SFU's exp2 and an add): each
// term is 2^(x k - b), k = log2(e) / T and b = x_b k for a logit x_b the
// thread has seen. b moves up only when a tile's largest logit would make a
// term past 2^32, so the sum never overflows and rarely rescales. Its error
// against the fp32 mass of the scores x / T is bounded by row_mass_error
// (sample_merge.cuh); tiles whose largest logit is not finite or whose x k
// reaches 2^100 take the exact form (tile_mass_add) instead.
// Z: the sum's type (fp32 for the row mass; fp64 for raw logprobs, RawMass).
template <class Z>
struct Exp2SumOf {
  float b = -INFINITY;      // the exponent the sum is relative to (log2 units)
  Z z = Z(0);               // sum of 2^(x k - b)
  float x_max = -INFINITY;  // the largest logit summed
};
using Exp2Sum = Exp2SumOf<float>;

// The range of T whose k = log2(e) / T the exp2 mass takes (others: the exact
// form for every tile).
__device__ __forceinline__ bool exp2_mass_temperature(float t) {
  return t >= 0x1p-20f && t <= 0x1p20f;
}

// Adds a thread's tile (U x G logits, largest logit m) to e; false when the
// tile needs the exact form. NaN and -inf logits add nothing.
template <class Z, int U, int G>
__device__ __forceinline__ bool tile_mass_add_exp2(Exp2SumOf<Z>& e, const float (&x)[U][G], float m,
                                                   float k) {
  if (m == -INFINITY) return true;
  if (!(fabsf(m * k) < 0x1p100f)) return false;  // m = +inf, or scores near overflow
  if (fmaf(m, k, -e.b) > 32.0f) {                // the first tile, or a term past 2^32
    const float b = m * k;
    e.z *= Z(exp2_ftz(fmaxf(e.b - b, -512.0f)));
    e.b = b;
  }
  e.x_max = fmaxf(e.x_max, m);
  float t[U * G];
#pragma unroll
  for (int i = 0; i < U * G; ++i) t[i] = exp2_ftz(fmaxf(fmaf(x[i / G][i % G], k, -e.b), -512.0f));
  e.z += Z(pairwise_sum(t));
  return true;
}

// e as a (max score, mass) pair: the max the exact score of its largest logit,
// the sum rescaled to it.
__device__ __forceinline__ MaxSum exp2_sum_at_max(const Exp2Sum& e, float temperature, float k) {
  if (e.x_max == -INFINITY) return {-INFINITY, 0.0f};
  return {nt_scaled_score(e.x_max, temperature), e.z * exp2_ftz(-fmaf(e.x_max, k, -e.b))};
}

// A thread's running raw mass, sum of exp(x - x_max) over its finite logits,
// for raw logprobs: the exp2 form at T = 1 (k = log2(e), no score rounding),
// each tile's terms added pairwise in fp32 and those sums in fp64. A tile
// with a +inf logit, or one whose x k reaches 2^100, is counted and left out:
// such a row takes the logprobs scan instead (core/logprobs.h's +inf rule).
struct RawMass {
  Exp2SumOf<double> e;  // at k = log2(e)
  u32 unsummed = 0;     // tiles left out
};

template <int U, int G>
__device__ __forceinline__ void tile_raw_mass_add(RawMass& r, const float (&x)[U][G], float m) {
  if (!tile_mass_add_exp2(r.e, x, m, kLog2e)) ++r.unsummed;
}

// r's sum rescaled to the logit m, at least every logit r summed (r summed
// some: r.e.x_max > -inf).
__device__ __forceinline__ double raw_mass_at(const RawMass& r, float m) {
  const Exp2SumOf<double>& e = r.e;
  return e.z * exp2(double(e.b) - double(m) * double(kLog2e));
}

// A block's (largest value, sum of exp(v - largest)) from its threads' own:
// each thread's largest value m (-inf: it summed nothing) and its sum
// rescaled to the block's largest by rescaled(top), called once a thread that
// summed something; the sum in fp64, with no exp in the reduction's steps.
// Block-uniform call; the max is every thread's, the sum thread 0's; the
// storage is free again after a __syncthreads.
struct MaxSumD {
  float m;
  double z;
};
template <int NT>
struct BlockMaxSumStorage {
  union {
    typename cub::BlockReduce<float, NT>::TempStorage f;
    typename cub::BlockReduce<double, NT>::TempStorage d;
  } tmp;
  float top;
};
template <int NT, class Rescaled>
__device__ __forceinline__ MaxSumD block_max_sum(float m, Rescaled rescaled, BlockMaxSumStorage<NT>& s) {
  const float top = cub::BlockReduce<float, NT>(s.tmp.f).Reduce(m, MaxF32());
  if (threadIdx.x == 0) s.top = top;
  __syncthreads();
  const float t = s.top;
  return {t, cub::BlockReduce<double, NT>(s.tmp.d).Sum(m == -INFINITY ? 0.0 : rescaled(t))};
}

// ---- Gumbel-max over groups of 4 tokens, with pruning ------------------------
// A token can only win if s + G >= the best value seen: most groups skip
// Philox (top score + 16.75 below the bound) or the logs (a word below the
// floor, core/word_floor.h). The bound is a value some token reached and
// rounding is monotone, so pruning never changes the argmax.
struct GumbelBest {
  u64 best = 0;      // composite (key(s + G), ~index) over finite scores
  u64 best_inf = 0;  // composite (key(G), ~index) over +inf scores
  u32 n_inf = 0;
  float bound = -INFINITY;
};

// The rest of one token's step once its Philox word is known: the exact score,
// the row's rules (keep), the Gumbel value, the running best.
template <class Keep>
__device__ __forceinline__ void gumbel_token(GumbelBest& g, const RowCfg& c, float x, u32 word,
                                             u32 t, Keep&& keep) {
  const float s = nt_scaled_score(x, c.p.temperature);
  if (s == -INFINITY) return;
  if (!keep(s, t)) return;
  const float gum = nt_gumbel_from_uniform(nt_uniform_from_bits(word));
  if (s == INFINITY) {
    ++g.n_inf;
    const u64 ci = composite(nt_order_key(gum), t);
    g.best_inf = ci > g.best_inf ? ci : g.best_inf;
  } else {
    const float v = s + gum;
    const u64 cv = composite(nt_order_key(v), t);
    if (cv > g.best) {
      g.best = cv;
      g.bound = fmaxf(g.bound, v);
    }
  }
}

// The first step over a group of 4 tokens (one Philox block): the block, when
// some token of the group may still win, and which tokens then reach the word
// floor of the group's top score (bits 0-3; 0 when the block was not needed).
// score_upper is monotone, so one call on the largest logit bounds the group
// (fmaxf skips NaN logits; a group of NaNs needs no block).
__device__ __forceinline__ u32 gumbel_candidates(const GumbelBest& g, const RowCfg& c,
                                                 const u32* floors, u32 t0,
                                                 const float (&x)[4], u32 (&word)[4]) {
  const float s_top = score_upper(fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3])), c);
  if (!(s_top + NT_GUMBEL_MAX >= g.bound)) return 0;
  const nt_philox_block b = nt_token_block(c.seed, c.offset, c.tag, t0 >> 2);
  const u32 floor = word_floor(floors, g.bound, s_top);
  u32 pass = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    word[j] = b.v[j];
    if (b.v[j] >= floor) pass |= 1u << j;
  }
  return pass;
}

template <class Keep>
__device__ __forceinline__ void gumbel_group(GumbelBest& g, const RowCfg& c, const u32* floors,
                                             u32 t0, const float (&x)[4], Keep&& keep) {
  u32 word[4];
  const u32 pass = gumbel_candidates(g, c, floors, t0, x, word);
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if ((pass >> j) & 1u) gumbel_token(g, c, x[j], word[j], t0 + u32(j), keep);
}

// Without a top-k a chunk keeps at most kNucleusCandidates candidates (half
// its list when that is less); rows whose keep-set reaches past them go to the
// large keep-set path. Rows of an explicit draw, which that path does not
// take, keep half the list (the general scan), before the exact fallback.
__device__ __forceinline__ u32 filtered_keep(const SampleArgs& a, const RowCfg& c) {
  if (c.p.top_k) return min(u32(c.p.top_k), u32(a.kchunk));
  const u32 half = max(1u, u32(a.kchunk) / 2);
  return c.has_u ? half : min(u32(kNucleusCandidates), half);
}

// Top-p measured on the whole row needs every token's mass.
__device__ __forceinline__ bool filtered_needs_mass(const SampleArgs& a, const RowCfg& c) {
  return nt_top_p_on_row_mass(c.p, a.joint);
}

// A thread's tile is skipped when the bound of its largest logit is below the
// admission bound (valid as score_upper is monotone; not in bound_mode 2, which
// checks every token); rows that need the full mass look at every token anyway.
__device__ __forceinline__ bool filtered_tile_filter(const SampleArgs& a, const RowCfg& c) {
  return !filtered_needs_mass(a, c) && c.bound_mode != 2;
}

// The list scan takes the filtered rows whose chunk keeps few candidates and
// whose logits can be compared with a bound; its chunks hand over their
// candidates sorted (sample_scan.cuh, lists_out_sorted).
__device__ __forceinline__ bool list_scan_applies(const SampleArgs& a, const RowCfg& c) {
  return filtered_keep(a, c) <= u32(kListKeepMax) && c.bound_mode != 2;
}

// The rows whose chunks sum the mass by exp2 (Exp2Sum): the list scan's rows
// of top-p without top-k, with T in exp2_mass_temperature's range. A cut
// within that mass's error is left to the flagged-row kernel, which every
// plan with such a row launches; a top-k row (joint mode) must resolve in the
// merge and keeps the exact form.
__device__ __forceinline__ bool exp2_mass_applies(const SampleArgs& a, const RowCfg& c) {
  return c.p.top_k == 0 && list_scan_applies(a, c) && filtered_needs_mass(a, c) &&
         exp2_mass_temperature(c.p.temperature);
}

// Rows with sorted chunk lists and a top-k of at most 128 (or none): the
// merge takes their best sorted_merge_count by a tree of warp merges.
constexpr u32 kSortedMergeMax = 128;
static_assert(kNucleusCandidates <= kListKeepMax && kListKeepMax <= int(kSortedMergeMax),
              "a row without top-k merges its chunks' lists");
__device__ __forceinline__ u32 sorted_merge_count(const RowCfg& c) {
  return c.p.top_k ? u32(c.p.top_k) : u32(kNucleusCandidates);
}
__device__ __forceinline__ bool merge_of_sorted_lists(const SampleArgs& a, const RowCfg& c) {
  return list_scan_applies(a, c) && sorted_merge_count(c) <= kSortedMergeMax;
}

}  // namespace nt::cuda
