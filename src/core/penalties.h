/* Penalties and logit bias (docs/SEMANTICS.md, "Penalties and logit bias"),
 * written once for every backend: the meaning of per-row parameter values, the
 * clamped range of a CSR row, and the arithmetic of one token, so that every
 * backend rounds the same way and writes the same bits. */
#ifndef NEXTTOK_CORE_PENALTIES_H
#define NEXTTOK_CORE_PENALTIES_H

#include "half.h"

/* A position in a CSR id list (offsets are i32 or i64, widened). */
#ifdef NT_OPENCL
typedef long nt_csr_pos;
#else
typedef int64_t nt_csr_pos;
#endif

/* The NaN written where the arithmetic produces one (inf - inf): every backend
 * writes these bits (f16 0x7E00, bf16 0x7FC0 after rounding), whatever NaN its
 * hardware would produce. */
#define NT_CANONICAL_NAN_BITS 0x7FC00000u

NT_FN int nt_f32_is_nan(float x) { return (nt_as_u32(x) & 0x7FFFFFFFu) > 0x7F800000u; }
NT_FN int nt_f32_is_finite(float x) { return (nt_as_u32(x) & 0x7F800000u) != 0x7F800000u; }

/* Per-row values (device data, never checked): a repetition penalty that is not
 * finite and > 0 acts as 1 (off); a presence or frequency penalty that is not
 * finite acts as 0 (off). Scalars are checked at the call instead. */
NT_FN float nt_resolve_repetition(float r) { return (r > 0.0f && nt_f32_is_finite(r)) ? r : 1.0f; }
NT_FN float nt_resolve_additive_penalty(float v) { return nt_f32_is_finite(v) ? v : 0.0f; }

/* Row b of a CSR list reads ids[lo, hi): lo = offsets[b] clamped to [0, n],
 * hi = offsets[b+1] clamped to [lo, n] (a decreasing pair is an empty row). */
NT_FN nt_csr_pos nt_csr_clamp(nt_csr_pos v, nt_csr_pos lo, nt_csr_pos n) {
  return v < lo ? lo : (v > n ? n : v);
}

/* y rounded to the logits' dtype (nt_dtype: 0 f32, 1 f16, 2 bf16), as fp32; a NaN
 * becomes the canonical NaN first. Applied after every arithmetic step. */
NT_FN float nt_round_logit(float y, int dtype) {
  if (nt_f32_is_nan(y)) y = nt_as_f32(NT_CANONICAL_NAN_BITS);
  if (dtype == 1) return nt_f16_to_f32(nt_f32_to_f16(y));
  if (dtype == 2) return nt_bf16_to_f32(nt_f32_to_bf16(y));
  return y;
}

/* One token's penalties (vLLM's apply_penalties), x the widened logit of a
 * token in the prompt or the output: repetition r once, then frequency f times
 * its output count, then presence p if it occurs in the output; each step in
 * fp32 and rounded to the dtype, and skipped when its parameter is neutral
 * (r == 1, f == 0, p == 0). A NaN logit is returned as is (the caller keeps
 * its bits). */
NT_FN float nt_penalize_logit(float x, nt_u32 count_out, float r, float f, float p, int dtype) {
  if (nt_f32_is_nan(x)) return x;
  if (r != 1.0f) x = nt_round_logit(x > 0.0f ? x / r : x * r, dtype);
  if (count_out != 0u) {
    if (f != 0.0f) x = nt_round_logit(x - f * (float)count_out, dtype);
    if (p != 0.0f) x = nt_round_logit(x - p, dtype);
  }
  return x;
}

/* One logit-bias entry: x + value in fp32, rounded to the dtype. Entries of one
 * token apply one after the other in entry order. A NaN logit is returned as is. */
NT_FN float nt_bias_logit(float x, float value, int dtype) {
  if (nt_f32_is_nan(x)) return x;
  return nt_round_logit(x + value, dtype);
}

/* Output counts live in 31 bits of a table word (bit 31: in the prompt). */
#define NT_PENALTY_IN_PROMPT 0x80000000u
#define NT_PENALTY_COUNT_MASK 0x7FFFFFFFu

/* Slot of key (an id + 1) in an open-addressing table of cap slots, any cap >= 1:
 * a murmur3 finalizer scaled to [0, cap) by a high multiply. */
NT_FN nt_u32 nt_table_home(nt_u32 key, nt_u32 cap) {
  nt_u32 h = key;
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return nt_mulhi_u32(h, cap);
}

#endif /* NEXTTOK_CORE_PENALTIES_H */
