// What the CUDA-only tests share: a CUDA runtime call that must succeed,
// whether a CUDA device and the library's CUDA backend are present, and the
// copies between host vectors and device arrays.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "nexttok/nexttok.h"

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

inline bool have_gpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0 && nt_backend_available(NT_DEVICE_CUDA);
}

// n elements (and 16 bytes of slack), or nullptr.
template <class T>
T* device_alloc(size_t n) {
  T* p = nullptr;
  return cudaMalloc(&p, n * sizeof(T) + 16) == cudaSuccess ? p : nullptr;
}

// Copies h into d on stream s and waits for it.
template <class T>
void upload(T* d, const std::vector<T>& h, cudaStream_t s) {
  EXPECT_EQ(cudaMemcpyAsync(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, s),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
}

// A new device array holding `host`, or nullptr.
template <class T>
T* device_copy(const std::vector<T>& host) {
  T* p = nullptr;
  if (cudaMalloc(&p, host.size() * sizeof(T)) != cudaSuccess) return nullptr;
  cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  // A pageable copy may still be in flight when cudaMemcpy returns, and the
  // tests' streams are non-blocking: they would not wait for it.
  cudaDeviceSynchronize();
  return p;
}

// n elements of p, read on `stream` once its work is done.
template <class T>
std::vector<T> host_copy(const T* p, size_t n, cudaStream_t stream) {
  std::vector<T> out(n);
  cudaMemcpyAsync(out.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
  return out;
}
