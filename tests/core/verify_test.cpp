// core/verify.h: the exact integer pieces of speculative verification against
// wide-arithmetic references (128-bit products, long double scalings), and the
// layout of the verification counters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "core/verify.h"

namespace {

float random_fraction(std::mt19937_64& rng) {
  // Uniform bits of [0, 1): every exponent, subnormals and 0 included.
  for (;;) {
    const uint32_t bits = uint32_t(rng()) & 0x3FFFFFFFu;  // sign 0, exponent < 128
    float f;
    std::memcpy(&f, &bits, 4);
    if (f < 1.0f) return f;
  }
}

TEST(VerifyCore, ScaleIsTheExactFloorOrCeiling) {
  std::mt19937_64 rng(7);
  for (int n = 0; n < 200000; ++n) {
    const uint64_t z = rng() >> (2 + rng() % 60);  // below 2^62, every magnitude
    const float f = random_fraction(rng);
    // f = m * 2^(e - 150) exactly; the product as a 128-bit integer over 2^shift.
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    const uint32_t e = bits >> 23;
    const uint64_t m = e ? ((bits & 0x7FFFFFu) | 0x800000u) : (bits & 0x7FFFFFu);
    const int shift = e ? 150 - int(e) : 149;
    const unsigned __int128 prod = (unsigned __int128)z * m;
    const unsigned __int128 floor_v = shift >= 128 ? 0 : prod >> shift;
    const bool exact = shift >= 128 ? prod == 0 : (prod & ((((unsigned __int128)1) << shift) - 1)) == 0;
    ASSERT_EQ(nt_scale_u64(z, f, 0), uint64_t(floor_v)) << "z=" << z << " f=" << f;
    ASSERT_EQ(nt_scale_u64(z, f, 1), uint64_t(floor_v) + (exact ? 0u : 1u)) << "z=" << z << " f=" << f;
  }
}

TEST(VerifyCore, FixedMassRoundsToNearestEvenAndKeepsPositiveMass) {
  std::mt19937_64 rng(8);
  for (int bits = 24; bits <= 40; bits += 4) {
    for (int n = 0; n < 100000; ++n) {
      const float p = n == 0 ? 1.0f : random_fraction(rng);
      const long double scaled = std::ldexp((long double)p, bits);  // exact
      uint64_t want = uint64_t(std::nearbyintl(scaled));               // ties to even
      if (p > 0 && want == 0) want = 1;
      ASSERT_EQ(nt_fixed_mass(p, bits), want) << "p=" << p << " bits=" << bits;
    }
  }
  EXPECT_EQ(nt_fixed_mass(0.0f, 40), 0u);
  EXPECT_EQ(nt_fixed_mass(-0.5f, 40), 0u);
  EXPECT_EQ(nt_fixed_mass(std::nanf(""), 40), 0u);
}

TEST(VerifyCore, MassBitsKeepVocabularySumsBelow2To62) {
  for (int32_t v : {1, 2, 3, 1000, 32000, 128256, 248320, INT32_MAX}) {
    const int bits = nt_mass_bits(v);
    EXPECT_GE(bits, 24);
    EXPECT_LE(bits, 40);
    EXPECT_LT((long double)v * std::ldexp(1.0L, bits), std::ldexp(1.0L, 62)) << v;
  }
}

TEST(VerifyCore, AcceptanceIsUBelowPOverQ) {
  // z = 2^40, m_x = z / 4: p(x) = 1/4. u * q < 1/4 accepts.
  const uint64_t z = uint64_t(1) << 40, m = z / 4;
  EXPECT_TRUE(nt_verify_accepts(0.2499f, 1.0f, m, z));
  EXPECT_FALSE(nt_verify_accepts(0.25f, 1.0f, m, z));
  EXPECT_TRUE(nt_verify_accepts(0.49f, 0.5f, m, z));   // p / q = 1/2
  EXPECT_FALSE(nt_verify_accepts(0.51f, 0.5f, m, z));
  EXPECT_TRUE(nt_verify_accepts(0.99f, 0.0f, m, z));   // q = 0: every kept token
  EXPECT_TRUE(nt_verify_accepts(0.99f, std::nanf(""), m, z));
  EXPECT_FALSE(nt_verify_accepts(1e-7f, 1.0f, 0, z));  // outside the keep-set
  EXPECT_FALSE(nt_verify_accepts(0.5f, INFINITY, m, z));
  // Residual: m - floor(q z), positive or 0.
  EXPECT_EQ(nt_verify_residual(m, 0.125f, z), m - z / 8);
  EXPECT_EQ(nt_verify_residual(m, 0.5f, z), 0u);
  EXPECT_EQ(nt_verify_residual(m, -1.0f, z), m);
  EXPECT_EQ(nt_verify_residual(m, 1.0f, z), 0u);
}

TEST(VerifyCore, CountersNeverMeetSampleStreams) {
  // Word 1: top bit, request (scalar seeds only), position.
  EXPECT_EQ(nt_verify_tag(0, 5, 3), 0x80000000u | (5u << 12) | 3u);
  EXPECT_EQ(nt_verify_tag(1, 5, 3), 0x80000000u | 3u);
  EXPECT_EQ(nt_verify_tag(0, NT_VERIFY_MAX_REQUESTS - 1, NT_VERIFY_MAX_POSITIONS - 1), 0xFFFFFFFFu);
  // The acceptance uniform of candidate k: word k & 3 of block 0xFFFFFFFF - k / 4.
  const uint64_t seed = 0x123456789ABCDEFull, offset = 77;
  for (uint32_t k = 0; k < 12; ++k) {
    const nt_philox_block b =
        nt_philox4x32_10(0xFFFFFFFFu - (k >> 2), nt_verify_tag(1, 0, 2), uint32_t(offset), 0,
                         uint32_t(seed), uint32_t(seed >> 32));
    EXPECT_EQ(nt_verify_accept_uniform(seed, offset, nt_verify_tag(1, 0, 2), k),
              nt_uniform_from_bits(b.v[k & 3]));
  }
}

}  // namespace
