// The CPU's logprobs helpers, shared by sample_logprobs, the shard summaries and
// the combine: a row's top tokens (TopList) and its values (RowValues).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/logprobs.h"
#include "core/ordering.h"
#include "nexttok/nexttok.h"

namespace nt::cpu {

// The first n (at most NT_MAX_LOGPROBS) tokens of a row's order (nt_ranks_before
// of their keys: key descending, index ascending), by insertion into a sorted list.
struct TopList {
  int32_t n = 0, cap = 0;
  int32_t index[NT_MAX_LOGPROBS];
  uint32_t key[NT_MAX_LOGPROBS];

  void offer(uint32_t k, int32_t i) {
    if (n == cap && (cap == 0 || !nt_ranks_before(k, i, key[n - 1], index[n - 1]))) return;
    int32_t at = n < cap ? n++ : n - 1;
    while (at > 0 && nt_ranks_before(k, i, key[at - 1], index[at - 1])) {
      key[at] = key[at - 1];
      index[at] = index[at - 1];
      --at;
    }
    key[at] = k;
    index[at] = i;
  }
};

// The log-probability of every token of one row, as the mode defines it: the
// token's base value (nt_logprob_base) less the row's normalizer, or the +inf
// rule (each +inf value -log(count), every other -inf).
struct RowValues {
  bool processed;
  nt_keep_set keep;
  int64_t token;
  double max = 0.0, log_z = 0.0;  // finite case: value = (v - max) - log_z
  float pos_inf_value = -INFINITY;
  bool pos_inf = false;

  void set_pos_inf(int64_t count) {
    pos_inf = true;
    pos_inf_value = float(-std::log(double(count)));
  }
  // The value (logit or score) a token's log-probability is computed from, or
  // -inf when it has none (outside the keep-set, NaN, -inf).
  float base(float x, int32_t i) const {
    return nt_logprob_base(x, uint32_t(i), processed, keep, int32_t(token));
  }
  float value(float v) const {
    if (pos_inf) return v == INFINITY ? pos_inf_value : -INFINITY;
    if (v == -INFINITY) return -INFINITY;
    return float((double(v) - max) - log_z);
  }
};

}  // namespace nt::cpu
