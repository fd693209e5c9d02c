/* The project's own exp for d <= 0: sampling's probabilities p_i = exp(s_i - s_max).
 *
 * Keep-sets (top-p, min-p) and explicit draws compare sums of p_i with cuts, so
 * the CPU's portable and AVX2 paths and the OpenCL backend must agree on every
 * bit of p_i; library exps (glibc, a vector math library, an OpenCL driver's)
 * differ in the last ulp. This one uses only fma-rounded arithmetic in a fixed
 * order and exact scalings by powers of two, so every IEEE fp32 implementation
 * with a true fma returns the same bits. The AVX2 kernel
 * (cpu/sample_kernels_avx2.cpp, exp8) repeats it lane for lane with these very
 * constants; tests/core/portable_exp_test.cpp checks that the two agree.
 *
 * Method: Cody-Waite reduction d = n ln2 + r with n = rint(d / ln2), |r| <= ln2/2
 * (ln2 in two parts, the hi part with 15 significant bits so that n * hi is
 * exact); a degree-7 Taylor polynomial (truncation below 6e-9 relative); then
 * 2^n applied as 2^n1 * 2^n2 in two exact halves, so that results down to the
 * subnormal range are rounded once. At most 0.94 ulp on [-110, 0] (every float
 * checked). */
#ifndef NEXTTOK_CORE_PORTABLE_EXP_H
#define NEXTTOK_CORE_PORTABLE_EXP_H

#include "portable.h"

#define NT_EXP_LOG2E 1.44269502162933349609375f
#define NT_EXP_ROUND_MAGIC 12582912.0f /* 1.5 * 2^23: (x + magic) - magic = rint(x), |x| < 2^22 */
#define NT_EXP_LN2_HI 0.693145751953125f
#define NT_EXP_LN2_LO 1.428606765330187045e-06f
#define NT_EXP_MIN_ARG (-110.0f) /* exp(-110) < 2^-158: rounds to 0 */
#define NT_EXP_C7 (1.0f / 5040.0f)
#define NT_EXP_C6 (1.0f / 720.0f)
#define NT_EXP_C5 (1.0f / 120.0f)
#define NT_EXP_C4 (1.0f / 24.0f)
#define NT_EXP_C3 (1.0f / 6.0f)
#define NT_EXP_C2 0.5f

/* 2^n as a float, for n in [-126, 127] (exact: only the exponent field). */
NT_FN float nt_exp_pow2i(nt_i32 n) { return nt_as_f32((nt_u32)(n + 127) << 23); }

/* exp(d) for d <= 0; 0 for d < NT_EXP_MIN_ARG, -inf and NaN. Those inputs go
 * through the arithmetic as 0 and are selected away at the end, so no NaN or
 * infinity is ever converted to an integer and there is no branch to keep
 * vector lanes (OpenCL's nt_exp4) apart. */
NT_FN float nt_portable_exp(float d) {
  const int in_range = d >= NT_EXP_MIN_ARG;
  const float x = in_range ? d : 0.0f;
  /* n = rint(x * log2(e)): the product is rounded, then the magic add rounds
   * to an integer (a*b+c must not be contracted, see portable.h). */
  const float n = (x * NT_EXP_LOG2E + NT_EXP_ROUND_MAGIC) - NT_EXP_ROUND_MAGIC;
  float r = nt_fmaf(n, -NT_EXP_LN2_HI, x);
  r = nt_fmaf(n, -NT_EXP_LN2_LO, r);
  float q = nt_fmaf(NT_EXP_C7, r, NT_EXP_C6);
  q = nt_fmaf(q, r, NT_EXP_C5);
  q = nt_fmaf(q, r, NT_EXP_C4);
  q = nt_fmaf(q, r, NT_EXP_C3);
  q = nt_fmaf(q, r, NT_EXP_C2);
  q = nt_fmaf(q, r, 1.0f);
  q = nt_fmaf(q, r, 1.0f);
  const nt_i32 ni = (nt_i32)n; /* n is an integer in [-159, 0] */
  const nt_i32 n1 = ni >> 1, n2 = ni - n1; /* both >= -80: 2^n1, 2^n2 are normal */
  const float p = (q * nt_exp_pow2i(n1)) * nt_exp_pow2i(n2);
  return in_range ? p : 0.0f;
}

#endif /* NEXTTOK_CORE_PORTABLE_EXP_H */
