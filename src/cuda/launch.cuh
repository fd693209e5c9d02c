// Programmatic dependent launch (sm_90+) for the kernels that only combine
// what the kernel before them wrote (the merges of sampling and of the LM
// heads): such a kernel may be launched while its predecessor on the stream
// still runs, and waits in dependent_wait() for that predecessor's results, so
// its launch latency and prologue hide behind the predecessor's tail instead
// of following it. A predecessor lets it launch early with
// allow_dependent_launch(); both are no-ops on older devices and in launches
// made without the attribute.
//
// Off unless NEXTTOK_CUDA_PDL=1. On the H200 (bench/results/2026-12-02-h200-run34)
// the CUDA cases pass with it and tokens are unchanged, but the gain is mixed:
// 0.5-1.3 us on B=1/B=64 greedy, plain and top-k rows and on the M=1 heads,
// 3-7 us lost on B=64 rows that run the top-p fallback after the merge. A
// default that skips it where the fallback runs is the next thing to measure.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "cuda/ops.cuh"

namespace nt::cuda {

// The first statement of every dependent kernel, in every CTA, before any read
// of the predecessor's output: the dependent grid then cannot finish before
// its predecessor has, so later work on the stream stays ordered after both.
__device__ __forceinline__ void dependent_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// In a predecessor: its dependent may be scheduled once every CTA of this grid
// has executed this (or exited). Dependent CTAs placed early wait in
// dependent_wait() and only take room this grid's CTAs left free.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Whether launches use the attribute on a device of compute capability
// `cc_major` (the callers' cached device limits): 9 or newer, and
// NEXTTOK_CUDA_PDL=1 (read on every call, so that one process can time both
// ways).
inline bool dependent_launch_enabled(int cc_major) {
  const char* on = std::getenv("NEXTTOK_CUDA_PDL");
  return cc_major >= 9 && on != nullptr && std::strcmp(on, "1") == 0;
}

// kernel<<<grid, block, smem, stream>>>(args...), as a programmatic dependent
// of the previous work on the stream when `dependent` is set.
template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, bool dependent, const char* op, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = dependent ? 1 : 0;
  check_cuda(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), op);
}

}  // namespace nt::cuda
