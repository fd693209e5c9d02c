// Scalar arithmetic of the CPU sampler that the AVX2 kernels reproduce lane for
// lane (cpu/sample_kernels_avx2.cpp), so both paths give the same bits.
#pragma once

#include <cstdint>

#include "core/ordering.h"
#include "core/sampling.h"

namespace nt::cpu::sampling {

// exp(d) for d <= 0 (p_i = exp(s_i - s_max)) from fma and exact scalings only:
// a library expf differs between the portable and the vector path in the last
// bit, which would let the keep-set depend on the CPU. Cody-Waite reduction
// d = n ln2 + r, |r| <= ln2/2, then a degree-7 Taylor polynomial (truncation
// below 6e-9 relative) and 2^n applied in two exact halves so that results
// down to the subnormal range round once. About 1 ulp.
constexpr float kExpLog2e = 1.44269502162933349609375f;
constexpr float kExpRoundMagic = 12582912.0f;  // 1.5 * 2^23: x + magic - magic = rint(x)
constexpr float kExpLn2Hi = 0.693145751953125f;
constexpr float kExpLn2Lo = 1.428606765330187045e-06f;
constexpr float kExpMinArg = -110.0f;  // exp(-110) < 2^-158: rounds to 0
constexpr float kExpC7 = 1.0f / 5040.0f, kExpC6 = 1.0f / 720.0f, kExpC5 = 1.0f / 120.0f,
                kExpC4 = 1.0f / 24.0f, kExpC3 = 1.0f / 6.0f, kExpC2 = 0.5f;

inline float pow2i(int32_t n) { return nt_as_f32(uint32_t(n + 127) << 23); }  // n >= -126

inline float row_exp(float d) {
  if (!(d >= kExpMinArg)) return 0.0f;
  const float n = (d * kExpLog2e + kExpRoundMagic) - kExpRoundMagic;
  float r = nt_fmaf(n, -kExpLn2Hi, d);
  r = nt_fmaf(n, -kExpLn2Lo, r);
  float q = nt_fmaf(kExpC7, r, kExpC6);
  q = nt_fmaf(q, r, kExpC5);
  q = nt_fmaf(q, r, kExpC4);
  q = nt_fmaf(q, r, kExpC3);
  q = nt_fmaf(q, r, kExpC2);
  q = nt_fmaf(q, r, 1.0f);
  q = nt_fmaf(q, r, 1.0f);
  const int32_t ni = int32_t(n);
  const int32_t n1 = ni >> 1, n2 = ni - n1;  // both >= -80: 2^n1, 2^n2 are normal
  return (q * pow2i(n1)) * pow2i(n2);
}

// An upper bound of nt_gumbel_from_uniform over all 2^23 uniforms Philox can
// give (the true maximum, at u = 1 - 2^-24, is 16.6355): a token whose
// fl(s + kGumbelMax) is below the best perturbed score so far cannot win, so
// its Philox block and logs are skipped. Checked exhaustively by the tests.
constexpr float kGumbelMax = 16.75f;

// Top-p without top-k bins the probabilities by d = s_max - s, 1/16 wide:
// only the bin where the mass crosses the target needs an exact selection.
// The bin is non-increasing in s, so every bin is a range of keys.
constexpr int kMassBins = 512;
constexpr float kMassBinScale = 16.0f;
constexpr float kMassBinLast = float(kMassBins - 1);

inline int mass_bin(float s, float s_max) {
  const float t = (s_max - s) * kMassBinScale;
  return int(t < kMassBinLast ? t : kMassBinLast);
}

// Ordering key of the scaled score of a logit.
inline uint32_t score_key(float logit, float temperature) {
  return nt_order_key(nt_scaled_score(logit, temperature));
}

constexpr uint32_t kKeyPosInf = 0xFF800000u;  // nt_order_key(+inf)
constexpr uint32_t kKeyFirstFinite = NT_KEY_NEG_INF + 1;

}  // namespace nt::cpu::sampling
