// nt_portable_log: error within 1 ulp of the true log (double log rounded only once
// in the comparison), monotone, and Gumbel noise finite over every uniform the
// sampler can produce.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "core/portable_log.h"
#include "core/sampling.h"

namespace {

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Error of got in units of the last place of the exact result y.
double ulp_error(float got, double y) {
  if (y == 0.0) return got == 0.0f ? 0.0 : INFINITY;
  int e;
  std::frexp(y, &e);  // |y| in [2^(e-1), 2^e): one fp32 ulp there is 2^(e-24)
  return std::fabs(double(got) - y) / std::ldexp(1.0, e - 24);
}

struct Sweep {
  double max_ulp = 0;
  uint32_t worst_bits = 0;
  uint64_t monotonicity_violations = 0;
  uint32_t first_violation = 0;
};

// Every `step`-th float with bits in [lo, hi], in increasing order.
Sweep sweep(uint32_t lo, uint32_t hi, uint32_t step) {
  Sweep s;
  float previous = -INFINITY;
  for (uint64_t b = lo; b <= hi; b += step) {
    const float x = from_bits(uint32_t(b));
    const float r = nt_portable_log(x);
    const double err = ulp_error(r, std::log(double(x)));
    if (!(err <= s.max_ulp)) {  // also catches NaN
      s.max_ulp = std::isnan(err) ? INFINITY : err;
      s.worst_bits = uint32_t(b);
    }
    if (r < previous) {
      if (s.monotonicity_violations++ == 0) s.first_violation = uint32_t(b);
    }
    previous = r;
  }
  return s;
}

void expect_sweep(const Sweep& s) {
  EXPECT_LE(s.max_ulp, 1.0) << "worst input bits 0x" << std::hex << s.worst_bits << " (x="
                            << from_bits(s.worst_bits) << ")";
  EXPECT_EQ(s.monotonicity_violations, 0u)
      << "first decrease at bits 0x" << std::hex << s.first_violation;
}

// Every 16th normal float in (0, 1): about 66 million inputs.
TEST(PortableLog, DenseGridBelowOne) { expect_sweep(sweep(0x00800000u, 0x3f7fffffu, 16)); }

// Every float in [0.5, 2): both sides of 1 and the sqrt(2) mantissa split.
TEST(PortableLog, EveryFloatNearOne) { expect_sweep(sweep(0x3f000000u, 0x3fffffffu, 1)); }

// Every 257th normal float above 1, up to FLT_MAX.
TEST(PortableLog, GridAboveOne) { expect_sweep(sweep(0x3f800000u, 0x7f7fffffu, 257)); }

TEST(PortableLog, RandomNormalFloats) {
  const uint64_t seed = 0x51ab1e;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t bits = 0x00800000u + uint32_t(rng() % (0x7f800000u - 0x00800000u));
    const float x = from_bits(bits);
    const double err = ulp_error(nt_portable_log(x), std::log(double(x)));
    ASSERT_LE(err, 1.0) << "seed=" << seed << " x=" << x << " bits=0x" << std::hex << bits;
  }
}

TEST(PortableLog, ExactPoints) {
  EXPECT_EQ(nt_portable_log(1.0f), 0.0f);
  for (int e = -126; e <= 127; ++e) {
    const float x = std::ldexp(1.0f, e);
    EXPECT_LE(ulp_error(nt_portable_log(x), e * std::log(2.0)), 1.0) << "x=2^" << e;
  }
}

// Every uniform nt_uniform_from_bits can return: ((j + 0.5) * 2^-23, j < 2^23). Both
// logs of the Gumbel transform must see positive normal arguments, so the noise is
// finite, it must not decrease as u grows, and it stays below NT_GUMBEL_MAX, the
// bound every backend's pruning relies on.
TEST(PortableLog, GumbelFiniteAndMonotoneOverAllUniforms) {
  float previous = -INFINITY;
  for (uint32_t j = 0; j < (1u << 23); ++j) {
    const float u = (float(j) + 0.5f) * 1.1920928955078125e-7f;
    const float g = nt_gumbel_from_uniform(u);
    if (!std::isfinite(g) || g < previous) FAIL() << "u=" << u << " G=" << g << " prev=" << previous;
    previous = g;
  }
  EXPECT_LT(previous, NT_GUMBEL_MAX);
}

}  // namespace
