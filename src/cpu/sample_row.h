// One row of CPU sampling (docs/SEMANTICS.md): its state and the stages that
// cpu/sample.cpp runs, either all on one thread or pass by pass over (row,
// chunk) items spread over the pool.
//
// No sort. A row goes through at most four passes over its logits, each split
// into fixed chunks (cpu/sample_kernels.h), with short serial stages in
// between that work on small candidate lists:
//   scan:    the largest logit (greedy, s_max, +inf); for top-k also the
//            tokens at or above a pivot estimated from every 64th logit (a
//            superset of the top k); for top-p without top-k the tokens at or
//            above a pivot estimated from about 512 sampled logits (a
//            thousand or so), and the sum of exp(s - ref) over the others
//            (ref: the largest sampled score, at or above them all), which
//            with the listed tokens' masses gives Z: when the listed mass
//            reaches top_p * Z, the keep-set is selected from them (rows whose
//            sample looks flat skip this, as no such list holds their nucleus);
//   mass:    only for top-p without top-k (or joint mode) that the scan did
//            not settle: Z and a histogram of the probabilities
//            (cpu/sample_kernels.h);
//   compact: the tokens of the bin where the mass crosses top_p * Z (and
//            those above it when they are few);
//   draw:    Gumbel-max (or the explicit draw) over the keep-set, only when it
//            is not already listed.
// Top-k and top-p boundaries come from radix selection over the candidates'
// score keys (cpu/sample_select.h), min-p from a bisection over keys; the
// keep-set is then one prefix end (threshold key, tie cut-off index).
#pragma once

#include <cstdint>

#include "core/check.h"
#include "core/logprobs.h"
#include "core/portable_exp.h"
#include "core/sampling.h"
#include "cpu/sample_kernels.h"
#include "cpu/sample_select.h"

namespace nt::cpu::sampling {

// The pass a row waits for; kDone once its token is known.
enum class Next { kDone, kScan, kMass, kCompact, kDraw };

struct ChunkOut {
  ScanStats stats;
  int64_t n_found;
  double rest;  // mass of the scores beyond the binned range
  double mass;  // scan with a mass reference: the chunk's sum of exp(s - ref)
  Best best;
  Cumulative cum;
};

// A row's inputs, its workspace and its state between passes. Lives in the
// caller's workspace, one per slot (cpu/sample.cpp binds the pointers).
struct RowJob {
  Row x;
  int64_t vocab, n_chunks;
  nt_row_params p;
  bool joint;
  uint64_t seed, offset;
  uint32_t tag;
  bool has_uniform;
  float uniform;

  ChunkOut* chunks;
  double* bin_mass;      // kMassBins per chunk; chunk 0's receive the totals
  uint32_t* bin_count;
  // Candidate list (c_*: index, score key, score, probability) and scratch (r_*).
  int32_t* c_index;
  uint32_t* c_key;
  float* c_score;
  float* c_mass;
  int32_t* r_index;
  uint32_t* r_key;
  float* r_val;

  uint32_t hi;          // larger x-keys are never kept (+inf logits when T = +inf)
  uint32_t compact_lo, compact_hi;  // x-key range of the next compaction; empty: none
  // Largest sampled score: the scan sums exp(s - mass_ref) below the pivot; NaN: no sum.
  float mass_ref;
  ScanStats stats;
  float s_max;
  uint32_t s_max_key;
  PrefixEnd keep;
  int64_t n_list;       // the keep-set lies inside c_*[0, n_list); -1: no list
  double z;
  int n_binned;         // mass bins filled by the mass pass; the rest is only summed
  double before_list;   // top-p: mass ranked before the listed candidates
  DrawSet set;
  float bound;          // perturbed score of a known member of the keep-set
  Next next;
  int64_t token;
};

// Stages in order; chunk_* run once per chunk (possibly in parallel), the
// stage_* between them on one thread, and each sets `next`.
void stage_start(RowJob& j);
void chunk_scan(RowJob& j, int64_t c);
void stage_after_scan(RowJob& j);
void chunk_mass(RowJob& j, int64_t c);
void stage_after_mass(RowJob& j);  // may ask for the mass pass once more
void chunk_compact(RowJob& j, int64_t c);
void stage_after_compact(RowJob& j);
void chunk_draw(RowJob& j, int64_t c);
void stage_after_draw(RowJob& j);

// The smallest key in [lo, hi] at whose float pred turns true (hi + 1 if
// never): pred must be monotone over that range, as every property of a
// score, or of s = x / T as a function of the logit x, used here is.
template <class Pred>
uint32_t first_key(uint32_t lo, uint32_t hi, Pred pred) {
  uint32_t up = hi + 1;
  while (lo < up) {
    const uint32_t mid = lo + (up - lo) / 2;
    if (pred(nt_key_to_float(mid))) up = mid; else lo = mid + 1;
  }
  return lo;
}

// The smallest x-key in [first finite, hi] whose score key is >= key_min.
inline uint32_t x_threshold(uint32_t key_min, float temperature, uint32_t hi) {
  return first_key(NT_KEY_FIRST_FINITE, hi,
                   [&](float x) { return score_key(x, temperature) >= key_min; });
}

// The smallest score key whose probability exp(s - s_max) reaches min_p, at
// most s_max_key, with core/portable_exp.h's exp: the cut of the CPU sampler
// and of the host combine of vocabulary-parallel summaries.
inline uint32_t minp_key(uint32_t s_max_key, float s_max, float min_p) {
  return first_key(NT_KEY_FIRST_FINITE, s_max_key - 1,
                   [&](float s) { return nt_portable_exp(s - s_max) >= min_p; });
}

// The keep-set a finished row drew its token from: what the stages resolved
// (the prefix end `keep`, the +inf rule, greedy), for the logprobs pass.
nt_keep_set drawn_keep_set(const RowJob& j);

// nt_sample's rows (cpu/sample.cpp). After a row's token is written, `done`
// (when not null) is called with the finished row, possibly on a pool thread.
struct RowDone {
  void (*fn)(const RowJob& j, int64_t row, const void* context);
  const void* context;
};
size_t sample_workspace_bytes(const SampleCall& call);
void sample_rows(const char* op, const SampleCall& call, void* workspace, size_t workspace_bytes,
                 RowDone done);

}  // namespace nt::cpu::sampling
