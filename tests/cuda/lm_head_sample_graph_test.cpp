// nt_lm_head_sample_binary and _dense captured in a CUDA graph (the scoring
// kernels, the copy of the scores, the bitmask, the sampler and its logprobs
// pass) and replayed with new activations, seeds and offsets written into
// their device arrays: every replay equals an eager call bit for bit (tokens,
// scores, logprob ids, values, ranks), and the tokens follow the new inputs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/cuda_util.h"
#include "nexttok/nexttok.hpp"

namespace {

// Float bits of a half-precision value in [0.5, 1.5).
uint16_t half_in_range(std::mt19937_64& rng) { return uint16_t(0x3800 + rng() % 0x0800); }

TEST(CudaGraph, LmHeadSampleReplaysWithNewInputs) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  // rows = 2: the binary decode kernel; rows = 5: a pass kernel (and the dense head's MMAs).
  for (const int rows : {2, 5})
    for (const bool binary : {true, false}) {
      SCOPED_TRACE(std::string(binary ? "binary" : "dense") + " M=" + std::to_string(rows));
      const int vocab = 30011, hidden = 1024, group = 128, n = 5, words = (vocab + 31) / 32;
      std::mt19937_64 rng(20261205 + rows);
      const nexttok::Device dev = nexttok::Device::cuda(0);
      std::vector<void*> owned;
      auto keep = [&](auto* p) {
        owned.push_back(p);
        return p;
      };

      // The head: binary (signs, f16 scales) or dense bf16 (its bits, 1/32 scale).
      std::vector<int32_t> wq(size_t(vocab) * (hidden / 32));
      for (int32_t& w : wq) w = int32_t(rng());
      std::vector<uint16_t> wscale(size_t(vocab) * (hidden / group));
      for (uint16_t& s : wscale) s = half_in_range(rng);
      std::vector<uint16_t> weight(size_t(vocab) * hidden);
      std::normal_distribution<float> normal(0.f, 1.f);
      for (uint16_t& w : weight) {
        const float v = normal(rng) / 32.0f;
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        w = uint16_t(bits >> 16);
      }
      std::vector<int32_t> mask(size_t(rows) * words);
      for (int32_t& m : mask) m = int32_t(rng() | 1u);  // about half the tokens, never none
      const std::vector<float> temperature = {1.0f, 0.0f, 0.8f, 1.1f, 1.0f};
      const std::vector<int32_t> top_k = {50, 0, 0, 20, 0};
      const std::vector<float> top_p = {0.9f, 1.0f, 0.95f, 1.0f, 1.0f};

      int8_t* d_act = keep(device_alloc<int8_t>(size_t(rows) * hidden));
      uint16_t* d_hidden = keep(device_alloc<uint16_t>(size_t(rows) * hidden));
      float* d_act_scale = keep(device_copy(std::vector<float>(rows, 1.0f / 4096.0f)));
      int32_t* d_wq = keep(device_copy(wq));
      uint16_t* d_wscale = keep(device_copy(wscale));
      uint16_t* d_weight = keep(device_copy(weight));
      int32_t* d_mask = keep(device_copy(mask));
      float* d_t = keep(device_copy(std::vector<float>(temperature.begin(), temperature.begin() + rows)));
      int32_t* d_k = keep(device_copy(std::vector<int32_t>(top_k.begin(), top_k.begin() + rows)));
      float* d_p = keep(device_copy(std::vector<float>(top_p.begin(), top_p.begin() + rows)));
      uint64_t* d_seed = keep(device_copy(std::vector<uint64_t>(rows, 0)));
      uint64_t* d_offset = keep(device_copy(std::vector<uint64_t>(rows, 0)));
      int64_t* d_tokens = keep(device_alloc<int64_t>(rows));
      float* d_scores = keep(device_alloc<float>(size_t(rows) * vocab));
      int32_t* d_ids = keep(device_alloc<int32_t>(size_t(rows) * (n + 1)));
      float* d_values = keep(device_alloc<float>(size_t(rows) * (n + 1)));
      int32_t* d_ranks = keep(device_alloc<int32_t>(rows));
      for (void* p : owned) ASSERT_NE(p, nullptr);
      cudaStream_t stream;
      CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

      nexttok::SampleParams p;
      p.temperature.per_row = d_t;
      p.top_k.per_row = d_k;
      p.top_p.per_row = d_p;
      p.seed.per_row = d_seed;
      p.offset.per_row = d_offset;
      nt_lm_head_sample_binary_args b{};
      nt_lm_head_sample_dense_args a{};
      auto outputs = [&](auto& args) {
        args.bitmask = nexttok::matrix(d_mask, rows, words, -1, dev);
        args.sampling = nexttok::lm_head_sampling(p);
        args.tokens = nexttok::vector(d_tokens, rows, dev);
        args.num_logprobs = n;
        args.logprobs_mode = NT_LOGPROBS_PROCESSED;
        args.logprob_ids = nexttok::matrix(d_ids, rows, n + 1, -1, dev);
        args.logprobs = nexttok::matrix(d_values, rows, n + 1, -1, dev);
        args.ranks = nexttok::vector(d_ranks, rows, dev);
        args.scores = nexttok::matrix(d_scores, rows, vocab, -1, dev);
      };
      b.act_q = nexttok::matrix(d_act, rows, hidden, -1, dev);
      b.act_scale = nexttok::vector(d_act_scale, rows, dev);
      b.wq = nexttok::matrix(d_wq, vocab, hidden / 32, -1, dev);
      b.wscale = nexttok::matrix(d_wscale, NT_F16, vocab, hidden / group, -1, dev);
      b.group_size = group;
      outputs(b);
      a.hidden = nexttok::matrix(d_hidden, NT_BF16, rows, hidden, -1, dev);
      a.weight = nexttok::matrix(d_weight, NT_BF16, vocab, hidden, -1, dev);
      outputs(a);
      size_t bytes = 0;
      if (binary) ASSERT_EQ(nt_lm_head_sample_binary_workspace_size(&b, &bytes), NT_OK) << nt_last_error();
      else ASSERT_EQ(nt_lm_head_sample_dense_workspace_size(&a, &bytes), NT_OK) << nt_last_error();
      void* ws = nullptr;
      CUDA_OK(cudaMalloc(&ws, bytes));
      owned.push_back(ws);
      auto call = [&] {
        return binary ? nt_lm_head_sample_binary(&b, ws, bytes, stream)
                      : nt_lm_head_sample_dense(&a, ws, bytes, stream);
      };

      cudaGraph_t graph;
      CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      const nt_status captured = call();
      CUDA_OK(cudaStreamEndCapture(stream, &graph));
      ASSERT_EQ(captured, NT_OK) << nt_last_error();
      cudaGraphExec_t exec;
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

      auto poison_outputs = [&] {
        CUDA_OK(cudaMemsetAsync(d_tokens, 0x7F, size_t(rows) * 8, stream));
        CUDA_OK(cudaMemsetAsync(d_scores, 0x7F, size_t(rows) * vocab * 4, stream));
        CUDA_OK(cudaMemsetAsync(d_ids, 0x7F, size_t(rows) * (n + 1) * 4, stream));
        CUDA_OK(cudaMemsetAsync(d_values, 0x7F, size_t(rows) * (n + 1) * 4, stream));
        CUDA_OK(cudaMemsetAsync(d_ranks, 0x7F, size_t(rows) * 4, stream));
      };
      std::vector<std::vector<int64_t>> replayed;
      for (int step = 0; step < 4; ++step) {
        // New inputs in place: activations (or hidden rows), seeds, offsets.
        std::vector<int8_t> act(size_t(rows) * hidden);
        for (int8_t& q : act) q = int8_t(int(rng() % 255) - 127);
        std::vector<uint16_t> h(size_t(rows) * hidden);
        for (uint16_t& x : h) {
          const float v = normal(rng);
          uint32_t bits;
          std::memcpy(&bits, &v, 4);
          x = uint16_t(bits >> 16);
        }
        std::vector<uint64_t> seeds(rows), offsets(rows);
        for (int r = 0; r < rows; ++r) {
          seeds[r] = 0x9E3779B97F4A7C15ull * uint64_t(r + 1) + uint64_t(step) * 7919u;
          offsets[r] = uint64_t(step) * 1000003u + uint64_t(r);
        }
        upload(d_act, act, stream);
        upload(d_hidden, h, stream);
        upload(d_seed, seeds, stream);
        upload(d_offset, offsets, stream);
        poison_outputs();
        CUDA_OK(cudaGraphLaunch(exec, stream));
        const auto g_tokens = host_copy(d_tokens, rows, stream);
        const auto g_scores = host_copy(d_scores, size_t(rows) * vocab, stream);
        const auto g_ids = host_copy(d_ids, size_t(rows) * (n + 1), stream);
        const auto g_values = host_copy(d_values, size_t(rows) * (n + 1), stream);
        const auto g_ranks = host_copy(d_ranks, rows, stream);

        poison_outputs();  // the eager call must write everything the replay wrote
        ASSERT_EQ(call(), NT_OK) << nt_last_error();
        EXPECT_EQ(host_copy(d_tokens, rows, stream), g_tokens) << "step " << step;
        const auto e_scores = host_copy(d_scores, size_t(rows) * vocab, stream);
        EXPECT_EQ(std::memcmp(e_scores.data(), g_scores.data(), e_scores.size() * 4), 0) << "step " << step;
        EXPECT_EQ(host_copy(d_ids, size_t(rows) * (n + 1), stream), g_ids) << "step " << step;
        EXPECT_EQ(host_copy(d_ranks, rows, stream), g_ranks) << "step " << step;
        const auto e_values = host_copy(d_values, size_t(rows) * (n + 1), stream);
        EXPECT_EQ(std::memcmp(e_values.data(), g_values.data(), e_values.size() * 4), 0) << "step " << step;
        for (int r = 0; r < rows; ++r) {
          const int64_t t = g_tokens[r];
          ASSERT_GE(t, 0) << "row " << r;
          ASSERT_LT(t, vocab) << "row " << r;
          EXPECT_NE((uint32_t(mask[size_t(r) * words + t / 32]) >> (t % 32)) & 1u, 0u)
              << "row " << r << " drew disallowed token " << t;
          EXPECT_EQ(g_ids[size_t(r) * (n + 1)], t);
        }
        replayed.push_back(g_tokens);
      }
      int changed = 0;
      for (size_t step = 1; step < replayed.size(); ++step)
        for (int r = 0; r < rows; ++r) changed += replayed[step][r] != replayed[0][r];
      EXPECT_GT(changed, rows) << "replays ignored the new inputs";

      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      for (void* q : owned) cudaFree(q);
      cudaStreamDestroy(stream);
    }
}

}  // namespace
