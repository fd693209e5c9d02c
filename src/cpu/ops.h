// The CPU backend's operations, one source file each (cpu/<op>.cpp). Arguments
// arrive checked by core/check.cpp.
#pragma once

#include <cstddef>

#include "nexttok/nexttok.h"

namespace nt::cpu {

void apply_token_bitmask(const nt_apply_token_bitmask_args& a);
void bitmask_from_allowed(const nt_bitmask_from_allowed_args& a);
size_t sample_workspace_size(const nt_sample_args& a);
void sample(const nt_sample_args& a, void* workspace, size_t workspace_bytes);
size_t lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args& a);
void lm_head_topk_dense(const nt_lm_head_dense_args& a, void* workspace, size_t workspace_bytes);
size_t lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args& a);
void lm_head_topk_binary(const nt_lm_head_binary_args& a, void* workspace, size_t workspace_bytes);
void pack_weights(const nt_pack_weights_args& a);
void quantize_activations(const nt_quantize_activations_args& a);

// Penalties and logit bias (cpu/apply_penalties.cpp, cpu/apply_logit_bias.cpp); no workspace.
void apply_penalties(const nt_apply_penalties_args& a);
void apply_logit_bias(const nt_apply_logit_bias_args& a);

}  // namespace nt::cpu
