// In-place f32 bitmask (W4: B=256, V=128,256, 50% random) against the DRAM
// patterns around it, timed the way bench/cuda_sampling_bench.py times the
// library (a spin before each call, inputs rotated over > 4x the L2), so the
// mask kernel's time can be read against what read + write of the same bytes
// costs in steady state, where every call also pays the write-back of the
// previous call's dirty lines. Last, scatter stores of -inf that never read
// the logits (checked against the library's scheme first): the one way under
// the in-place floor, if partial sectors reach DRAM without a fill.
// Built by bench/micro/CMakeLists.txt (-DNEXTTOK_BENCH_MICRO=ON): micro_mask_patterns.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda_check.h"
#include "median_timer.cuh"

constexpr int kThreads = 256;

// Load kinds: 0 ld.global.cs (evict-first), 1 ld.global.nc, 2 ld.global.
template <int L>
__device__ __forceinline__ float4 load(const float4* p) {
  if constexpr (L == 0) return __ldcs(p);
  else if constexpr (L == 1) return __ldg(p);
  else return *p;
}
// Store kinds: 0 st.global.cs, 1 st.global, 2 st.global.wt... (cg: L2 only)
template <int S>
__device__ __forceinline__ void store(float4* p, float4 v) {
  if constexpr (S == 0) __stcs(p, v);
  else if constexpr (S == 1) *p = v;
  else __stcg(p, v);
}

// Every vector read and written back unchanged: the read + write ceiling.
template <int VPT>
__global__ void __launch_bounds__(kThreads) copy_inplace(float4* x, int64_t n) {
  float4 v[VPT];
  const int64_t base = int64_t(blockIdx.x) * VPT * kThreads + threadIdx.x;
#pragma unroll
  for (int u = 0; u < VPT; ++u)
    if (base + u * kThreads < n) v[u] = x[base + u * kThreads];
#pragma unroll
  for (int u = 0; u < VPT; ++u)
    if (base + u * kThreads < n) x[base + u * kThreads] = v[u];
}

__global__ void __launch_bounds__(kThreads) read_only(const float4* x, int64_t n, float* sink) {
  float s = 0.0f;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads) {
    const float4 v = __ldcs(x + i);
    s += v.x + v.y + v.z + v.w;
  }
  if (s == 123.456f) *sink = s;
}

__global__ void __launch_bounds__(kThreads) write_only(float4* x, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads)
    __stcs(x + i, make_float4(-1.0f, -1.0f, -1.0f, -1.0f));
}

// The library's scheme (one row per blockIdx.y, VPT vectors per thread;
// fully allowed vectors untouched, fully masked written without a read, mixed
// read-merge-write), with the load and store kinds as parameters.
template <int L, int S, int VPT>
__global__ void __launch_bounds__(kThreads) mask_rows(float* logits, int64_t vocab, const int32_t* mask,
                                                      int64_t words) {
  float* row = logits + int64_t(blockIdx.y) * vocab;
  const int32_t* mrow = mask + int64_t(blockIdx.y) * words;
  int64_t t[VPT];
  uint32_t bits[VPT];
  float4 v[VPT];
#pragma unroll
  for (int u = 0; u < VPT; ++u) {
    t[u] = ((int64_t(blockIdx.x) * VPT + u) * kThreads + threadIdx.x) * 4;
    bits[u] = t[u] + 4 <= vocab ? (uint32_t(__ldg(mrow + (t[u] >> 5))) >> (t[u] & 31)) & 15u : 15u;
  }
#pragma unroll
  for (int u = 0; u < VPT; ++u)
    if (bits[u] != 0u && bits[u] != 15u) v[u] = load<L>(reinterpret_cast<const float4*>(row + t[u]));
#pragma unroll
  for (int u = 0; u < VPT; ++u) {
    if (bits[u] == 15u) continue;
    float w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (!((bits[u] >> j) & 1u)) w[j] = -INFINITY;
    store<S>(reinterpret_cast<float4*>(row + t[u]), make_float4(w[0], w[1], w[2], w[3]));
  }
}

// The library's scheme for any element size, in 16-byte vectors of G tokens
// (4 f32 or 8 f16/bf16), with the vectors a thread owns (VPT), the blocks an SM
// must hold (MINB) and the grid's shape as parameters: PERSIST = 0 is the
// library's grid (one block a chunk of VPT x 256 vectors of a row), PERSIST = 1
// a grid of MINB blocks an SM walking the (row, chunk) items, so the last wave
// is not a fraction of the SM's slots (bf16 at VPT = 4 is 5.2 waves).
template <int G, int VPT, int MINB, int PERSIST>
__global__ void __launch_bounds__(kThreads, MINB) mask_any(uint4* logits, int64_t row_vecs, const int32_t* mask,
                                                           int64_t words, int64_t rows, int64_t chunks) {
  constexpr uint32_t kAll = (1u << G) - 1u;
  constexpr uint32_t kLaneBits = 128 / G;  // 32 or 16
  constexpr uint32_t kNegInf = G == 4 ? 0xFF800000u : 0xFF80u;
  const int64_t items = rows * chunks;
  for (int64_t item = blockIdx.x; item < items; item += PERSIST ? gridDim.x : items) {
    const int64_t r = item / chunks, c = item - r * chunks;
    uint4* row = logits + r * row_vecs;
    const int32_t* mrow = mask + r * words;
    int64_t t[VPT];
    uint32_t bits[VPT];
    uint4 v[VPT];
#pragma unroll
    for (int u = 0; u < VPT; ++u) {
      t[u] = (c * VPT + u) * kThreads + threadIdx.x;  // vector index in the row
      bits[u] = t[u] < row_vecs ? (uint32_t(__ldg(mrow + ((t[u] * G) >> 5))) >> ((t[u] * G) & 31)) & kAll : kAll;
    }
#pragma unroll
    for (int u = 0; u < VPT; ++u) {
      v[u] = make_uint4(0u, 0u, 0u, 0u);
      if (bits[u] != 0u && bits[u] != kAll) v[u] = __ldg(row + t[u]);
    }
#pragma unroll
    for (int u = 0; u < VPT; ++u) {
      if (bits[u] == kAll) continue;
      uint32_t w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
      for (int j = 0; j < G; ++j) {
        const int word = j * kLaneBits / 32, sh = (j * kLaneBits) % 32;
        const uint32_t lane_mask = (kLaneBits == 32 ? 0xFFFFFFFFu : 0xFFFFu) << sh;
        if (!((bits[u] >> j) & 1u)) w[word] = (w[word] & ~lane_mask) | (kNegInf << sh);
      }
      __stcs(row + t[u], make_uint4(w[0], w[1], w[2], w[3]));
    }
    if (!PERSIST) break;
  }
}

// No logit read at all: every disallowed token gets its own -inf store, one
// warp store instruction a mask word (lane j stores token 32w + j when its bit
// is 0), so DRAM sees partial sectors. Whether the L2 must fill such a sector
// from DRAM before writing it back (a read-modify-write, as ECC'd HBM3 would
// need) decides whether this beats read + write: write-only bytes would put
// W4 f32 near 35 us instead of the ~69 us in-place floor. E is uint32_t (f32
// rows) or unsigned short (16-bit rows); 32 words a warp, row blockIdx.y.
template <class E>
__global__ void __launch_bounds__(kThreads) mask_scatter(E* logits, int64_t vocab, const int32_t* mask,
                                                         int64_t words, E neg_inf) {
  const int lane = threadIdx.x & 31;
  const int64_t word0 = (int64_t(blockIdx.x) * (kThreads / 32) + (threadIdx.x >> 5)) * 32;
  E* row = logits + int64_t(blockIdx.y) * vocab;
  const int32_t* mrow = mask + int64_t(blockIdx.y) * words;
  const uint32_t mine = word0 + lane < words ? uint32_t(__ldg(mrow + word0 + lane)) : 0xFFFFFFFFu;
#pragma unroll 8
  for (int w = 0; w < 32; ++w) {
    const uint32_t bits = __shfl_sync(0xFFFFFFFFu, mine, w);
    const int64_t token = (word0 + w) * 32 + lane;
    if (!((bits >> lane) & 1u) && token < vocab) __stcs(row + token, neg_inf);
  }
}

// Elements where two buffers differ (the scatter's check against mask_any).
__global__ void count_differences(const uint32_t* a, const uint32_t* b, int64_t n, unsigned long long* count) {
  unsigned long long c = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    c += a[i] != b[i];
  if (c) atomicAdd(count, c);
}

int main() {
  const int64_t rows = 256, vocab = 128256, words = (vocab + 31) / 32;
  const int64_t elems = rows * vocab, vec = elems / 4;
  const int copies = 4;  // 4 x 131 MB, > 4x the 60 MiB L2
  float* x = nullptr;
  int32_t* mask = nullptr;
  float* sink = nullptr;
  CHECK(cudaMalloc(&x, copies * elems * 4));
  CHECK(cudaMalloc(&mask, rows * words * 4));
  CHECK(cudaMalloc(&sink, 8));  // a float sink, or the scatter check's 64-bit count
  std::vector<int32_t> hm(rows * words);
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (auto& w : hm) {  // 50% random bits
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    w = int32_t(s >> 11);
  }
  CHECK(cudaMemcpy(mask, hm.data(), hm.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(x, 0x3f, copies * elems * 4));
  auto X = [&](int i) { return x + int64_t(i) * elems; };
  const double mb = elems * 4 / 1e6;
  const int runs = 100;
  auto report = [&](const char* name, float us, double bytes_mb) {
    std::printf("%-44s %8.1f us  %6.2f TB/s of %.0f MB\n", name, us, bytes_mb / us, bytes_mb);
  };
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  report("read only (ld.cs)", median_us([&](int i) {
    read_only<<<sms * 8, kThreads>>>(reinterpret_cast<float4*>(X(i)), vec, sink); }, copies, runs), mb);
  report("write only (st.cs)", median_us([&](int i) {
    write_only<<<sms * 8, kThreads>>>(reinterpret_cast<float4*>(X(i)), vec); }, copies, runs), mb);
  report("cudaMemcpy D2D (half, read + write)", median_us([&](int i) {
    cudaMemcpyAsync(X(i), X(i) + elems / 2, elems * 2, cudaMemcpyDeviceToDevice); }, copies, runs), mb);
  report("copy in place VPT=4", median_us([&](int i) {
    copy_inplace<4><<<unsigned((vec + 4 * kThreads - 1) / (4 * kThreads)), kThreads>>>(
        reinterpret_cast<float4*>(X(i)), vec); }, copies, runs), 2 * mb);
  const dim3 g4(unsigned((vocab / 4 + 4 * kThreads - 1) / (4 * kThreads)), unsigned(rows));
  const dim3 g8(unsigned((vocab / 4 + 8 * kThreads - 1) / (8 * kThreads)), unsigned(rows));
  report("mask ld.cs st.cs VPT=4 (the old library scheme)", median_us([&](int i) {
    mask_rows<0, 0, 4><<<g4, kThreads>>>(X(i), vocab, mask, words); }, copies, runs), 2 * mb);
  report("mask ld.nc st VPT=4", median_us([&](int i) {
    mask_rows<1, 1, 4><<<g4, kThreads>>>(X(i), vocab, mask, words); }, copies, runs), 2 * mb);
  report("mask ld.nc st.cs VPT=4 (library)", median_us([&](int i) {
    mask_rows<1, 0, 4><<<g4, kThreads>>>(X(i), vocab, mask, words); }, copies, runs), 2 * mb);
  report("mask ld st VPT=4", median_us([&](int i) {
    mask_rows<2, 1, 4><<<g4, kThreads>>>(X(i), vocab, mask, words); }, copies, runs), 2 * mb);
  report("mask ld.cs st.cg VPT=4", median_us([&](int i) {
    mask_rows<0, 2, 4><<<g4, kThreads>>>(X(i), vocab, mask, words); }, copies, runs), 2 * mb);
  report("mask ld.cs st.cs VPT=8", median_us([&](int i) {
    mask_rows<0, 0, 8><<<g8, kThreads>>>(X(i), vocab, mask, words); }, copies, runs), 2 * mb);
  report("mask ld st VPT=8", median_us([&](int i) {
    mask_rows<2, 1, 8><<<g8, kThreads>>>(X(i), vocab, mask, words); }, copies, runs), 2 * mb);
  // Any element size (mask_any): f32 against the library's f32 scheme above,
  // then 16-bit rows (W4 bf16: half the bytes, 8 tokens a vector).
  auto run_any = [&](const char* name, auto kernel, int G, int vpt, int minb, bool persist, int esize) {
    const int64_t row_vecs = vocab * esize / 16;
    const int64_t chunks = (row_vecs + int64_t(vpt) * kThreads - 1) / (int64_t(vpt) * kThreads);
    const unsigned grid = persist ? unsigned(sms * minb) : unsigned(rows * chunks);
    const double bytes = 2.0 * rows * vocab * esize / 1e6;
    report(name, median_us([&](int i) {
      kernel<<<grid, kThreads>>>(reinterpret_cast<uint4*>(X(i)), row_vecs, mask, words, rows, chunks); }, copies,
      runs), bytes);
    (void)G;
  };
  run_any("any f32 VPT=4 MINB=6", mask_any<4, 4, 6, 0>, 4, 4, 6, false, 4);
  run_any("any f32 VPT=4 MINB=6 persistent", mask_any<4, 4, 6, 1>, 4, 4, 6, true, 4);
  run_any("any f32 VPT=8 MINB=4", mask_any<4, 8, 4, 0>, 4, 8, 4, false, 4);
  report("copy in place VPT=4, 16-bit rows' bytes", median_us([&](int i) {
    copy_inplace<4><<<unsigned((vec / 2 + 4 * kThreads - 1) / (4 * kThreads)), kThreads>>>(
        reinterpret_cast<float4*>(X(i)), vec / 2); }, copies, runs), mb);
  run_any("any 16-bit VPT=4 MINB=6 (library)", mask_any<8, 4, 6, 0>, 8, 4, 6, false, 2);
  run_any("any 16-bit VPT=2 MINB=6", mask_any<8, 2, 6, 0>, 8, 2, 6, false, 2);
  run_any("any 16-bit VPT=2 MINB=8", mask_any<8, 2, 8, 0>, 8, 2, 8, false, 2);
  run_any("any 16-bit VPT=8 MINB=4", mask_any<8, 8, 4, 0>, 8, 8, 4, false, 2);
  run_any("any 16-bit VPT=4 MINB=6 persistent", mask_any<8, 4, 6, 1>, 8, 4, 6, true, 2);
  run_any("any 16-bit VPT=4 MINB=8 persistent", mask_any<8, 4, 8, 1>, 8, 4, 8, true, 2);
  run_any("any 16-bit VPT=2 MINB=8 persistent", mask_any<8, 2, 8, 1>, 8, 2, 8, true, 2);
  // Scatter stores (no logit read), first checked against mask_any on fresh
  // copies: same bytes, and the 50% mask must have written about half the
  // tokens (copy 0 is compared poisoned with 0x3f, so an unwritten token shows).
  const dim3 gs(unsigned((words + kThreads - 1) / kThreads), unsigned(rows));
  auto scatter = [&](float* rows_at, int esize) {
    if (esize == 4)
      mask_scatter<uint32_t><<<gs, kThreads>>>(reinterpret_cast<uint32_t*>(rows_at), vocab, mask, words, 0xFF800000u);
    else
      mask_scatter<unsigned short><<<gs, kThreads>>>(reinterpret_cast<unsigned short*>(rows_at), vocab, mask, words,
                                                     (unsigned short)0xFF80u);
  };
  // Words where a and b differ; a CUDA error reads as all of them (the check fails).
  auto differences = [&](const float* a, const float* b, int64_t n32) -> unsigned long long {
    unsigned long long* count = reinterpret_cast<unsigned long long*>(sink);
    unsigned long long host = ~0ull;
    if (cudaMemset(count, 0, 8) != cudaSuccess) return host;
    count_differences<<<sms * 4, 256>>>(reinterpret_cast<const uint32_t*>(a), reinterpret_cast<const uint32_t*>(b),
                                        n32, count);
    if (cudaMemcpy(&host, count, 8, cudaMemcpyDeviceToHost) != cudaSuccess) return ~0ull;
    return host;
  };
  for (int esize : {4, 2}) {
    const int64_t row_vecs = vocab * esize / 16, n32 = rows * vocab * esize / 4;
    const int64_t chunks = (row_vecs + 4 * kThreads - 1) / (4 * kThreads);
    for (int i = 0; i < 3; ++i) CHECK(cudaMemset(X(i), 0x3f, rows * vocab * esize));
    auto any = esize == 4 ? mask_any<4, 4, 6, 0> : mask_any<8, 4, 6, 0>;
    any<<<unsigned(rows * chunks), kThreads>>>(reinterpret_cast<uint4*>(X(0)), row_vecs, mask, words, rows, chunks);
    scatter(X(1), esize);
    const unsigned long long same = differences(X(0), X(1), n32), changed = differences(X(1), X(2), n32);
    const bool ok = same == 0 && changed > uint64_t(n32) / 4 && changed <= uint64_t(n32);
    std::printf("%s scatter check (%d-byte rows): %llu words differ from mask_any, %llu of %lld words written\n",
                ok ? "PASS" : "FAIL", esize, same, changed, (long long)n32);
    if (!ok) return 1;
  }
  report("scatter f32 (no logit read)", median_us([&](int i) { scatter(X(i), 4); }, copies, runs), 2 * mb);
  report("scatter 16-bit (no logit read)", median_us([&](int i) { scatter(X(i), 2); }, copies, runs), mb);
  // The same kernels on one copy (no rotation: the data stays partly in L2).
  report("mask ld.cs st.cs VPT=4, one copy", median_us([&](int) {
    mask_rows<0, 0, 4><<<g4, kThreads>>>(X(0), vocab, mask, words); }, 1, runs), 2 * mb);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  return 0;
}
