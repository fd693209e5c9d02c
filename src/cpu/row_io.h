// Reading and masking rows of f32/f16/bf16 host tensors. 16-bit values are
// handled as raw words and widened exactly (core/half.h).
#pragma once

#include <cstdint>

#include "core/check.h"
#include "core/half.h"
#include "nexttok/nexttok.h"

namespace nt::cpu {

// Row r of a 2-D host tensor (row_stride in elements).
inline char* row_address(const nt_tensor& t, int64_t r) {
  return static_cast<char*>(t.data) + r * t.row_stride * int64_t(dtype_size(t.dtype));
}

inline float row_value(const void* row, nt_dtype dtype, int64_t i) {
  switch (dtype) {
    case NT_F16: return nt_f16_to_f32(static_cast<const uint16_t*>(row)[i]);
    case NT_BF16: return nt_bf16_to_f32(static_cast<const uint16_t*>(row)[i]);
    default: return static_cast<const float*>(row)[i];
  }
}

// Bits of -inf in each logits format.
constexpr uint32_t kNegInfF32 = 0xFF800000u;
constexpr uint16_t kNegInfF16 = 0xFC00u;
constexpr uint16_t kNegInfBF16 = 0xFF80u;

}  // namespace nt::cpu
