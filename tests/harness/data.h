// Test data: a seeded generator with portable distributions (so a seed printed by
// a failure reproduces the input on any standard library), dtype encoding, the
// logit and bitmask families of BENCH.md, and poison patterns for outputs.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "nexttok/nexttok.h"

namespace ntt {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed), seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t bits() { return engine_(); }
  double uniform() { return double(engine_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  int64_t integer(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + int64_t(engine_() % uint64_t(hi - lo + 1));
  }
  double normal();  // Box-Muller
  bool coin(double p_true = 0.5) { return uniform() < p_true; }

 private:
  std::mt19937_64 engine_;
  uint64_t seed_;
};

// "seed=..." for SCOPED_TRACE, so every failure names its input.
std::string seed_trace(uint64_t seed);

size_t dtype_bytes(nt_dtype dtype);
const char* dtype_label(nt_dtype dtype);
// x rounded to the nearest value of a float dtype (f32: unchanged).
float round_to(nt_dtype dtype, float x);
// Host bytes of `values` in a float dtype (f32 / f16 / bf16), rounding to nearest even.
std::vector<uint8_t> encode(nt_dtype dtype, const std::vector<float>& values);
float decode(nt_dtype dtype, const std::vector<uint8_t>& bytes, size_t index);
// One f16 or bf16 value: the bits of x rounded to nearest even, and back (exact).
uint16_t half_bits(nt_dtype dtype, float x);
float from_half_bits(nt_dtype dtype, uint16_t bits);
// Raw bits of element `index` (widened to 32 bits), for bit-exact comparisons.
uint32_t raw_bits(nt_dtype dtype, const std::vector<uint8_t>& bytes, size_t index);

// BENCH.md logit families: "peaked" N(0, 2) plus 4 peaks in [10, 16]; "flat" N(0, 1).
std::vector<float> peaked_logits(Rng& rng, int64_t rows, int64_t vocab);
std::vector<float> flat_logits(Rng& rng, int64_t rows, int64_t vocab);

// n weight signs, -1 or +1 with equal odds (64 from each draw of the generator:
// the LM-head suites need tens of millions).
std::vector<int8_t> random_signs(Rng& rng, size_t n);

// BENCH.md bitmask families (W4): 50% random, 1% allowed, and "blocky": runs of
// 1k-4k tokens alternately allowed and masked. int32 [rows, ceil(vocab/32)],
// padding bits 0; every row allows at least one token.
enum class MaskKind { Random50, Allowed1, Blocky };
const char* mask_kind_label(MaskKind kind);
std::vector<int32_t> bench_bitmask(Rng& rng, int64_t rows, int64_t vocab, MaskKind kind);

// Grammar-mask test inputs: logits holding what a mask must leave bit for bit
// (NaN, +inf, -inf, +-0, about 1% each, among 3 N(0, 1)), and mask words whose
// bits are set with one density drawn in [0.05, 0.95].
std::vector<float> logits_with_specials(Rng& rng, size_t n);
std::vector<int32_t> random_mask_words(Rng& rng, size_t n);

// Poison: unwritten elements must stand out.
constexpr int64_t kPoisonI64 = 0x7f7f7f7f7f7f7f7fll;
constexpr int32_t kPoisonI32 = 0x7f7f7f7f;
float poison_f32();  // a NaN with a recognisable payload

inline uint32_t f32_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace ntt
