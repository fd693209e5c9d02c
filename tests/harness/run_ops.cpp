#include "harness/run_ops.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "harness/run_util.h"

namespace ntt {
namespace {

TopK collect_topk(const Buffer& values, const Buffer& indices, int64_t rows, int64_t k,
                  int64_t stride) {
  const auto v = from_device<float>(values, size_t(rows * stride));
  const auto i = from_device<int64_t>(indices, size_t(rows * stride));
  TopK out;
  out.rows = rows;
  out.k = k;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < stride; ++j) {
      const size_t at = size_t(r * stride + j);
      if (j < k) {
        out.values.push_back(v[at]);
        out.indices.push_back(i[at]);
      } else if (f32_bits(v[at]) != f32_bits(poison_f32()) || i[at] != kPoisonI64) {
        throw std::runtime_error("top-k wrote into the gap of output row " + std::to_string(r));
      }
    }
  }
  return out;
}

}  // namespace

RowSampleParams SampleCase::row_params(int64_t row) const {
  RowSampleParams p = case_row_params(*this, row);
  p.row_tag = seed.per_row ? 0u : uint32_t(row);
  p.has_uniform = !uniform.empty();
  p.uniform = p.has_uniform ? uniform[size_t(row)] : 0.0f;
  return p;
}

SampleReference reference_sample(const SampleCase& c, int64_t row) {
  std::vector<float> x(size_t(c.vocab));
  for (int64_t i = 0; i < c.vocab; ++i) x[size_t(i)] = round_to(c.dtype, c.logits[size_t(row * c.vocab + i)]);
  return reference_sample_row(x.data(), c.vocab, c.row_params(row));
}

std::vector<int64_t> run_sample(TestDevice& dev, const SampleCase& c) {
  const SampleInputs in(dev, c);
  run_with_workspace(dev, in.args(), "nt_sample", nt_sample_workspace_size, nt_sample);
  std::vector<int64_t> out = in.read_tokens();
  in.check_logits_unchanged("nt_sample");
  return out;
}

TopK run_dense(TestDevice& dev, const DenseCase& c) {
  const int64_t xs = c.x_stride ? c.x_stride : c.hidden;
  const int64_t ws_ = c.weight_stride ? c.weight_stride : c.hidden;
  const int64_t os = c.out_stride ? c.out_stride : c.k;
  auto x = to_device(dev, encode(c.dtype, with_gaps(c.x, c.rows, c.hidden, xs, c.dtype)));
  std::vector<float> w_host = with_gaps(c.weight, c.vocab, c.hidden, ws_, c.dtype);
  w_host.insert(w_host.begin(), size_t(c.weight_offset), round_to(c.dtype, 60000.0f));
  const std::vector<uint8_t> w_bytes = encode(c.dtype, w_host);
  const size_t w_byte_offset = w_bytes.size() / w_host.size() * size_t(c.weight_offset);
  auto w = to_device(dev, w_bytes);
  std::unique_ptr<Buffer> bias = c.bias.empty() ? nullptr : to_device(dev, encode(c.bias_dtype, c.bias));
  auto values = to_device(dev, std::vector<float>(size_t(c.rows * os), poison_f32()));
  auto indices = to_device(dev, std::vector<int64_t>(size_t(c.rows * os), kPoisonI64));

  nt_lm_head_dense_args a{};
  a.hidden = x->matrix(c.dtype, c.rows, c.hidden, xs);
  a.weight = w->matrix(c.dtype, c.vocab, c.hidden, ws_, w_byte_offset);
  if (bias) a.bias = bias->vector(c.bias_dtype, c.vocab);
  a.k = c.k;
  a.values = values->matrix(NT_F32, c.rows, c.k, os);
  a.indices = indices->matrix(NT_I64, c.rows, c.k, os);
  run_with_workspace(dev, a, "nt_lm_head_topk_dense", nt_lm_head_topk_dense_workspace_size, nt_lm_head_topk_dense);
  return collect_topk(*values, *indices, c.rows, c.k, os);
}

std::vector<double> reference_dense_logits(const DenseCase& c) {
  auto rounded = [&](const std::vector<float>& v) {  // the values the device holds
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = round_to(c.dtype, v[i]);
    return r;
  };
  const std::vector<float> x = rounded(c.x), w = rounded(c.weight);
  std::vector<double> out(size_t(c.rows * c.vocab));
  for (int64_t m = 0; m < c.rows; ++m)
    for (int64_t v = 0; v < c.vocab; ++v) {
      const float* xm = &x[size_t(m * c.hidden)];
      const float* wv = &w[size_t(v * c.hidden)];
      double sum = 0;
      for (int64_t h = 0; h < c.hidden; ++h) sum += double(xm[h]) * double(wv[h]);
      if (!c.bias.empty()) sum += double(round_to(c.bias_dtype, c.bias[size_t(v)]));
      out[size_t(m * c.vocab + v)] = sum;
    }
  return out;
}

TopK run_binary(TestDevice& dev, const BinaryCase& c) {
  const int64_t groups = c.hidden / c.group, words = c.hidden / 32;
  const int64_t as = c.act_stride ? c.act_stride : c.hidden;
  const int64_t qs = c.wq_stride ? c.wq_stride : words;
  const int64_t ss = c.wscale_stride ? c.wscale_stride : groups;
  const int64_t os = c.out_stride ? c.out_stride : c.k;
  auto act_q = to_device(dev, with_gaps<int8_t>(c.act_q, c.rows, c.hidden, as, 127));
  auto act_scale = to_device(dev, c.act_scale);
  auto wq = to_device(dev, with_gaps<int32_t>(reference_pack(c.signs, c.vocab, c.hidden), c.vocab,
                                              words, qs, -1));
  auto wscale = to_device(dev, encode(NT_F16, with_gaps<float>(c.wscale, c.vocab, groups, ss, 1000.0f)));
  std::unique_ptr<Buffer> bias = c.bias.empty() ? nullptr : to_device(dev, encode(c.bias_dtype, c.bias));
  auto values = to_device(dev, std::vector<float>(size_t(c.rows * os), poison_f32()));
  auto indices = to_device(dev, std::vector<int64_t>(size_t(c.rows * os), kPoisonI64));

  nt_lm_head_binary_args a{};
  a.act_q = act_q->matrix(NT_I8, c.rows, c.hidden, as);
  a.act_scale = act_scale->vector(NT_F32, c.rows);
  a.wq = wq->matrix(NT_I32, c.vocab, words, qs);
  a.wscale = wscale->matrix(NT_F16, c.vocab, groups, ss);
  if (bias) a.bias = bias->vector(c.bias_dtype, c.vocab);
  a.group_size = c.group;
  a.k = c.k;
  a.values = values->matrix(NT_F32, c.rows, c.k, os);
  a.indices = indices->matrix(NT_I64, c.rows, c.k, os);
  run_with_workspace(dev, a, "nt_lm_head_topk_binary", nt_lm_head_topk_binary_workspace_size, nt_lm_head_topk_binary);
  return collect_topk(*values, *indices, c.rows, c.k, os);
}

std::vector<double> reference_binary_logits(const BinaryCase& c) {
  const int64_t groups = c.hidden / c.group;
  std::vector<double> out(size_t(c.rows * c.vocab));
  for (int64_t m = 0; m < c.rows; ++m)
    for (int64_t v = 0; v < c.vocab; ++v) {
      const int8_t* a = &c.act_q[size_t(m * c.hidden)];
      const int8_t* s = &c.signs[size_t(v * c.hidden)];
      double sum = 0;
      for (int64_t g = 0; g < groups; ++g) {
        int32_t d = 0;  // exact integer dot of the group: |d| <= 128 * group
        for (int64_t j = g * c.group; j < (g + 1) * c.group; ++j) d += s[j] > 0 ? a[j] : -a[j];
        sum += double(round_to(NT_F16, c.wscale[size_t(v * groups + g)])) * double(d);
      }
      sum *= double(c.act_scale[size_t(m)]);
      if (!c.bias.empty()) sum += double(round_to(c.bias_dtype, c.bias[size_t(v)]));
      out[size_t(m * c.vocab + v)] = sum;
    }
  return out;
}

MaskCase random_mask_case(Rng& rng, nt_dtype dtype, int64_t rows, int64_t vocab, int64_t words,
                          int64_t logits_gap, int64_t mask_gap) {
  MaskCase c;
  c.rows = rows;
  c.vocab = vocab;
  c.dtype = dtype;
  c.logits_stride = vocab + logits_gap;
  c.logits = logits_with_specials(rng, size_t(rows * c.stride()));
  c.words = words;
  c.mask_stride = words + mask_gap;
  c.mask = random_mask_words(rng, size_t(rows * c.mask_stride));
  return c;
}

std::vector<uint8_t> run_apply_mask(TestDevice& dev, const MaskCase& c) {
  const auto encoded = encode(c.dtype, c.logits);
  auto logits = to_device(dev, encoded);
  auto mask = to_device(dev, c.mask);
  const int64_t mask_stride = c.mask_stride ? c.mask_stride : c.words;
  std::unique_ptr<Buffer> indices;
  if (c.has_indices) {
    if (c.index_dtype == NT_I64) {
      indices = to_device(dev, c.indices);
    } else {
      std::vector<int32_t> narrow(c.indices.begin(), c.indices.end());
      indices = to_device(dev, narrow);
    }
  }
  nt_apply_token_bitmask_args a{};
  a.logits = logits->matrix(c.dtype, c.rows, c.vocab, c.stride());
  a.bitmask = mask->matrix(NT_I32, c.rows, c.words, mask_stride);
  if (indices) a.indices = indices->vector(c.index_dtype, int64_t(c.indices.size()));
  ok(nt_apply_token_bitmask(&a, dev.stream()), "nt_apply_token_bitmask");
  dev.sync();
  return from_device<uint8_t>(*logits, encoded.size());
}

std::vector<uint8_t> reference_apply_mask(const MaskCase& c) {
  std::vector<uint8_t> out = encode(c.dtype, c.logits);
  std::vector<bool> selected(size_t(c.rows), !c.has_indices);
  for (int64_t i : c.indices)
    if (i >= 0 && i < c.rows) selected[size_t(i)] = true;
  const int64_t mask_stride = c.mask_stride ? c.mask_stride : c.words;
  const size_t width = dtype_bytes(c.dtype);
  const std::vector<uint8_t> minus_inf = encode(c.dtype, {-INFINITY});
  for (int64_t r = 0; r < c.rows; ++r) {
    if (!selected[size_t(r)]) continue;
    for (int64_t t = 0; t < c.vocab; ++t) {
      const bool allowed = t < 32 * c.words &&
                           ((uint32_t(c.mask[size_t(r * mask_stride + t / 32)]) >> (t % 32)) & 1u);
      if (!allowed) std::memcpy(&out[size_t(r * c.stride() + t) * width], minus_inf.data(), width);
    }
  }
  return out;
}

std::vector<int32_t> reference_bitmask_from_allowed(int64_t rows, int64_t vocab,
                                                    int64_t allowed_stride,
                                                    const std::vector<uint8_t>& allowed) {
  const int64_t words = (vocab + 31) / 32;
  std::vector<int32_t> out(size_t(rows * words), 0);  // padding bits stay 0
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < vocab; ++t)
      if (allowed[size_t(r * allowed_stride + t)])
        out[size_t(r * words + t / 32)] =
            int32_t(uint32_t(out[size_t(r * words + t / 32)]) | (1u << (t % 32)));
  return out;
}

std::vector<int32_t> run_bitmask_from_allowed(TestDevice& dev, int64_t rows, int64_t vocab,
                                              int64_t allowed_stride,
                                              const std::vector<uint8_t>& allowed) {
  const int64_t words = (vocab + 31) / 32;
  auto in = to_device(dev, allowed);
  auto out = to_device(dev, std::vector<int32_t>(size_t(rows * words), kPoisonI32));
  nt_bitmask_from_allowed_args a{};
  a.allowed = in->matrix(NT_BOOL, rows, vocab, allowed_stride);
  a.bitmask = out->matrix(NT_I32, rows, words);
  ok(nt_bitmask_from_allowed(&a, dev.stream()), "nt_bitmask_from_allowed");
  dev.sync();
  return from_device<int32_t>(*out, size_t(rows * words));
}

std::vector<int32_t> run_pack(TestDevice& dev, int64_t rows, int64_t cols,
                              const std::vector<int8_t>& signs) {
  auto in = to_device(dev, signs);
  auto out = to_device(dev, std::vector<int32_t>(size_t(rows * cols / 32), kPoisonI32));
  nt_pack_weights_args a{};
  a.signs = in->matrix(NT_I8, rows, cols);
  a.wq = out->matrix(NT_I32, rows, cols / 32);
  ok(nt_pack_weights(&a, dev.stream()), "nt_pack_weights");
  dev.sync();
  return from_device<int32_t>(*out, size_t(rows * cols / 32));
}

Quantized run_quantize(TestDevice& dev, nt_dtype dtype, int64_t rows, int64_t cols,
                       int64_t stride, const std::vector<float>& x) {
  const int64_t xs = stride ? stride : cols;
  auto in = to_device(dev, encode(dtype, with_gaps(x, rows, cols, xs, dtype)));
  // -128 is outside the clamp range, so an unwritten element cannot pass.
  auto q = to_device(dev, std::vector<int8_t>(size_t(rows * cols), int8_t(-128)));
  auto scale = to_device(dev, std::vector<float>(size_t(rows), poison_f32()));
  nt_quantize_activations_args a{};
  a.x = in->matrix(dtype, rows, cols, xs);
  a.act_q = q->matrix(NT_I8, rows, cols);
  a.act_scale = scale->vector(NT_F32, rows);
  ok(nt_quantize_activations(&a, dev.stream()), "nt_quantize_activations");
  dev.sync();
  return {from_device<int8_t>(*q, size_t(rows * cols)), from_device<float>(*scale, size_t(rows))};
}

}  // namespace ntt
