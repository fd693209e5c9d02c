// Brute-force references, written from docs/SEMANTICS.md without sharing code with
// any backend: a full sort for sampling and top-k, double precision for softmax
// and LM-head logits. Only the core's Philox and portable log are reused (the
// Gumbel noise must match bit for bit; both are tested on their own in tests/core).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nexttok/nexttok.h"

namespace ntt {

// Boundaries closer than this (relative) make an input degenerate: backends
// compute masses in fp32 and are promised to agree only away from them.
constexpr double kDegenerateMargin = 1e-6;

struct RowSampleParams {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  uint64_t offset = 0;
  uint32_t row_tag = 0;
  bool joint = false;
  bool has_uniform = false;
  float uniform = 0.0f;
};

// The parameters as one line, for failure messages.
std::string describe(const RowSampleParams& p);

struct SampleReference {
  int64_t token = -1;            // -1: empty keep-set
  bool greedy = false;
  std::vector<int64_t> order;    // every finite token (or the +inf ones) by (score desc, index asc)
  std::vector<double> weight;    // exp(s - s_max) along `order`: the unnormalized probabilities
  std::vector<int64_t> keep;     // keep-set: the prefix of `order` every cut keeps
  std::vector<int64_t> keep_by_index;  // the same set in vocabulary order
  std::vector<double> cdf;       // cumulative mass over keep_by_index, last = 1
  size_t n_top_k = 0, n_top_p = 0, n_min_p = 0;  // prefix lengths of each cut (sampling rows)
  bool degenerate = false;       // a cut or the explicit draw is within the margin
  std::string why_degenerate;
};

SampleReference reference_sample_row(const float* logits, int64_t vocab, const RowSampleParams& p);

// ---- logprobs with sample (harness/reference_logprobs.cpp) ---------------------
// What nt_sample_logprobs must return for one row whose sampled token is
// `sample.token` (reference_sample_row's): ids of columns 0..n, the values in
// fp64 (log_softmax of the logits, or of the scores over the keep-set), rank.
struct LogprobsReference {
  std::vector<int64_t> ids;
  std::vector<double> values;
  int64_t rank = 0;
};
LogprobsReference reference_logprobs_row(const float* logits, int64_t vocab,
                                         const RowSampleParams& p, const SampleReference& sample,
                                         int n, bool processed);
// The tolerance of a returned value against the fp64 reference: equal when the
// reference is infinite, else within kLogprobAbsTol (the contract) plus the
// rounding of the fp32 result itself, kLogprobRelTol * |ref| (half an ulp).
constexpr double kLogprobAbsTol = 1e-5;
constexpr double kLogprobRelTol = 0x1p-24;
bool logprob_close(float got, double ref);

// Positions of the k largest values, by (value desc, index asc); NaN ranks as -inf.
std::vector<int64_t> reference_topk(const double* values, int64_t n, int64_t k);

// Compares one row of a backend's top-k with reference logits. tol = 0: the
// inputs are exact (every logit representable and every sum exact in fp32), so
// values and indices must match exactly, ties included. tol > 0: values within
// tol * max|logit| of the sorted reference and of their own index's logit, and
// indices equal wherever the reference value is separated from its neighbours by
// more than 2 * tol * max|logit|. Returns "" or the first mismatch.
std::string compare_topk_row(const double* logits, int64_t vocab, int64_t k, const float* values,
                             const int64_t* indices, double tol);

// Binary layout: bit j of word w of row v is 1 iff signs[v, 32w + j] > 0.
std::vector<int32_t> reference_pack(const std::vector<int8_t>& signs, int64_t rows, int64_t cols);

// quantize_activations of one row, bit-exact: scale = max|x|/127 (fp32), q = rint.
void reference_quantize_row(const float* x, int64_t n, int8_t* q, float* scale);

// ---- penalties and logit bias (harness/reference_penalties.cpp) ----------------
// A CSR id list per row: offsets [B+1] (taken as the device reads them, any
// values) and ids [N]; absent unless `present`.
struct CsrIds {
  bool present = false;
  std::vector<int64_t> offsets;
  std::vector<int32_t> ids;
};

// vLLM's dense apply_penalties on a whole logits buffer (rows x stride, encoded
// in dtype): bincount of each row's output ids and mask of its prompt ids over
// [V], then masked arithmetic over every token, each step rounded to the dtype. Parameters: one value per row. Returns the buffer after.
std::vector<uint8_t> reference_penalties(nt_dtype dtype, int64_t rows, int64_t vocab,
                                         int64_t stride, const std::vector<uint8_t>& logits,
                                         const CsrIds& prompt, const CsrIds& output,
                                         const std::vector<float>& repetition,
                                         const std::vector<float>& presence,
                                         const std::vector<float>& frequency);

// apply_logit_bias entry by entry, in order, on a dense copy of each row.
std::vector<uint8_t> reference_logit_bias(nt_dtype dtype, int64_t rows, int64_t vocab,
                                          int64_t stride, const std::vector<uint8_t>& logits,
                                          const CsrIds& tokens, const std::vector<float>& values);

}  // namespace ntt
