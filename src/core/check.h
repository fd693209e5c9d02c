// Argument validation shared by every backend: each op's arguments are checked
// here, before any backend sees them, so every backend fails the same way with
// the same message. Only host-visible properties are checked (shapes, dtypes,
// devices, strides, ranges of scalars); per-row device values get the safe
// meanings of core/sampling.h instead.
#pragma once

#include <cstdint>

#include "nexttok/nexttok.h"

namespace nt {

const char* dtype_name(nt_dtype dtype);
size_t dtype_size(nt_dtype dtype);
const char* device_name(nt_device_type device);
inline bool present(const nt_tensor& t) { return t.data != nullptr; }

// The vocabulary words of a bitmask row.
inline int64_t bitmask_words(int64_t vocab) { return (vocab + 31) / 32; }

void check_apply_token_bitmask(const nt_apply_token_bitmask_args& a);
void check_bitmask_from_allowed(const nt_bitmask_from_allowed_args& a);
void check_sample(const nt_sample_args& a);
void check_lm_head_dense(const nt_lm_head_dense_args& a);
void check_lm_head_binary(const nt_lm_head_binary_args& a);
void check_pack_weights(const nt_pack_weights_args& a);
void check_quantize_activations(const nt_quantize_activations_args& a);

constexpr int32_t kMaxTopK = 2048;

// Penalties and logit bias (issue 37): every id list holds fewer ids than this,
// so that a row's count fits 31 bits and twice its ids fit 32.
constexpr int64_t kMaxListIds = int64_t(1) << 30;
void check_apply_penalties(const nt_apply_penalties_args& a);
void check_apply_logit_bias(const nt_apply_logit_bias_args& a);

}  // namespace nt
