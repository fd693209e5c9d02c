// The header-only C++ layer (nexttok.hpp) on CPU tensors: views, workspaces, and
// failures as nexttok::Error carrying the status and the message.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "harness/data.h"
#include "harness/device.h"
#include "nexttok/nexttok.hpp"

namespace {

using ntt::expect_invalid_argument;

TEST(CppApi, SampleGreedyAndError) {
  ntt::Rng rng(14000);
  std::vector<float> logits(3 * 257);
  for (auto& x : logits) x = float(rng.normal());
  logits[5] = logits[257 + 256] = logits[514 + 100] = 9.0f;
  logits[514 + 200] = 9.0f;  // a tie: the lower index wins
  std::vector<int64_t> tokens(3, -7);
  nexttok::SampleParams p;
  p.temperature.scalar = 0.0f;
  nexttok::sample(nexttok::matrix(logits.data(), 3, 257), nexttok::vector(tokens.data(), 3), p);
  EXPECT_EQ(tokens, (std::vector<int64_t>{5, 256, 100}));

  p.top_p.scalar = 1.5f;
  expect_invalid_argument(
      [&] {
        nexttok::sample(nexttok::matrix(logits.data(), 3, 257), nexttok::vector(tokens.data(), 3),
                        p);
      },
      "top_p");
}

// sample_logprobs through the C++ layer: a greedy row with known values (two
// logits, so the log-softmax is exact to check), the error as nexttok::Error.
TEST(CppApi, SampleLogprobsGreedyRow) {
  std::vector<float> logits = {0.0f, std::log(3.0f), -std::numeric_limits<float>::infinity()};
  std::vector<int64_t> tokens(1, -7);
  std::vector<int32_t> ids(3, -7), ranks(1, -7);
  std::vector<float> values(3, 1.0f);
  nexttok::SampleParams p;
  p.temperature.scalar = 0.0f;
  const nt_sample_args s =
      nexttok::sample_args(nexttok::matrix(logits.data(), 1, 3), nexttok::vector(tokens.data(), 1), p);
  nt_sample_logprobs_args a = nexttok::sample_logprobs_args(
      s, 2, NT_LOGPROBS_RAW, nexttok::matrix(ids.data(), 1, 3), nexttok::matrix(values.data(), 1, 3),
      nexttok::vector(ranks.data(), 1));
  nexttok::sample_logprobs(a);
  EXPECT_EQ(tokens[0], 1);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 1, 0}));
  EXPECT_NEAR(values[0], std::log(0.75), 1e-6);  // p = 3/4
  EXPECT_NEAR(values[2], std::log(0.25), 1e-6);
  EXPECT_EQ(ranks[0], 1);
  a.mode = NT_LOGPROBS_PROCESSED;
  nexttok::sample_logprobs(a);
  EXPECT_EQ(values, (std::vector<float>{0.0f, 0.0f, -std::numeric_limits<float>::infinity()}));

  a.num_logprobs = 21;
  expect_invalid_argument([&] { nexttok::sample_logprobs(a); }, "num_logprobs");
}

// The convenience overload allocates its workspace on the host: with device
// tensors it must refuse before the library sees a host pointer as device memory.
TEST(CppApi, HostWorkspaceOverloadRefusesDeviceTensors) {
  float fake_device_data[4] = {1, 2, 3, 4};
  int64_t fake_tokens[1] = {-7};
  const nexttok::Device gpu = nexttok::Device::cuda(0);
  expect_invalid_argument(
      [&] {
        nexttok::sample(nexttok::matrix(fake_device_data, 1, 4, -1, gpu),
                        nexttok::vector(fake_tokens, 1, gpu), nexttok::SampleParams{});
      },
      "workspace");
  EXPECT_EQ(fake_tokens[0], -7);
}

TEST(CppApi, MaskThenTopK) {
  std::vector<float> logits = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<uint8_t> allowed = {1, 0, 1, 0, 1, 0, 1, 0, 1, 0};
  std::vector<int32_t> mask(1, -1);
  nexttok::bitmask_from_allowed(nexttok::matrix(reinterpret_cast<bool*>(allowed.data()), 1, 10),
                                nexttok::matrix(mask.data(), 1, 1));
  EXPECT_EQ(mask[0], 0x155);
  nexttok::apply_token_bitmask(nexttok::matrix(logits.data(), 1, 10), nexttok::matrix(mask.data(), 1, 1));
  EXPECT_EQ(logits[1], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(logits[8], 9.0f);

  // An identity head over the masked logits: top-3 of them.
  std::vector<float> weight(10 * 10, 0.0f), hidden(10);
  for (int i = 0; i < 10; ++i) {
    weight[size_t(i * 10 + i)] = 1.0f;
    hidden[size_t(i)] = float(i % 4) + 0.5f;
  }
  std::vector<float> values(3);
  std::vector<int64_t> indices(3);
  nt_lm_head_dense_args a{};
  a.hidden = nexttok::matrix(hidden.data(), 1, 10);
  a.weight = nexttok::matrix(weight.data(), 10, 10);
  a.k = 3;
  a.values = nexttok::matrix(values.data(), 1, 3);
  a.indices = nexttok::matrix(indices.data(), 1, 3);
  nexttok::lm_head_topk_dense(a);
  EXPECT_EQ(indices, (std::vector<int64_t>{3, 7, 2}));  // 3.5, 3.5, 2.5: ties to the lower index
  EXPECT_EQ(values, (std::vector<float>{3.5f, 3.5f, 2.5f}));
}

// Hidden -> token through the C++ layer: an identity head with a bitmask and
// greedy sampling picks the largest allowed hidden value; a fully masked row
// gets -1; a bad parameter throws naming it.
TEST(CppApi, LmHeadSampleDenseGreedyWithMask) {
  std::vector<float> weight(40 * 40, 0.0f), hidden(2 * 40);
  for (int i = 0; i < 40; ++i) weight[size_t(i * 40 + i)] = 1.0f;
  for (int i = 0; i < 80; ++i) hidden[size_t(i)] = float((i * 7) % 40);
  std::vector<int32_t> mask = {int32_t(0x0000FFFF), 0x0, 0x0, 0x0};  // row 0: tokens 0..15; row 1: none
  std::vector<int64_t> tokens(2, -7);
  nexttok::SampleParams p;
  p.temperature.scalar = 0.0f;
  nt_lm_head_sample_dense_args a{};
  a.hidden = nexttok::matrix(hidden.data(), 2, 40);
  a.weight = nexttok::matrix(weight.data(), 40, 40);
  a.bitmask = nexttok::matrix(mask.data(), 2, 2);
  a.sampling = nexttok::lm_head_sampling(p);
  a.tokens = nexttok::vector(tokens.data(), 2);
  nexttok::lm_head_sample_dense(a);
  int64_t best = 0;  // the largest of hidden[0, 0..15], first index on ties
  for (int i = 1; i < 16; ++i)
    if (hidden[size_t(i)] > hidden[size_t(best)]) best = i;
  EXPECT_EQ(tokens, (std::vector<int64_t>{best, -1}));

  a.sampling.top_k.scalar = -5;
  expect_invalid_argument([&] { nexttok::lm_head_sample_dense(a); }, "top_k");
}

// verify_tree through the C++ layer, greedy: root 0 with children 1 and 2, node 3
// under node 2. The walk rejects node 1 (not the root row's argmax), accepts
// node 2 and node 3, then emits node 3's argmax; a bad tensor throws naming it.
TEST(CppApi, VerifyTreeGreedyWalk) {
  constexpr int64_t kNodes = 4, kVocab = 37;
  ntt::Rng rng(14100);
  std::vector<float> logits(size_t(kNodes * kVocab));
  for (auto& x : logits) x = float(rng.normal());
  const int64_t argmax[kNodes] = {7, 30, 9, 36};  // node 1's row is never reached
  for (int64_t d = 0; d < kNodes; ++d) logits[size_t(d * kVocab + argmax[d])] = 8.0f;
  std::vector<int64_t> candidates = {3, 5, 7, 9};
  std::vector<int64_t> next_token = {1, -1, 3, -1};
  std::vector<int64_t> next_sibling = {-1, 2, -1, -1};
  std::vector<int32_t> out_ids(5, -7), out_nodes(5, -7), num_emitted(1, -7);
  nexttok::SampleParams p;
  p.temperature.scalar = 0.0f;
  nt_verify_tree_args a = nexttok::verify_tree_args(
      nexttok::matrix(logits.data(), kNodes, kVocab), nexttok::matrix(candidates.data(), 1, kNodes),
      nexttok::matrix(next_token.data(), 1, kNodes),
      nexttok::matrix(next_sibling.data(), 1, kNodes),
      nexttok::matrix(out_ids.data(), 1, 5), nexttok::matrix(out_nodes.data(), 1, 5),
      nexttok::vector(num_emitted.data(), 1), p);
  EXPECT_GT(nexttok::verify_tree_workspace_size(a), 0u);
  nexttok::verify_tree(a);
  EXPECT_EQ(num_emitted[0], 3);
  EXPECT_EQ(out_ids, (std::vector<int32_t>{7, 9, 36, -1, -1}));
  EXPECT_EQ(out_nodes, (std::vector<int32_t>{2, 3, -1, -1, -1}));

  std::vector<int32_t> narrow(kNodes);
  a.candidates = nexttok::matrix(narrow.data(), 1, kNodes);
  expect_invalid_argument([&] { nexttok::verify_tree(a); }, "candidates");
}

}  // namespace
