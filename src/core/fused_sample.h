// The nt_sample call with which a fused LM head (lm_head_sample_dense /
// _binary) draws its tokens from the [M, V] f32 scores it wrote in its
// workspace, and the nt_sample_logprobs call that replaces it when the
// arguments ask for logprobs: every backend makes them alike.
#pragma once

#include "nexttok/nexttok.h"

namespace nt {

// The contiguous [rows, vocab] f32 scores at `data` (+ byte_offset, OpenCL).
inline nt_tensor scores_matrix(void* data, int64_t rows, int64_t vocab, nt_device_type device,
                               int32_t device_id = 0, int64_t byte_offset = 0) {
  nt_tensor t{};
  t.data = data;
  t.byte_offset = byte_offset;
  t.dtype = NT_F32;
  t.ndim = 2;
  t.shape[0] = rows;
  t.shape[1] = vocab;
  t.row_stride = vocab;
  t.device = device;
  t.device_id = device_id;
  return t;
}

// The scores' data in a workspace-size query's sample call (checked, never read).
inline void* placeholder_scores() { static char placeholder; return &placeholder; }

inline nt_sample_args fused_sample_args(const nt_tensor& scores, const nt_lm_head_sampling& s,
                                        const nt_tensor& tokens) {
  nt_sample_args a{};
  a.logits = scores;
  a.temperature = s.temperature;
  a.top_k = s.top_k;
  a.top_p = s.top_p;
  a.min_p = s.min_p;
  a.seed = s.seed;
  a.offset = s.offset;
  a.flags = s.flags;
  a.tokens = tokens;
  return a;
}

// The optional logprobs request of the fused ops' arguments (its fields are
// named alike in nt_lm_head_sample_dense_args, _binary_args and _combine_args).
struct FusedLogprobs {
  int32_t n;
  uint32_t mode;
  const nt_tensor& ids;
  const nt_tensor& logprobs;
  const nt_tensor& ranks;
  bool requested() const { return ids.data != nullptr; }
};

template <class Args>
FusedLogprobs fused_logprobs(const Args& a) {
  return FusedLogprobs{a.num_logprobs, a.logprobs_mode, a.logprob_ids, a.logprobs, a.ranks};
}

// nt_sample_logprobs's arguments: the sample call on the scores plus the request.
inline nt_sample_logprobs_args fused_logprobs_args(const nt_sample_args& sample,
                                                   const FusedLogprobs& lp) {
  nt_sample_logprobs_args a{};
  a.sample = sample;
  a.num_logprobs = lp.n;
  a.mode = lp.mode;
  a.logprob_ids = lp.ids;
  a.logprobs = lp.logprobs;
  a.ranks = lp.ranks;
  return a;
}

}  // namespace nt
