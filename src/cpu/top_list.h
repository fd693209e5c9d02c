// The first n (at most NT_MAX_LOGPROBS) tokens of a row's order (nt_ranks_before
// of their keys: key descending, index ascending), by insertion into a sorted
// list: the logprobs' top tokens, for sample_logprobs and the shard summaries.
#pragma once

#include <cstdint>

#include "core/ordering.h"
#include "nexttok/nexttok.h"

namespace nt::cpu {

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

}  // namespace nt::cpu
