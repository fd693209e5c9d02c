// Where the time of a sampling call and of the LM heads' merge goes: W3
// k50+p0.9+min-p 0.05 at B = 1 (V = 128,256, the row's chunks as one cluster
// on sm_90) and at B = 256 (one CTA a row, merged in the scan CTA), plain
// T = 0.7 and greedy at B = 256, each also with more chunks a row; and the LM heads'
// merge alone (W1 M = 1's shape: 132 scoring CTAs of 50 candidates each).
// Each is timed warm (back to back) and cold (after a write of 2x the L2, as
// in a decode step, where the LM head's weights pass through L2 between
// calls), with the phase marks of cuda/timeline.cuh per CTA (CTA 0, the
// median CTA and the last one).
//   scripts/build_latency_paths.sh build/latency_paths && build/latency_paths
// (scripts/device_check.sh LATENCY=1 and device_profile.sh PROFILE_LATENCY=1 run it.)
#define NT_CUDA_TIMELINE 1
#include "cuda/sample.cu"
#include "cuda/topk_merge.cuh"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <random>
#include <vector>

#include "cuda_check.h"

namespace {

using nt::cuda::kTimelineCtas;
using nt::cuda::kTimelineSlots;

struct Timeline {
  std::vector<unsigned long long> ns;
  std::vector<long long> cycles;
  std::vector<unsigned> smid;
};

Timeline read_timeline() {
  Timeline t;
  t.ns.resize(size_t(kTimelineCtas) * kTimelineSlots);
  t.cycles.resize(t.ns.size());
  CHECK(cudaMemcpyFromSymbol(t.ns.data(), nt::cuda::timeline_ns, t.ns.size() * 8));
  CHECK(cudaMemcpyFromSymbol(t.cycles.data(), nt::cuda::timeline_cycles, t.cycles.size() * 8));
  t.smid.resize(kTimelineCtas);
  CHECK(cudaMemcpyFromSymbol(t.smid.data(), nt::cuda::timeline_smid, t.smid.size() * 4));
  return t;
}

void clear_timeline() {
  std::vector<unsigned long long> zero(size_t(kTimelineCtas) * kTimelineSlots, 0);
  CHECK(cudaMemcpyToSymbol(nt::cuda::timeline_ns, zero.data(), zero.size() * 8));
  CHECK(cudaMemcpyToSymbol(nt::cuda::timeline_cycles, zero.data(), zero.size() * 8));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Times `call` `runs` times, each between two events; cold: a write of
// `flush` bytes before each (outside the events).
double time_call(const std::function<void()>& call, bool cold, void* flush, size_t flush_bytes,
                 int runs, cudaStream_t s) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<double> us;
  for (int i = 0; i < runs + 3; ++i) {
    if (cold) CHECK(cudaMemsetAsync(flush, i & 0xFF, flush_bytes, s));
    CHECK(cudaEventRecord(e0, s));
    call();
    CHECK(cudaEventRecord(e1, s));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (i >= 3) us.push_back(ms * 1000.0);
  }
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return median(us);
}

// Median over `runs` calls of each mark's time (us) after the earliest CTA's
// mark 0: for CTA 0 and, per slot, the latest CTA to reach it.
// How the CTAs' times of one mark spread (all calls pooled): percentiles, and
// each SM's mean with the CTAs it ran (to tell slow SMs from slow rows).
void report_spread(const char* name, int slot, std::vector<double> v, const std::vector<double>& sm_sum,
                   const std::vector<double>& sm_n, int runs) {
  if (v.empty()) return;
  std::sort(v.begin(), v.end());
  auto pct = [&](double p) { return v[std::min(v.size() - 1, size_t(p * double(v.size())))]; };
  std::printf("%s: mark %d over CTAs: p10 %.2f p50 %.2f p90 %.2f p99 %.2f max %.2f us\n", name, slot, pct(0.1),
              pct(0.5), pct(0.9), pct(0.99), v.back());
  std::printf("  per SM (smid: mean us / CTAs a call):");
  int shown = 0;
  for (size_t sm = 0; sm < sm_sum.size(); ++sm) {
    if (sm_n[sm] == 0) continue;
    if (shown++ % 8 == 0) std::printf("\n   ");
    std::printf(" %3zu:%6.2f/%.1f", sm, sm_sum[sm] / sm_n[sm], sm_n[sm] / runs);
  }
  std::printf("\n");
}

void timeline_report(const char* name, const std::function<void()>& call, bool cold, void* flush,
                     size_t flush_bytes, int ctas, const char* const* slot_names, int slots, int runs,
                     cudaStream_t s, int spread_slot = -1) {
  std::vector<std::vector<double>> cta0(slots), last(slots), cyc0(slots), mid(slots);
  std::vector<double> spread, sm_sum(256, 0.0), sm_n(256, 0.0);
  for (int r = 0; r < runs; ++r) {
    if (cold) CHECK(cudaMemsetAsync(flush, r & 0xFF, flush_bytes, s));
    CHECK(cudaStreamSynchronize(s));
    clear_timeline();
    call();
    CHECK(cudaStreamSynchronize(s));
    const Timeline t = read_timeline();
    unsigned long long t0 = ~0ull;
    for (int c = 0; c < ctas; ++c)
      if (t.ns[size_t(c) * kTimelineSlots]) t0 = std::min(t0, t.ns[size_t(c) * kTimelineSlots]);
    if (spread_slot >= 0)
      for (int c = 0; c < ctas; ++c) {
        const unsigned long long v = t.ns[size_t(c) * kTimelineSlots + spread_slot];
        if (!v) continue;
        const double us = double(v - t0) / 1000.0;
        spread.push_back(us);
        const unsigned sm = t.smid[c];
        if (sm < sm_sum.size()) {
          sm_sum[sm] += us;
          sm_n[sm] += 1;
        }
      }
    for (int k = 0; k < slots; ++k) {
      const unsigned long long v0 = t.ns[k];
      if (v0) cta0[k].push_back(double(v0 - t0) / 1000.0);
      if (v0 && t.cycles[0]) cyc0[k].push_back(double(t.cycles[k] - t.cycles[0]));
      unsigned long long hi = 0;
      std::vector<double> reached;
      for (int c = 0; c < ctas; ++c) {
        const unsigned long long v = t.ns[size_t(c) * kTimelineSlots + k];
        hi = std::max(hi, v);
        if (v) reached.push_back(double(v - t0) / 1000.0);
      }
      if (hi) last[k].push_back(double(hi - t0) / 1000.0);
      if (!reached.empty()) mid[k].push_back(median(reached));
    }
  }
  if (spread_slot >= 0) report_spread(name, spread_slot, spread, sm_sum, sm_n, runs);
  std::printf("%s, %s: phase marks (us after the first CTA's start; medians of %d calls)\n", name,
              cold ? "cold" : "warm", runs);
  std::printf("  %-34s %9s %11s %10s %9s\n", "mark", "CTA 0", "CTA 0 cyc", "median CTA", "last CTA");
  for (int k = 0; k < slots; ++k) {
    if (cta0[k].empty() && last[k].empty()) continue;
    std::printf("  %2d %-31s %9.2f %11.0f %10.2f %9.2f\n", k, slot_names[k], median(cta0[k]), median(cyc0[k]),
                median(mid[k]), median(last[k]));
  }
}

// A W3 call of `rows` rows of V = 128,256 (k, p, min-p as given; k = 0 and
// p = 1: plain sampling), timed and phase-marked for each merge choice
// ("cluster" or "default": the default plan, "kernel":
// NEXTTOK_CUDA_SAMPLE_MERGE=kernel) and each split count (0: the planned
// one, else NEXTTOK_CUDA_SAMPLE_SPLITS).
void sampling_case(int rows, float temperature, int top_k, float top_p, float min_p,
                   std::initializer_list<const char*> merges, std::initializer_list<int> splits_list, void* flush,
                   size_t flush_bytes, int dev, cudaStream_t s, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int vocab = 128256;
  std::vector<float> host(size_t(rows) * vocab);
  for (auto& x : host) x = 2.0f * normal(rng);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < 4; ++j)
      host[size_t(r) * vocab + rng() % vocab] = 10.0f + 6.0f * float(rng() % 1000) / 1000.0f;
  float* logits = nullptr;
  int64_t* tokens = nullptr;
  CHECK(cudaMalloc(&logits, host.size() * sizeof(float)));
  CHECK(cudaMalloc(&tokens, size_t(rows) * 8));
  CHECK(cudaMemcpy(logits, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  nt_sample_args a{};
  a.logits.data = logits;
  a.logits.dtype = NT_F32;
  a.logits.ndim = 2;
  a.logits.shape[0] = rows;
  a.logits.shape[1] = vocab;
  a.logits.row_stride = vocab;
  a.logits.device = NT_DEVICE_CUDA;
  a.logits.device_id = dev;
  a.tokens = a.logits;
  a.tokens.data = tokens;
  a.tokens.dtype = NT_I64;
  a.tokens.ndim = 1;
  a.tokens.shape[1] = 0;
  a.tokens.row_stride = 1;
  a.temperature.scalar = temperature;
  a.top_k.scalar = top_k;
  a.top_p.scalar = top_p;
  a.min_p.scalar = min_p;
  a.seed.scalar = 1234;
  const char* slots[] = {"kernel start",          "first tile in hand",    "first-tile floor",
                         "scan loop done",        "chunk selected",        "chunk record out",
                         "cluster barrier passed", "merge: records read",  "merge: candidates in",
                         "merge: top m selected", "tail: sorted",          "tail: keep length",
                         "tail: token written"};
  char label[160];
  std::snprintf(label, sizeof label, "sample B=%d V=%d %s", rows, vocab,
                top_k ? "k50+p0.9+min-p" : temperature > 0.0f ? "plain T=0.7" : "greedy");
  std::vector<int64_t> first_tokens;
  for (const char* merge : merges)
    for (int splits : splits_list) {
      if (std::strcmp(merge, "kernel") == 0)
        setenv("NEXTTOK_CUDA_SAMPLE_MERGE", "kernel", 1);
      else
        unsetenv("NEXTTOK_CUDA_SAMPLE_MERGE");
      if (splits > 0)
        setenv("NEXTTOK_CUDA_SAMPLE_SPLITS", std::to_string(splits).c_str(), 1);
      else
        unsetenv("NEXTTOK_CUDA_SAMPLE_SPLITS");
      const size_t bytes = nt::cuda::sample_workspace_size(a);
      void* ws = nullptr;
      CHECK(cudaMalloc(&ws, std::max<size_t>(bytes, 256)));
      auto call = [&] { nt::cuda::sample(a, ws, bytes, s); };
      CHECK(cudaMemset(tokens, 0x7F, size_t(rows) * 8));
      call();
      CHECK(cudaStreamSynchronize(s));
      std::vector<int64_t> got(rows);
      CHECK(cudaMemcpy(got.data(), tokens, size_t(rows) * 8, cudaMemcpyDeviceToHost));
      bool valid = true;
      for (int64_t t : got) valid = valid && t >= 0 && t < vocab;
      if (first_tokens.empty()) first_tokens = got;
      const double warm = time_call(call, false, flush, flush_bytes, 200, s);
      const double cold = time_call(call, true, flush, flush_bytes, 200, s);
      std::printf("\n%s (%s merge, splits %s; tokens %s, %s the first setting's; token 0 = %lld): "
                  "warm %.2f us, cold %.2f us\n",
                  label, merge, splits > 0 ? std::to_string(splits).c_str() : "planned",
                  valid ? "in range" : "OUT OF RANGE",
                  got == first_tokens ? "equal to" : "DIFFERENT FROM", (long long)got[0], warm, cold);
      // CTAs: a row's chunks at B = 1 (16 in a cluster, up to 64 otherwise), else the
      // rows' chunks; for a batch, how the CTAs' scan ends spread (mark 3).
      const int ctas = rows == 1 ? 64 : std::min(rows * std::max(splits, 1), int(kTimelineCtas));
      timeline_report(label, call, false, flush, flush_bytes, ctas, slots, 13, 30, s, rows > 1 ? 3 : -1);
      timeline_report(label, call, true, flush, flush_bytes, ctas, slots, 13, 30, s);
      CHECK(cudaFree(ws));
    }
  unsetenv("NEXTTOK_CUDA_SAMPLE_MERGE");
  unsetenv("NEXTTOK_CUDA_SAMPLE_SPLITS");
  CHECK(cudaFree(logits));
  CHECK(cudaFree(tokens));
}

}  // namespace

int main() {
  int dev = 0;
  CHECK(cudaSetDevice(dev));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const size_t flush_bytes = size_t(prop.l2CacheSize) * 2;
  void* flush = nullptr;
  CHECK(cudaMalloc(&flush, flush_bytes));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);

  // ---- sampling: B = 1 (the latency path) and B = 256 (where the tail sits) ----
  sampling_case(1, 0.7f, 50, 0.9f, 0.05f, {"cluster", "kernel"}, {0}, flush, flush_bytes, dev, s, rng);
  sampling_case(256, 0.7f, 50, 0.9f, 0.05f, {"default"}, {0, 2}, flush, flush_bytes, dev, s, rng);
  sampling_case(256, 0.7f, 0, 1.0f, 0.0f, {"default"}, {0, 2, 4}, flush, flush_bytes, dev, s, rng);
  sampling_case(256, 0.0f, 0, 1.0f, 0.0f, {"default"}, {0, 4}, flush, flush_bytes, dev, s, rng);

  // ---- the LM heads' merge, W1 M = 1's shape ----------------------------------
  {
    using nt::cuda::topk::Candidate;
    const int grid = prop.multiProcessorCount, k = 50, per_cta = 248320 / grid + 1;
    const int cap = k + 256 + 128, mp_stride = 1;
    std::vector<Candidate> cand(size_t(grid) * mp_stride * cap);
    std::vector<int32_t> counts(size_t(grid) * mp_stride * 2);
    std::vector<float> scores(per_cta);
    for (int c = 0; c < grid; ++c) {
      for (auto& x : scores) x = normal(rng);
      std::vector<int> order(per_cta);
      for (int i = 0; i < per_cta; ++i) order[i] = i;
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int x, int y) { return scores[x] > scores[y]; });
      for (int i = 0; i < k; ++i)
        cand[size_t(c) * cap + i] = Candidate{scores[order[i]], c * per_cta + order[i]};
      counts[c] = k;
      counts[grid + c] = int32_t(nt_order_key(scores[order[k - 1]]));
    }
    Candidate* d_cand = nullptr;
    int32_t* d_counts = nullptr;
    float* values = nullptr;
    int64_t* indices = nullptr;
    CHECK(cudaMalloc(&d_cand, cand.size() * sizeof(Candidate)));
    CHECK(cudaMalloc(&d_counts, counts.size() * 4));
    CHECK(cudaMalloc(&values, k * 4));
    CHECK(cudaMalloc(&indices, k * 8));
    CHECK(cudaMemcpy(d_cand, cand.data(), cand.size() * sizeof(Candidate), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_counts, counts.data(), counts.size() * 4, cudaMemcpyHostToDevice));
    nt::cuda::topk::CandidateArgs ca{d_cand, d_counts, mp_stride, cap, k};
    int smem_optin = 0;
    CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const nt::cuda::topk::MergeBudget budget = nt::cuda::topk::merge_budget(
        smem_optin, [](auto kernel, int bytes) {
          CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        });
    auto call = [&] {
      nt::cuda::topk::launch_merge(ca, grid, values, k, indices, k, 0, 1, budget, false, s);
    };
    std::vector<int64_t> first(k), again(k);
    for (const char* merge : {"few winners", "sort"}) {
      if (std::strcmp(merge, "sort") == 0)
        setenv("NEXTTOK_CUDA_LM_HEAD_MERGE", "sort", 1);
      else
        unsetenv("NEXTTOK_CUDA_LM_HEAD_MERGE");
      CHECK(cudaMemset(indices, 0x7F, k * 8));
      call();
      CHECK(cudaStreamSynchronize(s));
      CHECK(cudaMemcpy(again.data(), indices, k * 8, cudaMemcpyDeviceToHost));
      if (std::strcmp(merge, "sort") == 0)
        std::printf("\nindices equal to the few-winners merge's: %s\n", again == first ? "yes" : "NO");
      first = again;
      const double warm = time_call(call, false, flush, flush_bytes, 200, s);
      const double cold = time_call(call, true, flush, flush_bytes, 200, s);
      std::printf("\nLM-head merge (%s), %d CTAs x %d candidates, k=%d: warm %.2f us, cold %.2f us\n", merge,
                  grid, k, k, warm, cold);
      const char* sort_slots[] = {"kernel start",     "floor and offsets", "candidates resident", "k-th found",
                                  "winners gathered", "sorted",            "written"};
      const char* few_slots[] = {"kernel start", "lists resident", "bound", "survivors out",
                                 "tree merged",  "-",               "written"};
      const char* const* slots = std::strcmp(merge, "sort") == 0 ? sort_slots : few_slots;
      timeline_report("LM-head merge", call, false, flush, flush_bytes, 1, slots, 7, 30, s);
      timeline_report("LM-head merge", call, true, flush, flush_bytes, 1, slots, 7, 30, s);
    }
    unsetenv("NEXTTOK_CUDA_LM_HEAD_MERGE");
  }
  CHECK(cudaFree(flush));
  return 0;
}
