// The sampler's passes over a range of one logits row (cpu/sample_row.cpp
// drives them). Two implementations with identical results: portable C++ and
// AVX2+FMA (exact fma and IEEE division, same operation order), chosen at run
// time.
//
// The passes work on ordering keys of the raw logits ("x-keys",
// nt_order_key(x)): s = x / T is monotone in x for every T > 0 except +inf
// (where only +inf logits break it, and they are cut off by `hi`), so every
// threshold on the scores' keys is a threshold on x-keys, found by bisection
// in cpu/sample_row.cpp. Full passes then compare keys and divide only for the
// tokens they keep. Probabilities p = exp(s - s_max) are the core's
// nt_portable_exp (core/portable_exp.h), the OpenCL backend's too.
#pragma once

#include <cstdint>

#include "core/ordering.h"
#include "core/portable_exp.h"
#include "core/sampling.h"
#include "cpu/row_io.h"
#include "nexttok/nexttok.h"

namespace nt::cpu::sampling {

// Rows are processed in fixed chunks: the unit of splitting a row over
// threads, and of every fp64 partial sum, so that sums (and therefore
// keep-sets in degenerate cases) do not depend on the number of threads.
constexpr int64_t kChunk = 8192;

// Top-p without top-k bins the probabilities by d = s_max - s, 1/16 wide:
// only the bin where the mass crosses the target needs an exact selection.
// The bin is non-increasing in s, so every bin is a range of keys.
constexpr int kMassBins = 512;
constexpr float kMassBinScale = 16.0f;
constexpr float kMassBinLast = float(kMassBins - 1);

inline int mass_bin(float s, float s_max) {
  const float t = (s_max - s) * kMassBinScale;
  return int(t < kMassBinLast ? t : kMassBinLast);
}

// Ordering key of the scaled score of a logit.
inline uint32_t score_key(float logit, float temperature) {
  return nt_order_key(nt_scaled_score(logit, temperature));
}

struct Row {
  const void* data;
  nt_dtype dtype;
  float at(int64_t i) const { return widen_element(data, dtype, i); }  // logit i, widened exactly
};

struct ScanStats {
  uint32_t max_key;   // largest x-key
  int32_t max_index;  // first token holding it
};

// The tokens of a draw: x-key <= hi and (x-key >= b or (x-key >= a and
// index <= cut)), a <= b. With pos_inf the scores count as 0.
struct DrawSet {
  uint32_t a, b, hi;
  int32_t cut;
  bool pos_inf;
  float temperature;
  float s_max;
  uint64_t seed, offset;
  uint32_t tag;
};

// Largest perturbed score so far and its token (lowest index on ties);
// index INT32_MAX marks a bound that no token of this range has matched yet.
struct Best {
  float value;
  int32_t index;
};

struct Cumulative {
  double total;
  int32_t hit;   // first member with prefix + mass so far > target; -1 if none
  int32_t last;  // last member; -1 if none
};

struct Kernels {
  // Stats of [begin, end); writes the indices with lo <= x-key <= hi to out
  // (nothing when lo > hi) and returns their number.
  int64_t (*scan)(Row row, int64_t begin, int64_t end, uint32_t lo, uint32_t hi, int32_t* out,
                  ScanStats* stats);
  // scan(), and in *mass the sum of exp(s - ref) over the scores s = x / T > -inf
  // of the tokens of [begin, end) (begin a multiple of 8) that it does not list
  // (x-key below lo), formed in eight lanes as mass_histogram's rest. The
  // caller's ref is at or above every such score (the pivot lo comes from
  // logits scoring at most ref), so no term exceeds 1.
  int64_t (*scan_mass)(Row row, int64_t begin, int64_t end, uint32_t lo, uint32_t hi,
                       float temperature, float ref, int32_t* out, ScanStats* stats, double* mass);
  // For every finite score of [begin, end) (begin a multiple of 8), with
  // p = exp(s - s_max) and b = mass_bin(s, s_max): if b < n_binned, adds p
  // and 1 to bin b, in index order (the caller zeroes the bins); otherwise
  // adds p to the returned "rest" sum, formed in eight lanes (token i in lane
  // i % 8, lanes combined ((0+4)+(2+6))+((1+5)+(3+7))).
  double (*mass_histogram)(Row row, int64_t begin, int64_t end, float temperature, float s_max,
                           int n_binned, double* mass, uint32_t* count);
  // p[i] = nt_portable_exp(s[i] - s_max).
  void (*exp_list)(const float* s, int64_t n, float s_max, float* p);
  // Gumbel noise (nt_token_gumbel) of listed tokens.
  void (*gumbel_list)(const int32_t* index, int64_t n, uint64_t seed, uint64_t offset,
                      uint32_t tag, float* gumbel);
  // Gumbel-max over the members of [begin, end) (begin a multiple of 32),
  // updating *best. Members whose score plus NT_GUMBEL_MAX stays below the best
  // so far are skipped, which never changes the result.
  void (*gumbel_scan)(Row row, int64_t begin, int64_t end, const DrawSet& set, Best* best);
  // Mass p = exp(s - s_max) (1 with pos_inf) of the members, summed in index
  // order; `hit` compares prefix + the sum so far with target.
  Cumulative (*cumulative)(Row row, int64_t begin, int64_t end, const DrawSet& set,
                           double prefix, double target);
};

const Kernels& portable_kernels();
const Kernels* avx2_kernels();  // nullptr when not compiled in
// AVX2 when compiled in and the CPU has AVX2, FMA and F16C.
const Kernels& kernels();

}  // namespace nt::cpu::sampling
