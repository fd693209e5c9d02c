// What the CPU backend's ops share: rows and elements of f32/f16/bf16 host
// tensors (16-bit values widened exactly, core/half.h), per-row parameters,
// 64-byte workspace alignment, and the run-time checks that pick the
// *_avx2.cpp and *_avx512.cpp kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/check.h"
#include "core/half.h"
#include "nexttok/nexttok.h"

namespace nt::cpu {

// Row r of a 2-D host tensor (row_stride in elements).
inline char* row_address(const nt_tensor& t, int64_t r) {
  return static_cast<char*>(t.data) + r * t.row_stride * int64_t(dtype_size(t.dtype));
}

// Element i of an f32 / f16 / bf16 array, widened exactly to f32.
inline float widen_element(const void* data, nt_dtype dtype, int64_t i) {
  switch (dtype) {
    case NT_F16: return nt_f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case NT_BF16: return nt_bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    default: return static_cast<const float*>(data)[i];
  }
}

// y, a value of the dtype (already rounded to it), written as element i.
inline void store_element(void* data, nt_dtype dtype, int64_t i, float y) {
  switch (dtype) {
    case NT_F16: static_cast<uint16_t*>(data)[i] = uint16_t(nt_f32_to_f16(y)); break;
    case NT_BF16: static_cast<uint16_t*>(data)[i] = uint16_t(nt_f32_to_bf16(y)); break;
    default: static_cast<float*>(data)[i] = y; break;
  }
}

// Row r's value of a per-row parameter: its array's element, or the scalar.
inline float row_param(const nt_param_f32& q, int64_t r) {
  return q.per_row ? static_cast<const float*>(q.per_row)[r] : q.scalar;
}
inline int32_t row_param(const nt_param_i32& q, int64_t r) {
  return q.per_row ? static_cast<const int32_t*>(q.per_row)[r] : q.scalar;
}
inline uint64_t row_param(const nt_param_u64& q, int64_t r) {
  return q.per_row ? static_cast<const uint64_t*>(q.per_row)[r] : q.scalar;
}

// Row r's resolved filters (core/sampling.h) from the temperature, top_k, top_p
// and min_p fields of `s` (nt_sample_args, nt_lm_head_sampling, ...).
template <class Params>
nt_row_params row_params(const Params& s, int64_t r, int64_t vocab) {
  return nt_resolve_row_params(row_param(s.temperature, r), row_param(s.top_k, r),
                               row_param(s.top_p, r), row_param(s.min_p, r), int32_t(vocab));
}

// Workspaces are carved into 64-byte aligned pieces from the caller's pointer
// rounded up to 64 bytes; their sizes include kWorkspaceSlack for that.
constexpr size_t kWorkspaceSlack = 64;
inline size_t align64(size_t n) { return (n + 63) & ~size_t(63); }
inline char* align_workspace(void* p) {
  return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63));
}

// The *_avx2.cpp kernels need AVX2, FMA and F16C; checked once.
inline bool use_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         __builtin_cpu_supports("f16c");
  return ok;
#else
  return false;
#endif
}

// The *_avx512.cpp kernels are built for AVX-512F, BW and VL on top of what
// use_avx2 checks (CMakeLists.txt), so the compiler may use any of them;
// __builtin_cpu_supports also checks that the OS saves the ZMM state.
inline bool use_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool ok = use_avx2() && __builtin_cpu_supports("avx512f") &&
                         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return ok;
#else
  return false;
#endif
}

}  // namespace nt::cpu
