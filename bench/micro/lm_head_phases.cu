// Where the warps of the LM heads' sm_90 kernels spend their cycles: W2
// (dense bf16, V = 248,320, H = 5,120) with PHASES_BINARY undefined, W1 (the
// binary head, G = 128) with it defined, at M = 16 and 64, k = 50.
// The kernels' sources are included with NT_CUDA_TIMELINE defined, so the
// phase sums of cuda/timeline.cuh (nt::cuda::phase) are compiled in; a row
// gives the call's median time (the kernel and the merge) and, per phase, the
// mean over CTAs of the cycles a CTA's warps of that kind spent there, divided
// by their number (so a phase of the scoring warps reads as one warp's time).
//   scripts/build_lm_head_phases.sh build/lm_head_phases && build/lm_head_phases
// (scripts/device_check.sh PHASES=1 builds and runs both heads.)
#define NT_CUDA_TIMELINE 1
#if defined(PHASES_BINARY)
#include "cuda/lm_head_topk_binary.cu"
#else
#include "cuda/lm_head_topk_dense.cu"
#endif

#include <algorithm>
#include <cstdio>
#include <vector>

#include "nexttok/nexttok.hpp"

#include "cuda_check.h"

namespace {

using nt::cuda::kTimelineCtas;
using nt::cuda::kTimelineSlots;
namespace phase = nt::cuda::phase;

// Deterministic fills on the device (a hash of the element index): the
// weights need no host copy of 2.5 GB.
__device__ uint32_t mix(uint64_t i) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return uint32_t(x);
}
#if defined(PHASES_BINARY)
__global__ void fill_u32(uint32_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = mix(i + seed);
}
__global__ void fill_f32(float* p, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = lo + (hi - lo) * float(mix(i + seed) >> 8) * (1.0f / 16777216.0f);
}
#endif
// bf16 or f16 halves of a uniform value in [-scale, scale) (bf16: the top 16 bits of the float).
__global__ void fill_u16(uint16_t* p, size_t n, uint64_t seed, float scale, bool bf16) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float v = scale * (float(mix(i + seed) >> 8) * (2.0f / 16777216.0f) - 1.0f);
    p[i] = bf16 ? uint16_t(__float_as_uint(v) >> 16) : __half_as_ushort(__float2half(v));
  }
}

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 256)));
  return p;
}

struct PhaseName {
  int slot;
  const char* name;
  bool scoring;  // a phase of the scoring warps (else of the copy lane)
};
constexpr PhaseName kPhases[] = {
    {phase::kStageWait, "stage wait", true},   {phase::kStageWork, "stage work", true},
    {phase::kUpkeep, "upkeep", true},          {phase::kLastUpkeep, "last upkeep", true},
    {phase::kCopyWait, "copy: stage wait", false},
    {phase::kUpkeepBarrier, "(upkeeps: barrier)", true}, {phase::kUpkeepCuts, "(upkeeps: cuts)", true},
};

void clear_sums() {
  std::vector<unsigned long long> zero(size_t(kTimelineCtas) * kTimelineSlots, 0);
  CHECK(cudaMemcpyToSymbol(nt::cuda::timeline_sum, zero.data(), zero.size() * 8));
  CHECK(cudaMemcpyToSymbol(nt::cuda::timeline_ns, zero.data(), zero.size() * 8));
  // The copies go on the legacy stream; the call's stream does not wait for it.
  CHECK(cudaDeviceSynchronize());
}

// Times `call` (median of 20) and then reports one call's phase sums.
template <class Call>
void report(const char* label, Call&& call, int scoring_warps, cudaStream_t s) {
  for (int i = 0; i < 3; ++i) call();
  CHECK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    CHECK(cudaEventRecord(a, s));
    call();
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  clear_sums();
  call();
  CHECK(cudaStreamSynchronize(s));
  std::vector<unsigned long long> sums(size_t(kTimelineCtas) * kTimelineSlots), ns(sums.size());
  std::vector<long long> cycles(sums.size());
  CHECK(cudaMemcpyFromSymbol(sums.data(), nt::cuda::timeline_sum, sums.size() * 8));
  CHECK(cudaMemcpyFromSymbol(ns.data(), nt::cuda::timeline_ns, ns.size() * 8));
  CHECK(cudaMemcpyFromSymbol(cycles.data(), nt::cuda::timeline_cycles, cycles.size() * 8));
  // The scoring kernel's thread 0 marks its start and end (the merges' marks
  // use other slots); the SM clock is read from those marks' cycles and ns.
  int ctas = 0;
  double kernel_us = 0, cycles_per_us = 0;
  for (int c = 0; c < kTimelineCtas; ++c) {
    const size_t at = size_t(c) * kTimelineSlots;
    const unsigned long long t0 = ns[at + phase::kStartMark], t1 = ns[at + phase::kEndMark];
    if (t0 == 0 || t1 <= t0) continue;
    ++ctas;
    kernel_us = std::max(kernel_us, (t1 - t0) * 1e-3);
    cycles_per_us += double(cycles[at + phase::kEndMark] - cycles[at + phase::kStartMark]) / ((t1 - t0) * 1e-3);
  }
  if (ctas == 0) {
    std::printf("\n%s: no CTA marked (not the sm_90 kernels?)\n", label);
    return;
  }
  cycles_per_us /= ctas;
  std::printf("\n%s: call %.1f us (median of 20), %d CTAs, longest CTA %.1f us, SM clock %.0f MHz\n", label,
              ms[ms.size() / 2] * 1e3, ctas, kernel_us, cycles_per_us);
  for (const PhaseName& ph : kPhases) {
    double total = 0;
    for (int c = 0; c < kTimelineCtas; ++c) total += double(sums[size_t(c) * kTimelineSlots + ph.slot]);
    if (total == 0 || ctas == 0) continue;
    const int warps = ph.scoring ? scoring_warps : 1;
    const double us = total / ctas / warps / cycles_per_us;
    std::printf("  %-18s %8.1f us a warp (mean over CTAs)\n", ph.name, us);
  }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
}

}  // namespace

int main() {
  const int V = 248320, H = 5120, K = 50;
  const nexttok::Device dev = nexttok::Device::cuda(0);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int rows : {16, 64}) {
    float* values = static_cast<float*>(device_alloc(size_t(rows) * K * 4));
    int64_t* indices = static_cast<int64_t*>(device_alloc(size_t(rows) * K * 8));
#if defined(PHASES_BINARY)
    const int G = 128;
    auto* wq = static_cast<uint32_t*>(device_alloc(size_t(V) * (H / 32) * 4));
    auto* wscale = static_cast<uint16_t*>(device_alloc(size_t(V) * (H / G) * 2));
    auto* act_q = static_cast<uint32_t*>(device_alloc(size_t(rows) * H));
    auto* act_scale = static_cast<float*>(device_alloc(size_t(rows) * 4));
    fill_u32<<<1024, 256, 0, s>>>(wq, size_t(V) * (H / 32), 1);
    fill_u16<<<1024, 256, 0, s>>>(wscale, size_t(V) * (H / G), 2, 0.02f, false);
    fill_u32<<<64, 256, 0, s>>>(act_q, size_t(rows) * H / 4, 3);
    fill_f32<<<1, 64, 0, s>>>(act_scale, size_t(rows), 4, 0.01f, 0.02f);
    nt_lm_head_binary_args a{};
    a.act_q = nexttok::matrix(act_q, NT_I8, rows, H, -1, dev);
    a.act_scale = nexttok::vector(act_scale, NT_F32, rows, dev);
    a.wq = nexttok::matrix(wq, NT_I32, V, H / 32, -1, dev);
    a.wscale = nexttok::matrix(wscale, NT_F16, V, H / G, -1, dev);
    a.bias = nexttok::vector(nullptr, NT_F32, 0, dev);
    a.group_size = G;
    const char* head = "W1 binary";
    const int scoring_warps = nt::cuda::lm_head::kWgmmaWarps;
    auto size = [&] { return nt::cuda::lm_head_topk_binary_workspace_size(a); };
    auto run = [&](void* ws, size_t bytes) { nt::cuda::lm_head_topk_binary(a, ws, bytes, s); };
    auto release = [&] {
      CHECK(cudaFree(wq));
      CHECK(cudaFree(wscale));
      CHECK(cudaFree(act_q));
      CHECK(cudaFree(act_scale));
    };
#else
    auto* weight = static_cast<uint16_t*>(device_alloc(size_t(V) * H * 2));
    auto* hidden = static_cast<uint16_t*>(device_alloc(size_t(rows) * H * 2));
    fill_u16<<<1024, 256, 0, s>>>(weight, size_t(V) * H, 1, 0.03f, true);
    fill_u16<<<64, 256, 0, s>>>(hidden, size_t(rows) * H, 2, 1.0f, true);
    nt_lm_head_dense_args a{};
    a.hidden = nexttok::matrix(hidden, NT_BF16, rows, H, -1, dev);
    a.weight = nexttok::matrix(weight, NT_BF16, V, H, -1, dev);
    a.bias = nexttok::vector(nullptr, NT_BF16, 0, dev);
    const char* head = "W2 dense bf16";
    const int scoring_warps = nt::cuda::lm_head::kStagedWarps;
    auto size = [&] { return nt::cuda::lm_head_topk_dense_workspace_size(a); };
    auto run = [&](void* ws, size_t bytes) { nt::cuda::lm_head_topk_dense(a, ws, bytes, s); };
    auto release = [&] {
      CHECK(cudaFree(weight));
      CHECK(cudaFree(hidden));
    };
#endif
    a.k = K;
    a.values = nexttok::matrix(values, rows, K, -1, dev);
    a.indices = nexttok::matrix(indices, rows, K, -1, dev);
    CHECK(cudaStreamSynchronize(s));
    const size_t bytes = size();
    void* ws = device_alloc(bytes);
    char label[96];
    std::snprintf(label, sizeof label, "%s M=%d", head, rows);
    report(label, [&] { run(ws, bytes); }, scoring_warps, s);
    CHECK(cudaFree(ws));
    release();
    CHECK(cudaFree(values));
    CHECK(cudaFree(indices));
  }
  return 0;
}
