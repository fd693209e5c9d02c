// nt_resolve_row_params: the meaning of every per-row parameter value in the
// table of docs/SEMANTICS.md, including the odd ones a device array may hold.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/sampling.h"

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

nt_row_params resolve(float t, int k = 0, float p = 1.0f, float m = 0.0f, int vocab = 1000) {
  return nt_resolve_row_params(t, k, p, m, vocab);
}

TEST(RowParams, Temperature) {
  EXPECT_FALSE(resolve(0.7f).greedy);
  EXPECT_EQ(resolve(0.7f).temperature, 0.7f);
  EXPECT_FALSE(resolve(1e-30f).greedy);
  EXPECT_TRUE(resolve(0.0f).greedy);
  EXPECT_TRUE(resolve(-0.0f).greedy);
  EXPECT_TRUE(resolve(-1.0f).greedy);
  EXPECT_TRUE(resolve(kNaN).greedy);
  EXPECT_TRUE(resolve(-kInf).greedy);
  // A greedy row carries a harmless positive temperature.
  EXPECT_GT(resolve(kNaN).temperature, 0.0f);
}

TEST(RowParams, TopK) {
  EXPECT_TRUE(resolve(1.0f, 1).greedy);
  EXPECT_EQ(resolve(1.0f, 2).top_k, 2);
  EXPECT_EQ(resolve(1.0f, 999).top_k, 999);
  EXPECT_EQ(resolve(1.0f, 1000).top_k, 0);  // >= V: off
  EXPECT_EQ(resolve(1.0f, 5000).top_k, 0);
  EXPECT_EQ(resolve(1.0f, 0).top_k, 0);
  EXPECT_EQ(resolve(1.0f, -1).top_k, 0);
  EXPECT_EQ(resolve(1.0f, -123456).top_k, 0);
  EXPECT_FALSE(resolve(1.0f, -1).greedy);
  EXPECT_FALSE(resolve(1.0f, 0).greedy);
}

TEST(RowParams, TopP) {
  EXPECT_EQ(resolve(1.0f, 0, 0.9f).top_p, 0.9f);
  EXPECT_EQ(resolve(1.0f, 0, 1.0f).top_p, 1.0f);   // off
  EXPECT_EQ(resolve(1.0f, 0, 1.5f).top_p, 1.0f);   // >= 1: off
  EXPECT_EQ(resolve(1.0f, 0, kInf).top_p, 1.0f);
  EXPECT_EQ(resolve(1.0f, 0, kNaN).top_p, 1.0f);   // NaN: off
  EXPECT_EQ(resolve(1.0f, 0, 0.0f).top_p, 0.0f);   // keep the top token
  EXPECT_EQ(resolve(1.0f, 0, -0.5f).top_p, 0.0f);
  EXPECT_EQ(resolve(1.0f, 0, -kInf).top_p, 0.0f);
}

TEST(RowParams, MinP) {
  EXPECT_EQ(resolve(1.0f, 0, 1.0f, 0.05f).min_p, 0.05f);
  EXPECT_EQ(resolve(1.0f, 0, 1.0f, 0.0f).min_p, 0.0f);
  EXPECT_EQ(resolve(1.0f, 0, 1.0f, -0.3f).min_p, 0.0f);
  EXPECT_EQ(resolve(1.0f, 0, 1.0f, kNaN).min_p, 0.0f);
  EXPECT_EQ(resolve(1.0f, 0, 1.0f, 1.0f).min_p, 1.0f);
  EXPECT_EQ(resolve(1.0f, 0, 1.0f, 7.0f).min_p, 1.0f);  // > 1 acts as 1
  EXPECT_EQ(resolve(1.0f, 0, 1.0f, kInf).min_p, 1.0f);
}

TEST(RowParams, SingleTokenVocabularyIsGreedy) {
  EXPECT_TRUE(resolve(1.0f, 0, 1.0f, 0.0f, 1).greedy);
}

TEST(RowParams, ScaledScoreAndRowTag) {
  EXPECT_EQ(nt_scaled_score(1.0f, 3.0f), 1.0f / 3.0f);  // IEEE division
  EXPECT_EQ(nt_scaled_score(kNaN, 0.5f), -kInf);
  EXPECT_EQ(nt_scaled_score(-kInf, 0.5f), -kInf);
  EXPECT_EQ(nt_scaled_score(kInf, 0.5f), kInf);
  EXPECT_EQ(nt_row_tag(0, 17u), 17u);
  EXPECT_EQ(nt_row_tag(1, 17u), 0u);
  EXPECT_EQ(nt_perturbed_score(3.0f, 0.25f, 0), 3.25f);
  EXPECT_EQ(nt_perturbed_score(kInf, 0.25f, 1), 0.25f);
}

}  // namespace
