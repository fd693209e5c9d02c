// What a user runs today without nexttok, written the way a user would write
// it: a sort-based sampling chain, an argmax loop, unpack-then-masked-fill for
// the grammar mask, a full-logits GEMV/GEMM plus std::partial_sort for the LM
// heads. bench times them against the library; check and show use the chain's
// keep-set as an independent reference (it shares no code with the library).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "nexttok/nexttok.h"

namespace baseline {

struct ChainParams {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  bool joint = false;  // top-p mass measured on the full distribution
};

// One row through the chain: scaled scores sorted by (score desc, index asc),
// then the three cuts, each a prefix length of that order.
struct Chain {
  bool greedy = false;
  bool pos_inf = false;       // the keep-set is the +inf tokens
  bool degenerate = false;    // a boundary within 1e-6 relative: bits may decide it
  std::vector<std::pair<float, int32_t>> order;  // finite tokens (or the +inf ones)
  std::vector<double> prob;   // exp(s - s_max) along `order`, unnormalized
  int64_t n_k = 0, n_p = 0, n_m = 0, kept = 0;  // kept = min(n_k, n_p, n_m)
};

// `logits` f32, one row. Greedy rows (T <= 0 or NaN, top_k == 1) come back with
// greedy set and the argmax as the only kept entry.
void sort_chain(const float* logits, int64_t vocab, const ChainParams& p, Chain& out);

// The chain plus an exponential-race draw (argmax p_i / E_i) from `rng_state`.
// Returns -1 for an empty keep-set.
int64_t sort_chain_sample(const float* logits, int64_t vocab, const ChainParams& p,
                          uint64_t& rng_state, Chain& scratch);

// First index of the largest value (NaN as -inf); -1 when none is finite or +inf.
int64_t argmax(const float* row, int64_t vocab);
int64_t argmax(const void* row, nt_dtype dtype, int64_t vocab);

// bitmask -> bool [rows, vocab] -> logits[t] = -inf where not allowed.
void unpack_bitmask(const int32_t* bitmask, int64_t words, int64_t rows, int64_t vocab,
                    bool* allowed);
void masked_fill(void* logits, nt_dtype dtype, int64_t rows, int64_t vocab, const bool* allowed);

// logits[M, V] = hidden[M, H] . weight[V, H]^T, f32 accumulation, split over
// `threads` threads by vocabulary blocks. dtype f32 or bf16 for both inputs.
void dense_logits(const void* hidden, const void* weight, nt_dtype dtype, int64_t m, int64_t v,
                  int64_t h, float* logits, int threads);

// Top-k of one row by std::partial_sort: (value desc, index asc), NaN as -inf.
void topk(const float* row, int64_t vocab, int32_t k, float* values, int64_t* indices,
          std::vector<int32_t>& scratch);

}  // namespace baseline
