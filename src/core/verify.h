/* Speculative verification (docs/SEMANTICS.md, "Speculative verification"),
 * the pieces every backend shares: the Philox streams of a request's positions,
 * the fixed-point target masses, the acceptance test and the residual masses.
 * Everything here is integer arithmetic or single IEEE fp32 operations, so a
 * decision taken on one backend is taken on every other one. */
#ifndef NEXTTOK_CORE_VERIFY_H
#define NEXTTOK_CORE_VERIFY_H

#include "ordering.h"
#include "portable_exp.h"
#include "sampling.h"

/* Word 1 of a verification counter: the top bit (never set in a sample() row
 * tag of a batch below 2^31 rows), the request tag (the request index for a
 * scalar seed, 0 for per-request seeds) and the position. */
#define NT_VERIFY_TAG_BIT 0x80000000u
#define NT_VERIFY_MAX_REQUESTS (1 << 19)
#define NT_VERIFY_MAX_POSITIONS (1 << 12)

NT_FN nt_u32 nt_verify_tag(int seeds_per_request, nt_u32 request, nt_u32 position) {
  return NT_VERIFY_TAG_BIT | ((seeds_per_request ? 0u : request) << 12) | position;
}

/* Acceptance uniform of the k-th candidate tried at a position: word k & 3 of
 * counter block 0xFFFFFFFF - (k >> 2); token noise uses blocks below 2^29. */
NT_FN float nt_verify_accept_uniform(nt_u64 seed, nt_u64 offset, nt_u32 tag, nt_u32 k) {
  nt_philox_block b = nt_token_block(seed, offset, tag, 0xFFFFFFFFu - (k >> 2));
  return nt_uniform_from_bits(b.v[k & 3u]);
}

/* Bits of the fixed-point masses: V masses of at most 2^bits sum below 2^62. */
NT_FN int nt_verify_mass_bits(nt_i32 vocab) {
  int bits = 0;
  for (nt_u32 v = (nt_u32)vocab; v != 0u; v >>= 1) ++bits;
  bits = 62 - bits;
  return bits < 24 ? 24 : (bits > 40 ? 40 : bits);
}

/* p in [0, 1] as round-to-nearest-even(p * 2^bits) in integer arithmetic; at
 * least 1 whenever p > 0. */
NT_FN nt_u64 nt_verify_fixed_mass(float p, int bits) {
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
NT_FN nt_u64 nt_verify_mass_of(float s, float s_max, int bits) {
  return nt_verify_fixed_mass(nt_portable_exp(s - s_max), bits);
}

NT_FN nt_u64 nt_verify_mulhi_u64(nt_u64 a, nt_u64 b) {
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
NT_FN nt_u64 nt_verify_scale(nt_u64 z, float f, int round_up) {
  const nt_u32 bits = nt_as_u32(f);
  const nt_u32 e = bits >> 23;
  const nt_u64 m = e ? (nt_u64)((bits & 0x7FFFFFu) | 0x800000u) : (nt_u64)(bits & 0x7FFFFFu);
  const nt_u32 shift = e ? 150u - e : 149u; /* >= 24 since f < 1 */
  const nt_u64 lo = z * m, hi = nt_verify_mulhi_u64(z, m);
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

/* A draft probability as the rules read it: NaN or negative counts as 0. */
NT_FN float nt_verify_draft_prob(float q) { return q > 0.0f ? q : 0.0f; }

/* Accept a candidate of mass m_x (0 outside the keep-set) with draft
 * probability q against the remaining mass r: floor(fl32(u * q) * r) < m_x,
 * i.e. u < p(x) / q(x); fl32(u * q) >= 1 rejects. */
NT_FN int nt_verify_accepts(float u, float q, nt_u64 m_x, nt_u64 r) {
  if (m_x == 0u) return 0;
  const float f = u * nt_verify_draft_prob(q);
  if (!(f < 1.0f)) return 0;
  return nt_verify_scale(r, f, 0) < m_x;
}

/* Residual mass max(m_i - floor(q_i * z), 0) of token i (z the keep-set's mass). */
NT_FN nt_u64 nt_verify_residual(nt_u64 m_i, float q_i, nt_u64 z) {
  const float q = nt_verify_draft_prob(q_i);
  if (m_i == 0u || !(q < 1.0f)) return 0u;
  const nt_u64 cut = nt_verify_scale(z, q, 0);
  return m_i > cut ? m_i - cut : 0u;
}

/* Gumbel-max key of a residual mass r > 0: log(float(r)) + G (float(r) >= 1 is
 * a normal float, so the portable log is defined on it). */
NT_FN float nt_verify_residual_key(nt_u64 r, float gumbel) {
  return nt_portable_log((float)r) + gumbel;
}

#endif /* NEXTTOK_CORE_VERIFY_H */
