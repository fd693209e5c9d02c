// Argument validation shared by every backend: each op's arguments are checked
// here, before any backend sees them, so every backend fails the same way with
// the same message. Only host-visible properties are checked (shapes, dtypes,
// devices, strides, ranges of scalars); per-row device values get the safe
// meanings of core/sampling.h instead.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/sampling.h"
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

// A sample call as check_sample found it, described once for the backend:
// what the host knows of every row before anything runs.
struct SampleCall {
  const nt_sample_args& args;
  int64_t rows, vocab;
  bool per_row;          // temperature, top_k, top_p or min_p is a per-row array
  nt_row_params scalar;  // the scalar parameters' meaning (every row's when !per_row)
  int row_class;         // NT_ROW_* of every row when !per_row
  bool explicit_draw;    // `uniform` is given
  bool joint;            // NT_SAMPLE_TOP_P_JOINT
  bool tokens_i32;
  int mass_bits;         // fixed-point masses p * 2^bits: V of them sum below 2^62
};
SampleCall check_sample(const nt_sample_args& a);

// A sample_logprobs call: the sample call (checked by check_sample, so its
// errors name the sample's arguments) and the logprobs request.
struct SampleLogprobsCall {
  SampleCall sample;
  const nt_sample_logprobs_args& args;
  int32_t n;       // num_logprobs: columns 1..n after the sampled token's column 0
  bool processed;  // NT_LOGPROBS_PROCESSED
};
SampleLogprobsCall check_sample_logprobs(const nt_sample_logprobs_args& a);
void check_lm_head_dense(const nt_lm_head_dense_args& a);
void check_lm_head_binary(const nt_lm_head_binary_args& a);
// The fused head + sampling ops (checked before any work). The shard forms
// take the tokens as optional and check `shard` too; the binary form checks
// group_size first, as lm_head_topk_binary.
void check_lm_head_sample_dense(const nt_lm_head_sample_dense_args& a, const nt_lm_head_shard* shard);
void check_lm_head_sample_binary(const nt_lm_head_sample_binary_args& a, const nt_lm_head_shard* shard);
void check_lm_head_sample_combine(const nt_lm_head_sample_combine_args& a);
void check_lm_head_shard_ranks(const nt_lm_head_shard_ranks_args& a);
// Whether a shard call carries a logprobs request, and the summary words it adds.
inline bool shard_logprobs(const nt_lm_head_shard& shard) { return shard.scores.data != nullptr; }
inline int64_t shard_logprobs_words(const nt_lm_head_shard& shard) {
  return shard_logprobs(shard) ? NT_LM_HEAD_LOGPROBS_WORDS(int64_t(shard.num_logprobs)) : 0;
}
// The candidates a summary row holds (its words past NT_LM_HEAD_SUMMARY_WORDS,
// less the `logprobs_words` of a logprobs request at its end).
inline int64_t summary_candidates(const nt_tensor& summary, int64_t logprobs_words = 0) {
  return summary.shape[1] - NT_LM_HEAD_SUMMARY_WORDS - logprobs_words;
}
void check_pack_weights(const nt_pack_weights_args& a);
void check_quantize_activations(const nt_quantize_activations_args& a);

constexpr int32_t kMaxTopK = 2048;

// The caller's workspace against what the call's plan needs (NT_ERROR_WORKSPACE).
void check_workspace(const char* op, size_t needed, const void* workspace, size_t bytes);

// Penalties and logit bias: every id list holds fewer ids than this,
// so that a row's count fits 31 bits and twice its ids fit 32.
constexpr int64_t kMaxListIds = int64_t(1) << 30;
// The ids of a checked list: N, or 0 when the list is absent.
inline int64_t list_ids(const nt_token_lists& l) { return present(l.offsets) ? l.ids.shape[0] : 0; }
void check_apply_penalties(const nt_apply_penalties_args& a);
void check_apply_logit_bias(const nt_apply_logit_bias_args& a);

// Speculative verification, both layouts described once for the backend.
// Chain (verify_draft): position j of request b verifies draft_ids[lo+j]
// against target row lo+b+j. Tree (verify_tree): node d of request b has
// target row b*nodes + d. Per-request parameters as in nt_verify_*_args.
struct VerifyCall {
  const char* op;
  bool tree;
  nt_tensor target;                  // [rows, vocab]
  int64_t requests, vocab, width;    // B, V, S = out_ids columns
  int64_t drafts;                    // chain: Td
  int64_t nodes;                     // tree: D
  nt_tensor draft_ids, cu_num_draft, draft_probs;          // chain
  nt_tensor candidates, next_token, next_sibling, out_nodes;  // tree
  nt_param_f32 temperature, top_p, min_p;
  nt_param_i32 top_k;
  nt_param_u64 seed, offset;
  bool joint;
  int mass_bits;                     // nt_mass_bits(V)
  nt_tensor out_ids, num_emitted;
};
VerifyCall check_verify_draft(const nt_verify_draft_args& a);
VerifyCall check_verify_tree(const nt_verify_tree_args& a);

}  // namespace nt
