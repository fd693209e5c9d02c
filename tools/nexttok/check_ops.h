// Random cases of every op for `nexttok check`, and running a case through the
// public API on any Device (inputs uploaded, outputs fetched back).
#pragma once

#include <cstdint>
#include <vector>

#include "baselines.h"
#include "device.h"
#include "inputs.h"

constexpr nt_dtype kNoTensor = static_cast<nt_dtype>(-1);

struct MaskCase {
  int64_t b = 0, v = 0, stride = 0, words = 0;  // words: the bitmask's W'
  nt_dtype dtype = NT_F32;
  std::vector<unsigned char> logits;           // [b, stride]
  std::vector<int32_t> mask;                   // [b, words]
  nt_dtype index_type = kNoTensor;             // NT_I32 | NT_I64 | kNoTensor
  std::vector<int64_t> indices;
};
MaskCase make_mask_case(Rng& rng);
std::vector<unsigned char> run_mask(Device& dev, const MaskCase& c);

struct AllowedCase {
  int64_t b = 0, v = 0;
  std::vector<unsigned char> allowed;  // bool [b, v]
};
AllowedCase make_allowed_case(Rng& rng);
std::vector<int32_t> run_allowed(Device& dev, const AllowedCase& c);

struct SampleCase {
  int64_t b = 0, v = 0;
  nt_dtype dtype = NT_F32;
  std::vector<unsigned char> logits;             // [b, v]
  bool params_per_row = false;                   // device arrays, else scalars
  std::vector<baseline::ChainParams> params;     // b entries if per row, else 1
  bool seeds_per_row = false;
  std::vector<uint64_t> seeds;                   // b entries if per row, else 1
  uint64_t offset = 0;
  bool joint = false;
  std::vector<float> uniform;                    // empty, or b explicit draws
  nt_dtype token_type = NT_I64;
  const baseline::ChainParams& row_params(int64_t r) const {
    return params_per_row ? params[r] : params[0];
  }
  float logit(int64_t r, int64_t t) const { return widen(logits.data(), dtype, r * v + t); }
};
// greedy_only: temperature 0 or top_k 1 on every row.
SampleCase make_sample_case(Rng& rng, bool greedy_only);
std::vector<int64_t> run_sample(Device& dev, const SampleCase& c);

struct TopK {
  std::vector<float> values;
  std::vector<int64_t> indices;
};

struct DenseCase {
  int64_t m = 0, v = 0, h = 0;
  int32_t k = 1;
  nt_dtype dtype = NT_F32, bias_type = kNoTensor;
  std::vector<unsigned char> hidden, weight, bias;
};
DenseCase make_dense_case(Rng& rng);
TopK run_dense(Device& dev, const DenseCase& c);

struct BinaryCase {
  int64_t m = 0, v = 0, h = 0;
  int32_t g = 32, k = 1;
  std::vector<int8_t> act_q;
  std::vector<float> act_scale;
  std::vector<int32_t> wq;
  std::vector<uint16_t> wscale;  // f16
  nt_dtype bias_type = kNoTensor;
  std::vector<unsigned char> bias;
};
BinaryCase make_binary_case(Rng& rng);
TopK run_binary(Device& dev, const BinaryCase& c);

struct PackCase {
  int64_t v = 0, h = 0;
  std::vector<int8_t> signs;
};
PackCase make_pack_case(Rng& rng);
std::vector<int32_t> run_pack(Device& dev, const PackCase& c);

struct QuantizeCase {
  int64_t m = 0, h = 0;
  nt_dtype dtype = NT_F32;
  std::vector<unsigned char> x;
};
struct Quantized {
  std::vector<int8_t> q;
  std::vector<float> scale;
};
QuantizeCase make_quantize_case(Rng& rng);
Quantized run_quantize(Device& dev, const QuantizeCase& c);
