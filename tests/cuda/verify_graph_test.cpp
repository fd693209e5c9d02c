// verify_draft captured in a CUDA graph and replayed after the engine rewrote
// the drafts, the per-request offsets and temperatures in their device arrays:
// every replay must equal the CPU backend on the same data (a graph that froze
// a value, or a host read of device data, would not). Top-k 40 takes the
// listed keep-set path, top-p alone the bisected one.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/cuda_util.h"
#include "nexttok/nexttok.hpp"

namespace {

void graph_replays(int32_t top_k, float top_p) {
  const int batch = 24, drafts = 3, vocab = 5000, rows = batch * (drafts + 1);
  std::mt19937_64 rng(53);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<float> logits(size_t(rows) * vocab), probs(size_t(batch) * drafts * vocab);
  for (float& x : logits) x = normal(rng);
  for (size_t r = 0; r < size_t(batch) * drafts; ++r) {
    float z = 0;
    for (int i = 0; i < vocab; ++i) z += probs[r * vocab + i] = std::exp(normal(rng));
    for (int i = 0; i < vocab; ++i) probs[r * vocab + i] /= z;
  }
  std::vector<int32_t> cu(batch + 1), ids(size_t(batch) * drafts);
  for (int b = 0; b <= batch; ++b) cu[b] = b * drafts;
  std::vector<uint64_t> seeds(batch), offsets(batch, 0);
  for (auto& s : seeds) s = rng();
  std::vector<float> temperature(batch);

  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* d_logits = device_alloc<float>(logits.size());
  float* d_probs = device_alloc<float>(probs.size());
  int32_t* d_ids = device_alloc<int32_t>(ids.size());
  int32_t* d_cu = device_alloc<int32_t>(cu.size());
  uint64_t* d_seed = device_alloc<uint64_t>(batch);
  uint64_t* d_offset = device_alloc<uint64_t>(batch);
  float* d_t = device_alloc<float>(batch);
  int32_t* d_out = device_alloc<int32_t>(size_t(batch) * (drafts + 1));
  int32_t* d_num = device_alloc<int32_t>(batch);
  ASSERT_TRUE(d_logits && d_probs && d_ids && d_cu && d_seed && d_offset && d_t && d_out && d_num);
  upload(d_logits, logits, stream);
  upload(d_probs, probs, stream);
  upload(d_cu, cu, stream);
  upload(d_seed, seeds, stream);

  auto args = [&](nexttok::Device dev, const float* l, const int32_t* d, const int32_t* c,
                  const float* q, const void* t, const void* s, const void* o, int32_t* out,
                  int32_t* num) {
    nexttok::SampleParams p;
    p.temperature = {t, 1.0f};
    p.top_k = {nullptr, top_k};
    p.top_p = {nullptr, top_p};
    p.seed = {s, 0};
    p.offset = {o, 0};
    return nexttok::verify_draft_args(
        nexttok::matrix(l, rows, vocab, -1, dev), nexttok::vector(d, batch * drafts, dev),
        nexttok::vector(c, batch + 1, dev), nexttok::matrix(q, batch * drafts, vocab, -1, dev),
        nexttok::matrix(out, batch, drafts + 1, -1, dev), nexttok::vector(num, batch, dev), p);
  };
  const nt_verify_draft_args gpu_args = args(nexttok::Device::cuda(0), d_logits, d_ids, d_cu,
                                             d_probs, d_t, d_seed, d_offset, d_out, d_num);
  const size_t bytes = nexttok::verify_draft_workspace_size(gpu_args);
  void* ws = nullptr;
  CUDA_OK(cudaMalloc(&ws, bytes + 1));

  auto fill_step = [&](int step) {
    for (int b = 0; b < batch; ++b) {
      temperature[b] = b % 5 == step % 5 ? 0.0f : 0.6f + 0.1f * float((b + step) % 7);
      offsets[b] = uint64_t(step * 3 + b);
      for (int j = 0; j < drafts; ++j) {
        const float* row = &logits[size_t(cu[b] + b + j) * vocab];
        int best = 0;
        for (int i = 1; i < vocab; ++i) best = row[i] > row[best] ? i : best;
        ids[size_t(b * drafts + j)] = (rng() % 3) ? best : int32_t(rng() % vocab);
      }
    }
    upload(d_t, temperature, stream);
    upload(d_offset, offsets, stream);
    upload(d_ids, ids, stream);
  };
  fill_step(0);
  ASSERT_EQ(nt_verify_draft(&gpu_args, ws, bytes, stream), NT_OK) << nt_last_error();
  CUDA_OK(cudaStreamSynchronize(stream));

  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const nt_status captured = nt_verify_draft(&gpu_args, ws, bytes, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_EQ(captured, NT_OK) << nt_last_error();
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  for (int step = 1; step <= 4; ++step) {
    fill_step(step);
    CUDA_OK(cudaGraphLaunch(exec, stream));
    std::vector<int32_t> got(size_t(batch) * (drafts + 1)), got_num(batch);
    CUDA_OK(cudaMemcpyAsync(got.data(), d_out, got.size() * 4, cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaMemcpyAsync(got_num.data(), d_num, got_num.size() * 4, cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));

    std::vector<int32_t> want(got.size()), want_num(batch);
    nexttok::verify_draft(args(nexttok::Device::cpu(), logits.data(), ids.data(), cu.data(),
                               probs.data(), temperature.data(), seeds.data(), offsets.data(),
                               want.data(), want_num.data()));
    EXPECT_EQ(got, want) << "step " << step;
    EXPECT_EQ(got_num, want_num) << "step " << step;
  }

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  for (void* q : {(void*)d_logits, (void*)d_probs, (void*)d_ids, (void*)d_cu, (void*)d_seed,
                  (void*)d_offset, (void*)d_t, (void*)d_out, (void*)d_num, ws})
    cudaFree(q);
  cudaStreamDestroy(stream);
}

TEST(CudaGraph, VerifyDraftReplayReadsDeviceDraftsAndParameters) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  graph_replays(40, 0.9f);
}

TEST(CudaGraph, VerifyDraftReplayWithTopPAlone) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  graph_replays(0, 0.8f);
}

}  // namespace
