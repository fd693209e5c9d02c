// Random inputs for bench, check and show. Logits are never zeros: "peaked"
// rows are N(0, 2) plus 4 peaks drawn from [10, 16], "flat" rows N(0, 1)
// (a large nucleus). 16-bit logits are stored as raw words.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nexttok/nexttok.h"

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t next();                     // splitmix64
  double uniform();                    // [0, 1)
  float normal();                      // N(0, 1), Box-Muller
  int64_t below(int64_t n);            // [0, n)

 private:
  uint64_t state_;
  float spare_ = 0;
  bool has_spare_ = false;
};

enum class LogitKind { Peaked, Flat };
LogitKind parse_logit_kind(const std::string& text);  // "peaked" | "flat"
const char* logit_kind_name(LogitKind k);

// One row of f32 logits.
void fill_logits(float* row, int64_t vocab, LogitKind kind, Rng& rng);

size_t dtype_size(nt_dtype t);
const char* dtype_name(nt_dtype t);
// f32 -> the element type (f32, f16 or bf16), round to nearest even.
void narrow(const float* src, void* dst, nt_dtype t, size_t n);
// element type -> f32, exact.
float widen(const void* src, nt_dtype t, size_t i);

// `rows` rows of logits of type t in a byte vector.
std::vector<unsigned char> make_logits(int64_t rows, int64_t vocab, nt_dtype t, LogitKind kind,
                                       Rng& rng);

enum class MaskKind { Random50, Allowed1, Blocky };
const char* mask_kind_name(MaskKind k);
// int32 [rows, ceil(vocab/32)], padding bits 0; never all-disallowed.
std::vector<int32_t> make_bitmask(int64_t rows, int64_t vocab, MaskKind kind, Rng& rng);

// How many copies of an input of `bytes` to rotate over so that the copies
// together exceed `target` bytes (a multiple of the last-level cache), capped
// by `max_total` bytes of memory; at least 1.
int copies_for(size_t bytes, size_t target, size_t max_total);
size_t last_level_cache_bytes();
