#include "workloads.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <unistd.h>

#include "nexttok/nexttok.hpp"

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Distinct random units (rows) are generated up to this many bytes; further
// copies repeat them. The cache cannot tell, and it keeps setup fast.
constexpr size_t kDistinctBytes = size_t{48} << 20;

// `copy_bytes` per copy made of units of `unit_bytes`; fill(unit, rng) draws one.
template <class Fill>
Rotated make_rotated(const BenchConfig& c, size_t copy_bytes, size_t unit_bytes, Fill&& fill,
                     int copies = 0) {
  Rotated r;
  r.copies = copies > 0 ? copies : copies_for(copy_bytes, c.rotate_bytes, c.max_input_bytes);
  r.stride = (copy_bytes + 63) / 64 * 64;
  r.host = std::make_shared<std::vector<unsigned char>>(r.stride * r.copies);
  Rng rng(copy_bytes * 31 + unit_bytes);
  size_t units_per_copy = copy_bytes / unit_bytes;
  size_t distinct = std::max(units_per_copy, kDistinctBytes / unit_bytes);
  size_t made = 0;
  for (int i = 0; i < r.copies; ++i)
    for (size_t u = 0; u < units_per_copy; ++u, ++made) {
      unsigned char* dst = r.host_copy(i) + u * unit_bytes;
      if (made < distinct) {
        fill(dst, rng);
      } else {
        size_t src = made % distinct;
        std::memcpy(dst, r.host->data() + (src / units_per_copy) * r.stride +
                             (src % units_per_copy) * unit_bytes, unit_bytes);
      }
    }
  r.device = DeviceBuffer(*c.device, r.host->data(), r.host->size());
  return r;
}

template <class T>
DeviceBuffer upload_vector(TestDevice& dev, std::vector<T>& v) {
  return DeviceBuffer(dev, v.data(), v.size() * sizeof(T));
}

}  // namespace

LogitKind parse_logit_kind(const std::string& text) {
  if (text == "peaked") return LogitKind::Peaked;
  if (text == "flat") return LogitKind::Flat;
  throw std::invalid_argument("logits must be 'peaked' or 'flat', got '" + text + "'");
}

const char* logit_kind_name(LogitKind kind) { return kind == LogitKind::Peaked ? "peaked" : "flat"; }

std::vector<float> logits_row(Rng& rng, int64_t vocab, LogitKind kind) {
  return kind == LogitKind::Peaked ? ntt::peaked_logits(rng, 1, vocab) : ntt::flat_logits(rng, 1, vocab);
}

void narrow(const float* src, void* dst, nt_dtype dtype, size_t n) {
  const std::vector<uint8_t> bytes = ntt::encode(dtype, std::vector<float>(src, src + n));
  std::memcpy(dst, bytes.data(), bytes.size());
}

float widen(const void* src, nt_dtype dtype, size_t i) {
  if (dtype == NT_F32) return static_cast<const float*>(src)[i];
  return ntt::from_half_bits(dtype, static_cast<const uint16_t*>(src)[i]);
}

int copies_for(size_t bytes, size_t target, size_t max_total) {
  if (bytes == 0) return 1;
  size_t n = (target + bytes - 1) / bytes;
  n = std::min(n, std::max<size_t>(1, max_total / bytes));
  return static_cast<int>(std::max<size_t>(1, n));
}

size_t last_level_cache_bytes() {
  for (int index = 4; index >= 0; --index) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string text;
    if (f >> text) {
      size_t v = std::stoull(text);
      char unit = text.back();
      if (unit == 'K') v <<= 10;
      if (unit == 'M') v <<= 20;
      return v;
    }
  }
  long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return v > 0 ? static_cast<size_t>(v) : (32u << 20);
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// ---- sampling ---------------------------------------------------------------

void SampleWorkload::prepare() {
  TestDevice& dev = *config_.device;
  size_t row_bytes = static_cast<size_t>(spec_.vocab) * ntt::dtype_bytes(spec_.dtype);
  logits_ = make_rotated(config_, row_bytes * spec_.batch, row_bytes,
                         [&](unsigned char* dst, Rng& rng) {
                           const std::vector<float> row = logits_row(rng, spec_.vocab, spec_.kind);
                           narrow(row.data(), dst, spec_.dtype, row.size());
                         });
  nexttok::SampleParams p;
  const baseline::ChainParams& first = spec_.params.front();
  p.temperature.scalar = first.temperature;
  p.top_k.scalar = first.top_k;
  p.top_p.scalar = first.top_p;
  p.min_p.scalar = first.min_p;
  p.seed.scalar = 1234;
  p.flags = first.joint ? NT_SAMPLE_TOP_P_JOINT : 0;
  if (spec_.params.size() > 1) {
    size_t b = static_cast<size_t>(spec_.batch);
    per_row_host_.assign(5, {});
    per_row_host_[0].resize(b * 4);
    per_row_host_[1].resize(b * 4);
    per_row_host_[2].resize(b * 4);
    per_row_host_[3].resize(b * 4);
    per_row_host_[4].resize(b * 8);
    for (size_t r = 0; r < b; ++r) {
      const baseline::ChainParams& q = spec_.params[r];
      uint64_t seed = 1000 + r;
      std::memcpy(&per_row_host_[0][r * 4], &q.temperature, 4);
      std::memcpy(&per_row_host_[1][r * 4], &q.top_k, 4);
      std::memcpy(&per_row_host_[2][r * 4], &q.top_p, 4);
      std::memcpy(&per_row_host_[3][r * 4], &q.min_p, 4);
      std::memcpy(&per_row_host_[4][r * 8], &seed, 8);
    }
    for (auto& v : per_row_host_) per_row_.push_back(upload_vector(dev, v));
    p.temperature.per_row = per_row_[0].get();
    p.top_k.per_row = per_row_[1].get();
    p.top_p.per_row = per_row_[2].get();
    p.min_p.per_row = per_row_[3].get();
    p.seed.per_row = per_row_[4].get();
  }
  tokens_host_.assign(static_cast<size_t>(spec_.batch), -2);
  tokens_ = upload_vector(dev, tokens_host_);
  args_ = nexttok::sample_args(
      ntt::device_matrix(dev, logits_.device.get(), 0, spec_.dtype, spec_.batch, spec_.vocab),
      ntt::device_vector(dev, tokens_.get(), 0, NT_I64, spec_.batch), p);
  if (spec_.logprobs < 0) {
    workspace_ = std::make_unique<DeviceScratch>(dev, nexttok::sample_workspace_size(args_));
    return;
  }
  const int64_t b = spec_.batch, cols = spec_.logprobs + 1;
  logprob_ids_ = std::make_unique<DeviceScratch>(dev, static_cast<size_t>(b * cols) * 4);
  logprobs_ = std::make_unique<DeviceScratch>(dev, static_cast<size_t>(b * cols) * 4);
  ranks_ = std::make_unique<DeviceScratch>(dev, static_cast<size_t>(b) * 4);
  workspace_ = std::make_unique<DeviceScratch>(
      dev, nexttok::sample_logprobs_workspace_size(logprobs_args(args_)));
  lp_row_.resize(static_cast<size_t>(spec_.vocab));
  lp_values_.resize(static_cast<size_t>(spec_.logprobs));
  lp_ids_.resize(static_cast<size_t>(spec_.logprobs));
}

nt_sample_logprobs_args SampleWorkload::logprobs_args(const nt_sample_args& a) const {
  TestDevice& dev = *config_.device;
  const int64_t b = spec_.batch, cols = spec_.logprobs + 1;
  return nexttok::sample_logprobs_args(
      a, spec_.logprobs, NT_LOGPROBS_RAW,
      ntt::device_matrix(dev, logprob_ids_->get(), 0, NT_I32, b, cols),
      ntt::device_matrix(dev, logprobs_->get(), 0, NT_F32, b, cols),
      ntt::device_vector(dev, ranks_->get(), 0, NT_I32, b));
}

void SampleWorkload::run_ours(int i) {
  nt_sample_args a = args_;
  a.logits = ntt::device_matrix(*config_.device, logits_.device.get(), logits_.offset(i), spec_.dtype,
                         spec_.batch, spec_.vocab);
  a.offset.scalar = static_cast<uint64_t>(i);  // a new draw every step, as in decoding
  if (spec_.logprobs >= 0)
    nexttok::sample_logprobs(logprobs_args(a), workspace_->get(), workspace_->bytes(),
                             config_.device->stream());
  else
    nexttok::sample(a, workspace_->get(), workspace_->bytes(), config_.device->stream());
}

void SampleWorkload::run_baseline(int i) {
  size_t row_bytes = static_cast<size_t>(spec_.vocab) * ntt::dtype_bytes(spec_.dtype);
  for (int64_t r = 0; r < spec_.batch; ++r) {
    const unsigned char* src = logits_.host_copy(i) + r * row_bytes;
    const float* row = reinterpret_cast<const float*>(src);
    if (spec_.dtype != NT_F32) {
      widened_.resize(static_cast<size_t>(spec_.vocab));
      for (int64_t t = 0; t < spec_.vocab; ++t) widened_[t] = widen(src, spec_.dtype, t);
      row = widened_.data();
    }
    const baseline::ChainParams& p = spec_.params.size() > 1 ? spec_.params[r] : spec_.params[0];
    tokens_host_[r] = baseline::sort_chain_sample(row, spec_.vocab, p, rng_state_, chain_);
    if (spec_.logprobs >= 0) {
      int32_t rank = 0;
      baseline::logprobs_of_row(row, spec_.vocab, spec_.logprobs, tokens_host_[r], lp_row_.data(),
                                lp_values_.data(), lp_ids_.data(), &rank, lp_scratch_);
    }
  }
}

// ---- grammar mask -------------------------------------------------------------

void MaskWorkload::prepare() {
  size_t row_bytes = static_cast<size_t>(spec_.vocab) * ntt::dtype_bytes(spec_.dtype);
  logits_ = make_rotated(config_, row_bytes * spec_.batch, row_bytes,
                         [&](unsigned char* dst, Rng& rng) {
                           const std::vector<float> row = logits_row(rng, spec_.vocab, LogitKind::Peaked);
                           narrow(row.data(), dst, spec_.dtype, row.size());
                         });
  size_t words = static_cast<size_t>((spec_.vocab + 31) / 32);
  mask_ = make_rotated(
      config_, words * 4 * spec_.batch, words * 4,
      [&](unsigned char* dst, Rng& rng) {
        std::vector<int32_t> m = ntt::bench_bitmask(rng, 1, spec_.vocab, spec_.mask);
        std::memcpy(dst, m.data(), words * 4);
      },
      logits_.copies);
  allowed_.resize(static_cast<size_t>(spec_.batch * spec_.vocab));
}

void MaskWorkload::run_ours(int i) {
  TestDevice& dev = *config_.device;
  int64_t words = (spec_.vocab + 31) / 32;
  nexttok::apply_token_bitmask(
      ntt::device_matrix(dev, logits_.device.get(), logits_.offset(i), spec_.dtype, spec_.batch,
                  spec_.vocab),
      ntt::device_matrix(dev, mask_.device.get(), mask_.offset(i), NT_I32, spec_.batch, words),
      nexttok::none(), dev.stream());
}

void MaskWorkload::run_baseline(int i) {
  int64_t words = (spec_.vocab + 31) / 32;
  bool* allowed = reinterpret_cast<bool*>(allowed_.data());
  baseline::unpack_bitmask(reinterpret_cast<const int32_t*>(mask_.host_copy(i)), words,
                           spec_.batch, spec_.vocab, allowed);
  baseline::masked_fill(logits_.host_copy(i), spec_.dtype, spec_.batch, spec_.vocab, allowed);
}

// ---- LM heads -------------------------------------------------------------------

void HeadWorkload::prepare() {
  TestDevice& dev = *config_.device;
  const int64_t v = spec_.vocab, h = spec_.hidden, m = spec_.m;
  nt_dtype hidden_type = binary_ ? NT_F32 : spec_.dtype;
  size_t hrow = static_cast<size_t>(h) * ntt::dtype_bytes(hidden_type);
  std::vector<float> row(static_cast<size_t>(h));
  hidden_ = make_rotated(config_, hrow * m, hrow, [&](unsigned char* dst, Rng& rng) {
    for (float& x : row) x = static_cast<float>(rng.normal());
    narrow(row.data(), dst, hidden_type, row.size());
  });

  Rng rng(v * 7 + h);
  float amplitude = 1.0f / std::sqrt(static_cast<float>(h));
  if (binary_) {
    int64_t groups = h / spec_.group;
    wq_host_.resize(static_cast<size_t>(v * h / 32));
    for (int32_t& w : wq_host_) w = static_cast<int32_t>(rng.bits());
    wscale_host_.resize(static_cast<size_t>(v * groups));
    for (uint16_t& s : wscale_host_)
      s = ntt::half_bits(NT_F16, amplitude * (0.5f + static_cast<float>(rng.uniform())));
    wq_ = upload_vector(dev, wq_host_);
    wscale_ = upload_vector(dev, wscale_host_);
    // The fallback a user runs: the same weights dequantized to a bf16 head.
    weight_host_.resize(static_cast<size_t>(v * h) * 2);
    uint16_t* w = reinterpret_cast<uint16_t*>(weight_host_.data());
    for (int64_t r = 0; r < v; ++r)
      for (int64_t j = 0; j < h; ++j) {
        float scale = ntt::from_half_bits(NT_F16, wscale_host_[r * groups + j / spec_.group]);
        bool plus = (static_cast<uint32_t>(wq_host_[(r * h + j) / 32]) >> (j % 32)) & 1u;
        w[r * h + j] = ntt::half_bits(NT_BF16, plus ? scale : -scale);
      }
    hidden_bf16_.resize(static_cast<size_t>(hidden_.copies * m * h) * 2);
    for (int c = 0; c < hidden_.copies; ++c) {
      const float* src = reinterpret_cast<const float*>(hidden_.host_copy(c));
      narrow(src, hidden_bf16_.data() + static_cast<size_t>(c * m * h) * 2, NT_BF16,
             static_cast<size_t>(m * h));
    }
    act_q_ = std::make_unique<DeviceScratch>(dev, static_cast<size_t>(m * h));
    act_scale_ = std::make_unique<DeviceScratch>(dev, static_cast<size_t>(m) * 4);
  } else {
    weight_host_.resize(static_cast<size_t>(v * h) * ntt::dtype_bytes(spec_.dtype));
    std::vector<float> wrow(static_cast<size_t>(h));
    for (int64_t r = 0; r < v; ++r) {
      for (float& x : wrow) x = amplitude * static_cast<float>(2.0 * rng.uniform() - 1.0);
      narrow(wrow.data(), weight_host_.data() + static_cast<size_t>(r * h) * ntt::dtype_bytes(spec_.dtype),
             spec_.dtype, wrow.size());
    }
    weight_ = DeviceBuffer(dev, weight_host_.data(), weight_host_.size());
  }
  logits_.resize(static_cast<size_t>(m * v));
  top_values_.resize(static_cast<size_t>(m * spec_.k));
  top_indices_.resize(static_cast<size_t>(m * spec_.k));
}

template <class Args>
void HeadWorkload::binary_operands(int i, Args& a) {
  TestDevice& dev = *config_.device;
  const int64_t v = spec_.vocab, h = spec_.hidden, m = spec_.m;
  a.act_q = ntt::device_matrix(dev, act_q_->get(), 0, NT_I8, m, h);
  a.act_scale = ntt::device_vector(dev, act_scale_->get(), 0, NT_F32, m);
  nexttok::quantize_activations(
      ntt::device_matrix(dev, hidden_.device.get(), hidden_.offset(i), NT_F32, m, h), a.act_q,
      a.act_scale, dev.stream());
  a.wq = ntt::device_matrix(dev, wq_.get(), 0, NT_I32, v, h / 32);
  a.wscale = ntt::device_matrix(dev, wscale_.get(), 0, NT_F16, v, h / spec_.group);
  a.group_size = spec_.group;
}

void HeadWorkload::run_head(int i, int32_t k) {
  TestDevice& dev = *config_.device;
  const int64_t v = spec_.vocab, h = spec_.hidden, m = spec_.m;
  if (!values_ || workspace_k_ != k) {
    values_ = std::make_unique<DeviceScratch>(dev, static_cast<size_t>(m * k) * 4);
    indices_ = std::make_unique<DeviceScratch>(dev, static_cast<size_t>(m * k) * 8);
  }
  nt_tensor values = ntt::device_matrix(dev, values_->get(), 0, NT_F32, m, k);
  nt_tensor indices = ntt::device_matrix(dev, indices_->get(), 0, NT_I64, m, k);
  if (binary_) {
    nt_lm_head_binary_args a{};
    binary_operands(i, a);
    a.k = k;
    a.values = values;
    a.indices = indices;
    if (workspace_k_ != k) {
      size_t bytes = 0;
      nexttok::check(nt_lm_head_topk_binary_workspace_size(&a, &bytes));
      workspace_ = std::make_unique<DeviceScratch>(dev, bytes);
      workspace_k_ = k;
    }
    nexttok::lm_head_topk_binary(a, workspace_->get(), workspace_->bytes(), dev.stream());
  } else {
    nt_lm_head_dense_args a{};
    a.hidden = ntt::device_matrix(dev, hidden_.device.get(), hidden_.offset(i), spec_.dtype, m, h);
    a.weight = ntt::device_matrix(dev, weight_.get(), 0, spec_.dtype, v, h);
    a.k = k;
    a.values = values;
    a.indices = indices;
    if (workspace_k_ != k) {
      size_t bytes = 0;
      nexttok::check(nt_lm_head_topk_dense_workspace_size(&a, &bytes));
      workspace_ = std::make_unique<DeviceScratch>(dev, bytes);
      workspace_k_ = k;
    }
    nexttok::lm_head_topk_dense(a, workspace_->get(), workspace_->bytes(), dev.stream());
  }
}

void HeadWorkload::run_ours(int i) { run_head(i, spec_.k); }

void HeadWorkload::baseline_logits(int i) {
  const int64_t v = spec_.vocab, h = spec_.hidden, m = spec_.m;
  if (binary_) {
    const unsigned char* hidden = hidden_bf16_.data() + static_cast<size_t>((i % hidden_.copies) * m * h) * 2;
    baseline::dense_logits(hidden, weight_host_.data(), NT_BF16, m, v, h, logits_.data(),
                           config_.threads);
  } else {
    baseline::dense_logits(hidden_.host_copy(i), weight_host_.data(), spec_.dtype, m, v, h,
                           logits_.data(), config_.threads);
  }
}

void HeadWorkload::run_baseline(int i) {
  baseline_logits(i);
  for (int64_t r = 0; r < spec_.m; ++r)
    baseline::topk(logits_.data() + r * spec_.vocab, spec_.vocab, spec_.k,
                   top_values_.data() + r * spec_.k, top_indices_.data() + r * spec_.k,
                   topk_scratch_);
}

// ---- W5: hidden state -> token --------------------------------------------------

void FusedWorkload::prepare() {
  HeadWorkload::prepare();
  TestDevice& dev = *config_.device;
  const int64_t m = spec_.m;
  size_t words = static_cast<size_t>((spec_.vocab + 31) / 32);
  mask_ = make_rotated(
      config_, words * 4 * m, words * 4,
      [&](unsigned char* dst, Rng& rng) {
        std::vector<int32_t> bits = ntt::bench_bitmask(rng, 1, spec_.vocab, MaskKind::Random50);
        std::memcpy(dst, bits.data(), words * 4);
      },
      hidden_.copies);
  tokens_ = std::make_unique<DeviceScratch>(dev, static_cast<size_t>(m) * 8);
  tokens_host_.resize(static_cast<size_t>(m));
  allowed_.resize(static_cast<size_t>(m * spec_.vocab));
}

void FusedWorkload::run_ours(int i) {
  TestDevice& dev = *config_.device;
  const int64_t v = spec_.vocab, h = spec_.hidden, m = spec_.m, words = (v + 31) / 32;
  nexttok::SampleParams p;
  p.top_k.scalar = spec_.k;
  p.top_p.scalar = 0.9f;
  p.seed.scalar = 99;
  p.offset.scalar = static_cast<uint64_t>(i);  // a new draw every step, as in decoding
  const nt_tensor bitmask =
      ntt::device_matrix(dev, mask_.device.get(), mask_.offset(i), NT_I32, m, words);
  const nt_tensor tokens = ntt::device_vector(dev, tokens_->get(), 0, NT_I64, m);
  auto run = [&](const auto& a, auto workspace_size, auto op) {
    if (!fused_workspace_) {
      size_t bytes = 0;
      nexttok::check(workspace_size(&a, &bytes));
      fused_workspace_ = std::make_unique<DeviceScratch>(dev, bytes);
    }
    nexttok::check(op(&a, fused_workspace_->get(), fused_workspace_->bytes(), dev.stream()));
  };
  if (binary_) {
    nt_lm_head_sample_binary_args a{};
    binary_operands(i, a);
    a.bitmask = bitmask;
    a.sampling = nexttok::lm_head_sampling(p);
    a.tokens = tokens;
    run(a, nt_lm_head_sample_binary_workspace_size, nt_lm_head_sample_binary);
  } else {
    nt_lm_head_sample_dense_args a{};
    a.hidden = ntt::device_matrix(dev, hidden_.device.get(), hidden_.offset(i), spec_.dtype, m, h);
    a.weight = ntt::device_matrix(dev, weight_.get(), 0, spec_.dtype, v, h);
    a.bitmask = bitmask;
    a.sampling = nexttok::lm_head_sampling(p);
    a.tokens = tokens;
    run(a, nt_lm_head_sample_dense_workspace_size, nt_lm_head_sample_dense);
  }
}

void FusedWorkload::run_baseline(int i) {
  const int64_t m = spec_.m, v = spec_.vocab, words = (v + 31) / 32;
  baseline_logits(i);
  bool* allowed = reinterpret_cast<bool*>(allowed_.data());
  baseline::unpack_bitmask(reinterpret_cast<const int32_t*>(mask_.host_copy(i)), words, m, v,
                           allowed);
  baseline::masked_fill(logits_.data(), NT_F32, m, v, allowed);
  baseline::ChainParams p;
  p.top_k = spec_.k;
  p.top_p = 0.9f;
  for (int64_t r = 0; r < m; ++r)
    tokens_host_[r] = baseline::sort_chain_sample(logits_.data() + r * v, v, p, rng_state_, chain_);
}

// ---- W7: penalties ------------------------------------------------------------------

void PenaltyWorkload::prepare() {
  TestDevice& dev = *config_.device;
  const int64_t b = spec_.batch, v = spec_.vocab;
  const size_t row_bytes = static_cast<size_t>(v) * 4;
  logits_ = make_rotated(config_, row_bytes * b, row_bytes, [&](unsigned char* dst, Rng& rng) {
    const std::vector<float> row = logits_row(rng, v, LogitKind::Peaked);
    std::memcpy(dst, row.data(), row_bytes);
  });
  Rng rng(static_cast<uint64_t>(b * 131 + v));
  auto lists = [&](int64_t per_row, std::vector<int32_t>& offsets, std::vector<int32_t>& ids,
                   bool repeats) {
    offsets.resize(static_cast<size_t>(b + 1));
    ids.resize(static_cast<size_t>(b * per_row));
    for (int64_t r = 0; r <= b; ++r) offsets[r] = static_cast<int32_t>(r * per_row);
    for (int64_t j = 0; j < b * per_row; ++j)
      ids[j] = repeats && j % per_row % 7 == 1 ? ids[j - 1]
                                                : static_cast<int32_t>(rng.integer(0, v - 1));
  };
  lists(spec_.prompt, prompt_offsets_, prompt_ids_, false);
  lists(spec_.output, output_offsets_, output_ids_, true);  // decoding repeats some tokens
  for (int64_t r = 0; r < b; ++r) {
    repetition_.push_back(static_cast<float>(rng.uniform(1.0, 2.0)));
    presence_.push_back(static_cast<float>(rng.uniform(0.0, 0.5)));
    frequency_.push_back(static_cast<float>(rng.uniform(0.0, 0.5)));
  }
  for (auto* v32 : {&prompt_offsets_, &prompt_ids_, &output_offsets_, &output_ids_})
    buffers_.push_back(upload_vector(dev, *v32));
  for (auto* f : {&repetition_, &presence_, &frequency_}) buffers_.push_back(upload_vector(dev, *f));
  auto vec = [&](int k, nt_dtype t, int64_t n) {
    return ntt::device_vector(dev, buffers_[k].get(), 0, t, n);
  };
  nexttok::PenaltyParams p;
  p.repetition.per_row = buffers_[4].get();
  p.presence.per_row = buffers_[5].get();
  p.frequency.per_row = buffers_[6].get();
  args_ = nexttok::penalties_args(
      ntt::device_matrix(dev, logits_.device.get(), 0, NT_F32, b, v),
      nexttok::token_lists(vec(0, NT_I32, b + 1), vec(1, NT_I32, b * spec_.prompt)),
      nexttok::token_lists(vec(2, NT_I32, b + 1), vec(3, NT_I32, b * spec_.output)), p);
  workspace_ = std::make_unique<DeviceScratch>(dev, nexttok::apply_penalties_workspace_size(args_));
}

void PenaltyWorkload::run_ours(int i) {
  nt_apply_penalties_args a = args_;
  a.logits = ntt::device_matrix(*config_.device, logits_.device.get(), logits_.offset(i), NT_F32,
                                spec_.batch, spec_.vocab);
  nexttok::apply_penalties(a, workspace_->get(), workspace_->bytes(), config_.device->stream());
}

void PenaltyWorkload::run_baseline(int i) {
  float* logits = reinterpret_cast<float*>(logits_.host_copy(i));
  for (int64_t r = 0; r < spec_.batch; ++r)
    baseline::dense_penalties(logits + r * spec_.vocab, spec_.vocab,
                              prompt_ids_.data() + r * spec_.prompt, spec_.prompt,
                              output_ids_.data() + r * spec_.output, spec_.output, repetition_[r],
                              presence_[r], frequency_[r], scratch_);
}
