// Philox4x32-10 against the published known-answer vectors (Random123's kat_vectors),
// the token -> counter layout of SEMANTICS.md, and the word -> uniform mapping.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "core/philox.h"

namespace {

struct Kat {
  uint32_t ctr[4], key[2], out[4];
};

void expect_block(const Kat& k) {
  nt_philox_block b = nt_philox4x32_10(k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3], k.key[0], k.key[1]);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b.v[i], k.out[i]) << "word " << i;
}

TEST(Philox, KnownAnswerZero) {
  expect_block({{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});
}

TEST(Philox, KnownAnswerAllOnes) {
  const uint32_t f = 0xffffffffu;
  expect_block({{f, f, f, f}, {f, f}, {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}});
}

TEST(Philox, KnownAnswerPiDigits) {
  expect_block({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                {0xa4093822u, 0x299f31d0u},
                {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}});
}

// SEMANTICS.md: key = (seed lo, seed hi), counter = (i >> 2, row_tag, offset lo,
// offset hi), word i & 3. Written out here independently of nt_token_block.
TEST(Philox, TokenUniformLayout) {
  const uint64_t seeds[] = {0, 1, 0x123456789abcdef0ull, ~0ull};
  const uint64_t offsets[] = {0, 7, 0xfedcba9876543210ull};
  const uint32_t tags[] = {0, 3, 0xffffffffu};
  const uint32_t tokens[] = {0, 1, 2, 3, 4, 5, 1023, 128255, 0x7fffffffu};
  for (uint64_t seed : seeds)
    for (uint64_t off : offsets)
      for (uint32_t tag : tags)
        for (uint32_t tok : tokens) {
          nt_philox_block b = nt_philox4x32_10(tok >> 2, tag, uint32_t(off), uint32_t(off >> 32),
                                               uint32_t(seed), uint32_t(seed >> 32));
          const float expected = nt_uniform_from_bits(b.v[tok & 3]);
          ASSERT_EQ(nt_token_uniform(seed, off, tag, tok), expected)
              << "seed=" << seed << " offset=" << off << " tag=" << tag << " token=" << tok;
        }
}

// ((x >> 9) + 0.5) * 2^-23: exact, strictly inside (0, 1), strictly increasing in x >> 9.
TEST(UniformFromBits, ExactAndInOpenInterval) {
  float previous = 0.0f;
  for (uint32_t hi = 0; hi < (1u << 23); ++hi) {
    const uint32_t low_bits = (hi * 2654435761u) & 0x1ffu;  // low 9 bits must not matter
    const uint32_t x = (hi << 9) | low_bits;
    const float u = nt_uniform_from_bits(x);
    const double exact = (double(hi) + 0.5) / 8388608.0;
    if (double(u) != exact || !(u > previous) || !(u < 1.0f)) {
      FAIL() << "x=" << x << " u=" << u << " exact=" << exact << " previous=" << previous;
    }
    previous = u;
  }
  EXPECT_EQ(nt_uniform_from_bits(0u), 0.5f / 8388608.0f);
  EXPECT_EQ(nt_uniform_from_bits(0xffffffffu), 1.0f - 0.5f / 8388608.0f);
}

}  // namespace
