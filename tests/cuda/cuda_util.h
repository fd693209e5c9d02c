// What the CUDA-only tests share: a CUDA runtime call that must succeed, and
// whether a CUDA device and the library's CUDA backend are present.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

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
