// Read bandwidth of a logits-row scan with no sampling arithmetic: B rows of V
// fp32, each row split into S chunks, one CTA per chunk reading 16-byte vectors
// into DEPTH register tiles (the sampling scan's scheme), reduced to one max per
// CTA so nothing is optimized away. Sweeps the load flavour (evict-first,
// non-coherent, plain), DEPTH, threads per CTA and splits, so the greedy scan's
// time can be set beside what the same reads take alone. Inputs rotate over
// more than 4x the L2.
// Built by bench/micro/CMakeLists.txt (-DNEXTTOK_BENCH_MICRO=ON): micro_row_reads.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda_check.h"

// Philox4x32-10 (Salmon et al., SC'11), keyed as SPEC.md keys token draws:
// counter (block, row, offset lo, offset hi), key (seed lo, seed hi). The
// arithmetic a plainly sampled token pays; the bits only feed the sink.
struct PhiloxBlock {
  uint32_t v[4];
};

__device__ __forceinline__ PhiloxBlock philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2,
                                                     uint32_t c3, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

enum Kind { kEvictFirst = 0, kNonCoherent = 1, kPlain = 2 };

template <int KIND>
__device__ __forceinline__ float4 load4(const float* p) {
  if constexpr (KIND == kEvictFirst) return __ldcs(reinterpret_cast<const float4*>(p));
  else if constexpr (KIND == kNonCoherent) return __ldg(reinterpret_cast<const float4*>(p));
  else return *reinterpret_cast<const float4*>(p);
}

// Each thread reads 8 tokens (two vectors) per tile, as the scan does. PHILOX:
// one Philox block per 4 tokens as well (what plain sampling pays where no
// group can be ruled out), folded into the result.
template <int THREADS, int DEPTH, int KIND, bool PHILOX = false>
__global__ void __launch_bounds__(THREADS) scan(const float* x, int64_t stride, int vocab, int chunk,
                                                float* out) {
  constexpr int kTile = THREADS * 8;
  const float* row = x + int64_t(blockIdx.x) * stride;
  const int begin = blockIdx.y * chunk, end = min(vocab, begin + chunk);
  float4 buf[DEPTH][2];
  float best = -INFINITY;
  auto load = [&](int tile, float4 (&b)[2]) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int t = tile + (u * THREADS + int(threadIdx.x)) * 4;
      b[u] = t + 4 <= end ? load4<KIND>(row + t) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    }
  };
#pragma unroll
  for (int d = 0; d < DEPTH; ++d) load(begin + d * kTile, buf[d]);
  for (int base = begin; base < end; base += DEPTH * kTile) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      const int tile = base + d * kTile;
      if (tile >= end) break;
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        float m = fmaxf(fmaxf(buf[d][u].x, buf[d][u].y), fmaxf(buf[d][u].z, buf[d][u].w));
        if constexpr (PHILOX) {
          const unsigned t = unsigned(tile + (u * THREADS + int(threadIdx.x)) * 4);
          const PhiloxBlock b = philox4x32_10(t >> 2, blockIdx.x, 7, 0, 0x34567890u, 0x12u);
          m += __uint_as_float((b.v[0] ^ b.v[1] ^ b.v[2] ^ b.v[3]) & 0x007fffffu);
        }
        best = fmaxf(best, m);
      }
      load(tile + DEPTH * kTile, buf[d]);
    }
  }
  for (int o = 16; o; o >>= 1) best = fmaxf(best, __shfl_xor_sync(0xffffffffu, best, o));
  if ((threadIdx.x & 31) == 0) atomicMax(reinterpret_cast<int*>(out + blockIdx.x), __float_as_int(best));
}

template <int THREADS, int DEPTH, int KIND, bool PHILOX = false>
int run(const char* name, const std::vector<float*>& bufs, int rows, int vocab, int splits) {
  const int chunk = ((vocab + splits - 1) / splits + 7) / 8 * 8;
  float* out;
  CHECK(cudaMalloc(&out, rows * sizeof(float)));
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  for (int it = 0; it < 60; ++it) {
    const float* x = bufs[it % bufs.size()];
    cudaEventRecord(a);
    scan<THREADS, DEPTH, KIND, PHILOX><<<dim3(rows, splits), THREADS>>>(x, vocab, vocab, chunk, out);
    cudaEventRecord(b);
    CHECK(cudaEventSynchronize(b));
    float t;
    cudaEventElapsedTime(&t, a, b);
    if (it >= 10) ms.push_back(t);
  }
  CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  const double us = ms[ms.size() / 2] * 1e3, bytes = double(rows) * vocab * 4;
  std::printf("%-14s threads %4d depth %d splits %2d B %4d V %6d: %7.1f us %6.0f GB/s\n", name, THREADS,
              DEPTH, splits, rows, vocab, us, bytes / us * 1e-3);
  cudaFree(out);
  return 0;
}

int main() {
  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
  const int vocab = 128256;
  const size_t bytes = size_t(1024) * vocab * 4;
  std::vector<float*> bufs;
  for (size_t have = 0; have < size_t(4) * l2 + bytes || bufs.size() < 2; have += bytes) {
    float* p;
    CHECK(cudaMalloc(&p, bytes));
    CHECK(cudaMemset(p, 0x3f, bytes));
    bufs.push_back(p);
  }
  for (int rows : {256, 1024}) {
    run<512, 3, kEvictFirst>("evict-first", bufs, rows, vocab, 1);
    run<512, 4, kEvictFirst>("evict-first", bufs, rows, vocab, 1);
    run<512, 3, kNonCoherent>("non-coherent", bufs, rows, vocab, 1);
    run<512, 4, kNonCoherent>("non-coherent", bufs, rows, vocab, 1);
    run<512, 4, kPlain>("plain", bufs, rows, vocab, 1);
    run<512, 4, kNonCoherent>("non-coherent", bufs, rows, vocab, 2);
    run<512, 4, kNonCoherent>("non-coherent", bufs, rows, vocab, 4);
    run<256, 4, kNonCoherent>("non-coherent", bufs, rows, vocab, 2);
    run<1024, 2, kNonCoherent>("non-coherent", bufs, rows, vocab, 1);
    run<1024, 4, kNonCoherent>("non-coherent", bufs, rows, vocab, 1);
    run<512, 3, kEvictFirst, true>("philox ef", bufs, rows, vocab, 1);
    run<512, 3, kNonCoherent, true>("philox nc", bufs, rows, vocab, 1);
    run<512, 4, kNonCoherent, true>("philox nc", bufs, rows, vocab, 1);
    run<1024, 2, kNonCoherent, true>("philox nc", bufs, rows, vocab, 1);
  }
  return 0;
}
