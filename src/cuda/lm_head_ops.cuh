// The CUDA backend's LM-head operations (SPEC section 4): dense and binary
// heads with exact top-k, and the two binary-format helpers. Arguments arrive
// checked by core/check.cpp; a head checks the caller's workspace against the
// plan it makes, as its size query does. Each call launches on `stream` only,
// never synchronizes the host and never allocates.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "nexttok/nexttok.h"

namespace nt::cuda {

size_t lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args& a);
void lm_head_topk_dense(const nt_lm_head_dense_args& a, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream);

size_t lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args& a);
void lm_head_topk_binary(const nt_lm_head_binary_args& a, void* workspace,
                         size_t workspace_bytes, cudaStream_t stream);

// The heads' scores written out, for the fused heads (cuda/lm_head_sample.cu):
// the top-k calls' kernels and arithmetic, every score of rows [0, M) to
// scores[m * stride + v] instead of a selection (k and the top-k outputs of
// `a` are not read). Errors name `op`.
void lm_head_scores_dense(const char* op, const nt_lm_head_dense_args& a, float* scores, int64_t stride,
                          cudaStream_t stream);
size_t lm_head_scores_binary_workspace_size(const char* op, const nt_lm_head_binary_args& a);
void lm_head_scores_binary(const char* op, const nt_lm_head_binary_args& a, float* scores, int64_t stride,
                           void* workspace, size_t workspace_bytes, cudaStream_t stream);

void pack_weights(const nt_pack_weights_args& a, cudaStream_t stream);
void quantize_activations(const nt_quantize_activations_args& a, cudaStream_t stream);

}  // namespace nt::cuda
