// The CUDA backend's sampling and grammar-mask operations, one source file
// each (cuda/<op>.cu); device templates live in headers beside them.
#pragma once

#include <cuda_runtime.h>

#include "core/check.h"
#include "cuda/device.cuh"
#include "nexttok/nexttok.h"

namespace nt::cuda {

// Grammar mask (cuda/apply_token_bitmask.cu, cuda/bitmask_from_allowed.cu).
void apply_token_bitmask(const nt_apply_token_bitmask_args& a, cudaStream_t stream);
void bitmask_from_allowed(const nt_bitmask_from_allowed_args& a, cudaStream_t stream);

// Sampling (cuda/sample.cu); the workspace layout depends on B, V, the scalar
// parameters and the device.
size_t sample_workspace_size(const SampleCall& call);
void sample(const SampleCall& call, void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace nt::cuda
