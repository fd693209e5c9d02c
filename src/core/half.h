/* Bit-exact conversions between fp32 and the 16-bit float formats, shared by
 * every backend that reads f16/bf16 from memory as raw 16-bit words. Widening
 * is exact; narrowing rounds to nearest even. */
#ifndef NEXTTOK_CORE_HALF_H
#define NEXTTOK_CORE_HALF_H

#include "portable.h"

/* Bits of -inf in each logits format. */
#define NT_F32_NEG_INF 0xFF800000u
#define NT_F16_NEG_INF 0xFC00u
#define NT_BF16_NEG_INF 0xFF80u

NT_FN float nt_bf16_to_f32(nt_u32 h) { return nt_as_f32((h & 0xFFFFu) << 16); }

NT_FN nt_u32 nt_f32_to_bf16(float x) {
  nt_u32 u = nt_as_u32(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return ((u >> 16) | 0x40u) & 0xFFFFu; /* quiet NaN */
  return ((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16) & 0xFFFFu;
}

NT_FN float nt_f16_to_f32(nt_u32 h) {
  nt_u32 sign = (h & 0x8000u) << 16;
  nt_u32 exp = (h >> 10) & 0x1Fu;
  nt_u32 man = h & 0x3FFu;
  if (exp == 0x1Fu) return nt_as_f32(sign | 0x7F800000u | (man << 13)); /* inf / NaN */
  if (exp != 0u) return nt_as_f32(sign | ((exp + 112u) << 23) | (man << 13));
  /* zero or subnormal: man * 2^-24, exact in fp32 */
  float v = (float)man * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

NT_FN nt_u32 nt_f32_to_f16(float x) {
  nt_u32 u = nt_as_u32(x);
  nt_u32 sign = (u >> 16) & 0x8000u;
  nt_u32 a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u;             /* NaN */
  if (a >= 0x477FF000u) return sign | 0x7C00u;            /* rounds to inf */
  if (a < 0x38800000u) {                                   /* f16 subnormal or zero */
    /* a value below 2^-14: round a * 2^24 to an integer, nearest even */
    float v = nt_as_f32(a) * 16777216.0f;                  /* exact scaling */
    nt_u32 i = (nt_u32)v;
    float frac = v - (float)i;
    if (frac > 0.5f || (frac == 0.5f && (i & 1u))) i += 1u;
    return sign | i;
  }
  nt_u32 r = a + 0xFFFu + ((a >> 13) & 1u) - 0x38000000u; /* rebias 127 -> 15, round */
  return sign | ((r >> 13) & 0x7FFFu);
}

#endif /* NEXTTOK_CORE_HALF_H */
