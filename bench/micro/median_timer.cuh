// The micro-benchmarks' timing, as bench/_common.py times the library: a GPU
// spin ahead of each timed launch (so the host's enqueue is hidden), CUDA
// events around it, inputs rotated over `copies`, the median of `runs`.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "cuda_check.h"

__global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {}
}

// launch(c) issues the timed work on input copy c.
template <class F>
float median_us(F launch, int copies, int runs) {
  for (int i = 0; i < 10; ++i) launch(i % copies);
  std::vector<cudaEvent_t> a(runs), b(runs);
  for (int i = 0; i < runs; ++i) {
    CHECK(cudaEventCreate(&a[i]));
    CHECK(cudaEventCreate(&b[i]));
  }
  for (int i = 0; i < runs; ++i) {
    spin<<<1, 1>>>(20000);
    cudaEventRecord(a[i]);
    launch(i % copies);
    cudaEventRecord(b[i]);
  }
  CHECK(cudaDeviceSynchronize());
  std::vector<float> us(runs);
  for (int i = 0; i < runs; ++i) {
    float ms = 0;
    cudaEventElapsedTime(&ms, a[i], b[i]);
    us[i] = ms * 1000.0f;
    cudaEventDestroy(a[i]);
    cudaEventDestroy(b[i]);
  }
  std::sort(us.begin(), us.end());
  return us[runs / 2];
}
