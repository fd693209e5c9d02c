// f16 / bf16 conversions: widening is exact, every 16-bit pattern round-trips, and
// narrowing rounds to nearest even (checked against rounding done in double).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "core/half.h"

namespace {

// The f16 value of bits h, decoded from the IEEE binary16 definition.
double f16_value(uint32_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v = exp == 0    ? std::ldexp(double(man), -24)
             : exp == 31 ? (man ? NAN : INFINITY)
                         : std::ldexp(1.0 + man / 1024.0, exp - 15);
  return sign ? -v : v;
}

// x rounded to nearest even at `mantissa_bits` fraction bits, with the format's
// smallest normal exponent `min_exp` and largest finite value `max_finite`.
double round_to_format(double x, int mantissa_bits, int min_exp, double max_finite) {
  if (x == 0) return x;
  int e = std::ilogb(x);
  if (e < min_exp) e = min_exp;
  const double quantum = std::ldexp(1.0, e - mantissa_bits);
  const double q = std::nearbyint(x / quantum) * quantum;  // default mode: half to even
  if (std::fabs(q) > max_finite) return std::copysign(INFINITY, x);
  return q == 0 ? std::copysign(0.0, x) : q;
}

double f16_round(double x) { return round_to_format(x, 10, -14, 65504.0); }
double bf16_round(double x) {
  return round_to_format(x, 7, -126, std::ldexp(255.0, 120));  // (2 - 2^-7) * 2^127
}

bool same_value(double a, float b) {
  if (std::isnan(a)) return std::isnan(b);
  return a == double(b) && std::signbit(a) == std::signbit(b);
}

TEST(Half, F16WideningExactAndRoundTrip) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = nt_f16_to_f32(h);
    const bool nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0;
    if (nan) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      const uint32_t back = nt_f32_to_f16(f);
      ASSERT_TRUE(((back >> 10) & 0x1f) == 0x1f && (back & 0x3ff) != 0) << std::hex << h;
      ASSERT_EQ(back & 0x8000u, h & 0x8000u) << std::hex << h;
      continue;
    }
    ASSERT_TRUE(same_value(f16_value(h), f)) << std::hex << "h=" << h << " got " << f;
    ASSERT_EQ(nt_f32_to_f16(f), h) << std::hex << "h=" << h;
  }
}

TEST(Half, Bf16RoundTrip) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = nt_bf16_to_f32(h);
    const uint32_t back = nt_f32_to_bf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(nt_bf16_to_f32(back))) << std::hex << h;
      ASSERT_EQ(back & 0x8000u, h & 0x8000u) << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

// Exact midpoints between neighbouring 16-bit values go to the even neighbour.
TEST(Half, TiesToEven) {
  for (uint32_t h = 0; h < 0x7bffu; ++h) {  // positive finite f16 below the largest
    const float mid = float((f16_value(h) + f16_value(h + 1)) / 2);  // exact in fp32
    const uint32_t want = (h & 1) ? h + 1 : h;
    ASSERT_EQ(nt_f32_to_f16(mid), want) << std::hex << "between " << h << " and " << h + 1;
    ASSERT_EQ(nt_f32_to_f16(-mid), want | 0x8000u) << std::hex << h;
  }
  for (uint32_t h = 0; h < 0x7f7fu; ++h) {  // positive finite bf16 below the largest
    const double lo = nt_bf16_to_f32(h), hi = nt_bf16_to_f32(h + 1);
    const float mid = float((lo + hi) / 2);
    const uint32_t want = (h & 1) ? h + 1 : h;
    ASSERT_EQ(nt_f32_to_bf16(mid), want) << std::hex << "between " << h << " and " << h + 1;
  }
  // Half-way above the largest finite value rounds (to even) to infinity.
  EXPECT_EQ(nt_f32_to_f16(65520.0f), 0x7c00u);
  EXPECT_EQ(nt_f32_to_f16(std::nextafter(65520.0f, 0.0f)), 0x7bffu);
}

TEST(Half, RandomNarrowingMatchesDoubleRounding) {
  const uint64_t seed = 0x4a1f;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 3000000; ++i) {
    const uint32_t bits = uint32_t(rng());
    const float x = nt_as_f32(bits);
    if (std::isnan(x)) continue;
    const float bf = nt_bf16_to_f32(nt_f32_to_bf16(x));
    ASSERT_TRUE(same_value(bf16_round(x), bf)) << "seed=" << seed << " x=" << x << " bits=0x"
                                               << std::hex << bits;
    // f16 range: exponents -30 .. 17 cover subnormals, normals and overflow.
    const int e = int(rng() % 48) - 30;
    const float y = std::ldexp(1.0f + float(rng() & 0x7fffff) / 8388608.0f, e) *
                    ((rng() & 1) ? -1.0f : 1.0f);
    const float h = nt_f16_to_f32(nt_f32_to_f16(y));
    ASSERT_TRUE(same_value(f16_round(y), h)) << "seed=" << seed << " y=" << y;
  }
}

TEST(Half, Specials) {
  EXPECT_EQ(nt_f32_to_f16(INFINITY), 0x7c00u);
  EXPECT_EQ(nt_f32_to_f16(-INFINITY), 0xfc00u);
  EXPECT_EQ(nt_f32_to_f16(-0.0f), 0x8000u);
  EXPECT_EQ(nt_f32_to_bf16(INFINITY), 0x7f80u);
  EXPECT_EQ(nt_f32_to_bf16(-0.0f), 0x8000u);
  // A NaN whose payload sits in the discarded bits must stay a NaN.
  EXPECT_TRUE(std::isnan(nt_bf16_to_f32(nt_f32_to_bf16(nt_as_f32(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(nt_f16_to_f32(nt_f32_to_f16(nt_as_f32(0x7f800001u)))));
  // The largest finite f32 lies above the largest bf16 plus half an ulp.
  EXPECT_EQ(nt_f32_to_bf16(3.4028235e38f), 0x7f80u);
  EXPECT_EQ(nt_f32_to_f16(3.4028235e38f), 0x7c00u);
}

}  // namespace
