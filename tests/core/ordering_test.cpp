// Ordering keys: monotone in the float order, NaN ranks as -inf, -0 equals +0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/ordering.h"

namespace {

bool is_nan_bits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

TEST(OrderKey, MonotoneOnRandomPairs) {
  const uint64_t seed = 0x0fde7;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 4000000; ++i) {
    const uint32_t ua = uint32_t(rng()), ub = uint32_t(rng());
    if (is_nan_bits(ua) || is_nan_bits(ub)) continue;
    const float a = nt_as_f32(ua), b = nt_as_f32(ub);
    const uint32_t ka = nt_order_key(a), kb = nt_order_key(b);
    ASSERT_EQ(a < b, ka < kb) << "seed=" << seed << " a=" << a << " b=" << b;
    ASSERT_EQ(a == b, ka == kb) << "seed=" << seed << " a=" << a << " b=" << b;
  }
}

// A sorted list of special and neighbouring values must map to sorted keys.
TEST(OrderKey, MonotoneOverSpecials) {
  const float inf = std::numeric_limits<float>::infinity();
  const float tiny = std::numeric_limits<float>::denorm_min();
  std::vector<float> v = {-inf, -std::numeric_limits<float>::max(), -1e30f, -2.0f, -1.0f,
                          -std::numeric_limits<float>::min(), -tiny, 0.0f, tiny,
                          std::numeric_limits<float>::min(), 1.0f, std::nextafter(1.0f, 2.0f),
                          2.0f, 1e30f, std::numeric_limits<float>::max(), inf};
  for (size_t i = 1; i < v.size(); ++i)
    EXPECT_LT(nt_order_key(v[i - 1]), nt_order_key(v[i])) << v[i - 1] << " vs " << v[i];
}

TEST(OrderKey, NanRanksAsNegativeInfinity) {
  const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu,
                           0xffffffffu, 0x7fa5a5a5u};
  const uint32_t neg_inf_key = nt_order_key(-std::numeric_limits<float>::infinity());
  EXPECT_EQ(neg_inf_key, uint32_t(NT_KEY_NEG_INF));
  for (uint32_t n : nans) EXPECT_EQ(nt_order_key(nt_as_f32(n)), neg_inf_key) << std::hex << n;
  // Below every real score.
  EXPECT_LT(neg_inf_key, nt_order_key(-std::numeric_limits<float>::max()));
}

TEST(OrderKey, NegativeZeroEqualsPositiveZero) {
  EXPECT_EQ(nt_order_key(-0.0f), nt_order_key(0.0f));
  EXPECT_LT(nt_order_key(-std::numeric_limits<float>::denorm_min()), nt_order_key(-0.0f));
  EXPECT_GT(nt_order_key(std::numeric_limits<float>::denorm_min()), nt_order_key(-0.0f));
}

TEST(OrderKey, KeyToFloatInverts) {
  for (uint64_t b = 0; b < (1ull << 32); b += 4099) {
    const uint32_t u = uint32_t(b);
    if (is_nan_bits(u)) continue;
    const float x = nt_as_f32(u);
    const uint32_t back = nt_as_u32(nt_key_to_float(nt_order_key(x)));
    ASSERT_EQ(back, u == 0x80000000u ? 0u : u) << std::hex << "bits=" << u;
  }
  EXPECT_EQ(nt_as_u32(nt_key_to_float(nt_order_key(-0.0f))), 0u);
}

TEST(OrderKey, RanksBefore) {
  const uint32_t k1 = nt_order_key(1.0f), k2 = nt_order_key(2.0f);
  EXPECT_TRUE(nt_ranks_before(k2, 5, k1, 0));   // higher score first
  EXPECT_FALSE(nt_ranks_before(k1, 0, k2, 5));
  EXPECT_TRUE(nt_ranks_before(k1, 3, k1, 4));   // ties: lower index first
  EXPECT_FALSE(nt_ranks_before(k1, 4, k1, 3));
  EXPECT_FALSE(nt_ranks_before(k1, 4, k1, 4));  // strict
  // -0 and +0 tie, so the index decides.
  EXPECT_TRUE(nt_ranks_before(nt_order_key(-0.0f), 1, nt_order_key(0.0f), 2));
  EXPECT_FALSE(nt_ranks_before(nt_order_key(0.0f), 2, nt_order_key(-0.0f), 1));
}

}  // namespace
