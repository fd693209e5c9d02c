// Running each op on a TestDevice: inputs are uploaded, outputs poisoned first,
// the op runs on the device's stream with a workspace of exactly the queried
// size, and results come back to the host. A failing status throws OpError
// (gtest reports it with nt_last_error()). Beside each case type, the
// reference of what the op must return for it.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/data.h"
#include "harness/test_device.h"
#include "harness/reference.h"

namespace ntt {

// An op returned a status other than NT_OK; what() holds nt_last_error().
struct OpError : std::runtime_error {
  OpError(nt_status s, const std::string& message) : std::runtime_error(message), status(s) {}
  nt_status status;
};

// A sampling parameter: one scalar for all rows, or a device array.
template <class T>
struct Param {
  bool per_row = false;
  std::vector<T> values;
  T at(int64_t row) const { return per_row ? values[size_t(row)] : values[0]; }
};
template <class T>
Param<T> scalar(T v) { return Param<T>{false, {v}}; }
template <class T>
Param<T> per_row(std::vector<T> v) { return Param<T>{true, std::move(v)}; }

struct SampleCase {
  int64_t rows = 1, vocab = 1;
  int64_t row_stride = 0;  // 0: contiguous
  nt_dtype dtype = NT_F32;
  std::vector<float> logits;  // rows x vocab, each representable in dtype
  Param<float> temperature = scalar(1.0f);
  Param<int32_t> top_k = scalar<int32_t>(0);
  Param<float> top_p = scalar(1.0f);
  Param<float> min_p = scalar(0.0f);
  Param<uint64_t> seed = scalar<uint64_t>(0);
  Param<uint64_t> offset = scalar<uint64_t>(0);
  std::vector<float> uniform;  // empty: Gumbel-max draw
  uint32_t flags = 0;
  nt_dtype token_dtype = NT_I64;

  RowSampleParams row_params(int64_t row) const;
};

std::vector<int64_t> run_sample(TestDevice& dev, const SampleCase& c);
SampleReference reference_sample(const SampleCase& c, int64_t row);

// ---- logprobs with sample (harness/ops_logprobs.cpp) ------------------------------
struct LogprobsResult {
  int64_t columns = 1;          // n + 1
  std::vector<int64_t> tokens;  // rows
  std::vector<int32_t> ids;     // rows x columns
  std::vector<float> values;    // rows x columns
  std::vector<int32_t> ranks;   // rows
};
// nt_sample_logprobs on case c (the workspace exactly the queried size), its
// outputs poisoned first and given row strides of columns + out_gap (the gaps
// must stay poisoned); throws if it modified its logits or wrote a gap.
LogprobsResult run_sample_logprobs(TestDevice& dev, const SampleCase& c, int n, uint32_t mode,
                                   int64_t out_gap = 0);
// The reference of row `row` (its token: reference_sample's).
LogprobsReference reference_logprobs(const SampleCase& c, int64_t row, int n, bool processed);

struct TopK {
  int64_t rows = 0, k = 0;
  std::vector<float> values;    // rows x k
  std::vector<int64_t> indices;
};

struct DenseCase {
  int64_t rows = 1, vocab = 1, hidden = 1;
  nt_dtype dtype = NT_F32;
  std::vector<float> x;       // rows x hidden (the hidden states)
  std::vector<float> weight;  // vocab x hidden
  int64_t x_stride = 0, weight_stride = 0, out_stride = 0;  // 0: contiguous
  int64_t weight_offset = 0;  // elements of the weights' allocation before its first row
  std::vector<float> bias;    // empty: no bias
  nt_dtype bias_dtype = NT_F32;
  int32_t k = 1;
};

TopK run_dense(TestDevice& dev, const DenseCase& c);
std::vector<double> reference_dense_logits(const DenseCase& c);  // rows x vocab

struct BinaryCase {
  int64_t rows = 1, vocab = 1, hidden = 32;
  int32_t group = 32;
  std::vector<int8_t> act_q;      // rows x hidden
  std::vector<float> act_scale;   // rows
  std::vector<int8_t> signs;      // vocab x hidden, -1 / +1
  std::vector<float> wscale;      // vocab x hidden/group, each representable in f16
  std::vector<float> bias;
  nt_dtype bias_dtype = NT_F32;
  int32_t k = 1;
  int64_t act_stride = 0, wq_stride = 0, wscale_stride = 0, out_stride = 0;  // 0: contiguous
};

TopK run_binary(TestDevice& dev, const BinaryCase& c);
std::vector<double> reference_binary_logits(const BinaryCase& c);

struct MaskCase {
  int64_t rows = 1, vocab = 1, logits_stride = 0;
  nt_dtype dtype = NT_F32;
  std::vector<float> logits;         // rows x logits_stride (gaps included)
  int64_t words = 1, mask_stride = 0;
  std::vector<int32_t> mask;         // rows x mask_stride
  bool has_indices = false;
  nt_dtype index_dtype = NT_I32;
  std::vector<int64_t> indices;
  int64_t stride() const { return logits_stride ? logits_stride : vocab; }
};

// A random case over all rows: N(0, 3) logits with the specials a mask must leave
// alone (NaN, +-inf, +-0) and `logits_gap` elements after each row, and mask
// words of one random density with `mask_gap` words after each row.
MaskCase random_mask_case(Rng& rng, nt_dtype dtype, int64_t rows, int64_t vocab, int64_t words,
                          int64_t logits_gap, int64_t mask_gap);
// The whole logits buffer after the op, encoded in c.dtype.
std::vector<uint8_t> run_apply_mask(TestDevice& dev, const MaskCase& c);
// What that buffer must hold: -inf (bit for bit) where a selected row's token is
// not allowed (bit 0 or past 32 W'), every other byte unchanged.
std::vector<uint8_t> reference_apply_mask(const MaskCase& c);

// allowed: bool bytes [rows, allowed_stride]; result int32 [rows, ceil(vocab/32)].
std::vector<int32_t> run_bitmask_from_allowed(TestDevice& dev, int64_t rows, int64_t vocab,
                                              int64_t allowed_stride,
                                              const std::vector<uint8_t>& allowed);
std::vector<int32_t> reference_bitmask_from_allowed(int64_t rows, int64_t vocab,
                                                    int64_t allowed_stride,
                                                    const std::vector<uint8_t>& allowed);
std::vector<int32_t> run_pack(TestDevice& dev, int64_t rows, int64_t cols,
                              const std::vector<int8_t>& signs);

struct Quantized {
  std::vector<int8_t> q;
  std::vector<float> scale;
};
Quantized run_quantize(TestDevice& dev, nt_dtype dtype, int64_t rows, int64_t cols,
                       int64_t stride, const std::vector<float>& x);

// ---- penalties and logit bias (harness/ops_penalties.cpp) ----------------------
struct PenaltyCase {
  int64_t rows = 1, vocab = 1, logits_stride = 0;  // stride 0: contiguous
  nt_dtype dtype = NT_F32;
  std::vector<uint8_t> logits;  // rows x stride, encoded in dtype (gaps included)
  CsrIds prompt, output;
  nt_dtype offsets_dtype = NT_I32;  // of both lists
  Param<float> repetition = scalar(1.0f);
  Param<float> presence = scalar(0.0f);
  Param<float> frequency = scalar(0.0f);
  int64_t stride() const { return logits_stride ? logits_stride : vocab; }
};

// The whole logits buffer after nt_apply_penalties (workspace of exactly the
// queried size).
std::vector<uint8_t> run_apply_penalties(TestDevice& dev, const PenaltyCase& c);
std::vector<uint8_t> reference_penalties(const PenaltyCase& c);

struct BiasCase {
  int64_t rows = 1, vocab = 1, logits_stride = 0;
  nt_dtype dtype = NT_F32;
  std::vector<uint8_t> logits;
  CsrIds tokens;
  nt_dtype offsets_dtype = NT_I32;
  std::vector<float> values;  // one per id
  int64_t stride() const { return logits_stride ? logits_stride : vocab; }
};

std::vector<uint8_t> run_apply_logit_bias(TestDevice& dev, const BiasCase& c);
std::vector<uint8_t> reference_logit_bias(const BiasCase& c);

}  // namespace ntt
