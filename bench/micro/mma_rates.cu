// Latency and SM throughput of the warp-level MMAs the binary head can use,
// measured rather than assumed: the 1-bit AND-popcount MMAs (m16n8k128 and
// m16n8k256) and the int8 one (m16n8k32). The bit-plane decode kernel issues
// one m16n8k128 per group of 16 vocabulary rows; whether its time per tile is
// the MMA's latency chain or its issue rate decides how to restructure it.
// Built by bench/micro/CMakeLists.txt (-DNEXTTOK_BENCH_MICRO=ON): micro_mma_rates.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "cuda_check.h"

enum Kind { kB1K128 = 0, kB1K256 = 1, kS8K32 = 2 };

template <int K>
__device__ __forceinline__ void mma(int32_t (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (K == kB1K128) {
    asm volatile(
        "mma.sync.aligned.m16n8k128.row.col.s32.b1.b1.s32.and.popc {%0,%1,%2,%3}, {%4,%5}, {%6}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(b[0]));
  } else if constexpr (K == kB1K256) {
    asm volatile(
        "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

// CHAINS independent accumulators a warp, each a dependent chain of `steps`
// MMAs; warp 0's lane 0 records the cycles its loop took.
template <int K, int CHAINS>
__global__ void run(int steps, uint32_t seed, long long* cycles, int32_t* sink) {
  uint32_t a[4], b[2];
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = seed * (threadIdx.x + 7 * i + 1);
  b[0] = seed ^ threadIdx.x;
  b[1] = seed + threadIdx.x;
  int32_t d[CHAINS][4] = {};
  __syncthreads();
  const long long t0 = clock64();
  for (int s = 0; s < steps; ++s) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) mma<K>(d[c], a, b);
  }
  int32_t x = 0;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) x += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  __syncthreads();
  const long long t1 = clock64();
  if (threadIdx.x == 0 && blockIdx.x == 0) *cycles = t1 - t0;
  if (x == 0x7fffffff) sink[threadIdx.x] = x;  // keeps the chains alive
}

template <int K, int CHAINS>
double cycles_per_mma(int warps, int steps, long long* d_cycles, int32_t* d_sink) {
  run<K, CHAINS><<<1, 32 * warps>>>(steps, 0x9e3779b9u, d_cycles, d_sink);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  long long cycles = 0;
  CHECK(cudaMemcpy(&cycles, d_cycles, sizeof cycles, cudaMemcpyDeviceToHost));
  return double(cycles) / double(steps);
}

template <int K>
void report(const char* name, long long* d_cycles, int32_t* d_sink) {
  const int steps = 4096;
  cycles_per_mma<K, 1>(1, 64, d_cycles, d_sink);  // warm-up
  // Latency: one warp, one chain. Throughput: an SM's cycles per MMA with
  // 4 chains a warp and 4, 8 or 16 warps (all four schedulers busy).
  const double latency = cycles_per_mma<K, 1>(1, steps, d_cycles, d_sink);
  std::printf("%-10s latency %6.1f cycles", name, latency);
  for (int warps : {4, 8, 16}) {
    const double per_step = cycles_per_mma<K, 4>(warps, steps, d_cycles, d_sink);
    std::printf(" | %2d warps: %5.2f cycles/MMA an SM", warps, per_step / (4.0 * warps));
  }
  std::printf("\n");
}

int main() {
  long long* d_cycles;
  int32_t* d_sink;
  CHECK(cudaMalloc(&d_cycles, sizeof(long long)));
  CHECK(cudaMalloc(&d_sink, 1024 * sizeof(int32_t)));
  report<kB1K128>("b1 k128", d_cycles, d_sink);
  report<kB1K256>("b1 k256", d_cycles, d_sink);
  report<kS8K32>("s8 k32", d_cycles, d_sink);
  CHECK(cudaFree(d_cycles));
  CHECK(cudaFree(d_sink));
  return 0;
}
