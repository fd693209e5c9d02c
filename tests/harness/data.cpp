#include "harness/data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/half.h"

namespace ntt {

double Rng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

std::string seed_trace(uint64_t seed) { return "seed=" + std::to_string(seed); }

size_t dtype_bytes(nt_dtype dtype) {
  switch (dtype) {
    case NT_F32: case NT_I32: return 4;
    case NT_F16: case NT_BF16: return 2;
    case NT_I8: case NT_BOOL: return 1;
    case NT_I64: case NT_U64: return 8;
  }
  throw std::runtime_error("unknown dtype");
}

const char* dtype_label(nt_dtype dtype) {
  switch (dtype) {
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

float round_to(nt_dtype dtype, float x) {
  switch (dtype) {
    case NT_F32: return x;
    case NT_F16: return nt_f16_to_f32(nt_f32_to_f16(x));
    case NT_BF16: return nt_bf16_to_f32(nt_f32_to_bf16(x));
    default: throw std::runtime_error("round_to: not a float dtype");
  }
}

std::vector<uint8_t> encode(nt_dtype dtype, const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * dtype_bytes(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == NT_F32) {
      std::memcpy(&out[i * 4], &values[i], 4);
    } else {
      const uint16_t h = uint16_t(dtype == NT_F16 ? nt_f32_to_f16(values[i])
                                                  : nt_f32_to_bf16(values[i]));
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

uint32_t raw_bits(nt_dtype dtype, const std::vector<uint8_t>& bytes, size_t index) {
  if (dtype == NT_F32) {
    uint32_t u;
    std::memcpy(&u, &bytes[index * 4], 4);
    return u;
  }
  uint16_t h;
  std::memcpy(&h, &bytes[index * 2], 2);
  return h;
}

float decode(nt_dtype dtype, const std::vector<uint8_t>& bytes, size_t index) {
  const uint32_t raw = raw_bits(dtype, bytes, index);
  switch (dtype) {
    case NT_F32: {
      float x;
      std::memcpy(&x, &raw, 4);
      return x;
    }
    case NT_F16: return nt_f16_to_f32(raw);
    case NT_BF16: return nt_bf16_to_f32(raw);
    default: throw std::runtime_error("decode: not a float dtype");
  }
}

uint16_t half_bits(nt_dtype dtype, float x) {
  switch (dtype) {
    case NT_F16: return uint16_t(nt_f32_to_f16(x));
    case NT_BF16: return uint16_t(nt_f32_to_bf16(x));
    default: throw std::runtime_error("half_bits: not a 16-bit float dtype");
  }
}

float from_half_bits(nt_dtype dtype, uint16_t bits) {
  switch (dtype) {
    case NT_F16: return nt_f16_to_f32(bits);
    case NT_BF16: return nt_bf16_to_f32(bits);
    default: throw std::runtime_error("from_half_bits: not a 16-bit float dtype");
  }
}

std::vector<float> peaked_logits(Rng& rng, int64_t rows, int64_t vocab) {
  std::vector<float> x(size_t(rows * vocab));
  for (auto& v : x) v = float(2.0 * rng.normal());
  for (int64_t r = 0; r < rows; ++r)
    for (int p = 0; p < 4; ++p) x[size_t(r * vocab + rng.integer(0, vocab - 1))] = float(rng.uniform(10, 16));
  return x;
}

std::vector<float> flat_logits(Rng& rng, int64_t rows, int64_t vocab) {
  std::vector<float> x(size_t(rows * vocab));
  for (auto& v : x) v = float(rng.normal());
  return x;
}

std::vector<int8_t> random_signs(Rng& rng, size_t n) {
  std::vector<int8_t> signs(n);
  for (size_t i = 0; i < n; i += 64) {
    const uint64_t bits = rng.bits();
    for (size_t j = 0; j < std::min<size_t>(64, n - i); ++j)
      signs[i + j] = int8_t(int((bits >> j) & 1) * 2 - 1);
  }
  return signs;
}

const char* mask_kind_label(MaskKind kind) {
  switch (kind) {
    case MaskKind::Random50: return "50% random";
    case MaskKind::Allowed1: return "1% allowed";
    case MaskKind::Blocky: return "blocky";
  }
  return "?";
}

std::vector<int32_t> bench_bitmask(Rng& rng, int64_t rows, int64_t vocab, MaskKind kind) {
  const int64_t words = (vocab + 31) / 32;
  std::vector<int32_t> mask(size_t(rows * words), 0);
  for (int64_t r = 0; r < rows; ++r) {
    int32_t* m = &mask[size_t(r * words)];
    auto allow = [&](int64_t t) { m[t / 32] = int32_t(uint32_t(m[t / 32]) | (1u << (t % 32))); };
    if (kind == MaskKind::Random50) {
      for (int64_t w = 0; w < words; ++w) m[w] = int32_t(uint32_t(rng.bits()));
      if (vocab % 32) m[words - 1] = int32_t(uint32_t(m[words - 1]) & ((1u << (vocab % 32)) - 1u));
    } else if (kind == MaskKind::Allowed1) {
      for (int64_t t = 0; t < vocab; ++t)
        if (rng.coin(0.01)) allow(t);
    } else {
      // A grammar state that admits whole families of tokens (identifiers, digits).
      bool on = rng.coin();
      for (int64_t t = 0; t < vocab;) {
        const int64_t end = std::min(vocab, t + rng.integer(1024, 4096));
        for (; t < end; ++t)
          if (on) allow(t);
        on = !on;
      }
    }
    allow(rng.integer(0, vocab - 1));  // a grammar always admits some token
  }
  return mask;
}

std::vector<float> logits_with_specials(Rng& rng, size_t n) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(n);
  for (float& v : x) {
    const double u = rng.uniform();
    v = u < 0.01 ? nan : u < 0.02 ? inf : u < 0.03 ? -inf
        : u < 0.04 ? (rng.coin() ? 0.0f : -0.0f) : float(3.0 * rng.normal());
  }
  return x;
}

std::vector<int32_t> random_mask_words(Rng& rng, size_t n) {
  std::vector<int32_t> mask(n);
  const double density = rng.uniform(0.05, 0.95);
  for (int32_t& w : mask) {
    uint32_t bits = 0;
    for (int j = 0; j < 32; ++j)
      if (rng.coin(density)) bits |= 1u << j;
    w = int32_t(bits);
  }
  return mask;
}

float poison_f32() {
  const uint32_t bits = 0x7fdeadbfu;  // a quiet NaN payload no arithmetic produces
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

}  // namespace ntt
