// The keep-set predicates of core/logprobs.h: a prefix given by its last
// member's (key, index) equals the composite threshold "composite >= cut" of
// the GPU backends for every cut, -inf scores are never members, cut 0 keeps
// every score (+inf ones included), and the +inf set is exactly the +inf scores.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/logprobs.h"

namespace {

const float kInf = std::numeric_limits<float>::infinity();

uint64_t composite(uint32_t key, uint32_t index) { return (uint64_t(key) << 32) | uint64_t(~index); }

nt_keep_set prefix(uint64_t cut, float temperature) {
  return nt_keep_set{NT_KEEP_PREFIX, temperature, uint32_t(cut >> 32), ~uint32_t(cut)};
}

TEST(KeepSet, PrefixEqualsCompositeThreshold) {
  std::mt19937_64 rng(0x1095);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(300);
  for (float& v : x) v = normal(rng);
  x[7] = x[8] = x[200];  // ties, broken by the index
  x[11] = -kInf;
  x[12] = std::numeric_limits<float>::quiet_NaN();
  x[13] = -0.0f;
  x[14] = 0.0f;
  for (float t : {1.0f, 0.7f, 1.9f}) {
    std::vector<uint64_t> cuts = {0ull, ~0ull};
    for (uint32_t i = 0; i < x.size(); ++i)
      cuts.push_back(composite(nt_order_key(nt_scaled_score(x[i], t)), i));
    for (int r = 0; r < 50; ++r) cuts.push_back(rng());
    for (uint64_t cut : cuts) {
      const nt_keep_set k = prefix(cut, t);
      for (uint32_t i = 0; i < x.size(); ++i) {
        const uint32_t key = nt_order_key(nt_scaled_score(x[i], t));
        const bool want = key != NT_KEY_NEG_INF && composite(key, i) >= cut;
        ASSERT_EQ(nt_keep_member(k, x[i], i) != 0, want) << "cut " << cut << " token " << i;
      }
    }
  }
}

TEST(KeepSet, EveryScoreAndPositiveInfinity) {
  const std::vector<float> x = {1.0f, kInf, -kInf, std::numeric_limits<float>::quiet_NaN(), kInf, -3.0f};
  const nt_keep_set all = prefix(0ull, 0.5f);
  const nt_keep_set pos_inf{NT_KEEP_POS_INF, 0.5f, 0u, 0u};
  const bool want_all[] = {true, true, false, false, true, true};
  const bool want_inf[] = {false, true, false, false, true, false};
  for (uint32_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(nt_keep_member(all, x[i], i) != 0, want_all[i]) << i;
    EXPECT_EQ(nt_keep_member(pos_inf, x[i], i) != 0, want_inf[i]) << i;
  }
  // T = +inf: a +inf logit scores NaN, hence -inf, and is never kept.
  EXPECT_FALSE(nt_keep_member(prefix(0ull, kInf), kInf, 1));
  EXPECT_TRUE(nt_keep_member(prefix(0ull, kInf), 5.0f, 0));
  // Sets that keep nothing by construction.
  EXPECT_FALSE(nt_keep_member(nt_keep_set{NT_KEEP_EMPTY, 1.0f, 0u, 0u}, 1.0f, 0));
  EXPECT_FALSE(nt_keep_member(nt_keep_set{NT_KEEP_ONE, 1.0f, 0u, 0u}, 1.0f, 0));
}

TEST(KeepSet, RankComparesKeys) {
  EXPECT_TRUE(nt_logprob_at_least(nt_order_key(2.0f), nt_order_key(2.0f)));
  EXPECT_TRUE(nt_logprob_at_least(nt_order_key(0.0f), nt_order_key(-0.0f)));  // -0 == +0
  EXPECT_FALSE(nt_logprob_at_least(nt_order_key(1.0f), nt_order_key(2.0f)));
  EXPECT_TRUE(nt_logprob_at_least(nt_order_key(kInf), nt_order_key(kInf)));
}

}  // namespace
