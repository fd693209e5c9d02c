#include "inputs.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <unistd.h>

#include "core/half.h"

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return (next() >> 11) * 0x1.0p-53; }

float Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // 1 - u keeps the log argument in (0, 1].
  float r = std::sqrt(-2.0f * std::log(1.0f - static_cast<float>(uniform())));
  float t = 6.2831853f * static_cast<float>(uniform());
  spare_ = r * std::sin(t);
  has_spare_ = true;
  return r * std::cos(t);
}

int64_t Rng::below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }

LogitKind parse_logit_kind(const std::string& text) {
  if (text == "peaked") return LogitKind::Peaked;
  if (text == "flat") return LogitKind::Flat;
  throw std::invalid_argument("logits must be 'peaked' or 'flat', got '" + text + "'");
}

const char* logit_kind_name(LogitKind k) { return k == LogitKind::Peaked ? "peaked" : "flat"; }

void fill_logits(float* row, int64_t vocab, LogitKind kind, Rng& rng) {
  float sigma = kind == LogitKind::Peaked ? 2.0f : 1.0f;
  for (int64_t i = 0; i < vocab; ++i) row[i] = sigma * rng.normal();
  if (kind == LogitKind::Peaked)
    for (int p = 0; p < 4 && p < vocab; ++p)
      row[rng.below(vocab)] = 10.0f + 6.0f * static_cast<float>(rng.uniform());
}

size_t dtype_size(nt_dtype t) {
  switch (t) {
    case NT_F16: case NT_BF16: return 2;
    case NT_I8: case NT_BOOL: return 1;
    case NT_I64: case NT_U64: return 8;
    default: return 4;
  }
}

const char* dtype_name(nt_dtype t) {
  switch (t) {
    case NT_F32: return "f32";
    case NT_F16: return "f16";
    case NT_BF16: return "bf16";
    case NT_I8: return "i8";
    case NT_I32: return "i32";
    case NT_I64: return "i64";
    case NT_U64: return "u64";
    case NT_BOOL: return "bool";
  }
  return "?";
}

void narrow(const float* src, void* dst, nt_dtype t, size_t n) {
  if (t == NT_F32) {
    std::memcpy(dst, src, n * 4);
    return;
  }
  auto* out = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; ++i)
    out[i] = static_cast<uint16_t>(t == NT_BF16 ? nt_f32_to_bf16(src[i]) : nt_f32_to_f16(src[i]));
}

float widen(const void* src, nt_dtype t, size_t i) {
  if (t == NT_F32) return static_cast<const float*>(src)[i];
  uint16_t h = static_cast<const uint16_t*>(src)[i];
  return t == NT_BF16 ? nt_bf16_to_f32(h) : nt_f16_to_f32(h);
}

std::vector<unsigned char> make_logits(int64_t rows, int64_t vocab, nt_dtype t, LogitKind kind,
                                       Rng& rng) {
  std::vector<unsigned char> out(static_cast<size_t>(rows * vocab) * dtype_size(t));
  std::vector<float> row(static_cast<size_t>(vocab));
  for (int64_t r = 0; r < rows; ++r) {
    fill_logits(row.data(), vocab, kind, rng);
    narrow(row.data(), out.data() + static_cast<size_t>(r * vocab) * dtype_size(t), t,
           row.size());
  }
  return out;
}

const char* mask_kind_name(MaskKind k) {
  switch (k) {
    case MaskKind::Random50: return "50% random";
    case MaskKind::Allowed1: return "1% allowed";
    case MaskKind::Blocky: return "blocky";
  }
  return "?";
}

std::vector<int32_t> make_bitmask(int64_t rows, int64_t vocab, MaskKind kind, Rng& rng) {
  int64_t words = (vocab + 31) / 32;
  std::vector<int32_t> mask(static_cast<size_t>(rows * words), 0);
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t* m = reinterpret_cast<uint32_t*>(mask.data() + r * words);
    auto allow = [&](int64_t t) { m[t >> 5] |= 1u << (t & 31); };
    if (kind == MaskKind::Random50) {
      for (int64_t w = 0; w < words; ++w) m[w] = static_cast<uint32_t>(rng.next());
      if (vocab % 32) m[words - 1] &= (1u << (vocab % 32)) - 1u;
    } else if (kind == MaskKind::Allowed1) {
      for (int64_t t = 0; t < vocab; ++t)
        if (rng.uniform() < 0.01) allow(t);
    } else {
      // Alternating runs of 1k-4k tokens, as a grammar state that admits whole
      // families of tokens (identifiers, digits) produces.
      bool on = rng.uniform() < 0.5;
      for (int64_t t = 0; t < vocab;) {
        int64_t run = 1024 + rng.below(3073);
        for (int64_t e = std::min(vocab, t + run); t < e; ++t)
          if (on) allow(t);
        on = !on;
      }
    }
    allow(rng.below(vocab));  // a grammar always admits some token
  }
  return mask;
}

int copies_for(size_t bytes, size_t target, size_t max_total) {
  if (bytes == 0) return 1;
  size_t n = (target + bytes - 1) / bytes;
  n = std::min(n, std::max<size_t>(1, max_total / bytes));
  return static_cast<int>(std::max<size_t>(1, n));
}

size_t last_level_cache_bytes() {
  for (int index = 4; index >= 0; --index) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string text;
    if (f >> text) {
      size_t v = std::stoull(text);
      char unit = text.back();
      if (unit == 'K') v <<= 10;
      if (unit == 'M') v <<= 20;
      return v;
    }
  }
  long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return v > 0 ? static_cast<size_t>(v) : (32u << 20);
}
