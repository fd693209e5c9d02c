// Read bandwidth of the access patterns the LM-head kernels could use, with no
// arithmetic, so a kernel's time can be split into "memory pattern" and "the
// rest". Every pattern reads the same bytes (V rows of R bytes) once through a
// per-CTA cp.async pipeline of S stages, as the binary head does.
// Built by bench/micro/CMakeLists.txt (-DNEXTTOK_BENCH_MICRO=ON): micro_dram_patterns.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdint>
#include <algorithm>
#include <vector>

#include "cuda_check.h"

__device__ __forceinline__ void cp16(void* dst, const void* src) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wait_n() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Pattern 0: stage = tile_rows rows x slice bytes (slice < row: strided, like
// the binary head's 64-byte column chunks); pattern 1: stage = whole rows
// (contiguous tile_rows*row_bytes/steps bytes).
template <int S>
__global__ void __launch_bounds__(256, 1)
pipeline(const unsigned char* w, int64_t rows, int row_bytes, int rows_per_cta, int tile_rows,
         int slice, unsigned* sink) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int64_t r0 = int64_t(blockIdx.x) * rows_per_cta;
  const int64_t r1 = min(rows, r0 + rows_per_cta);
  const int n_tiles = int((r1 - r0 + tile_rows - 1) / tile_rows);
  const int steps = row_bytes / slice;
  const int stage_bytes = tile_rows * slice;
  const int total = n_tiles * steps;
  int issued = 0;
  auto issue = [&]() {
    if (issued < total) {
      const int tile = issued / steps, st = issued - tile * steps;
      const int64_t row0 = r0 + int64_t(tile) * tile_rows;
      const int valid = int(min(int64_t(tile_rows), r1 - row0));
      unsigned char* dst = smem + (issued % S) * stage_bytes;
      {
        const int per_row = slice / 16;
        for (int i = threadIdx.x; i < valid * per_row; i += blockDim.x) {
          const int r = i / per_row, c = i - r * per_row;
          cp16(dst + r * slice + 16 * c, w + (row0 + r) * row_bytes + st * slice + 16 * c);
        }
      }
    }
    ++issued;
    commit();
  };
  for (int i = 0; i < S - 1; ++i) issue();
  unsigned acc = 0;
  for (int q = 0; q < total; ++q) {
    wait_n<S - 2>();
    __syncthreads();
    issue();
    acc += smem[(q % S) * stage_bytes + threadIdx.x * 4];
  }
  wait_n<0>();
  if (acc == 0x12345678u) sink[0] = acc;
}

// Pattern 2: plain vector loads, U per thread in flight, grid-stride over a
// contiguous range per CTA.
template <int U>
__global__ void __launch_bounds__(512, 2) stream_ld(const uint4* w, int64_t n16, unsigned* sink) {
  const int64_t per = (n16 + gridDim.x - 1) / gridDim.x;
  const int64_t b = per * blockIdx.x, e = min(n16, b + per);
  unsigned acc = 0;
  for (int64_t i = b + threadIdx.x; i < e; i += int64_t(U) * blockDim.x) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = i + int64_t(u) * blockDim.x;
      v[u] = j < e ? __ldcs(w + j) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].w;
  }
  if (acc == 0x12345678u) sink[0] = acc;
}

int main() {
  int sms = 0, smem_optin = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  const int64_t V = 248320;
  const int row_bytes = 640;  // 5120 sign bits
  const size_t bytes = size_t(V) * row_bytes;
  unsigned char* w;
  unsigned* sink;
  CHECK(cudaMalloc(&w, bytes));
  CHECK(cudaMalloc(&sink, 4));
  CHECK(cudaMemset(w, 1, bytes));
  unsigned char* flush;
  const size_t flush_bytes = 256u << 20;
  CHECK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  auto time = [&](auto&& launch) {
    std::vector<float> t;
    for (int it = 0; it < 12; ++it) {
      cudaMemsetAsync(flush, it, flush_bytes);
      cudaEventRecord(a);
      launch();
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms;
      cudaEventElapsedTime(&ms, a, b);
      if (it >= 2) t.push_back(ms * 1000.f);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  std::printf("signs: %zu bytes, %d SMs\n", bytes, sms);
  const int rows_per_cta = int((V + sms - 1) / sms + 15) / 16 * 16;
  const int grid = int((V + rows_per_cta - 1) / rows_per_cta);
  struct Cfg { int tile_rows, slice; };
  for (Cfg c : {Cfg{256, 64}, Cfg{256, 128}, Cfg{64, 640}, Cfg{32, 640}, Cfg{128, 128}}) {
    const int stage = c.tile_rows * c.slice;
    const int S = 8;
    if (S * stage > smem_optin) continue;
    auto k = pipeline<8>;
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, S * stage);
    const float us = time([&] {
      k<<<grid, 256, S * stage>>>(w, V, row_bytes, rows_per_cta, c.tile_rows, c.slice, sink);
    });
    CHECK(cudaGetLastError());
    std::printf("cp.async pipeline S=8 tile %3d rows x %3d B (stage %6d B): %7.1f us  %6.0f GB/s\n",
                c.tile_rows, c.slice, stage, us, bytes / us / 1e3);
  }
  for (int ctas : {1, 2, 4}) {
    const float us = time([&] { stream_ld<4><<<sms * ctas, 512>>>((const uint4*)w, bytes / 16, sink); });
    CHECK(cudaGetLastError());
    std::printf("ld.global v4 x4 in flight, %d CTAs/SM x 512:                  %7.1f us  %6.0f GB/s\n",
                ctas, us, bytes / us / 1e3);
  }
  return 0;
}
