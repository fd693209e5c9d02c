// A decode step (restore logits, apply the grammar mask, sample) captured in a
// CUDA graph and replayed with new seeds and offsets written into the per-row
// device arrays: the replays must equal eager calls token for token, and the
// tokens must follow the new seeds (a graph that froze them would not).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda/cuda_util.h"
#include "nexttok/nexttok.hpp"

namespace {

struct Step {
  int rows, vocab, words;
  float* pristine;  // logits as the model produced them
  float* logits;    // the buffer the step masks in place
  int32_t* mask;
  float *temperature, *top_p, *min_p;
  int32_t* top_k;
  uint64_t *seed, *offset;
  int64_t* tokens;
  void* workspace;
  size_t workspace_bytes;
  cudaStream_t stream;

  nt_sample_args args() const {
    const nexttok::Device dev = nexttok::Device::cuda(0);
    nexttok::SampleParams p;
    p.temperature.per_row = temperature;
    p.top_k.per_row = top_k;
    p.top_p.per_row = top_p;
    p.min_p.per_row = min_p;
    p.seed.per_row = seed;
    p.offset.per_row = offset;
    return nexttok::sample_args(nexttok::matrix(logits, rows, vocab, -1, dev),
                                nexttok::vector(tokens, rows, dev), p);
  }

  // Enqueues the whole step on the stream; returns false on any failure.
  bool enqueue() const {
    const nexttok::Device dev = nexttok::Device::cuda(0);
    if (cudaMemcpyAsync(logits, pristine, sizeof(float) * rows * vocab, cudaMemcpyDeviceToDevice,
                        stream) != cudaSuccess)
      return false;
    nt_apply_token_bitmask_args m{nexttok::matrix(logits, rows, vocab, -1, dev),
                                  nexttok::matrix(mask, rows, words, -1, dev), nexttok::none()};
    if (nt_apply_token_bitmask(&m, stream) != NT_OK) return false;
    nt_sample_args a = args();
    return nt_sample(&a, workspace, workspace_bytes, stream) == NT_OK;
  }
};

TEST(CudaGraph, DecodeStepReplaysWithNewSeedsAndOffsets) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int rows = 8, vocab = 50000, words = (vocab + 31) / 32;
  std::mt19937_64 rng(20261130);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> logits(size_t(rows) * vocab);
  for (float& x : logits) x = normal(rng);  // flat: a wide keep-set, so seeds matter
  std::vector<int32_t> mask(size_t(rows) * words);
  for (int32_t& w : mask) w = int32_t(rng());
  // Mixed per-row parameters, as continuous batching sends them.
  std::vector<float> temperature = {1.0f, 0.7f, 1.3f, 0.0f, 1.0f, 0.9f, 1.1f, 0.8f};
  std::vector<int32_t> top_k = {0, 50, 0, 0, 1000, 20, 0, 5};
  std::vector<float> top_p = {1.0f, 0.9f, 0.95f, 1.0f, 1.0f, 0.8f, 1.0f, 1.0f};
  std::vector<float> min_p = {0.0f, 0.05f, 0.0f, 0.0f, 0.0f, 0.0f, 0.02f, 0.0f};

  Step s{};
  s.rows = rows; s.vocab = vocab; s.words = words;
  s.pristine = device_copy(logits);
  s.logits = device_copy(logits);
  s.mask = device_copy(mask);
  s.temperature = device_copy(temperature);
  s.top_k = device_copy(top_k);
  s.top_p = device_copy(top_p);
  s.min_p = device_copy(min_p);
  s.seed = device_copy(std::vector<uint64_t>(rows, 0));
  s.offset = device_copy(std::vector<uint64_t>(rows, 0));
  s.tokens = device_copy(std::vector<int64_t>(rows, -7));
  ASSERT_TRUE(s.pristine && s.logits && s.mask && s.temperature && s.top_k && s.top_p &&
              s.min_p && s.seed && s.offset && s.tokens);
  CUDA_OK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  nt_sample_args a = s.args();
  ASSERT_EQ(nt_sample_workspace_size(&a, &s.workspace_bytes), NT_OK) << nt_last_error();
  CUDA_OK(cudaMalloc(&s.workspace, s.workspace_bytes > 0 ? s.workspace_bytes : 1));

  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
  const bool enqueued = s.enqueue();
  CUDA_OK(cudaStreamEndCapture(s.stream, &graph));
  ASSERT_TRUE(enqueued) << nt_last_error();
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  std::vector<std::vector<int64_t>> replayed;
  for (int step = 0; step < 6; ++step) {
    // The engine writes this step's seeds and offsets into the device arrays.
    std::vector<uint64_t> seeds(rows), offsets(rows);
    for (int r = 0; r < rows; ++r) {
      seeds[r] = 0x9E3779B97F4A7C15ull * uint64_t(r + 1) + uint64_t(step) * 7919u;
      offsets[r] = uint64_t(step) * 1000003u + uint64_t(r);
    }
    CUDA_OK(cudaMemcpyAsync(s.seed, seeds.data(), rows * 8, cudaMemcpyHostToDevice, s.stream));
    CUDA_OK(cudaMemcpyAsync(s.offset, offsets.data(), rows * 8, cudaMemcpyHostToDevice, s.stream));
    CUDA_OK(cudaMemsetAsync(s.tokens, 0x7F, rows * sizeof(int64_t), s.stream));  // poison
    CUDA_OK(cudaGraphLaunch(exec, s.stream));
    std::vector<int64_t> from_graph(rows), eager(rows);
    CUDA_OK(cudaMemcpyAsync(from_graph.data(), s.tokens, rows * 8, cudaMemcpyDeviceToHost, s.stream));
    CUDA_OK(cudaStreamSynchronize(s.stream));

    CUDA_OK(cudaMemsetAsync(s.tokens, 0x7F, rows * sizeof(int64_t), s.stream));
    ASSERT_TRUE(s.enqueue()) << nt_last_error();
    CUDA_OK(cudaMemcpyAsync(eager.data(), s.tokens, rows * 8, cudaMemcpyDeviceToHost, s.stream));
    CUDA_OK(cudaStreamSynchronize(s.stream));

    for (int r = 0; r < rows; ++r) {
      ASSERT_GE(from_graph[r], 0) << "row " << r << " step " << step;
      ASSERT_LT(from_graph[r], vocab) << "row " << r << " step " << step;
      const int t = int(from_graph[r]);
      EXPECT_TRUE((uint32_t(mask[size_t(r) * words + t / 32]) >> (t % 32)) & 1u)
          << "row " << r << " drew masked token " << t;
    }
    EXPECT_EQ(from_graph, eager) << "step " << step;
    replayed.push_back(from_graph);
  }
  // Sampled rows must move with the seeds; the greedy row (T = 0) must not.
  int changed = 0;
  for (size_t step = 1; step < replayed.size(); ++step)
    for (int r = 0; r < rows; ++r) changed += replayed[step][r] != replayed[0][r];
  EXPECT_GT(changed, 10) << "replays ignored the new seeds and offsets";
  for (size_t step = 1; step < replayed.size(); ++step) EXPECT_EQ(replayed[step][3], replayed[0][3]);

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  for (void* p : {(void*)s.pristine, (void*)s.logits, (void*)s.mask, (void*)s.temperature,
                  (void*)s.top_k, (void*)s.top_p, (void*)s.min_p, (void*)s.seed, (void*)s.offset,
                  (void*)s.tokens, s.workspace})
    cudaFree(p);
  cudaStreamDestroy(s.stream);
}

}  // namespace
