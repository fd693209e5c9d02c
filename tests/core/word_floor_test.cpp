// The Gumbel-max word floors (core/word_floor.h): every word below the floor
// for (best, s_top) must leave s + G strictly below best for every s <= s_top,
// computed exactly as the backends compute it (fp32 add of the portable-log
// Gumbel value), or pruning could skip a winner or a tie.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "core/sampling.h"
#include "core/word_floor.h"

namespace {

// s + G for the largest word whose (w >> 9) is below `floor`: G grows with the
// word, so it is the worst case of every word the floor rules out.
float worst_skipped_value(float s_top, int32_t floor) {
  const uint32_t w = (uint32_t(floor - 1) << 9) | 0x1ffu;
  return s_top + nt_gumbel_from_uniform(nt_uniform_from_bits(w));
}

TEST(WordFloor, EntriesIncreaseAndStayInRange) {
  int32_t previous = 0;
  for (int k = 0; k < NT_WORD_FLOOR_STEPS; ++k) {
    const int32_t f = nt_word_floor_entry(k);
    ASSERT_GE(f, previous) << "k=" << k;
    ASSERT_LT(f, 1 << 23) << "k=" << k;
    previous = f;
  }
  // Pruning must bite where it matters: at g = 10 only ~1 word in 20,000 passes.
  EXPECT_GT(nt_word_floor_entry(14 * 8), (1 << 23) - (1 << 23) / 20000);
}

TEST(WordFloor, NothingRuledOutWithoutAFiniteBound) {
  EXPECT_EQ(nt_word_floor_index(-INFINITY, 3.0f), -1);
  EXPECT_EQ(nt_word_floor_index(5.0f, INFINITY), -1);
  EXPECT_EQ(nt_word_floor_index(NAN, 0.0f), -1);
  EXPECT_EQ(nt_word_floor_index(0.0f, NAN), -1);
  EXPECT_EQ(nt_word_floor_index(INFINITY, 1.0f), -1);
  EXPECT_EQ(nt_word_floor_index(1.0f, 1.0f + 4.0f), -1);  // g below the table
}

// Every table entry at the g it is looked up for, over score magnitudes from
// tiny to 1e30: the worst skipped word never reaches the bound.
TEST(WordFloor, SkippedWordsNeverReachTheBoundOnTheGrid) {
  const float scales[] = {0.0f, 1e-3f, 1.0f, 37.5f, 1e3f, 1e5f, 1e7f, 3e9f, 1e30f};
  int checked = 0;
  for (float base : scales)
    for (int sign = -1; sign <= 1; sign += 2)
      for (int k = 0; k <= NT_WORD_FLOOR_STEPS + 8; ++k) {
        const float s_top = float(sign) * base;
        const float best = s_top + (NT_WORD_FLOOR_LOW + float(k) / 8.0f);
        const int idx = nt_word_floor_index(best, s_top);
        if (idx < 0) continue;
        const int32_t floor = nt_word_floor_entry(idx);
        if (floor == 0) continue;
        ++checked;
        ASSERT_LT(worst_skipped_value(s_top, floor), best)
            << "s_top=" << s_top << " best=" << best << " index=" << idx;
      }
  EXPECT_GT(checked, 500);
}

// Random pairs, including bounds just above a table step (where the lookup
// rounds down) and scores whose sum with G rounds.
TEST(WordFloor, SkippedWordsNeverReachTheBoundOnRandomPairs) {
  std::mt19937 rng(20261201u);
  std::uniform_real_distribution<float> gap(-5.0f, 18.0f);
  std::uniform_int_distribution<int> exponent(-20, 40);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  int checked = 0;
  for (int i = 0; i < 400000; ++i) {
    const float s_top = std::ldexp(mant(rng), exponent(rng));
    float best = s_top + gap(rng);
    if (i % 3 == 0) best = std::nextafter(best, INFINITY);
    const int idx = nt_word_floor_index(best, s_top);
    if (idx < 0) continue;
    const int32_t floor = nt_word_floor_entry(idx);
    if (floor == 0) continue;
    ++checked;
    ASSERT_LT(worst_skipped_value(s_top, floor), best) << "s_top=" << s_top << " best=" << best;
  }
  EXPECT_GT(checked, 100000);
}

}  // namespace
