// The words of a vocabulary-parallel summary row (nt_lm_head_shard), written
// by cpu/lm_head_sample.cpp and cuda/lm_head_sample.cu, read by
// cpu/lm_head_combine.cpp. Every field
// is computed over the shard's tokens: its rows with global id < vocab_size
// (padding rows are no tokens), a token the bitmask disallows scoring -inf.
// x is a token's score from the head (its logit), s = x / T its scaled score
// (core/sampling.h), keys are nt_order_key of a float.
//
//   word 0  greedy: max key of x (low 32 bits) and the lowest id with it (high)
//   word 1  s_max: max key of s (low 32 bits)
//   word 2  Z: sum of portable_exp(s - s_max) over the finite s, as double
//           bits (rows with top-p only; 0 otherwise), in a fixed order of the
//           writer's (CPU: id order; CUDA: its block sums), so the last bits
//           may differ between backends
//   word 3  plain draw: max of s + G over the finite s (float bits, low) and
//           its id (high; INT32_MAX for none), ties to the lower id
//   word 4  +inf draw: max of G over the tokens with s = +inf, the same way
//   word 5  the number of tokens with a finite s
//   word 6  n, the candidates written (min(K, word 5) for filtered rows, else 0)
//   word 7  the logprobs request: 0 without one, else 1 + n_lp + 256 * mode
//   word 8 + i, i < n: candidate i, x's float bits (low) and its id (high),
//           the first n tokens with a finite s in the order (s desc, id asc)
// With a logprobs request (n_lp logprobs, mode raw | processed), the last
// NT_LM_HEAD_LOGPROBS_WORDS(n_lp) words of the row, from B = 8 + K:
//   word B      Z: raw, sum of exp(x - x_max) over the finite x, x_max from
//               word 0; processed (non-greedy rows without a filter only),
//               sum of exp(s - s_max) over the finite s, s_max from word 1;
//               fp64 exp and sum (CPU: in id order; CUDA: its block sums), as
//               double bits (else 0)
//   word B + 1  the number of +inf values (raw: x; processed: s, non-greedy rows)
//   word B + 2  the plain draw's x (float bits, low) and its id (high)
//   word B + 3  the +inf draw's x and its id, the same way
//   word B + 4 + c, c < n_lp: the first n_lp tokens of the shard in the order
//               (x key desc, id asc), -inf and NaN x included, as (x bits, id);
//               (0, kNoId) past the shard's tokens
// Ids are global. Words a row's class does not use hold the values of an empty
// shard (keys of -inf, no id, zero counts).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/portable.h"
#include "nexttok/nexttok.h"

namespace nt::summary {

enum Word : int { kGreedy = 0, kSMax, kMass, kPlain, kPosInf, kFinite, kCandidates, kRequest };
static_assert(kRequest + 1 == NT_LM_HEAD_SUMMARY_WORDS, "summary header words");

// The logprobs words, from the end of the candidates.
enum LogprobsWord : int { kLpMass = 0, kLpPosInfCount, kLpPlainX, kLpPosInfX, kLpTop };
static_assert(kLpTop == NT_LM_HEAD_LOGPROBS_WORDS(0), "summary logprobs words");

// Word 7 of a row written with (or without: requested false) a logprobs request.
NT_FN int64_t request_word(bool requested, int32_t n, uint32_t mode) {
  return requested ? 1 + int64_t(n) + 256 * int64_t(mode) : 0;
}

constexpr int32_t kNoId = INT32_MAX;

NT_FN int64_t pack(uint32_t low, int32_t id) {
  return int64_t((uint64_t(uint32_t(id)) << 32) | uint64_t(low));
}
NT_FN uint32_t low(int64_t w) { return uint32_t(uint64_t(w)); }
NT_FN int32_t id(int64_t w) { return int32_t(uint32_t(uint64_t(w) >> 32)); }
// A rank key (nt_lm_head_shard_ranks): the order keys [lo, hi] that a shard
// counts its scores in, lo in the low 32 bits and hi in the high; -1 counts none.
NT_FN int64_t rank_key(uint32_t lo, uint32_t hi) { return pack(lo, int32_t(hi)); }
struct RankRange {
  uint32_t lo, hi;  // none when lo > hi
  NT_FN bool empty() const { return lo > hi; }
  NT_FN bool holds(uint32_t key) const { return key >= lo && key <= hi; }
};
NT_FN RankRange rank_range(int64_t w) { return w == -1 ? RankRange{1u, 0u} : RankRange{low(w), uint32_t(id(w))}; }

inline int64_t double_word(double d) { int64_t w; std::memcpy(&w, &d, 8); return w; }
inline double word_double(int64_t w) { double d; std::memcpy(&d, &w, 8); return d; }

// A (value, id) maximum, ties to the lower id.
struct Best {
  float value;
  int32_t id;
  void offer(float v, int32_t i) {
    if (id == kNoId || v > value || (v == value && i < id)) { value = v; id = i; }
  }
};

}  // namespace nt::summary
