// nt_score_from_product(fl64(x * nt_score_reciprocal(T))) is x / T correctly
// rounded (nt_scaled_score, bit for bit) wherever nt_score_product_exact says
// so, and it says so for every quotient from 2^-124 up, infinities and NaN
// included: random floats of every kind, and the logits whose quotient lies
// nearest a rounding boundary of fp32, where a wrong rounding would show.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/sampling.h"

namespace {

// Checks one (x, T); returns whether the product path applied.
bool check(float x, float t) {
  const double y = double(x) * nt_score_reciprocal(t);
  const float want = nt_scaled_score(x, t);
  if (!nt_score_product_exact(y)) {
    EXPECT_LT(std::fabs(double(x) / double(t)), 0x1p-124) << "x=" << x << " T=" << t;
    return false;
  }
  EXPECT_EQ(nt_as_u32(nt_score_from_product(y)), nt_as_u32(want))
      << std::hexfloat << "x=" << x << " T=" << t << " x/T=" << want;
  return true;
}

// Positive finite temperatures: common ones and random bits (subnormal to huge).
std::vector<float> temperatures(std::mt19937_64& rng, int n_random) {
  std::vector<float> t = {1.0f, 0.7f, 0.5f, 0.3f, 1.3f, 2.0f, 1e-3f, 1e-6f, 123.456f, 3.0f,
                          0x1p-149f, 0x1p-126f, 0x1.fffffep127f, 0.1f};
  for (int i = 0; i < n_random; ++i) t.push_back(nt_as_f32(1u + uint32_t(rng() % 0x7f7fffffu)));
  return t;
}

TEST(ScaledScore, RandomFloatsOfEveryKind) {
  const uint64_t seed = 0x5c01e;
  std::mt19937_64 rng(seed);
  int product = 0, total = 0;
  for (float t : temperatures(rng, 50)) {
    for (int i = 0; i < 100000; ++i) {
      // Every bit pattern: subnormals, +-0, +-inf and NaN among them.
      product += check(nt_as_f32(uint32_t(rng())), t);
      ++total;
    }
    for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0x1p-149f, -0x1p-149f,
                    0x1.fffffep127f, -0x1.fffffep127f, 1.0f, -1.0f})
      check(x, t);
  }
  EXPECT_GT(product, total / 2) << "seed=" << seed;
}

// Logits whose quotient is nearest a midpoint b between two floats (or the
// overflow threshold): x the floats around fl(b * T), for random b and T.
TEST(ScaledScore, QuotientsNearRoundingBoundaries) {
  const uint64_t seed = 0xb0da;
  std::mt19937_64 rng(seed);
  for (float t : temperatures(rng, 2000)) {
    for (int i = 0; i < 200; ++i) {
      // b = (2^24 + 2m + 1) * 2^(e - 24): a 25-bit odd significand in binade e.
      const int e = -120 + int(rng() % 247);
      const uint32_t odd = (1u << 24) + 2u * uint32_t(rng() % (1u << 23)) + 1u;
      const double b = std::ldexp(double(odd), e - 24);
      const float x0 = float(b * double(t));
      if (!std::isfinite(x0) || x0 == 0.0f) continue;
      float x = x0;
      for (int k = 0; k < 3; ++k) x = std::nextafter(x, -INFINITY);
      for (int k = 0; k < 7; ++k, x = std::nextafter(x, INFINITY)) {
        check(x, t);
        check(-x, t);
      }
    }
    // Around the overflow threshold (2^128 - 2^103) * T.
    const float big = float(0x1.ffffffp127 * double(t));
    if (std::isfinite(big)) {
      float x = big;
      for (int k = 0; k < 3; ++k) x = std::nextafter(x, -INFINITY);
      for (int k = 0; k < 7; ++k, x = std::nextafter(x, INFINITY)) check(x, t);
    }
  }
}

// Quotients exactly halfway between two subnormal floats, x = M U 2^(k - 150)
// over T = U 2^k (M, U odd): the one place where the product can round the
// other way, so nt_score_product_exact must send them to the division.
TEST(ScaledScore, SubnormalTiesTakeTheDivision) {
  const uint64_t seed = 0x7e5;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t m = 2u * uint32_t(rng() % 2048u) + 1u, u = 2u * uint32_t(rng() % 2048u) + 1u;
    const int k = 1 + int(rng() % 100);
    const float t = std::ldexp(float(u), k), x = std::ldexp(float(m * u), k - 150);
    ASSERT_EQ(double(x) / double(t), std::ldexp(double(m), -150));  // the tie itself
    for (float xi : {x, std::nextafter(x, 0.0f), std::nextafter(x, INFINITY)}) {
      check(xi, t);
      check(-xi, t);
    }
  }
}

}  // namespace
