// The nt_sample call with which a fused LM head (lm_head_sample_dense /
// _binary) draws its tokens from the [M, V] f32 scores it wrote: the CPU and
// OpenCL backends make it alike, each with its own view of the scores.
#pragma once

#include "nexttok/nexttok.h"

namespace nt {

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

}  // namespace nt
