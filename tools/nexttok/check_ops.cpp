#include "check_ops.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "nexttok/nexttok.hpp"

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

const nt_dtype kFloatTypes[] = {NT_F32, NT_F16, NT_BF16};

nt_dtype any_float_type(Rng& rng) { return kFloatTypes[rng.below(3)]; }

int64_t pick(Rng& rng, std::initializer_list<int64_t> options) {
  return options.begin()[rng.below(static_cast<int64_t>(options.size()))];
}

// A host copy of `data` with its device twin; fetch() leaves the device's
// contents in `host`.
struct Staged {
  std::vector<unsigned char> host;
  DeviceBuffer device;
  Staged(Device& dev, const void* data, size_t bytes)
      : host(static_cast<const unsigned char*>(data), static_cast<const unsigned char*>(data) + bytes) {
    device = DeviceBuffer(dev, host.data(), host.size());
  }
  Staged(Device& dev, size_t bytes) : host(bytes, 0xAB) {
    device = DeviceBuffer(dev, host.data(), host.size());
  }
  void* get() const { return device.get(); }
  template <class T>
  std::vector<T> fetch_as() {
    device.fetch();
    std::vector<T> out(host.size() / sizeof(T));
    std::memcpy(out.data(), host.data(), out.size() * sizeof(T));
    return out;
  }
};

template <class T>
Staged stage(Device& dev, const std::vector<T>& v) {
  return Staged(dev, v.data(), v.size() * sizeof(T));
}

nt_tensor view(Device& dev, const Staged& s, nt_dtype t, int64_t rows, int64_t cols,
               int64_t stride = -1) {
  nt_tensor x = device_view(dev, s.get(), 0, t, rows, cols);
  if (stride >= 0) x.row_stride = stride;
  return x;
}

nt_tensor vec(Device& dev, const Staged& s, nt_dtype t, int64_t n) {
  return device_vector(dev, s.get(), 0, t, n);
}

// Logits rows with, now and then, the values every op must rank right:
// NaN, -inf, +inf, -0 and exact ties.
void fill_row(float* row, int64_t v, Rng& rng) {
  fill_logits(row, v, rng.uniform() < 0.5 ? LogitKind::Peaked : LogitKind::Flat, rng);
  double u = rng.uniform();
  if (u < 0.08) {
    for (int64_t i = 0; i < v; ++i) row[i] = -kInf;
    if (rng.uniform() < 0.5) row[rng.below(v)] = std::numeric_limits<float>::quiet_NaN();
  } else if (u < 0.14) {
    for (int n = 0; n < 3; ++n) row[rng.below(v)] = kInf;
  } else if (u < 0.40) {
    for (int n = 0; n < 1 + v / 20; ++n) {
      int64_t i = rng.below(v);
      double w = rng.uniform();
      row[i] = w < 0.3 ? std::numeric_limits<float>::quiet_NaN() : w < 0.6 ? -kInf : w < 0.8 ? -0.0f : row[rng.below(v)];
    }
  }
}

}  // namespace

// ---- grammar mask ---------------------------------------------------------------

MaskCase make_mask_case(Rng& rng) {
  MaskCase c;
  c.b = 1 + rng.below(5);
  c.v = rng.uniform() < 0.3 ? 32 * (1 + rng.below(64)) : 1 + rng.below(3000);
  c.stride = c.v + (rng.uniform() < 0.3 ? 1 + rng.below(40) : 0);
  c.dtype = any_float_type(rng);
  int64_t full = (c.v + 31) / 32;
  double u = rng.uniform();
  c.words = u < 0.2 ? 1 + rng.below(full) : u < 0.4 ? full + 1 + rng.below(3) : full;
  std::vector<float> row(static_cast<size_t>(c.stride));
  c.logits.resize(static_cast<size_t>(c.b * c.stride) * dtype_size(c.dtype));
  for (int64_t r = 0; r < c.b; ++r) {
    fill_row(row.data(), c.stride, rng);
    narrow(row.data(), c.logits.data() + static_cast<size_t>(r * c.stride) * dtype_size(c.dtype),
           c.dtype, row.size());
  }
  c.mask.resize(static_cast<size_t>(c.b * c.words));
  MaskKind kind = static_cast<MaskKind>(rng.below(3));
  for (int64_t r = 0; r < c.b; ++r) {
    std::vector<int32_t> m = make_bitmask(1, 32 * c.words, kind, rng);
    std::memcpy(&c.mask[r * c.words], m.data(), c.words * 4);
  }
  if (rng.uniform() < 0.5) {
    c.index_type = rng.uniform() < 0.5 ? NT_I32 : NT_I64;
    int64_t n = 1 + rng.below(2 * c.b);
    for (int64_t i = 0; i < n; ++i) c.indices.push_back(rng.below(c.b + 4) - 2);
  }
  return c;
}

std::vector<unsigned char> run_mask(Device& dev, const MaskCase& c) {
  Staged logits = stage(dev, c.logits), mask = stage(dev, c.mask);
  std::vector<int32_t> i32(c.indices.begin(), c.indices.end());
  Staged indices = c.index_type == NT_I32 ? stage(dev, i32) : stage(dev, c.indices);
  nt_tensor idx = c.index_type == kNoTensor ? nexttok::none()
                                            : vec(dev, indices, c.index_type, static_cast<int64_t>(c.indices.size()));
  nexttok::apply_token_bitmask(view(dev, logits, c.dtype, c.b, c.v, c.stride),
                               view(dev, mask, NT_I32, c.b, c.words), idx, dev.stream());
  return logits.fetch_as<unsigned char>();
}

AllowedCase make_allowed_case(Rng& rng) {
  AllowedCase c;
  c.b = 1 + rng.below(4);
  c.v = 1 + rng.below(2000);
  double density = rng.uniform();
  c.allowed.resize(static_cast<size_t>(c.b * c.v));
  for (auto& a : c.allowed) a = rng.uniform() < density;
  return c;
}

std::vector<int32_t> run_allowed(Device& dev, const AllowedCase& c) {
  int64_t words = (c.v + 31) / 32;
  Staged allowed = stage(dev, c.allowed);
  Staged mask(dev, static_cast<size_t>(c.b * words) * 4);
  nexttok::bitmask_from_allowed(view(dev, allowed, NT_BOOL, c.b, c.v),
                                view(dev, mask, NT_I32, c.b, words), dev.stream());
  return mask.fetch_as<int32_t>();
}

// ---- sampling ------------------------------------------------------------------------

namespace {

baseline::ChainParams random_params(Rng& rng, bool per_row, bool greedy_only) {
  baseline::ChainParams p;
  if (greedy_only) {
    p.temperature = rng.uniform() < 0.5 ? 0.0f : 0.8f;
    p.top_k = p.temperature > 0 ? 1 : static_cast<int32_t>(pick(rng, {0, 5, 50}));
    if (per_row && rng.uniform() < 0.2) p.temperature = std::numeric_limits<float>::quiet_NaN(), p.top_k = 0;
    return p;
  }
  p.temperature = static_cast<float>(pick(rng, {50, 70, 100, 100, 150})) / 100.0f;
  p.top_k = static_cast<int32_t>(pick(rng, {0, 0, 2, 5, 50, 1000}));
  p.top_p = static_cast<float>(pick(rng, {100, 100, 50, 90, 95, 99})) / 100.0f;
  p.min_p = static_cast<float>(pick(rng, {0, 0, 0, 1, 5, 20})) / 100.0f;
  if (per_row) {
    // Device-resident values are never validated: they take defined meanings.
    double u = rng.uniform();
    if (u < 0.05) p.top_p = 0.0f;
    else if (u < 0.08) p.top_p = std::numeric_limits<float>::quiet_NaN();
    else if (u < 0.11) p.min_p = 1.5f;
    else if (u < 0.14) p.top_k = -7;
    else if (u < 0.17) p.temperature = -1.0f;
  }
  return p;
}

}  // namespace

SampleCase make_sample_case(Rng& rng, bool greedy_only) {
  SampleCase c;
  c.b = 1 + rng.below(6);
  c.v = rng.uniform() < 0.15 ? 20000 + rng.below(60000) : 1 + rng.below(4000);
  c.dtype = any_float_type(rng);
  std::vector<float> row(static_cast<size_t>(c.v));
  c.logits.resize(static_cast<size_t>(c.b * c.v) * dtype_size(c.dtype));
  for (int64_t r = 0; r < c.b; ++r) {
    fill_row(row.data(), c.v, rng);
    narrow(row.data(), c.logits.data() + static_cast<size_t>(r * c.v) * dtype_size(c.dtype), c.dtype,
           row.size());
  }
  c.params_per_row = rng.uniform() < 0.4;
  c.joint = rng.uniform() < 0.25;
  for (int64_t r = 0; r < (c.params_per_row ? c.b : 1); ++r) {
    c.params.push_back(random_params(rng, c.params_per_row, greedy_only));
    c.params.back().joint = c.joint;
  }
  c.seeds_per_row = rng.uniform() < 0.4;
  for (int64_t r = 0; r < (c.seeds_per_row ? c.b : 1); ++r) c.seeds.push_back(rng.next());
  c.offset = rng.uniform() < 0.5 ? rng.below(100) : rng.next();
  c.token_type = rng.uniform() < 0.3 ? NT_I32 : NT_I64;
  return c;
}

std::vector<int64_t> run_sample(Device& dev, const SampleCase& c) {
  Staged logits = stage(dev, c.logits);
  size_t b = static_cast<size_t>(c.b);
  std::vector<float> t(b), tp(b), mp(b);
  std::vector<int32_t> tk(b);
  for (size_t r = 0; r < b && c.params_per_row; ++r) {
    t[r] = c.params[r].temperature;
    tk[r] = c.params[r].top_k;
    tp[r] = c.params[r].top_p;
    mp[r] = c.params[r].min_p;
  }
  Staged st = stage(dev, t), stk = stage(dev, tk), stp = stage(dev, tp), smp = stage(dev, mp);
  Staged seeds = stage(dev, c.seeds), uniform = stage(dev, c.uniform);
  Staged tokens(dev, b * dtype_size(c.token_type));
  nexttok::SampleParams p;
  p.temperature.scalar = c.params[0].temperature;
  p.top_k.scalar = c.params[0].top_k;
  p.top_p.scalar = c.params[0].top_p;
  p.min_p.scalar = c.params[0].min_p;
  if (c.params_per_row) {
    p.temperature.per_row = st.get();
    p.top_k.per_row = stk.get();
    p.top_p.per_row = stp.get();
    p.min_p.per_row = smp.get();
  }
  p.seed.scalar = c.seeds[0];
  if (c.seeds_per_row) p.seed.per_row = seeds.get();
  p.offset.scalar = c.offset;
  p.flags = c.joint ? NT_SAMPLE_TOP_P_JOINT : 0;
  if (!c.uniform.empty()) p.uniform = vec(dev, uniform, NT_F32, c.b);
  nt_sample_args a = nexttok::sample_args(view(dev, logits, c.dtype, c.b, c.v),
                                          vec(dev, tokens, c.token_type, c.b), p);
  size_t bytes = nexttok::sample_workspace_size(a);
  DeviceScratch ws(dev, bytes);
  nexttok::sample(a, ws.get(), ws.bytes(), dev.stream());
  std::vector<int64_t> out(b);
  if (c.token_type == NT_I32) {
    std::vector<int32_t> t32 = tokens.fetch_as<int32_t>();
    out.assign(t32.begin(), t32.end());
  } else {
    out = tokens.fetch_as<int64_t>();
  }
  return out;
}

// ---- LM heads -----------------------------------------------------------------------

DenseCase make_dense_case(Rng& rng) {
  DenseCase c;
  c.m = 1 + rng.below(4);
  c.v = 1 + rng.below(3000);
  c.h = 1 + rng.below(300);
  c.dtype = any_float_type(rng);
  c.k = static_cast<int32_t>(1 + rng.below(std::min<int64_t>(c.v, rng.uniform() < 0.8 ? 64 : 2048)));
  auto fill = [&](std::vector<unsigned char>& out, int64_t n, nt_dtype t, float scale) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& e : x) e = scale * rng.normal();
    out.resize(static_cast<size_t>(n) * dtype_size(t));
    narrow(x.data(), out.data(), t, x.size());
  };
  fill(c.hidden, c.m * c.h, c.dtype, 1.0f);
  fill(c.weight, c.v * c.h, c.dtype, 1.0f / std::sqrt(static_cast<float>(c.h)));
  if (rng.uniform() < 0.5) {
    c.bias_type = any_float_type(rng);
    fill(c.bias, c.v, c.bias_type, 0.5f);
  }
  return c;
}

TopK run_dense(Device& dev, const DenseCase& c) {
  Staged hidden = stage(dev, c.hidden), weight = stage(dev, c.weight), bias = stage(dev, c.bias);
  Staged values(dev, static_cast<size_t>(c.m * c.k) * 4), indices(dev, static_cast<size_t>(c.m * c.k) * 8);
  nt_lm_head_dense_args a{};
  a.hidden = view(dev, hidden, c.dtype, c.m, c.h);
  a.weight = view(dev, weight, c.dtype, c.v, c.h);
  if (c.bias_type != kNoTensor) a.bias = vec(dev, bias, c.bias_type, c.v);
  a.k = c.k;
  a.values = view(dev, values, NT_F32, c.m, c.k);
  a.indices = view(dev, indices, NT_I64, c.m, c.k);
  size_t bytes = 0;
  nexttok::check(nt_lm_head_topk_dense_workspace_size(&a, &bytes));
  DeviceScratch ws(dev, bytes);
  nexttok::lm_head_topk_dense(a, ws.get(), ws.bytes(), dev.stream());
  return {values.fetch_as<float>(), indices.fetch_as<int64_t>()};
}

BinaryCase make_binary_case(Rng& rng) {
  BinaryCase c;
  c.m = 1 + rng.below(4);
  c.v = 1 + rng.below(3000);
  c.g = static_cast<int32_t>(pick(rng, {32, 64, 128, 256}));
  c.h = c.g * (1 + rng.below(512 / c.g + 1));
  c.k = static_cast<int32_t>(1 + rng.below(std::min<int64_t>(c.v, rng.uniform() < 0.8 ? 64 : 2048)));
  c.act_q.resize(static_cast<size_t>(c.m * c.h));
  for (int8_t& q : c.act_q) q = static_cast<int8_t>(rng.below(255) - 127);
  for (int64_t r = 0; r < c.m; ++r) c.act_scale.push_back(0.001f + 0.02f * static_cast<float>(rng.uniform()));
  c.wq.resize(static_cast<size_t>(c.v * c.h / 32));
  for (int32_t& w : c.wq) w = static_cast<int32_t>(rng.next());
  c.wscale.resize(static_cast<size_t>(c.v * (c.h / c.g)));
  for (uint16_t& s : c.wscale)
    s = static_cast<uint16_t>(nt_f32_to_f16((rng.uniform() < 0.1 ? -1.0f : 1.0f) *
                                            (0.5f + static_cast<float>(rng.uniform())) / std::sqrt(static_cast<float>(c.h))));
  if (rng.uniform() < 0.5) {
    c.bias_type = any_float_type(rng);
    std::vector<float> b(static_cast<size_t>(c.v));
    for (float& x : b) x = 0.5f * rng.normal();
    c.bias.resize(b.size() * dtype_size(c.bias_type));
    narrow(b.data(), c.bias.data(), c.bias_type, b.size());
  }
  return c;
}

TopK run_binary(Device& dev, const BinaryCase& c) {
  Staged act_q = stage(dev, c.act_q), act_scale = stage(dev, c.act_scale), wq = stage(dev, c.wq);
  Staged wscale = stage(dev, c.wscale), bias = stage(dev, c.bias);
  Staged values(dev, static_cast<size_t>(c.m * c.k) * 4), indices(dev, static_cast<size_t>(c.m * c.k) * 8);
  nt_lm_head_binary_args a{};
  a.act_q = view(dev, act_q, NT_I8, c.m, c.h);
  a.act_scale = vec(dev, act_scale, NT_F32, c.m);
  a.wq = view(dev, wq, NT_I32, c.v, c.h / 32);
  a.wscale = view(dev, wscale, NT_F16, c.v, c.h / c.g);
  if (c.bias_type != kNoTensor) a.bias = vec(dev, bias, c.bias_type, c.v);
  a.group_size = c.g;
  a.k = c.k;
  a.values = view(dev, values, NT_F32, c.m, c.k);
  a.indices = view(dev, indices, NT_I64, c.m, c.k);
  size_t bytes = 0;
  nexttok::check(nt_lm_head_topk_binary_workspace_size(&a, &bytes));
  DeviceScratch ws(dev, bytes);
  nexttok::lm_head_topk_binary(a, ws.get(), ws.bytes(), dev.stream());
  return {values.fetch_as<float>(), indices.fetch_as<int64_t>()};
}

PackCase make_pack_case(Rng& rng) {
  PackCase c;
  c.v = 1 + rng.below(300);
  c.h = 32 * (1 + rng.below(16));
  c.signs.resize(static_cast<size_t>(c.v * c.h));
  for (int8_t& s : c.signs) s = rng.uniform() < 0.5 ? -1 : 1;
  return c;
}

std::vector<int32_t> run_pack(Device& dev, const PackCase& c) {
  Staged signs = stage(dev, c.signs);
  Staged wq(dev, static_cast<size_t>(c.v * c.h / 32) * 4);
  nexttok::pack_weights(view(dev, signs, NT_I8, c.v, c.h), view(dev, wq, NT_I32, c.v, c.h / 32),
                        dev.stream());
  return wq.fetch_as<int32_t>();
}

QuantizeCase make_quantize_case(Rng& rng) {
  QuantizeCase c;
  c.m = 1 + rng.below(5);
  c.h = 1 + rng.below(2000);
  c.dtype = any_float_type(rng);
  std::vector<float> x(static_cast<size_t>(c.m * c.h));
  float scale = static_cast<float>(pick(rng, {1, 3, 100})) * 0.5f;
  for (float& e : x) e = scale * rng.normal();
  for (int64_t r = 0; r < c.m; ++r) {
    double u = rng.uniform();
    float* row = x.data() + r * c.h;
    if (u < 0.1) {
      for (int64_t j = 0; j < c.h; ++j) row[j] = rng.uniform() < 0.5 ? 0.0f : -0.0f;
    } else if (u < 0.25) {
      row[rng.below(c.h)] = std::numeric_limits<float>::quiet_NaN();
    } else if (u < 0.35) {
      // Values on the rounding midpoints: round-half-even must decide.
      for (int64_t j = 0; j < c.h; ++j) row[j] = static_cast<float>(rng.below(255) - 127) * 0.5f;
      row[0] = 63.5f;
    }
  }
  c.x.resize(x.size() * dtype_size(c.dtype));
  narrow(x.data(), c.x.data(), c.dtype, x.size());
  return c;
}

Quantized run_quantize(Device& dev, const QuantizeCase& c) {
  Staged x = stage(dev, c.x);
  Staged q(dev, static_cast<size_t>(c.m * c.h)), scale(dev, static_cast<size_t>(c.m) * 4);
  nexttok::quantize_activations(view(dev, x, c.dtype, c.m, c.h), view(dev, q, NT_I8, c.m, c.h),
                                vec(dev, scale, NT_F32, c.m), dev.stream());
  return {q.fetch_as<int8_t>(), scale.fetch_as<float>()};
}
