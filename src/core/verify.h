/* Speculative verification (docs/SEMANTICS.md, "Speculative verification"),
 * the pieces every backend shares: the Philox streams of a request's positions,
 * the fixed-point target masses, the acceptance test and the residual masses.
 * Everything here is integer arithmetic or single IEEE fp32 operations, so a
 * decision taken on one backend is taken on every other one. */
#ifndef NEXTTOK_CORE_VERIFY_H
#define NEXTTOK_CORE_VERIFY_H

#include "fixed_mass.h"
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

/* A draft probability as the rules read it: NaN or negative counts as 0. */
NT_FN float nt_verify_draft_prob(float q) { return q > 0.0f ? q : 0.0f; }

/* Accept a candidate of mass m_x (0 outside the keep-set) with draft
 * probability q against the remaining mass r: floor(fl32(u * q) * r) < m_x,
 * i.e. u < p(x) / q(x); fl32(u * q) >= 1 rejects. */
NT_FN int nt_verify_accepts(float u, float q, nt_u64 m_x, nt_u64 r) {
  if (m_x == 0u) return 0;
  const float f = u * nt_verify_draft_prob(q);
  if (!(f < 1.0f)) return 0;
  return nt_scale_u64(r, f, 0) < m_x;
}

/* Residual mass max(m_i - floor(q_i * z), 0) of token i (z the keep-set's mass). */
NT_FN nt_u64 nt_verify_residual(nt_u64 m_i, float q_i, nt_u64 z) {
  const float q = nt_verify_draft_prob(q_i);
  if (m_i == 0u || !(q < 1.0f)) return 0u;
  const nt_u64 cut = nt_scale_u64(z, q, 0);
  return m_i > cut ? m_i - cut : 0u;
}

/* Gumbel-max key of a residual mass r > 0: log(float(r)) + G (float(r) >= 1 is
 * a normal float, so the portable log is defined on it). */
NT_FN float nt_verify_residual_key(nt_u64 r, float gumbel) {
  return nt_portable_log((float)r) + gumbel;
}

#endif /* NEXTTOK_CORE_VERIFY_H */
