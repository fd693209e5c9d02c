// The penalty step of a decode (restore logits, logit bias, penalties with
// per-row parameters and device CSR lists) captured in a CUDA graph and
// replayed after the engine rewrote the per-row parameters and the output ids
// in their device arrays: every replay must equal the CPU backend on the same
// data bit for bit (a graph that froze a value, or a host read of device data,
// would not). One row is longer than the shared-memory table, so the
// workspace path is replayed too.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/cuda_util.h"
#include "nexttok/nexttok.hpp"

namespace {

TEST(CudaGraph, PenaltiesReplayReadDeviceListsAndParameters) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int rows = 12, vocab = 32000, bias_per_row = 8;
  std::mt19937_64 rng(37);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<float> logits(size_t(rows) * vocab);
  for (float& x : logits) x = normal(rng);
  auto id = [&] { return int32_t(rng() % (vocab + 20)) - 10; };  // some out of range

  // Prompt: 300 ids a row, row 4 holds 9,000 (past the shared-memory table).
  std::vector<int32_t> prompt_offsets{0}, prompt_ids, output_offsets{0}, output_ids;
  for (int r = 0; r < rows; ++r) {
    const int n = r == 4 ? 9000 : 300;
    for (int i = 0; i < n; ++i) prompt_ids.push_back(id());
    prompt_offsets.push_back(int32_t(prompt_ids.size()));
    for (int i = 0; i < 100; ++i) output_ids.push_back(i % 3 ? id() : prompt_ids[prompt_ids.size() - 1 - i]);
    output_offsets.push_back(int32_t(output_ids.size()));
  }
  std::vector<int32_t> bias_offsets{0}, bias_ids;
  std::vector<float> bias_values;
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < bias_per_row; ++i) {
      bias_ids.push_back(i == 3 ? bias_ids.back() : id());  // one repeat a row
      bias_values.push_back(normal(rng));
    }
    bias_offsets.push_back(int32_t(bias_ids.size()));
  }

  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* d_pristine = device_alloc<float>(logits.size());
  float* d_logits = device_alloc<float>(logits.size());
  int32_t* d_po = device_alloc<int32_t>(prompt_offsets.size());
  int32_t* d_pi = device_alloc<int32_t>(prompt_ids.size());
  int32_t* d_oo = device_alloc<int32_t>(output_offsets.size());
  int32_t* d_oi = device_alloc<int32_t>(output_ids.size());
  int32_t* d_bo = device_alloc<int32_t>(bias_offsets.size());
  int32_t* d_bi = device_alloc<int32_t>(bias_ids.size());
  float* d_bv = device_alloc<float>(bias_values.size());
  float* d_r = device_alloc<float>(rows);
  float* d_p = device_alloc<float>(rows);
  float* d_f = device_alloc<float>(rows);
  ASSERT_TRUE(d_pristine && d_logits && d_po && d_pi && d_oo && d_oi && d_bo && d_bi && d_bv &&
              d_r && d_p && d_f);
  upload(d_pristine, logits, stream);
  upload(d_po, prompt_offsets, stream);
  upload(d_pi, prompt_ids, stream);
  upload(d_oo, output_offsets, stream);
  upload(d_oi, output_ids, stream);
  upload(d_bo, bias_offsets, stream);
  upload(d_bi, bias_ids, stream);
  upload(d_bv, bias_values, stream);

  const nexttok::Device gpu = nexttok::Device::cuda(0);
  auto lists = [&](const nexttok::Device& dev, const void* off, const void* ids, size_t n) {
    return nexttok::token_lists(nexttok::vector(static_cast<const int32_t*>(off), rows + 1, dev),
                                nexttok::vector(static_cast<const int32_t*>(ids), int64_t(n), dev));
  };
  nexttok::PenaltyParams prm;
  prm.repetition.per_row = d_r;
  prm.presence.per_row = d_p;
  prm.frequency.per_row = d_f;
  const nt_apply_penalties_args pen = nexttok::penalties_args(
      nexttok::matrix(d_logits, rows, vocab, -1, gpu), lists(gpu, d_po, d_pi, prompt_ids.size()),
      lists(gpu, d_oo, d_oi, output_ids.size()), prm);
  const nt_apply_logit_bias_args bias = nexttok::logit_bias_args(
      nexttok::matrix(d_logits, rows, vocab, -1, gpu), lists(gpu, d_bo, d_bi, bias_ids.size()),
      nexttok::vector(d_bv, int64_t(bias_values.size()), gpu));
  const size_t pen_bytes = nexttok::apply_penalties_workspace_size(pen);
  const size_t bias_bytes = nexttok::apply_logit_bias_workspace_size(bias);
  void* pen_ws = nullptr;
  void* bias_ws = nullptr;
  CUDA_OK(cudaMalloc(&pen_ws, pen_bytes + 1));
  CUDA_OK(cudaMalloc(&bias_ws, bias_bytes + 1));

  auto enqueue = [&] {
    if (cudaMemcpyAsync(d_logits, d_pristine, logits.size() * 4, cudaMemcpyDeviceToDevice,
                        stream) != cudaSuccess)
      return false;
    return nt_apply_logit_bias(&bias, bias_ws, bias_bytes, stream) == NT_OK &&
           nt_apply_penalties(&pen, pen_ws, pen_bytes, stream) == NT_OK;
  };
  // The per-row arrays hold values before the capture (their check reads nothing).
  upload(d_r, std::vector<float>(rows, 1.0f), stream);
  upload(d_p, std::vector<float>(rows, 0.0f), stream);
  upload(d_f, std::vector<float>(rows, 0.0f), stream);
  ASSERT_TRUE(enqueue()) << nt_last_error();  // eager warm-up (shared-memory opt-ins)
  CUDA_OK(cudaStreamSynchronize(stream));

  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const bool enqueued = enqueue();
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(enqueued) << nt_last_error();
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  std::uniform_real_distribution<float> unit(0.f, 1.f);
  for (int step = 0; step < 4; ++step) {
    std::vector<float> r(rows), p(rows), f(rows);
    for (int i = 0; i < rows; ++i) {
      r[i] = (i + step) % 5 == 0 ? 1.0f : 0.6f + unit(rng);
      p[i] = (i + step) % 4 == 0 ? 0.0f : unit(rng) - 0.3f;
      f[i] = (i + step) % 3 == 0 ? 0.0f : unit(rng) * 0.5f;
    }
    for (size_t i = 0; i < output_ids.size(); i += 7) output_ids[i] = id();  // new tokens
    upload(d_r, r, stream);
    upload(d_p, p, stream);
    upload(d_f, f, stream);
    upload(d_oi, output_ids, stream);
    CUDA_OK(cudaGraphLaunch(exec, stream));
    std::vector<float> got(logits.size());
    CUDA_OK(cudaMemcpyAsync(got.data(), d_logits, got.size() * 4, cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));

    // The CPU backend on the same data.
    std::vector<float> want = logits;
    const nexttok::Device cpu = nexttok::Device::cpu();
    nexttok::apply_logit_bias(nexttok::logit_bias_args(
        nexttok::matrix(want.data(), rows, vocab), lists(cpu, bias_offsets.data(), bias_ids.data(), bias_ids.size()),
        nexttok::vector(bias_values.data(), int64_t(bias_values.size()))));
    nexttok::PenaltyParams host;
    host.repetition.per_row = r.data();
    host.presence.per_row = p.data();
    host.frequency.per_row = f.data();
    nexttok::apply_penalties(nexttok::penalties_args(
        nexttok::matrix(want.data(), rows, vocab),
        lists(cpu, prompt_offsets.data(), prompt_ids.data(), prompt_ids.size()),
        lists(cpu, output_offsets.data(), output_ids.data(), output_ids.size()), host));
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "step " << step;
  }

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  for (void* q : {(void*)d_pristine, (void*)d_logits, (void*)d_po, (void*)d_pi, (void*)d_oo,
                  (void*)d_oi, (void*)d_bo, (void*)d_bi, (void*)d_bv, (void*)d_r, (void*)d_p,
                  (void*)d_f, pen_ws, bias_ws})
    cudaFree(q);
  cudaStreamDestroy(stream);
}

}  // namespace
