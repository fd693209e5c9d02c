// What a user runs today without nexttok, written the way a user would write
// it: a sort-based sampling chain, an argmax loop, unpack-then-masked-fill for
// the grammar mask, a full-logits GEMV/GEMM plus std::partial_sort for the LM
// heads. `nexttok bench` times them against the library on the host copies of
// its inputs.
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

// The chain's buffers, reused from call to call.
struct ChainScratch {
  std::vector<std::pair<float, int32_t>> order;  // (scaled score, token), sorted
  std::vector<double> prob;                      // exp(s - s_max) along `order`
};

// One row (f32) through the chain: scores sorted by (score desc, index asc),
// the top-k, top-p and min-p cuts, then an exponential-race draw (argmax
// p_i / E_i) from `rng_state`. Greedy rows (T <= 0 or NaN, top_k == 1) take the
// argmax. Returns -1 for an empty keep-set.
int64_t sort_chain_sample(const float* logits, int64_t vocab, const ChainParams& p,
                          uint64_t& rng_state, ChainScratch& scratch);

// First index of the largest value (NaN as -inf); -1 when none is finite or +inf.
int64_t argmax(const float* row, int64_t vocab);

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

// The logprobs a user adds to the draw (torch's log_softmax, topk and a count):
// log_softmax of the row's logits (NaN as -inf), the n largest (value desc,
// index asc) into ids/logprobs, and the rank of `sampled` (the number of tokens
// whose logprob is at least its); `scratch` as topk's.
void logprobs_of_row(const float* row, int64_t vocab, int32_t n, int64_t sampled, float* logprob,
                     float* values, int64_t* ids, int32_t* rank, std::vector<int32_t>& scratch);

// vLLM's dense penalties on one f32 row of `vocab` logits, in place: the
// row's ids counted into bins over the whole vocabulary (output counts, a
// prompt mask), then every token of the vocabulary: x *= (in the prompt or the
// output ? (x > 0 ? 1 / r : r) : 1), x -= f * count, x -= p * (count > 0).
// Ids outside [0, vocab) are skipped.
struct PenaltyScratch {
  std::vector<int32_t> counts;
  std::vector<unsigned char> in_prompt;
};
void dense_penalties(float* row, int64_t vocab, const int32_t* prompt, int64_t n_prompt,
                     const int32_t* output, int64_t n_output, float r, float p, float f,
                     PenaltyScratch& scratch);

}  // namespace baseline
