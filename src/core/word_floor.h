/* Gumbel-max pruning shared by the CPU and CUDA scans; it never changes a
 * result, only which tokens pay for the two logs. A token scoring at most s_top
 * reaches a best value `best` only if G >= best - s_top, and G grows with the
 * token's Philox word, so every word below a floor rules the token out: one
 * integer compare instead of the logs. Floors are tabulated for g = best - s_top
 * on a 1/8 grid; lookups lower g by a margin far above every error on the way
 * (the portable log's, < 1e-5; the rounding of s + G; this float arithmetic, a
 * few ulps of |best| + |s_top|), so no token that could win or tie is skipped.
 * Host and CUDA only (the table needs a double exp; OpenCL does not prune). */
#ifndef NEXTTOK_CORE_WORD_FLOOR_H
#define NEXTTOK_CORE_WORD_FLOOR_H

#include "portable.h"

/* static: every translation unit keeps its own copy, so the AVX2 sampler's
 * (built with -mavx2) is never the one another unit links to. */
#define NT_WORD_FLOOR_FN static NT_FN

#define NT_WORD_FLOOR_LOW (-4.0f)
#define NT_WORD_FLOOR_STEPS 168 /* up to g = 16.875, above every Gumbel value (16.64) */

/* Entry k: the least value of (w >> 9) whose uniform may reach
 * U = exp(-exp(-(low + k / 8))), lowered by one more word; every word with
 * (w >> 9) below it has a uniform under U, so G < low + k / 8. */
NT_WORD_FLOOR_FN nt_i32 nt_word_floor_entry(int k) {
  const double u = std::exp(-std::exp(-((double)NT_WORD_FLOOR_LOW + (double)k / 8.0)));
  const double m = std::ceil(u * 8388608.0 - 0.5) - 1.0;
  return m > 0.0 ? (nt_i32)m : 0;
}

/* The table entry for a token scoring at most s_top against `best`, or -1 when
 * nothing can be ruled out (best = -inf, s_top = +inf, NaN, g below the table). */
NT_WORD_FLOOR_FN int nt_word_floor_index(float best, float s_top) {
  const float mag = (best < 0.0f ? -best : best) + (s_top < 0.0f ? -s_top : s_top);
  const float g = (best - s_top) - (1e-3f + 1e-6f * mag);
  if (!(g >= NT_WORD_FLOOR_LOW)) return -1;
  const float k = (g - NT_WORD_FLOOR_LOW) * 8.0f;
  return k >= (float)(NT_WORD_FLOOR_STEPS - 1) ? NT_WORD_FLOOR_STEPS - 1 : (int)k;
}

#endif /* NEXTTOK_CORE_WORD_FLOOR_H */
