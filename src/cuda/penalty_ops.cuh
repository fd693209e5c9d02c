// Penalties and logit bias on CUDA (cuda/apply_penalties.cu,
// cuda/apply_logit_bias.cu). Workspaces depend on the ids' lengths only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "nexttok/nexttok.h"

namespace nt::cuda {

size_t apply_penalties_workspace_size(const nt_apply_penalties_args& a);
void apply_penalties(const nt_apply_penalties_args& a, void* workspace, size_t workspace_bytes,
                     cudaStream_t stream);
size_t apply_logit_bias_workspace_size(const nt_apply_logit_bias_args& a);
void apply_logit_bias(const nt_apply_logit_bias_args& a, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream);

}  // namespace nt::cuda
