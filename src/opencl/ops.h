// The OpenCL backend's operations, one source file each (opencl/<op>.cpp with
// its kernels in <op>.cl). Arguments arrive checked by core/check.cpp; the
// stream is the cl_command_queue every kernel is enqueued on, nothing is
// allocated per call and nothing waits for the device.
#pragma once

#include <cstddef>

#include "nexttok/nexttok.h"

namespace nt::opencl {

void apply_token_bitmask(const nt_apply_token_bitmask_args& a, void* stream);
void bitmask_from_allowed(const nt_bitmask_from_allowed_args& a, void* stream);
size_t sample_workspace_size(const nt_sample_args& a);
void sample(const nt_sample_args& a, void* workspace, size_t workspace_bytes, void* stream);
size_t lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args& a);
void lm_head_topk_dense(const nt_lm_head_dense_args& a, void* workspace, size_t workspace_bytes,
                        void* stream);
size_t lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args& a);
void lm_head_topk_binary(const nt_lm_head_binary_args& a, void* workspace, size_t workspace_bytes,
                         void* stream);
void pack_weights(const nt_pack_weights_args& a, void* stream);
void quantize_activations(const nt_quantize_activations_args& a, void* stream);

// Penalties and logit bias (opencl/apply_penalties.cpp, opencl/apply_logit_bias.cpp).
size_t apply_penalties_workspace_size(const nt_apply_penalties_args& a);
void apply_penalties(const nt_apply_penalties_args& a, void* workspace, size_t workspace_bytes,
                     void* stream);
size_t apply_logit_bias_workspace_size(const nt_apply_logit_bias_args& a);
void apply_logit_bias(const nt_apply_logit_bias_args& a, void* workspace, size_t workspace_bytes,
                      void* stream);

}  // namespace nt::opencl
