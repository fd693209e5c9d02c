/* Per-row meaning of the sampling parameters (docs/SEMANTICS.md), shared by every
 * backend. Parameters read from device arrays cannot be validated without a
 * host sync, so every value, however odd, gets a defined and safe meaning here. */
#ifndef NEXTTOK_CORE_SAMPLING_H
#define NEXTTOK_CORE_SAMPLING_H

#include "philox.h"
#include "portable_log.h"

typedef struct nt_row_params {
  int greedy;        /* argmax of the logits, lowest index on ties */
  float temperature; /* > 0 when !greedy */
  nt_i32 top_k;      /* in [2, V) when on; 0 = off */
  float top_p;       /* in [0, 1) when on; 1 = off; 0 = keep the top token */
  float min_p;       /* in (0, 1] when on; 0 = off */
} nt_row_params;

NT_FN nt_row_params nt_resolve_row_params(float temperature, nt_i32 top_k, float top_p,
                                          float min_p, nt_i32 vocab) {
  nt_row_params r;
  /* !(t > 0) is true for NaN too: NaN temperature means greedy */
  r.greedy = !(temperature > 0.0f) || top_k == 1 || vocab == 1;
  r.temperature = r.greedy ? 1.0f : temperature;
  r.top_k = (top_k > 0 && top_k < vocab) ? top_k : 0;
  r.top_p = (top_p < 1.0f) ? (top_p > 0.0f ? top_p : 0.0f) : 1.0f; /* NaN -> off */
  r.min_p = (min_p > 0.0f) ? (min_p < 1.0f ? min_p : 1.0f) : 0.0f;  /* NaN -> off */
  return r;
}

/* How a row is drawn: the argmax (greedy); Gumbel-max over every finite
 * score (plain: temperature only); or over a keep-set cut by top-k, top-p or
 * min-p, or by the explicit draw (filtered). */
#define NT_ROW_GREEDY 0
#define NT_ROW_PLAIN 1
#define NT_ROW_FILTERED 2

NT_FN int nt_row_class(nt_row_params p, int explicit_draw) {
  if (p.greedy) return NT_ROW_GREEDY;
  return (p.top_k == 0 && p.top_p >= 1.0f && p.min_p <= 0.0f && !explicit_draw) ? NT_ROW_PLAIN
                                                                                : NT_ROW_FILTERED;
}

/* Whether a row's top-p is measured on the whole row's mass: top-p on, and no
 * top-k or the joint mode (otherwise it is measured on the top-k's mass). */
NT_FN int nt_top_p_on_row_mass(nt_row_params p, int joint) {
  return p.top_p > 0.0f && p.top_p < 1.0f && (joint || p.top_k == 0);
}

/* s_i = logit_i / T with IEEE division (never a reciprocal multiply), NaN -> -inf. */
NT_FN float nt_scaled_score(float logit, float temperature) {
  float s = logit / temperature;
  return (s != s) ? -INFINITY : s;
}

#ifndef NT_OPENCL
/* nt_scaled_score for many logits of one row, by a multiply in fp64:
 * y = fl64(x * r) with r = nt_score_reciprocal(T) = fl64(1 / T), then
 * nt_score_from_product(y) = fl32(y) is x / T correctly rounded wherever
 * nt_score_product_exact(y); elsewhere (|y| in (0, 2^-125), quotients at the
 * subnormal floats) divide. Why: y = (x / T)(1 + e), |e| < 2^-51.9 (two
 * roundings in fp64, no fp64 underflow or overflow for float x and T), while a
 * quotient of floats is never a rounding boundary of fp32 in the normal range
 * (a midpoint has a 25-bit odd significand, which x = midpoint * T cannot
 * give) and lies at least 2^-48 of its binade from one (|x - b T| is a
 * multiple of min(ulp(x), ulp(b) ulp(T))): fl32 rounds y and x / T alike.
 * Checked against the division in tests/core/scaled_score_test.cpp. */
NT_FN double nt_score_reciprocal(float temperature) { return 1.0 / (double)temperature; }
NT_FN float nt_score_from_product(double y) {
  float s = (float)y;
  return (s != s) ? -INFINITY : s;
}
NT_FN int nt_score_product_exact(double y) { return !(fabs(y) < 0x1p-125) || y == 0.0; }
#endif

/* Philox row tag: the row index for one scalar seed, 0 for per-row seeds, so a
 * request's draws do not depend on its batch position. */
NT_FN nt_u32 nt_row_tag(int seeds_per_row, nt_u32 row) { return seeds_per_row ? 0u : row; }

/* Above every Gumbel value the 2^23 uniforms can give (the largest, at
 * u = 1 - 2^-24, is 16.6355): a token whose fl(s + NT_GUMBEL_MAX) is below the
 * best perturbed score so far cannot win, so its Philox block and logs are
 * skipped. Checked exhaustively by tests/core/portable_log_test.cpp. */
#define NT_GUMBEL_MAX 16.75f

/* Gumbel noise of token i of a row. */
NT_FN float nt_token_gumbel(nt_u64 seed, nt_u64 offset, nt_u32 row_tag, nt_u32 token) {
  return nt_gumbel_from_uniform(nt_token_uniform(seed, offset, row_tag, token));
}

/* Perturbed score compared by Gumbel-max (ties to the lower index). Rows holding
 * a +inf logit keep only those tokens and draw uniformly among them: their score
 * counts as 0. */
NT_FN float nt_perturbed_score(float s, float gumbel, int row_has_pos_inf) {
  return (row_has_pos_inf ? 0.0f : s) + gumbel;
}

#endif /* NEXTTOK_CORE_SAMPLING_H */
