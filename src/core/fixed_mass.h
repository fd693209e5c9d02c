/* Exact fixed-point probability masses, shared by every backend wherever a
 * keep-set or a draw compares sums of probabilities with a cut (the OpenCL
 * sampler, speculative verification): p in [0, 1] as an integer multiple of
 * 2^-bits, and products of such sums with fp32 fractions, in integer
 * arithmetic only (no fp64: many devices lack it). */
#ifndef NEXTTOK_CORE_FIXED_MASS_H
#define NEXTTOK_CORE_FIXED_MASS_H

#include "portable.h"
#include "portable_exp.h"

/* Bits of the fixed-point masses: V masses of at most 2^bits sum below 2^62. */
NT_FN int nt_mass_bits(nt_u64 vocab) {
  int bits = 0;
  for (nt_u64 v = vocab; v != 0u; v >>= 1) ++bits;
  bits = 62 - bits;
  return bits < 24 ? 24 : (bits > 40 ? 40 : bits);
}

/* p in [0, 1] as round-to-nearest-even(p * 2^bits) in integer arithmetic; at
 * least 1 whenever p > 0. */
NT_FN nt_u64 nt_fixed_mass(float p, int bits) {
  if (!(p > 0.0f)) return 0u;
  const nt_u32 u = nt_as_u32(p), e = u >> 23;
  const nt_u64 mantissa = e ? (nt_u64)((u & 0x7FFFFFu) | 0x800000u) : (nt_u64)u;
  const int shift = (int)(e > 1u ? e : 1u) - 150 + bits; /* p = mantissa * 2^(shift - bits) */
  nt_u64 m;
  if (shift >= 0) {
    m = mantissa << shift;
  } else {
    const int down = -shift < 63 ? -shift : 63;
    const nt_u64 q = mantissa >> down, rest = mantissa & ((((nt_u64)1) << down) - 1u),
                 mid = ((nt_u64)1) << (down - 1);
    m = q + (nt_u64)(rest > mid || (rest == mid && (q & 1u)));
  }
  return m ? m : (nt_u64)1;
}

/* Mass of a score of a finite row: exp(s - s_max) in fixed point. */
NT_FN nt_u64 nt_mass_of(float s, float s_max, int bits) {
  return nt_fixed_mass(nt_portable_exp(s - s_max), bits);
}

NT_FN nt_u64 nt_mulhi_u64(nt_u64 a, nt_u64 b) {
#if defined(NT_OPENCL)
  return mul_hi(a, b);
#elif defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return (nt_u64)(((unsigned __int128)a * b) >> 64);
#endif
}

/* floor(f * z), or its ceiling when round_up, exactly, for 0 <= f < 1 and
 * z < 2^62: f is a 24-bit integer times 2^-shift, so the product is a shifted
 * 128-bit one. */
NT_FN nt_u64 nt_scale_u64(nt_u64 z, float f, int round_up) {
  const nt_u32 bits = nt_as_u32(f);
  const nt_u32 e = bits >> 23;
  const nt_u64 m = e ? (nt_u64)((bits & 0x7FFFFFu) | 0x800000u) : (nt_u64)(bits & 0x7FFFFFu);
  const nt_u32 shift = e ? 150u - e : 149u; /* >= 24 since f < 1 */
  const nt_u64 lo = z * m, hi = nt_mulhi_u64(z, m);
  nt_u64 q;
  int rest;
  if (shift >= 128u) {
    q = 0u;
    rest = (lo | hi) != 0u;
  } else if (shift >= 64u) {
    const nt_u32 s = shift - 64u;
    q = hi >> s;
    rest = lo != 0u || (s != 0u && (hi & ((((nt_u64)1) << s) - 1u)) != 0u);
  } else {
    q = (lo >> shift) | (hi << (64u - shift));
    rest = (lo & ((((nt_u64)1) << shift) - 1u)) != 0u;
  }
  return q + (nt_u64)(round_up && rest);
}

#endif /* NEXTTOK_CORE_FIXED_MASS_H */
