// nt_sample_logprobs captured in a CUDA graph (the sampler's kernels, then the
// logprobs scan and finish) and replayed with new seeds and offsets written
// into the per-row device arrays: every replay equals an eager call bit for
// bit (tokens, ids, values, ranks), its tokens equal nt_sample's, and the
// tokens follow the new seeds.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/cuda_util.h"
#include "nexttok/nexttok.hpp"

namespace {

TEST(CudaGraph, SampleLogprobsReplaysWithNewSeeds) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int rows = 6, vocab = 40000, n = 20;
  std::mt19937_64 rng(20261205);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> logits(size_t(rows) * vocab);
  for (float& x : logits) x = normal(rng);
  const std::vector<float> temperature = {1.0f, 0.7f, 0.0f, 1.2f, 0.9f, 1.0f};
  const std::vector<int32_t> top_k = {0, 50, 0, 0, 3000, 40};
  const std::vector<float> top_p = {1.0f, 0.9f, 1.0f, 0.95f, 0.9f, 1.0f};
  const std::vector<float> min_p = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.02f};

  float* d_logits = device_copy(logits);
  float* d_t = device_copy(temperature);
  int32_t* d_k = device_copy(top_k);
  float* d_p = device_copy(top_p);
  float* d_m = device_copy(min_p);
  uint64_t* d_seed = device_copy(std::vector<uint64_t>(rows, 0));
  uint64_t* d_offset = device_copy(std::vector<uint64_t>(rows, 0));
  int64_t* d_tokens = device_copy(std::vector<int64_t>(rows, -7));
  int64_t* d_plain = device_copy(std::vector<int64_t>(rows, -7));
  int32_t* d_ids = device_copy(std::vector<int32_t>(size_t(rows) * (n + 1), 0));
  float* d_values = device_copy(std::vector<float>(size_t(rows) * (n + 1), 0.0f));
  int32_t* d_ranks = device_copy(std::vector<int32_t>(rows, 0));
  ASSERT_TRUE(d_logits && d_t && d_k && d_p && d_m && d_seed && d_offset && d_tokens && d_plain &&
              d_ids && d_values && d_ranks);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  const nexttok::Device dev = nexttok::Device::cuda(0);
  nexttok::SampleParams p;
  p.temperature.per_row = d_t;
  p.top_k.per_row = d_k;
  p.top_p.per_row = d_p;
  p.min_p.per_row = d_m;
  p.seed.per_row = d_seed;
  p.offset.per_row = d_offset;
  const nt_sample_args plain =
      nexttok::sample_args(nexttok::matrix(d_logits, rows, vocab, -1, dev),
                           nexttok::vector(d_plain, rows, dev), p);
  nt_sample_args with = plain;
  with.tokens = nexttok::vector(d_tokens, rows, dev);
  const nt_sample_logprobs_args a = nexttok::sample_logprobs_args(
      with, n, NT_LOGPROBS_PROCESSED, nexttok::matrix(d_ids, rows, n + 1, -1, dev),
      nexttok::matrix(d_values, rows, n + 1, -1, dev), nexttok::vector(d_ranks, rows, dev));
  size_t bytes = 0, plain_bytes = 0;
  ASSERT_EQ(nt_sample_logprobs_workspace_size(&a, &bytes), NT_OK) << nt_last_error();
  ASSERT_EQ(nt_sample_workspace_size(&plain, &plain_bytes), NT_OK) << nt_last_error();
  void *ws = nullptr, *plain_ws = nullptr;
  CUDA_OK(cudaMalloc(&ws, bytes));
  CUDA_OK(cudaMalloc(&plain_ws, plain_bytes));

  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const nt_status captured = nt_sample_logprobs(&a, ws, bytes, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_EQ(captured, NT_OK) << nt_last_error();
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  std::vector<std::vector<int64_t>> replayed;
  // Every output of the call (and nt_sample's tokens) poisoned before each run.
  auto poison_outputs = [&] {
    CUDA_OK(cudaMemsetAsync(d_tokens, 0x7F, size_t(rows) * 8, stream));
    CUDA_OK(cudaMemsetAsync(d_plain, 0x7F, size_t(rows) * 8, stream));
    CUDA_OK(cudaMemsetAsync(d_ids, 0x7F, size_t(rows) * (n + 1) * 4, stream));
    CUDA_OK(cudaMemsetAsync(d_values, 0x7F, size_t(rows) * (n + 1) * 4, stream));
    CUDA_OK(cudaMemsetAsync(d_ranks, 0x7F, size_t(rows) * 4, stream));
  };
  for (int step = 0; step < 4; ++step) {
    std::vector<uint64_t> seeds(rows), offsets(rows);
    for (int r = 0; r < rows; ++r) {
      seeds[r] = 0x9E3779B97F4A7C15ull * uint64_t(r + 1) + uint64_t(step) * 7919u;
      offsets[r] = uint64_t(step) * 1000003u + uint64_t(r);
    }
    CUDA_OK(cudaMemcpyAsync(d_seed, seeds.data(), rows * 8, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(d_offset, offsets.data(), rows * 8, cudaMemcpyHostToDevice, stream));
    poison_outputs();
    CUDA_OK(cudaGraphLaunch(exec, stream));
    const auto g_tokens = host_copy(d_tokens, rows, stream);
    const auto g_ids = host_copy(d_ids, size_t(rows) * (n + 1), stream);
    const auto g_values = host_copy(d_values, size_t(rows) * (n + 1), stream);
    const auto g_ranks = host_copy(d_ranks, rows, stream);

    poison_outputs();  // the eager call must write everything the replay wrote
    ASSERT_EQ(nt_sample_logprobs(&a, ws, bytes, stream), NT_OK) << nt_last_error();
    ASSERT_EQ(nt_sample(&plain, plain_ws, plain_bytes, stream), NT_OK) << nt_last_error();
    EXPECT_EQ(host_copy(d_tokens, rows, stream), g_tokens) << "step " << step;
    EXPECT_EQ(host_copy(d_plain, rows, stream), g_tokens) << "step " << step << ": differs from nt_sample";
    EXPECT_EQ(host_copy(d_ids, size_t(rows) * (n + 1), stream), g_ids) << "step " << step;
    EXPECT_EQ(host_copy(d_ranks, rows, stream), g_ranks) << "step " << step;
    const auto e_values = host_copy(d_values, size_t(rows) * (n + 1), stream);
    EXPECT_EQ(std::memcmp(e_values.data(), g_values.data(), e_values.size() * 4), 0) << "step " << step;
    for (int r = 0; r < rows; ++r) {
      EXPECT_EQ(g_ids[size_t(r) * (n + 1)], g_tokens[r]);
      EXPECT_GE(g_ranks[r], 1);
      EXPECT_LE(g_values[size_t(r) * (n + 1)], 0.0f);
    }
    replayed.push_back(g_tokens);
  }
  int changed = 0;
  for (size_t step = 1; step < replayed.size(); ++step)
    for (int r = 0; r < rows; ++r) changed += replayed[step][r] != replayed[0][r];
  EXPECT_GT(changed, 4) << "replays ignored the new seeds and offsets";

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  for (void* q : {(void*)d_logits, (void*)d_t, (void*)d_k, (void*)d_p, (void*)d_m, (void*)d_seed,
                  (void*)d_offset, (void*)d_tokens, (void*)d_plain, (void*)d_ids, (void*)d_values,
                  (void*)d_ranks, ws, plain_ws})
    cudaFree(q);
  cudaStreamDestroy(stream);
}

}  // namespace
