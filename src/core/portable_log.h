/* The project's own natural logarithm for positive normal floats.
 *
 * Gumbel-max compares s_i + G_i across tokens, so G_i = -log(-log(u_i)) must be
 * bit-identical on every backend; library logs (glibc, CUDA's logf, an OpenCL
 * driver's log) differ in the last ulp. This one uses only exact operations
 * (bit manipulation, Sterbenz subtraction) and fma-rounded arithmetic in a fixed
 * order, so every IEEE fp32 implementation with a true fma returns the same bits.
 *
 * Method: x = 2^e * m with m in [sqrt(1/2), sqrt(2)); f = m - 1 is exact;
 * log(1+f) = f - f^2/2 + f^3 * P(f), with P a degree-8 polynomial fitted by the
 * project (weighted least squares, Lawson iterations) on that interval; then
 * e*ln2 is added in two parts (hi part exact in fp32). Max error about 1 ulp. */
#ifndef NEXTTOK_CORE_PORTABLE_LOG_H
#define NEXTTOK_CORE_PORTABLE_LOG_H

#include "portable.h"

NT_FN float nt_log_poly(float f) {
  float p = 6.804056466e-02f;
  p = nt_fmaf(p, f, -1.172831580e-01f);
  p = nt_fmaf(p, f, 1.189046502e-01f);
  p = nt_fmaf(p, f, -1.239611059e-01f);
  p = nt_fmaf(p, f, 1.421779245e-01f);
  p = nt_fmaf(p, f, -1.666853428e-01f);
  p = nt_fmaf(p, f, 2.000224590e-01f);
  p = nt_fmaf(p, f, -2.500000000e-01f);
  p = nt_fmaf(p, f, 3.333331048e-01f);
  return p;
}

/* Defined for positive normal x (the only inputs sampling produces). */
NT_FN float nt_portable_log(float x) {
  nt_u32 bits = nt_as_u32(x);
  nt_i32 e = (nt_i32)(bits >> 23) - 127;
  nt_u32 mbits = (bits & 0x007FFFFFu) | 0x3F800000u;
  if (mbits > 0x3FB504F3u) { /* m > sqrt(2): use m/2 and e+1 */
    mbits -= 0x00800000u;
    e += 1;
  }
  float f = nt_as_f32(mbits) - 1.0f;
  float z = f * f;
  /* tail = f^3 P(f) - z/2, then f + tail: the small terms first */
  float tail = nt_fmaf(z * f, nt_log_poly(f), -0.5f * z);
  float fe = (float)e;
  /* ln2 = 0.693359375 (8 significant bits, so fe*hi is exact) - 2.12194440e-4 */
  float r = nt_fmaf(fe, -2.121944400546905828e-4f, tail);
  r = r + f;
  return nt_fmaf(fe, 0.693359375f, r);
}

/* Standard Gumbel noise from a uniform in (0, 1): -log(-log(u)). For u from
 * nt_uniform_from_bits both logs see positive normal arguments. */
NT_FN float nt_gumbel_from_uniform(float u) {
  return -nt_portable_log(-nt_portable_log(u));
}

#endif /* NEXTTOK_CORE_PORTABLE_LOG_H */
