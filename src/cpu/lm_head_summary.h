// The words of a vocabulary-parallel summary row (nt_lm_head_shard), written
// by cpu/lm_head_sample.cpp and read by cpu/lm_head_combine.cpp. Every field
// is computed over the shard's tokens: its rows with global id < vocab_size
// (padding rows are no tokens), a token the bitmask disallows scoring -inf.
// x is a token's score from the head (its logit), s = x / T its scaled score
// (core/sampling.h), keys are nt_order_key of a float.
//
//   word 0  greedy: max key of x (low 32 bits) and the lowest id with it (high)
//   word 1  s_max: max key of s (low 32 bits)
//   word 2  Z: sum of portable_exp(s - s_max) over the finite s, in id order,
//           as double bits (rows with top-p only; 0 otherwise)
//   word 3  plain draw: max of s + G over the finite s (float bits, low) and
//           its id (high; INT32_MAX for none), ties to the lower id
//   word 4  +inf draw: max of G over the tokens with s = +inf, the same way
//   word 5  the number of tokens with a finite s
//   word 6  n, the candidates written (min(K, word 5) for filtered rows, else 0)
//   word 7  0
//   word 8 + i, i < n: candidate i, x's float bits (low) and its id (high),
//           the first n tokens with a finite s in the order (s desc, id asc)
// Ids are global. Words a row's class does not use hold the values of an empty
// shard (keys of -inf, no id, zero counts).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/ordering.h"
#include "nexttok/nexttok.h"

namespace nt::cpu::summary {

enum Word : int { kGreedy = 0, kSMax, kMass, kPlain, kPosInf, kFinite, kCandidates, kReserved };
static_assert(kReserved + 1 == NT_LM_HEAD_SUMMARY_WORDS, "summary header words");

constexpr int32_t kNoId = INT32_MAX;

inline int64_t pack(uint32_t low, int32_t id) {
  return int64_t((uint64_t(uint32_t(id)) << 32) | uint64_t(low));
}
inline uint32_t low(int64_t w) { return uint32_t(uint64_t(w)); }
inline int32_t id(int64_t w) { return int32_t(uint32_t(uint64_t(w) >> 32)); }
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

}  // namespace nt::cpu::summary
