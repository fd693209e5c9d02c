// Loads of logits rows as fp32, 16 bytes at a time where the row is aligned.
// Widening f16/bf16 to fp32 is exact, so every backend sees the same values.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "nexttok/nexttok.h"

namespace nt::cuda {

// Row `row`'s value of a sampling parameter: its per-row array's entry, else the scalar.
template <class Param>
__device__ __forceinline__ auto param_at(const Param& q, uint32_t row) {
  return q.per_row ? static_cast<const decltype(q.scalar)*>(q.per_row)[row] : q.scalar;
}

template <nt_dtype DT>
struct LogitTraits;
template <>
struct LogitTraits<NT_F32> {
  using Storage = float;
  static constexpr int kVecTokens = 4;
};
template <>
struct LogitTraits<NT_F16> {
  using Storage = uint16_t;
  static constexpr int kVecTokens = 8;
};
template <>
struct LogitTraits<NT_BF16> {
  using Storage = uint16_t;
  static constexpr int kVecTokens = 8;
};

template <nt_dtype DT>
__device__ __forceinline__ float widen(typename LogitTraits<DT>::Storage v) {
  if constexpr (DT == NT_F32) {
    return v;
  } else if constexpr (DT == NT_F16) {
    return __half2float(__ushort_as_half(v));
  } else {
    return __uint_as_float(uint32_t(v) << 16);
  }
}

// Tokens per load group: one 16-byte vector when aligned, else 4 scalar loads
// (4 keeps groups on Philox block boundaries either way).
template <nt_dtype DT, bool VEC>
constexpr int group_tokens() {
  return VEC ? LogitTraits<DT>::kVecTokens : 4;
}

// Streaming loads (evict-first) for single passes; cached loads for rows that
// are read again.
template <bool STREAM>
__device__ __forceinline__ uint4 load16(const void* p) {
  if constexpr (STREAM) {
    return __ldcs(reinterpret_cast<const uint4*>(p));
  } else {
    return __ldg(reinterpret_cast<const uint4*>(p));
  }
}

template <bool STREAM, class T>
__device__ __forceinline__ T load1(const T* p) {
  if constexpr (STREAM) {
    return __ldcs(p);
  } else {
    return __ldg(p);
  }
}

// Calls f(LogitLayout<DT, VEC>{}) for the logits' dtype, VEC when every row
// starts 16-byte aligned: the host's choice among a kernel's instantiations.
template <nt_dtype DT, bool VEC>
struct LogitLayout {
  static constexpr nt_dtype kDtype = DT;
  static constexpr bool kVec = VEC;
};
template <class F>
void with_logit_layout(nt_dtype dtype, bool vec, F&& f) {
  auto pick = [&](auto vector_layout, auto scalar_layout) {
    if (vec) f(vector_layout);
    else f(scalar_layout);
  };
  switch (dtype) {
    case NT_F16: pick(LogitLayout<NT_F16, true>{}, LogitLayout<NT_F16, false>{}); break;
    case NT_BF16: pick(LogitLayout<NT_BF16, true>{}, LogitLayout<NT_BF16, false>{}); break;
    default: pick(LogitLayout<NT_F32, true>{}, LogitLayout<NT_F32, false>{}); break;
  }
}

// Tokens [t, t + G) of a row as fp32; tokens at or past `end` read as -inf,
// which no selection ever keeps. With VEC, t is a multiple of G and the row base
// is 16-byte aligned.
template <nt_dtype DT, bool VEC, bool STREAM>
__device__ __forceinline__ void load_group(const typename LogitTraits<DT>::Storage* row, int64_t t,
                                           int64_t end, float (&out)[group_tokens<DT, VEC>()]) {
  using S = typename LogitTraits<DT>::Storage;
  constexpr int G = group_tokens<DT, VEC>();
  if (VEC && t + G <= end) {
    const uint4 v = load16<STREAM>(row + t);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    if constexpr (DT == NT_F32) {
#pragma unroll
      for (int j = 0; j < 4; ++j) out[j] = __uint_as_float(w[j]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        out[2 * j] = widen<DT>(S(w[j] & 0xFFFFu));
        out[2 * j + 1] = widen<DT>(S(w[j] >> 16));
      }
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < G; ++j)
    out[j] = (t + j < end) ? widen<DT>(load1<STREAM>(row + t + j)) : -INFINITY;
}

}  // namespace nt::cuda
