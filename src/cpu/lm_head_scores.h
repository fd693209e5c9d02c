// The CPU LM heads' scores written out: every score[m, v] of a dense or binary
// head, computed by the same pass (and so in the same arithmetic) as
// lm_head_topk_dense / lm_head_topk_binary, for the ops that need the whole
// row (cpu/lm_head_sample.cpp). Each takes a 64-byte aligned piece of the
// caller's workspace of the *_bytes size (a multiple of 64).
#pragma once

#include <cstddef>
#include <cstdint>

#include "nexttok/nexttok.h"

namespace nt::cpu {

size_t dense_scores_bytes(const nt_tensor& hidden, const nt_tensor& weight);
// scores[m * stride + v] for v in [0, V), m in [0, M).
void dense_scores(const nt_tensor& hidden, const nt_tensor& weight, const nt_tensor& bias,
                  float* scores, int64_t stride, char* piece);

// The binary head's inputs (nt_lm_head_binary_args without k and outputs).
struct BinaryHead {
  const nt_tensor& act_q;
  const nt_tensor& act_scale;
  const nt_tensor& wq;
  const nt_tensor& wscale;
  const nt_tensor& bias;
  int32_t group_size;
};

size_t binary_scores_bytes(const BinaryHead& head);
void binary_scores(const BinaryHead& head, float* scores, int64_t stride, char* piece);

}  // namespace nt::cpu
