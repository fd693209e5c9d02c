// W7's memory pattern without its table: the distinct ids of each row
// (B = 256, V = 128,256, 2,048 + 512 random ids a row, ~2,535 distinct) read,
// modified and written back in place, one thread an id, so nothing but DRAM's
// rate of scattered sector accesses bounds the time. Beside it the halves
// (scattered reads alone, scattered writes alone) and the same ids sorted in
// each row. The penalty kernel (bench/cuda_penalties_bench.py) cannot beat the
// read-modify-write row: that row is its floor on this GPU.
// Timed by median_timer.cuh, inputs rotated over more than 4x the L2.
// Built by bench/micro/CMakeLists.txt (-DNEXTTOK_BENCH_MICRO=ON): micro_scatter_rmw.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda_check.h"
#include "median_timer.cuh"

constexpr int kRows = 256;
constexpr int kVocab = 128256;
constexpr int kIdsPerRow = 2048 + 512;
constexpr int kThreads = 256;

// E = float (f32 rows) or unsigned short (bf16 rows, bits shifted into f32).
template <class E>
__device__ __forceinline__ float widen(E v) {
  if constexpr (sizeof(E) == 4) return v;
  else return __uint_as_float(uint32_t(v) << 16);
}
template <class E>
__device__ __forceinline__ E narrow(float x) {
  if constexpr (sizeof(E) == 4) return x;
  else return (unsigned short)(__float_as_uint(x) >> 16);
}

// MODE 0: read-modify-write; 1: read only; 2: write only.
template <class E, int MODE>
__global__ void __launch_bounds__(kThreads) scatter(E* logits, const int64_t* where, int64_t n, float* sink) {
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= n) return;
  E* p = logits + __ldg(where + i);
  if constexpr (MODE == 0) {
    *p = narrow<E>(widen<E>(*p) * 0.5f - 0.25f);
  } else if constexpr (MODE == 1) {
    const float v = widen<E>(__ldg(p));
    if (v == 123.456f) *sink = v;
  } else {
    *p = narrow<E>(-1.0f);
  }
}

// The element offsets of each row's distinct ids, in the rows' order (sorted
// within a row when `sorted`, else in first-seen order).
std::vector<int64_t> offsets(std::mt19937_64& rng, bool sorted) {
  std::uniform_int_distribution<int> id(0, kVocab - 1);
  std::vector<int64_t> out;
  std::vector<char> seen(kVocab);
  for (int r = 0; r < kRows; ++r) {
    std::fill(seen.begin(), seen.end(), 0);
    std::vector<int64_t> row;
    for (int q = 0; q < kIdsPerRow; ++q) {
      const int v = id(rng);
      if (!seen[v]) row.push_back(int64_t(r) * kVocab + v);
      seen[v] = 1;
    }
    if (sorted) std::sort(row.begin(), row.end());
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

template <class E>
void table(const char* dtype, int runs) {
  int device = 0, l2 = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  const size_t row_bytes = size_t(kRows) * kVocab * sizeof(E);
  const int copies = int(std::max<size_t>(4, (4 * size_t(l2)) / row_bytes + 2));
  std::mt19937_64 rng(7);
  std::vector<E*> logits(copies);
  for (auto& p : logits) {
    CHECK(cudaMalloc(&p, row_bytes));
    CHECK(cudaMemset(p, 0x3c, row_bytes));
  }
  float* sink = nullptr;
  CHECK(cudaMalloc(&sink, 4));
  for (int sorted = 0; sorted < 2; ++sorted) {
    std::vector<int64_t*> where(copies);
    int64_t n = 0;
    for (auto& w : where) {
      const std::vector<int64_t> h = offsets(rng, sorted);
      n = int64_t(h.size());
      CHECK(cudaMalloc(&w, h.size() * 8));
      CHECK(cudaMemcpy(w, h.data(), h.size() * 8, cudaMemcpyHostToDevice));
    }
    const unsigned blocks = unsigned((n + kThreads - 1) / kThreads);
    auto run = [&](auto kernel) {
      return median_us([&](int c) { kernel<<<blocks, kThreads>>>(logits[c], where[c], n, sink); }, copies,
                       runs);
    };
    const float rmw = run(scatter<E, 0>), rd = run(scatter<E, 1>), wr = run(scatter<E, 2>);
    CHECK(cudaGetLastError());
    std::printf("| %s | %s | %lld | %.1f | %.1f | %.1f | %.1f |\n", dtype, sorted ? "sorted" : "random",
                (long long)n, rmw, rd, wr, double(n) * 2 / rmw / 1e3);
    for (auto w : where) CHECK(cudaFree(w));
  }
  for (auto p : logits) CHECK(cudaFree(p));
  CHECK(cudaFree(sink));
}

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 50;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s: W7's distinct ids (B=%d, V=%d, %d random ids a row), one thread an id\n\n", prop.name, kRows,
              kVocab, kIdsPerRow);
  std::printf("| dtype | ids in a row | distinct ids | read-modify-write us | read us | write us | G sector ops/s (rmw) |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  table<float>("f32", runs);
  table<unsigned short>("bf16", runs);
  return 0;
}
