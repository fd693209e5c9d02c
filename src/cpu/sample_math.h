// Scalar arithmetic of the CPU sampler that the AVX2 kernels reproduce lane for
// lane (cpu/sample_kernels_avx2.cpp), so both paths give the same bits.
// Probabilities p = exp(s - s_max) are the core's nt_portable_exp
// (core/portable_exp.h), the OpenCL backend's too.
#pragma once

#include <cstdint>

#include "core/ordering.h"
#include "core/portable_exp.h"
#include "core/sampling.h"

namespace nt::cpu::sampling {

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
