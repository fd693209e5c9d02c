// Pieces both CPU LM heads share: sizes, the run-time SIMD check, the fixed
// lane-reduction tree (part of the bit-exact summation order), and reading one
// element of an f32/f16/bf16 tensor.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/half.h"
#include "nexttok/nexttok.h"

namespace nt::cpu::lm_head {

inline int64_t round8(int64_t n) { return (n + 7) & ~int64_t(7); }
inline size_t align64(size_t n) { return (n + 63) & ~size_t(63); }

#if defined(__x86_64__) || defined(_M_X64)
// The *_avx2.cpp kernels need AVX2, FMA and F16C; checked once.
inline bool use_avx2() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         __builtin_cpu_supports("f16c");
  return ok;
}
#endif

// Sum of 8 lanes in one fixed tree, so every path rounds alike.
inline float lane_sum(const float* a) {
  const float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
  return (t0 + t2) + (t1 + t3);
}

// Element i of a float tensor, widened exactly to f32.
inline float widen_element(const void* data, nt_dtype dtype, int64_t i) {
  switch (dtype) {
    case NT_F16: return nt_f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case NT_BF16: return nt_bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    default: return static_cast<const float*>(data)[i];
  }
}

}  // namespace nt::cpu::lm_head
