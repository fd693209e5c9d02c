// The CUDA backend's opt-in paths (README, "Switches") against the defaults on
// the same inputs in one process (the switches are read on every call):
//   NEXTTOK_CUDA_PDL=1                   merges as programmatic dependents: the
//                                        same tokens, values and indices, eager
//                                        and replayed from a captured graph;
//   NEXTTOK_CUDA_SAMPLE_MERGE=kernel     the merge kernel where a small batch's
//                                        rows would merge in their clusters: the
//                                        same tokens;
//   NEXTTOK_CUDA_LM_HEAD_MERGE=sort     the radix-select-and-sort merge where k <= 64
//                                        would take the few-winners merge: the
//                                        same values and indices, bit for bit;
//   NEXTTOK_CUDA_LM_HEAD_PATH=sync-mma   the binary head's passes on warp MMAs
//                                        where sm_90 takes warpgroup MMAs, and
//                     =pass-async-copies the warpgroup-MMA kernel fed by
//                                        cp.async stages where the default feeds
//                                        it by bulk tensor copies: the same
//                                        values and indices, bit for bit;
//   NEXTTOK_CUDA_LM_HEAD_CUT=filter      the CTA lists cut between tiles by a
//                                        bound, not a radix select: the same
//                                        values and indices, bit for bit.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "harness/scoped_env.h"
#include "nexttok/nexttok.hpp"

namespace {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

bool have_gpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0 && nt_backend_available(NT_DEVICE_CUDA);
}

using ntt::ScopedEnv;

template <class T>
struct DeviceBuffer {
  T* p = nullptr;
  explicit DeviceBuffer(size_t n) {
    if (cudaMalloc(&p, n * sizeof(T)) != cudaSuccess) p = nullptr;
  }
  ~DeviceBuffer() { cudaFree(p); }
};

// Tokens of one nt_sample call on the GPU with scalar parameters; the token
// buffer is poisoned first so that an unwritten row shows.
std::vector<int64_t> sample_on_gpu(const std::vector<float>& logits, int rows, int vocab,
                                   float temperature, int top_k, float top_p, float min_p,
                                   uint64_t seed, bool in_graph = false) {
  const nexttok::Device dev = nexttok::Device::cuda(0);
  DeviceBuffer<float> x(logits.size());
  DeviceBuffer<int64_t> tokens(static_cast<size_t>(rows));
  if (!x.p || !tokens.p) return {};
  cudaMemcpy(x.p, logits.data(), logits.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(tokens.p, 0x5A, size_t(rows) * sizeof(int64_t));
  // The memset (and the pageable copy) run on the legacy stream, which the
  // non-blocking stream below does not wait for: without this the poison
  // could land after the tokens (it did on the H200, 2026-12-02 run 41).
  cudaDeviceSynchronize();
  nexttok::SampleParams p;
  p.temperature.scalar = temperature;
  p.top_k.scalar = top_k;
  p.top_p.scalar = top_p;
  p.min_p.scalar = min_p;
  p.seed.scalar = seed;
  p.offset.scalar = 7;
  const nt_sample_args a = nexttok::sample_args(nexttok::matrix(x.p, rows, vocab, -1, dev),
                                                nexttok::vector(tokens.p, rows, dev), p);
  const size_t bytes = nexttok::sample_workspace_size(a);
  DeviceBuffer<unsigned char> ws(bytes + 16);
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (in_graph) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    const nt_status st = nt_sample(&a, ws.p, bytes, stream);
    cudaStreamEndCapture(stream, &graph);
    if (st != NT_OK || !graph || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
      ADD_FAILURE() << "capture failed: " << nt_last_error();
      return {};
    }
    cudaGraphLaunch(exec, stream);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  } else {
    nexttok::sample(a, ws.p, bytes, stream);
  }
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  std::vector<int64_t> out(static_cast<size_t>(rows));
  cudaMemcpy(out.data(), tokens.p, out.size() * sizeof(int64_t), cudaMemcpyDeviceToHost);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  return out;
}

std::vector<float> normal_logits(int rows, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.5f);
  std::vector<float> x(size_t(rows) * vocab);
  for (float& v : x) v = normal(rng);
  return x;
}

TEST(OptInPaths, DependentLaunchKeepsSampledTokens) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  // Small batches split each row over many CTAs, so a merge kernel follows
  // the scan: greedy, plain, and filtered rows (k50 + p0.9 + min-p).
  const struct { float t; int k; float p, m; } configs[] = {
      {0.0f, 0, 1.0f, 0.0f}, {0.7f, 0, 1.0f, 0.0f}, {0.7f, 50, 0.9f, 0.05f}, {1.0f, 0, 0.9f, 0.0f}};
  uint64_t seed = 77;
  for (int rows : {1, 8})
    for (const auto& c : configs) {
      SCOPED_TRACE("B=" + std::to_string(rows) + " T=" + std::to_string(c.t) +
                   " k=" + std::to_string(c.k) + " p=" + std::to_string(c.p));
      const int vocab = 128256;
      const std::vector<float> x = normal_logits(rows, vocab, ++seed);
      std::vector<int64_t> plain, pdl, pdl_graph;
      {
        ScopedEnv off("NEXTTOK_CUDA_PDL", nullptr);
        plain = sample_on_gpu(x, rows, vocab, c.t, c.k, c.p, c.m, seed);
      }
      {
        ScopedEnv on("NEXTTOK_CUDA_PDL", "1");
        pdl = sample_on_gpu(x, rows, vocab, c.t, c.k, c.p, c.m, seed);
        pdl_graph = sample_on_gpu(x, rows, vocab, c.t, c.k, c.p, c.m, seed, true);
      }
      ASSERT_EQ(plain.size(), size_t(rows));
      for (int64_t t : plain) EXPECT_TRUE(t >= 0 && t < vocab) << t;
      EXPECT_EQ(pdl, plain);
      EXPECT_EQ(pdl_graph, plain);
    }
}

TEST(OptInPaths, MergeKernelKeepsSampledTokens) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  // Batches below two rows per SM split their rows; on sm_90 the chunks of a
  // row of a batch of at most 8 form a cluster that merges them where no large
  // keep-set pass follows (top-p alone on these flat rows has one: it stays on
  // the merge kernel), NEXTTOK_CUDA_SAMPLE_MERGE=kernel pins the merge kernel
  // (and twice the chunks). Tokens depend on neither.
  const struct { float t; int k; float p, m; } configs[] = {
      {0.0f, 0, 1.0f, 0.0f}, {0.7f, 0, 1.0f, 0.0f}, {0.7f, 50, 0.9f, 0.05f}, {1.0f, 0, 0.9f, 0.0f}};
  uint64_t seed = 901;
  // 8: the largest batch that clusters, 9: the smallest that does not.
  for (int rows : {1, 3, 8, 9})
    for (const auto& c : configs) {
      SCOPED_TRACE("B=" + std::to_string(rows) + " T=" + std::to_string(c.t) +
                   " k=" + std::to_string(c.k) + " p=" + std::to_string(c.p));
      const int vocab = 128256 - 5 * rows;  // a ragged last chunk
      const std::vector<float> x = normal_logits(rows, vocab, ++seed);
      std::vector<int64_t> by_cluster, by_cluster_graph, by_kernel;
      {
        ScopedEnv off("NEXTTOK_CUDA_SAMPLE_MERGE", nullptr);
        by_cluster = sample_on_gpu(x, rows, vocab, c.t, c.k, c.p, c.m, seed);
        by_cluster_graph = sample_on_gpu(x, rows, vocab, c.t, c.k, c.p, c.m, seed, true);
      }
      {
        ScopedEnv on("NEXTTOK_CUDA_SAMPLE_MERGE", "kernel");
        by_kernel = sample_on_gpu(x, rows, vocab, c.t, c.k, c.p, c.m, seed);
      }
      ASSERT_EQ(by_kernel.size(), size_t(rows));
      for (int64_t t : by_kernel) EXPECT_TRUE(t >= 0 && t < vocab) << t;
      EXPECT_EQ(by_cluster, by_kernel);
      EXPECT_EQ(by_cluster_graph, by_kernel);
    }
}

// One LM-head call's outputs: `call()` runs it into `values` and `indices`
// (n each), poisoned first so that an unwritten entry shows.
template <class Call>
std::pair<std::vector<float>, std::vector<int64_t>> topk_outputs(Call&& call, float* values, int64_t* indices,
                                                                 size_t n) {
  cudaMemset(values, 0x7F, n * sizeof(float));
  cudaMemset(indices, 0x7F, n * sizeof(int64_t));
  EXPECT_EQ(call(), NT_OK) << nt_last_error();
  cudaDeviceSynchronize();
  std::vector<float> v(n);
  std::vector<int64_t> i(n);
  cudaMemcpy(v.data(), values, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(i.data(), indices, n * sizeof(int64_t), cudaMemcpyDeviceToHost);
  return {v, i};
}

// The dense head's arguments over device buffers (bias optional).
nt_lm_head_dense_args dense_head_args(const void* hidden, const void* weight, float* bias, int rows, int width,
                                      int vocab, int k, float* values, int64_t* indices, nt_dtype dtype = NT_F32) {
  const nexttok::Device dev = nexttok::Device::cuda(0);
  nt_lm_head_dense_args a{};
  a.hidden = nexttok::matrix(hidden, dtype, rows, width, -1, dev);
  a.weight = nexttok::matrix(weight, dtype, vocab, width, -1, dev);
  if (bias) a.bias = nexttok::vector(bias, vocab, dev);
  a.k = k;
  a.values = nexttok::matrix(values, rows, k, -1, dev);
  a.indices = nexttok::matrix(indices, rows, k, -1, dev);
  return a;
}

// Values and indices of one dense-head call with the switch `env` set to
// `value` (null: unset), in a workspace of the size it asks for.
std::pair<std::vector<float>, std::vector<int64_t>> dense_topk_with(const nt_lm_head_dense_args& a,
                                                                     const char* env, const char* value) {
  size_t bytes = 0;
  EXPECT_EQ(nt_lm_head_topk_dense_workspace_size(&a, &bytes), NT_OK) << nt_last_error();
  DeviceBuffer<unsigned char> ws(bytes + 16);
  ScopedEnv scoped(env, value);
  return topk_outputs([&] { return nt_lm_head_topk_dense(&a, ws.p, bytes, nullptr); },
                      static_cast<float*>(a.values.data), static_cast<int64_t*>(a.indices.data),
                      size_t(a.values.shape[0]) * size_t(a.k));
}

TEST(OptInPaths, DependentLaunchKeepsLmHeadTopK) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int rows = 3, hidden = 512, vocab = 20011, k = 50;
  std::mt19937_64 rng(2026);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> h(size_t(rows) * hidden), w(size_t(vocab) * hidden);
  for (float& v : h) v = normal(rng);
  for (float& v : w) v = normal(rng);
  DeviceBuffer<float> dh(h.size()), dw(w.size()), values(size_t(rows) * k);
  DeviceBuffer<int64_t> indices(static_cast<size_t>(rows) * k);
  ASSERT_TRUE(dh.p && dw.p && values.p && indices.p);
  CUDA_OK(cudaMemcpy(dh.p, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dw.p, w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice));
  const nt_lm_head_dense_args a = dense_head_args(dh.p, dw.p, nullptr, rows, hidden, vocab, k, values.p, indices.p);
  const auto plain = dense_topk_with(a, "NEXTTOK_CUDA_PDL", nullptr);
  const auto pdl = dense_topk_with(a, "NEXTTOK_CUDA_PDL", "1");
  for (int64_t i : plain.second) ASSERT_TRUE(i >= 0 && i < vocab) << i;
  EXPECT_EQ(pdl.first, plain.first);
  EXPECT_EQ(pdl.second, plain.second);
}

// Host values as `dtype`'s bytes: f32, or bf16 rounded to nearest even.
std::vector<unsigned char> as_dtype(const std::vector<float>& x, nt_dtype dtype) {
  const size_t esize = dtype == NT_BF16 ? 2 : 4;
  std::vector<unsigned char> out(x.size() * esize);
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t b;
    std::memcpy(&b, &x[i], 4);
    if (dtype == NT_BF16) {
      const uint16_t h = std::isnan(x[i]) ? uint16_t(0x7FC0) : uint16_t((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
      std::memcpy(&out[2 * i], &h, 2);
    } else {
      std::memcpy(&out[4 * i], &b, 4);
    }
  }
  return out;
}

// A dense-head switch env=value that must keep the same k: values and indices
// bit for bit the default's, at M = each of `row_counts` and k = 1, 50, 64,
// with a bias of few distinct values; from M = 3 on, row 1 has NaN scores
// (every score NaN, ranked as -inf, reported as NaN) and row 2 is the bias
// alone (a zero hidden state: ties, to the lower index).
void expect_dense_switch_matches_default(const char* env, const char* value, nt_dtype dtype,
                                         std::initializer_list<int> row_counts, int hidden, int vocab,
                                         uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> w(size_t(vocab) * hidden), bias(static_cast<size_t>(vocab));
  for (float& v : w) v = normal(rng);
  for (float& b : bias) b = 0.25f * float(int(rng() % 9) - 4);  // few distinct values
  const std::vector<unsigned char> w_bytes = as_dtype(w, dtype);
  DeviceBuffer<unsigned char> dw(w_bytes.size());
  DeviceBuffer<float> dbias(bias.size());
  ASSERT_TRUE(dw.p && dbias.p);
  CUDA_OK(cudaMemcpy(dw.p, w_bytes.data(), w_bytes.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dbias.p, bias.data(), bias.size() * sizeof(float), cudaMemcpyHostToDevice));
  for (int rows : row_counts)
    for (int k : {1, 50, 64}) {
      SCOPED_TRACE("M=" + std::to_string(rows) + " k=" + std::to_string(k));
      std::vector<float> h(size_t(rows) * hidden);
      for (float& v : h) v = normal(rng);
      if (rows > 2) {
        h[size_t(1) * hidden + 7] = std::nanf("");                            // row 1: NaN scores
        std::fill(h.begin() + 2 * hidden, h.begin() + 3 * hidden, 0.0f);  // row 2: the bias alone
      }
      const std::vector<unsigned char> h_bytes = as_dtype(h, dtype);
      DeviceBuffer<unsigned char> dh(h_bytes.size());
      DeviceBuffer<float> values(size_t(rows) * k);
      DeviceBuffer<int64_t> indices(static_cast<size_t>(rows) * k);
      ASSERT_TRUE(dh.p && values.p && indices.p);
      CUDA_OK(cudaMemcpy(dh.p, h_bytes.data(), h_bytes.size(), cudaMemcpyHostToDevice));
      const nt_lm_head_dense_args a =
          dense_head_args(dh.p, dw.p, dbias.p, rows, hidden, vocab, k, values.p, indices.p, dtype);
      const auto plain = dense_topk_with(a, env, nullptr);
      const auto switched = dense_topk_with(a, env, value);
      for (int64_t i : plain.second) ASSERT_TRUE(i >= 0 && i < vocab) << i;
      EXPECT_EQ(switched.second, plain.second);
      for (size_t j = 0; j < plain.first.size(); ++j)
        ASSERT_EQ(std::memcmp(&switched.first[j], &plain.first[j], sizeof(float)), 0) << "position " << j;
      if (rows > 2) {
        for (int j = 0; j < k; ++j) EXPECT_TRUE(std::isnan(plain.first[size_t(1) * k + j])) << j;
        int ties = 0;
        for (int j = 1; j < k; ++j) {  // ties to the lower index
          const size_t at = size_t(2) * k + j;
          if (plain.first[at] == plain.first[at - 1]) {
            ++ties;
            EXPECT_LT(plain.second[at - 1], plain.second[at]);
          }
        }
        if (k > 1) {
          EXPECT_GT(ties, 0) << "the bias-only row has ties among its top k";
        }
      }
    }
}

// NEXTTOK_CUDA_LM_HEAD_MERGE=sort: the merge that radix-selects and sorts
// where the few-winners merge (k <= 64) would run. Both pick the same k by the
// same (value desc, index asc) order (f32 weights, one and five rows).
TEST(OptInPaths, SortMergeKeepsLmHeadTopK) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  expect_dense_switch_matches_default("NEXTTOK_CUDA_LM_HEAD_MERGE", "sort", NT_F32, {1, 5}, 256, 30011, 2029);
}

// NEXTTOK_CUDA_LM_HEAD_CUT=filter: the CTAs' lists cut between tiles by a
// bound from every lane's two best entries instead of a radix select; the
// same k are kept in the end. bf16 weights (the staged kernel on sm_90),
// V = 70,001 (two or three 256-row tiles a CTA, the first always cut),
// M = 1, 5, 16 and 64.
TEST(OptInPaths, FilterCutsKeepDenseTopK) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  expect_dense_switch_matches_default("NEXTTOK_CUDA_LM_HEAD_CUT", "filter", NT_BF16, {1, 5, 16, 64}, 256, 70001,
                                      2030);
}

// The binary head's pass kernels compute the same integers and the same fp32
// sums in the same order, so a pinned one's outputs agree bit for bit with the
// default's on unstructured inputs (W1's H = 5,120 at G = 128; G = 256 at
// H = 2,048), at the token-row widths 16, 32 and 64 (M = 12, 16, 20, 24, 64)
// and over two passes (M = 67: 64 + 3, the second 8 wide). The same holds for
// any switch that keeps the same integers and sums (env = value).
struct BinaryShape {
  int hidden, group, rows;
};
// M = 12, 16: two n-tiles (two groups in flight in the bulk-copy kernel),
// 24: four, 64: eight (at G = 128 each group's MMAs in two halves), 67: a
// pass of 64 and one of 3.
const std::vector<BinaryShape> kPassShapes = {{5120, 128, 12}, {5120, 128, 16}, {5120, 128, 24}, {5120, 128, 64},
                                              {5120, 128, 67}, {2048, 256, 20}, {2048, 256, 67}};
void expect_binary_switch_matches_default(const char* env, const char* value,
                                          const std::vector<BinaryShape>& shapes = kPassShapes, int k = 50) {
  const nexttok::Device dev = nexttok::Device::cuda(0);
  // V = 70,001: up to three tiles a CTA (256 + 256 + 32 rows on 132 SMs), so
  // stage slots and tile buffers are reused and the last tile is ragged.
  const int vocab = 70001;
  std::mt19937_64 rng(2028);
  for (const BinaryShape& s : shapes) {
    SCOPED_TRACE("H=" + std::to_string(s.hidden) + " G=" + std::to_string(s.group) + " M=" + std::to_string(s.rows));
    const int words = s.hidden / 32, groups = s.hidden / s.group;
    std::vector<int8_t> act(size_t(s.rows) * s.hidden);
    for (int8_t& q : act) q = int8_t(int(rng() % 255) - 127);
    std::vector<float> act_scale(size_t(s.rows));
    for (float& a : act_scale) a = 0.001f * float(1 + rng() % 16);
    std::vector<int32_t> wq(size_t(vocab) * words);
    for (int32_t& w : wq) w = int32_t(uint32_t(rng()));
    std::vector<uint16_t> wscale(size_t(vocab) * groups);  // f16 in [2^-7, 2^-4)
    for (uint16_t& h : wscale) h = uint16_t(0x2000 + rng() % 0x0C00);
    std::vector<float> bias(static_cast<size_t>(vocab));
    for (float& b : bias) b = 0.01f * float(int(rng() % 201) - 100);
    DeviceBuffer<int8_t> d_act(act.size());
    DeviceBuffer<float> d_scale(act_scale.size()), d_bias(bias.size()), values(size_t(s.rows) * k);
    DeviceBuffer<int32_t> d_wq(wq.size());
    DeviceBuffer<uint16_t> d_wscale(wscale.size());
    DeviceBuffer<int64_t> indices(size_t(s.rows) * k);
    ASSERT_TRUE(d_act.p && d_scale.p && d_bias.p && values.p && d_wq.p && d_wscale.p && indices.p);
    CUDA_OK(cudaMemcpy(d_act.p, act.data(), act.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_scale.p, act_scale.data(), act_scale.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_bias.p, bias.data(), bias.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_wq.p, wq.data(), wq.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_wscale.p, wscale.data(), wscale.size() * 2, cudaMemcpyHostToDevice));
    nt_lm_head_binary_args a{};
    a.act_q = nexttok::matrix(d_act.p, s.rows, s.hidden, -1, dev);
    a.act_scale = nexttok::vector(d_scale.p, s.rows, dev);
    a.wq = nexttok::matrix(d_wq.p, vocab, words, -1, dev);
    a.wscale = nexttok::matrix(d_wscale.p, NT_F16, vocab, groups, -1, dev);
    a.bias = nexttok::vector(d_bias.p, vocab, dev);
    a.group_size = s.group;
    a.k = k;
    a.values = nexttok::matrix(values.p, s.rows, k, -1, dev);
    a.indices = nexttok::matrix(indices.p, s.rows, k, -1, dev);
    auto run = [&](const char* setting) {
      ScopedEnv scoped(env, setting);
      size_t bytes = 0;
      EXPECT_EQ(nt_lm_head_topk_binary_workspace_size(&a, &bytes), NT_OK) << nt_last_error();
      DeviceBuffer<unsigned char> ws(bytes + 16);
      return topk_outputs([&] { return nt_lm_head_topk_binary(&a, ws.p, bytes, nullptr); }, values.p,
                          indices.p, size_t(s.rows) * k);
    };
    const auto plain = run(nullptr);
    const auto pinned = run(value);
    for (int64_t i : plain.second) ASSERT_TRUE(i >= 0 && i < vocab) << i;
    for (size_t j = 1; j < plain.first.size(); ++j)
      if (j % k != 0) {
        EXPECT_GE(plain.first[j - 1], plain.first[j]) << "values sorted descending";
      }
    EXPECT_EQ(pinned.second, plain.second);
    for (size_t j = 0; j < plain.first.size(); ++j)
      ASSERT_EQ(std::memcmp(&pinned.first[j], &plain.first[j], sizeof(float)), 0) << "position " << j;
  }
}

// NEXTTOK_CUDA_LM_HEAD_PATH=sync-mma: warp MMAs where sm_90 takes warpgroup
// MMAs (on other devices both calls take the same kernel).
TEST(OptInPaths, SyncMmaKeepsBinaryTopK) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  expect_binary_switch_matches_default("NEXTTOK_CUDA_LM_HEAD_PATH", "sync-mma");
}

// NEXTTOK_CUDA_LM_HEAD_PATH=pass-async-copies: the warpgroup-MMA kernel fed
// by cp.async stages where the default feeds it by bulk tensor copies (every
// shape above has whole 512-column chunks, so the default takes them all).
TEST(OptInPaths, PassAsyncCopiesKeepBinaryTopK) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  expect_binary_switch_matches_default("NEXTTOK_CUDA_LM_HEAD_PATH", "pass-async-copies");
}

// NEXTTOK_CUDA_LM_HEAD_CUT=filter on the binary head (the warpgroup-MMA
// kernels' CTA lists; the bit-plane kernel's per-warp lists keep their cuts).
TEST(OptInPaths, FilterCutsKeepBinaryTopK) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  expect_binary_switch_matches_default("NEXTTOK_CUDA_LM_HEAD_CUT", "filter");
}

// NEXTTOK_CUDA_LM_HEAD_GROUPS=one: the bulk-fed kernel's passes of 64 rows
// at G = 128 (M = 64, and the first pass of M = 67) one group at a time where
// by default each group's MMAs go in two halves of the token rows: the same
// integers and sums, so the same k best bit for bit.
TEST(OptInPaths, OneGroupAtATimeKeepsBinaryTopK) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  expect_binary_switch_matches_default("NEXTTOK_CUDA_LM_HEAD_GROUPS", "one");
}

// NEXTTOK_CUDA_LM_HEAD_WEIGHTS_L2=normal: the weights' bulk copies without
// the evict-first L2 policy. A cache hint must not change a byte: the staged
// dense kernel at M = 1, 16 and 64, and the binary head's bulk-fed kernel.
TEST(OptInPaths, PlainWeightCopiesKeepDenseTopK) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  expect_dense_switch_matches_default("NEXTTOK_CUDA_LM_HEAD_WEIGHTS_L2", "normal", NT_BF16, {1, 16, 64}, 256,
                                      70001, 2032);
}

// NEXTTOK_CUDA_LM_HEAD_ROWS_CAP=1, 2: the bit-plane kernel's warp lists
// capped at k + 32 and 2k + 32 entries. With k = 16 and 64-80 rows a warp
// (V = 70,001: 129 CTAs of 34 tiles of 16 rows over 8 warps) the default
// lists take every row a warp scores (no cut but the CTA's final select),
// the switches cut them when they pass 32 entries (after the warp's third
// tile) and 48 (the fourth); the same k best in the end, bit for bit, at
// M = 1 and 2.
TEST(OptInPaths, ShorterWarpListsKeepBinaryTopK) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::vector<BinaryShape> decode = {{5120, 128, 1}, {5120, 128, 2}, {2048, 256, 1}};
  expect_binary_switch_matches_default("NEXTTOK_CUDA_LM_HEAD_ROWS_CAP", "1", decode, 16);
  expect_binary_switch_matches_default("NEXTTOK_CUDA_LM_HEAD_ROWS_CAP", "2", decode, 16);
}

TEST(OptInPaths, PlainWeightCopiesKeepBinaryTopK) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  expect_binary_switch_matches_default("NEXTTOK_CUDA_LM_HEAD_WEIGHTS_L2", "normal");
}

}  // namespace
