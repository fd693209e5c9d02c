// lm_head_sample_dense / _binary (hidden -> token) and their vocabulary-
// parallel form (lm_head_shard_* + lm_head_sample_combine), on the CPU.
//
// The contract (SPEC 9, docs/SEMANTICS.md): the token equals nt_sample on the
// head's own scores after the bitmask, bit for bit, for the same parameters,
// seed and offset; with a logprobs request, tokens and logprobs equal
// nt_sample_logprobs's on those scores. The head's scores are written out here by head_scores_*,
// which repeat the CPU heads' documented arithmetic (lane h mod 8 of an fma
// chain, the fixed lane tree, then the bias); HeadScores* checks them against
// lm_head_topk_* bit for bit, so "the head's own scores" is tested, not assumed.
// Sharded tokens must equal the single call's, through the fallback for rows
// whose keep-set passes the gathered candidates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "harness/data.h"
#include "harness/device.h"
#include "harness/reference.h"
#include "harness/run_ops.h"
#include "nexttok/nexttok.h"

namespace ntt {
namespace {

nt_tensor host(const void* data, nt_dtype dtype, int64_t rows, int64_t cols = -1) {
  nt_tensor t{};
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  t.device = NT_DEVICE_CPU;
  if (cols < 0) {
    t.ndim = 1;
    t.shape[0] = rows;
    t.row_stride = rows;
  } else {
    t.ndim = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.row_stride = cols;
  }
  return t;
}

// A shard without a logprobs request.
nt_lm_head_shard shard_of(int64_t vocab_start, int64_t vocab_size, int64_t first_row, nt_tensor summary) {
  nt_lm_head_shard sh{};
  sh.vocab_start = vocab_start;
  sh.vocab_size = vocab_size;
  sh.first_row = first_row;
  sh.summary = summary;
  return sh;
}

float lane_tree(const float* a) {
  const float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
  return (t0 + t2) + (t1 + t3);
}

// ---- inputs ----------------------------------------------------------------------

struct Head {
  bool binary = false;
  int64_t rows = 0, vocab = 0, hidden = 0;
  // dense
  nt_dtype dtype = NT_F32;
  std::vector<float> x, w;              // values of the dtype
  std::vector<uint8_t> x_bytes, w_bytes;
  // binary
  int32_t group = 128;
  std::vector<int8_t> act_q;
  std::vector<float> act_scale;
  std::vector<int32_t> wq;
  std::vector<uint16_t> wscale;
  // both
  std::vector<float> bias;  // f32, empty = none
};

Head dense_head(Rng& rng, nt_dtype dtype, int64_t rows, int64_t vocab, int64_t hidden, bool bias) {
  Head h;
  h.rows = rows;
  h.vocab = vocab;
  h.hidden = hidden;
  h.dtype = dtype;
  h.x.resize(size_t(rows * hidden));
  for (auto& v : h.x) v = round_to(dtype, float(rng.normal()));
  h.w.resize(size_t(vocab * hidden));
  const double scale = 1.5 / std::sqrt(double(hidden));
  for (auto& v : h.w) v = round_to(dtype, float(rng.normal() * scale));
  h.x_bytes = encode(dtype, h.x);
  h.w_bytes = encode(dtype, h.w);
  if (bias) {
    h.bias.resize(size_t(vocab));
    for (auto& v : h.bias) v = float(0.5 * rng.normal());
  }
  return h;
}

Head binary_head(Rng& rng, int64_t rows, int64_t vocab, int64_t hidden, int32_t group, bool bias) {
  Head h;
  h.binary = true;
  h.rows = rows;
  h.vocab = vocab;
  h.hidden = hidden;
  h.group = group;
  h.act_q.resize(size_t(rows * hidden));
  for (auto& q : h.act_q) q = int8_t(rng.integer(-127, 127));
  h.act_scale.resize(size_t(rows));
  for (auto& s : h.act_scale) s = float(rng.uniform(0.5, 2.0) / (127.0 * std::sqrt(double(hidden))));
  h.wq = reference_pack(random_signs(rng, size_t(vocab * hidden)), vocab, hidden);
  h.wscale.resize(size_t(vocab * (hidden / group)));
  for (auto& s : h.wscale) s = half_bits(NT_F16, float(rng.uniform(0.5, 1.5)));
  if (bias) {
    h.bias.resize(size_t(vocab));
    for (auto& v : h.bias) v = float(0.5 * rng.normal());
  }
  return h;
}

// The CPU heads' scores (file comment): [rows, vocab].
std::vector<float> head_scores(const Head& h) {
  std::vector<float> out(size_t(h.rows * h.vocab));
  for (int64_t m = 0; m < h.rows; ++m)
    for (int64_t v = 0; v < h.vocab; ++v) {
      float lanes[8] = {};
      float score;
      if (!h.binary) {
        for (int64_t j = 0; j < (h.hidden + 7) / 8 * 8; ++j) {
          const bool in = j < h.hidden;
          lanes[j % 8] = std::fmaf(in ? h.x[size_t(m * h.hidden + j)] : 0.0f,
                                   in ? h.w[size_t(v * h.hidden + j)] : 0.0f, lanes[j % 8]);
        }
        score = lane_tree(lanes);
      } else {
        const int64_t groups = h.hidden / h.group, words = h.hidden / 32;
        for (int64_t g = 0; g < (groups + 7) / 8 * 8; ++g) {
          int32_t dot = 0;
          float scale = 0.0f;
          if (g < groups) {
            for (int64_t j = g * h.group; j < (g + 1) * h.group; ++j) {
              const bool plus = (uint32_t(h.wq[size_t(v * words + j / 32)]) >> (j % 32)) & 1u;
              dot += plus ? h.act_q[size_t(m * h.hidden + j)] : -h.act_q[size_t(m * h.hidden + j)];
            }
            scale = from_half_bits(NT_F16, h.wscale[size_t(v * groups + g)]);
          }
          lanes[g % 8] = std::fmaf(scale, float(dot), lanes[g % 8]);
        }
        score = h.act_scale[size_t(m)] * lane_tree(lanes);
      }
      if (!h.bias.empty()) score += h.bias[size_t(v)];
      out[size_t(m * h.vocab + v)] = score;
    }
  return out;
}

// ---- sampling parameters ---------------------------------------------------------

struct Params {
  std::vector<float> temperature, top_p, min_p;
  std::vector<int32_t> top_k;
  std::vector<uint64_t> seed, offset;
  bool per_row = false, seeds_per_row = false, joint = false;
};

// Filter combination `combo` (bits: 1 top-k, 2 top-p, 4 min-p); per-row draws
// mix greedy and every combination.
Params draw_params(Rng& rng, int64_t rows, int64_t vocab, int combo, bool per_row, bool joint) {
  Params p;
  p.per_row = per_row;
  p.seeds_per_row = per_row && rng.coin();
  p.joint = joint;
  auto one = [&](int c, size_t r) {
    p.temperature[r] = float(rng.uniform(0.5, 1.5));
    p.top_k[r] = (c & 1) ? int32_t(rng.integer(2, std::max<int64_t>(2, std::min<int64_t>(vocab, 80)))) : 0;
    p.top_p[r] = (c & 2) ? float(rng.uniform(0.3, 0.95)) : 1.0f;
    p.min_p[r] = (c & 4) ? float(rng.uniform(0.01, 0.3)) : 0.0f;
  };
  const size_t n = per_row ? size_t(rows) : 1;
  p.temperature.resize(n); p.top_k.resize(n); p.top_p.resize(n); p.min_p.resize(n);
  p.seed.resize(p.seeds_per_row ? size_t(rows) : 1);
  p.offset.resize(per_row ? size_t(rows) : 1);
  for (size_t r = 0; r < n; ++r) {
    one(per_row ? int(rng.integer(0, 7)) : combo, r);
    if (per_row && rng.coin(0.15)) p.temperature[r] = 0.0f;  // greedy rows among sampled ones
  }
  for (auto& s : p.seed) s = rng.bits();
  for (auto& o : p.offset) o = rng.bits() >> 20;
  return p;
}

nt_lm_head_sampling sampling_of(const Params& p) {
  nt_lm_head_sampling s{};
  s.temperature = {p.per_row ? p.temperature.data() : nullptr, p.temperature[0]};
  s.top_k = {p.per_row ? p.top_k.data() : nullptr, p.top_k[0]};
  s.top_p = {p.per_row ? p.top_p.data() : nullptr, p.top_p[0]};
  s.min_p = {p.per_row ? p.min_p.data() : nullptr, p.min_p[0]};
  s.seed = {p.seeds_per_row ? p.seed.data() : nullptr, p.seed[0]};
  s.offset = {p.per_row ? p.offset.data() : nullptr, p.offset[0]};
  s.flags = p.joint ? uint32_t(NT_SAMPLE_TOP_P_JOINT) : 0u;
  return s;
}

// Row m's parameters as the reference takes them.
RowSampleParams row_params(const Params& p, int64_t m) {
  const size_t r = p.per_row ? size_t(m) : 0;
  RowSampleParams q;
  q.temperature = p.temperature[r];
  q.top_k = p.top_k[r];
  q.top_p = p.top_p[r];
  q.min_p = p.min_p[r];
  q.seed = p.seed[p.seeds_per_row ? size_t(m) : 0];
  q.offset = p.offset[r];
  q.row_tag = p.seeds_per_row ? 0u : uint32_t(m);
  q.joint = p.joint;
  return q;
}

// ---- running the ops -------------------------------------------------------------

struct HeadArgs {  // the head's tensors over a range of its vocabulary rows
  nt_lm_head_sample_dense_args dense{};
  nt_lm_head_sample_binary_args binary{};
};

HeadArgs head_args(const Head& h, int64_t v0, int64_t v1, int64_t m0, int64_t m1,
                   const std::vector<int32_t>& mask, int64_t words, const Params& p,
                   const std::vector<float>& bias) {
  HeadArgs a;
  const int64_t rows = m1 - m0, n = v1 - v0;
  nt_lm_head_sampling s = sampling_of(p);
  // Per-row arrays start at row m0.
  auto shift = [&](const void* ptr, size_t elt) {
    return ptr ? static_cast<const void*>(static_cast<const char*>(ptr) + size_t(m0) * elt) : nullptr;
  };
  s.temperature.per_row = shift(s.temperature.per_row, 4);
  s.top_k.per_row = shift(s.top_k.per_row, 4);
  s.top_p.per_row = shift(s.top_p.per_row, 4);
  s.min_p.per_row = shift(s.min_p.per_row, 4);
  s.seed.per_row = shift(s.seed.per_row, 8);
  s.offset.per_row = shift(s.offset.per_row, 8);
  const nt_tensor b = bias.empty() ? nt_tensor{} : host(bias.data() + v0, NT_F32, n);
  const nt_tensor bm = mask.empty() ? nt_tensor{} : host(mask.data() + m0 * words, NT_I32, rows, words);
  if (!h.binary) {
    const size_t e = dtype_bytes(h.dtype);
    a.dense.hidden = host(h.x_bytes.data() + size_t(m0 * h.hidden) * e, h.dtype, rows, h.hidden);
    a.dense.weight = host(h.w_bytes.data() + size_t(v0 * h.hidden) * e, h.dtype, n, h.hidden);
    a.dense.bias = b;
    a.dense.bitmask = bm;
    a.dense.sampling = s;
  } else {
    const int64_t words_h = h.hidden / 32, groups = h.hidden / h.group;
    a.binary.act_q = host(h.act_q.data() + m0 * h.hidden, NT_I8, rows, h.hidden);
    a.binary.act_scale = host(h.act_scale.data() + m0, NT_F32, rows);
    a.binary.wq = host(h.wq.data() + v0 * words_h, NT_I32, n, words_h);
    a.binary.wscale = host(h.wscale.data() + v0 * groups, NT_F16, n, groups);
    a.binary.bias = b;
    a.binary.group_size = h.group;
    a.binary.bitmask = bm;
    a.binary.sampling = s;
  }
  return a;
}

std::vector<int64_t> run_fused(const Head& h, const std::vector<int32_t>& mask, int64_t words,
                               const Params& p) {
  HeadArgs a = head_args(h, 0, h.vocab, 0, h.rows, mask, words, p, h.bias);
  std::vector<int64_t> tokens(size_t(h.rows), kPoisonI64);
  size_t bytes = 0;
  if (!h.binary) {
    a.dense.tokens = host(tokens.data(), NT_I64, h.rows);
    EXPECT_EQ(nt_lm_head_sample_dense_workspace_size(&a.dense, &bytes), NT_OK) << nt_last_error();
    std::vector<uint8_t> ws(bytes);
    EXPECT_EQ(nt_lm_head_sample_dense(&a.dense, ws.data(), bytes, nullptr), NT_OK) << nt_last_error();
  } else {
    a.binary.tokens = host(tokens.data(), NT_I64, h.rows);
    EXPECT_EQ(nt_lm_head_sample_binary_workspace_size(&a.binary, &bytes), NT_OK) << nt_last_error();
    std::vector<uint8_t> ws(bytes);
    EXPECT_EQ(nt_lm_head_sample_binary(&a.binary, ws.data(), bytes, nullptr), NT_OK) << nt_last_error();
  }
  return tokens;
}

// The two-step path: nt_apply_token_bitmask, then nt_sample, on the scores.
std::vector<int64_t> run_two_step(std::vector<float> scores, int64_t rows, int64_t vocab,
                                  const std::vector<int32_t>& mask, int64_t words, const Params& p) {
  if (!mask.empty()) {
    nt_apply_token_bitmask_args m{};
    m.logits = host(scores.data(), NT_F32, rows, vocab);
    m.bitmask = host(mask.data(), NT_I32, rows, words);
    EXPECT_EQ(nt_apply_token_bitmask(&m, nullptr), NT_OK) << nt_last_error();
  }
  const nt_lm_head_sampling s = sampling_of(p);
  std::vector<int64_t> tokens(size_t(rows), kPoisonI64);
  nt_sample_args a{};
  a.logits = host(scores.data(), NT_F32, rows, vocab);
  a.temperature = s.temperature;
  a.top_k = s.top_k;
  a.top_p = s.top_p;
  a.min_p = s.min_p;
  a.seed = s.seed;
  a.offset = s.offset;
  a.flags = s.flags;
  a.tokens = host(tokens.data(), NT_I64, rows);
  size_t bytes = 0;
  EXPECT_EQ(nt_sample_workspace_size(&a, &bytes), NT_OK) << nt_last_error();
  std::vector<uint8_t> ws(bytes);
  EXPECT_EQ(nt_sample(&a, ws.data(), bytes, nullptr), NT_OK) << nt_last_error();
  return tokens;
}

// A random bitmask ([rows, words]) with some rows fully masked, or none; at
// times one word short of the vocabulary (its last tokens disallowed).
std::vector<int32_t> draw_mask(Rng& rng, int64_t rows, int64_t vocab, int64_t* words) {
  const int64_t full = (vocab + 31) / 32;
  *words = full;
  if (rng.coin(0.3)) return {};
  std::vector<int32_t> mask = bench_bitmask(rng, rows, vocab, rng.coin() ? MaskKind::Random50 : MaskKind::Blocky);
  for (int64_t m = 0; m < rows; ++m)
    if (rng.coin(0.15)) std::fill(mask.begin() + m * full, mask.begin() + (m + 1) * full, 0);
  if (full > 2 && rng.coin(0.3)) {
    *words = full - 1;
    std::vector<int32_t> cut(size_t(rows * *words));
    for (int64_t m = 0; m < rows; ++m)
      std::copy(mask.begin() + m * full, mask.begin() + m * full + *words, cut.begin() + m * *words);
    return cut;
  }
  return mask;
}

// Row m of the scores with the bitmask applied (SEMANTICS: tokens >= 32 W' disallowed).
std::vector<float> masked_row(const std::vector<float>& scores, int64_t m, int64_t vocab,
                              const std::vector<int32_t>& mask, int64_t words) {
  std::vector<float> row(scores.begin() + m * vocab, scores.begin() + (m + 1) * vocab);
  for (int64_t v = 0; v < vocab && !mask.empty(); ++v)
    if (v / 32 >= words || !((uint32_t(mask[size_t(m * words + v / 32)]) >> (v % 32)) & 1u))
      row[size_t(v)] = -INFINITY;
  return row;
}

// ---- tests -------------------------------------------------------------------------

// head_scores repeats the CPU heads bit for bit: every value lm_head_topk_* reports.
TEST(LmHeadSample, HeadScoresAreTheHeadsOwn) {
  for (int c = 0; c < 6; ++c) {
    Rng rng(9100 + c);
    SCOPED_TRACE(seed_trace(rng.seed()));
    const bool binary = c >= 3;
    const int64_t rows = rng.integer(1, 5), vocab = rng.integer(1, 700);
    Head h = binary ? binary_head(rng, rows, vocab, 256 * rng.integer(1, 3), 128, rng.coin())
                    : dense_head(rng, c == 0 ? NT_F32 : c == 1 ? NT_BF16 : NT_F16, rows, vocab,
                                 rng.integer(1, 1100), rng.coin());
    const std::vector<float> scores = head_scores(h);
    const int32_t k = int32_t(std::min<int64_t>(vocab, 2048));
    std::vector<float> values(size_t(rows * k));
    std::vector<int64_t> indices(size_t(rows * k));
    HeadArgs a = head_args(h, 0, vocab, 0, rows, {}, 0, draw_params(rng, rows, vocab, 0, false, false), h.bias);
    size_t bytes = 0;
    if (!binary) {
      nt_lm_head_dense_args t{a.dense.hidden, a.dense.weight, a.dense.bias, k,
                              host(values.data(), NT_F32, rows, k), host(indices.data(), NT_I64, rows, k)};
      ASSERT_EQ(nt_lm_head_topk_dense_workspace_size(&t, &bytes), NT_OK);
      std::vector<uint8_t> ws(bytes);
      ASSERT_EQ(nt_lm_head_topk_dense(&t, ws.data(), bytes, nullptr), NT_OK) << nt_last_error();
    } else {
      nt_lm_head_binary_args t{a.binary.act_q, a.binary.act_scale, a.binary.wq, a.binary.wscale,
                               a.binary.bias, h.group, k, host(values.data(), NT_F32, rows, k),
                               host(indices.data(), NT_I64, rows, k)};
      ASSERT_EQ(nt_lm_head_topk_binary_workspace_size(&t, &bytes), NT_OK);
      std::vector<uint8_t> ws(bytes);
      ASSERT_EQ(nt_lm_head_topk_binary(&t, ws.data(), bytes, nullptr), NT_OK) << nt_last_error();
    }
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t i = 0; i < k; ++i) {
        const int64_t v = indices[size_t(m * k + i)];
        ASSERT_EQ(f32_bits(values[size_t(m * k + i)]), f32_bits(scores[size_t(m * vocab + v)]))
            << "row " << m << " token " << v;
      }
  }
}

// One random case of the fused op against the two-step path (and, away from
// degenerate boundaries, the brute-force reference).
void check_fused_case(uint64_t seed, bool binary, int64_t rows, int64_t vocab, int64_t hidden, int combo,
                      bool per_row, bool joint) {
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed) + " binary=" + std::to_string(binary) + " M=" + std::to_string(rows) +
               " V=" + std::to_string(vocab) + " H=" + std::to_string(hidden) + " combo=" +
               std::to_string(combo) + " per_row=" + std::to_string(per_row));
  const nt_dtype dtypes[] = {NT_F32, NT_BF16, NT_F16};
  Head h = binary ? binary_head(rng, rows, vocab, hidden, hidden % 256 == 0 ? 128 : 32, rng.coin())
                  : dense_head(rng, dtypes[rng.integer(0, 2)], rows, vocab, hidden, rng.coin());
  int64_t words = 0;
  const std::vector<int32_t> mask = draw_mask(rng, rows, vocab, &words);
  const Params p = draw_params(rng, rows, vocab, combo, per_row, joint);
  const std::vector<float> scores = head_scores(h);
  const std::vector<int64_t> fused = run_fused(h, mask, words, p);
  const std::vector<int64_t> two_step = run_two_step(scores, rows, vocab, mask, words, p);
  for (int64_t m = 0; m < rows; ++m) {
    ASSERT_EQ(fused[size_t(m)], two_step[size_t(m)]) << "row " << m << ": " << describe(row_params(p, m));
    const std::vector<float> row = masked_row(scores, m, vocab, mask, words);
    const SampleReference ref = reference_sample_row(row.data(), vocab, row_params(p, m));
    if (!ref.degenerate) {
      EXPECT_EQ(fused[size_t(m)], ref.token) << "row " << m << " vs the reference";
    }
  }
}

TEST(LmHeadSample, DenseEqualsTwoStepEveryFilter) {
  for (int combo = 0; combo < 8; ++combo)
    for (int per_row = 0; per_row < 2; ++per_row)
      check_fused_case(9200 + combo * 2 + per_row, false, 1 + combo * 3, 1000 + 997 * combo, 64 + 8 * combo + 3,
                       combo, per_row != 0, combo == 3 && per_row);
}

TEST(LmHeadSample, BinaryEqualsTwoStepEveryFilter) {
  for (int combo = 0; combo < 8; ++combo)
    check_fused_case(9300 + combo, true, 1 + combo * 2, 1500 + 611 * combo, combo % 2 ? 512 : 256, combo,
                     combo % 3 == 0, combo == 7);
}

// The issue's shape corners: M up to 64, H up to 5,120, V up to 248,320, V = 1,
// V not a multiple of 32.
TEST(LmHeadSample, ShapeCorners) {
  check_fused_case(9401, false, 64, 8192, 40, 3, true, false);
  check_fused_case(9402, false, 2, 2048, 5120, 7, false, false);
  check_fused_case(9403, false, 1, 248320, 128, 2, false, false);
  check_fused_case(9404, false, 3, 1, 40, 3, true, false);
  check_fused_case(9405, true, 2, 1, 256, 1, false, false);
  check_fused_case(9406, true, 5, 8191, 512, 5, true, false);
}

// NaN and infinite scores: a hidden row holding +inf / NaN.
TEST(LmHeadSample, SpecialScores) {
  for (int c = 0; c < 4; ++c) {
    Rng rng(9500 + c);
    SCOPED_TRACE(seed_trace(rng.seed()));
    Head h = dense_head(rng, NT_F32, 4, 300, 16, false);
    h.x[0] = INFINITY;                  // row 0: scores +-inf
    h.x[size_t(h.hidden + 3)] = NAN;    // row 1: every score NaN
    h.w[5] = 1e30f;                     // token 0 overflows in rows 2, 3
    h.x[size_t(2 * h.hidden)] = 1e20f;
    h.x_bytes = encode(h.dtype, h.x);
    h.w_bytes = encode(h.dtype, h.w);
    const Params p = draw_params(rng, 4, 300, c * 2 + 1, c >= 2, false);
    const std::vector<int64_t> fused = run_fused(h, {}, 0, p);
    EXPECT_EQ(fused, run_two_step(head_scores(h), 4, 300, {}, 0, p));
    EXPECT_EQ(fused[1], -1);
  }
}

// ---- vocabulary-parallel -------------------------------------------------------

struct ShardPlan {
  std::vector<int64_t> cuts;  // shard r holds padded rows [cuts[r], cuts[r+1])
  int shards() const { return int(cuts.size()) - 1; }
  // The most rows a shard holds: K for a fallback call, every token a candidate.
  int64_t widest() const {
    int64_t w = 0;
    for (size_t r = 0; r + 1 < cuts.size(); ++r) w = std::max(w, cuts[r + 1] - cuts[r]);
    return w;
  }
};

// A padded vocabulary cut in `shards` non-empty shards (a weight has at least one
// row), each cut anywhere in its range.
ShardPlan ragged_plan(Rng& rng, int64_t padded_vocab, int shards) {
  ShardPlan plan;
  plan.cuts.push_back(0);
  for (int r = 1; r < shards; ++r)
    plan.cuts.push_back(rng.integer(plan.cuts.back() + 1, padded_vocab - (shards - r)));
  plan.cuts.push_back(padded_vocab);
  return plan;
}

// One shard call on the host, the dense or the binary head's, with the workspace it asks for.
void run_shard(bool binary, const HeadArgs& a, const nt_lm_head_shard& sh) {
  size_t bytes = 0;
  if (!binary) {
    EXPECT_EQ(nt_lm_head_shard_dense_workspace_size(&a.dense, &sh, &bytes), NT_OK) << nt_last_error();
    std::vector<uint8_t> ws(bytes);
    EXPECT_EQ(nt_lm_head_shard_dense(&a.dense, &sh, ws.data(), bytes, nullptr), NT_OK) << nt_last_error();
  } else {
    EXPECT_EQ(nt_lm_head_shard_binary_workspace_size(&a.binary, &sh, &bytes), NT_OK) << nt_last_error();
    std::vector<uint8_t> ws(bytes);
    EXPECT_EQ(nt_lm_head_shard_binary(&a.binary, &sh, ws.data(), bytes, nullptr), NT_OK) << nt_last_error();
  }
}

// Summaries of every shard for rows [m0, m1), K candidates (0: every row of the shard).
std::vector<int64_t> shard_summaries(const Head& padded, const ShardPlan& plan, int64_t vocab,
                                     int64_t m0, int64_t m1, const std::vector<int32_t>& mask,
                                     int64_t words, const Params& p, int64_t K) {
  const int shards = plan.shards();
  const int64_t width = K != 0 ? K : plan.widest();
  const int64_t S = NT_LM_HEAD_SUMMARY_WORDS + width, rows = m1 - m0;
  std::vector<int64_t> all(size_t(shards * rows * S), kPoisonI64);
  for (int r = 0; r < shards; ++r) {
    const int64_t v0 = plan.cuts[size_t(r)], v1 = plan.cuts[size_t(r + 1)];
    HeadArgs a = head_args(padded, v0, v1, m0, m1, mask, words, p, padded.bias);
    nt_lm_head_shard sh = shard_of(v0, vocab, m0, host(all.data() + r * rows * S, NT_I64, rows, S));
    run_shard(padded.binary, a, sh);
  }
  return all;
}

std::vector<int64_t> combine(const std::vector<int64_t>& summaries, int shards, int64_t rows, int64_t vocab,
                             int64_t m0, const Params& p) {
  nt_lm_head_sample_combine_args c{};
  const int64_t S = int64_t(summaries.size()) / (shards * rows);
  c.summaries = host(summaries.data(), NT_I64, shards * rows, S);
  c.shards = shards;
  c.vocab_size = vocab;
  c.first_row = m0;
  HeadArgs shifted = head_args(Head{}, 0, 0, m0, m0 + rows, {}, 0, p, {});
  c.sampling = shifted.dense.sampling;
  std::vector<int64_t> tokens(size_t(rows), kPoisonI64);
  c.tokens = host(tokens.data(), NT_I64, rows);
  EXPECT_EQ(nt_lm_head_sample_combine(&c), NT_OK) << nt_last_error();
  return tokens;
}

// Sharded tokens: one gather of K candidates, then, per row that needs it, the
// fallback with every token a candidate. Counts the fallback rows.
std::vector<int64_t> sharded_tokens(const Head& padded, const ShardPlan& plan, int64_t vocab,
                                    const std::vector<int32_t>& mask, int64_t words, const Params& p,
                                    int64_t K, int* fallbacks) {
  const int shards = plan.shards();
  std::vector<int64_t> tokens =
      combine(shard_summaries(padded, plan, vocab, 0, padded.rows, mask, words, p, K), shards, padded.rows, vocab, 0, p);
  for (int64_t m = 0; m < padded.rows; ++m) {
    if (tokens[size_t(m)] != NT_TOKEN_NEEDS_ALL_CANDIDATES) continue;
    ++*fallbacks;
    tokens[size_t(m)] =
        combine(shard_summaries(padded, plan, vocab, m, m + 1, mask, words, p, 0), shards, 1, vocab, m, p)[0];
    EXPECT_NE(tokens[size_t(m)], NT_TOKEN_NEEDS_ALL_CANDIDATES);
  }
  return tokens;
}

// The head padded to a multiple of 64 rows (junk rows past V), cut in R ragged shards.
void check_sharded_case(uint64_t seed, bool binary, int64_t rows, int64_t vocab, int shards, int combo,
                        bool per_row, int64_t K, int* fallbacks, bool flat = false) {
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed) + " binary=" + std::to_string(binary) + " V=" + std::to_string(vocab) +
               " R=" + std::to_string(shards) + " combo=" + std::to_string(combo) + " K=" + std::to_string(K));
  const int64_t padded_vocab = (vocab + 63) / 64 * 64;
  const int64_t hidden = binary ? 256 : 48;
  Head h = binary ? binary_head(rng, rows, padded_vocab, hidden, 128, rng.coin())
                  : dense_head(rng, rng.coin() ? NT_F32 : NT_BF16, rows, padded_vocab, hidden, rng.coin());
  if (flat && !h.binary) {  // nearly equal scores: top-p alone keeps most of the row
    for (auto& v : h.w) v = round_to(h.dtype, v * 0.01f);
    h.w_bytes = encode(h.dtype, h.w);
  }
  const ShardPlan plan = ragged_plan(rng, padded_vocab, shards);
  int64_t words = 0;
  const std::vector<int32_t> mask = draw_mask(rng, rows, vocab, &words);
  const Params p = draw_params(rng, rows, vocab, combo, per_row, false);

  // The single call over the real vocabulary (the padding rows are no tokens).
  Head real = h;
  real.vocab = vocab;
  if (!real.bias.empty()) real.bias.resize(size_t(vocab));
  const std::vector<int64_t> single = run_fused(real, mask, words, p);
  const std::vector<int64_t> sharded = sharded_tokens(h, plan, vocab, mask, words, p, K, fallbacks);
  const std::vector<float> scores = head_scores(real);
  for (int64_t m = 0; m < rows; ++m) {
    const RowSampleParams q = row_params(p, m);
    // Top-p's mass over every token is summed per shard (docs/SEMANTICS.md):
    // equal away from degenerate boundaries.
    if (q.top_p < 1.0f && q.top_k == 0 && sharded[size_t(m)] != single[size_t(m)]) {
      const std::vector<float> row = masked_row(scores, m, vocab, mask, words);
      if (reference_sample_row(row.data(), vocab, q).degenerate) continue;
    }
    EXPECT_EQ(sharded[size_t(m)], single[size_t(m)]) << "row " << m << ": " << describe(q);
  }
}

TEST(LmHeadSampleSharded, EqualsSingleCallEveryFilter) {
  int fallbacks = 0;
  for (int combo = 0; combo < 8; ++combo)
    for (int shards : {2, 3, 4})
      check_sharded_case(9600 + combo * 8 + shards, combo % 2 == 1 && shards == 3, 6, 2000 + 331 * combo + shards,
                         shards, combo, combo == 5, combo == 6 ? 1 : 64, &fallbacks);
}

// The largest vocabulary of the issue, in 4 ragged shards.
TEST(LmHeadSampleSharded, LargeVocabulary) {
  int fallbacks = 0;
  check_sharded_case(9640, false, 2, 248320 - 17, 4, 7, true, 64, &fallbacks);
  check_sharded_case(9641, false, 2, 248320, 3, 2, false, 256, &fallbacks);
}

// A dense f32 head of 8 or 9 rows (H = 16) with special scores and odd per-row
// parameters, one row each: 0 scores +-inf (NaN where a weight is 0), 1 NaN
// everywhere, 2 huge (+inf at its small T), 3 T = +inf and plain, 4 T = NaN,
// 5 top_p <= 0 (the top token), 6 min_p > 1 (acts as 1), 7 top_k < 0 (off);
// a ninth row scores +-inf and is greedy.
void special_case(Rng& rng, int64_t rows, int64_t vocab, Head* h, Params* p) {
  const int64_t hidden = 16;
  *h = dense_head(rng, NT_F32, rows, vocab, hidden, false);
  h->x[0] = INFINITY;
  h->x[size_t(hidden + 2)] = NAN;
  h->x[size_t(2 * hidden)] = 1e30f;
  if (rows > 8) h->x[size_t(8 * hidden)] = INFINITY;
  h->x_bytes = encode(h->dtype, h->x);
  *p = draw_params(rng, rows, vocab, 7, true, false);
  p->temperature = {1.0f, 0.8f, 1e-3f, INFINITY, NAN, 0.7f, 1.2f, 0.9f};
  if (rows > 8) p->temperature.push_back(0.0f);
  p->top_p[5] = -0.5f;
  p->min_p[6] = 3.0f;
  p->top_k[7] = -3;
  p->top_k[3] = 0;
  p->top_p[3] = 1.0f;
  p->min_p[3] = 0.0f;
}

// Odd per-row parameters (T = +inf, NaN, 0; top_p <= 0; min_p > 1; top_k < 0)
// and special scores (+-inf, NaN, an overflow at a small T): sharded = single.
TEST(LmHeadSampleSharded, SpecialValues) {
  for (int c = 0; c < 3; ++c) {
    Rng rng(9660 + c);
    SCOPED_TRACE(seed_trace(rng.seed()));
    const int64_t rows = 8, vocab = 700;
    Head h;
    Params p;
    special_case(rng, rows, vocab, &h, &p);
    const std::vector<int64_t> single = run_fused(h, {}, 0, p);
    EXPECT_EQ(single, run_two_step(head_scores(h), rows, vocab, {}, 0, p));
    EXPECT_EQ(single[1], -1);
    int fallbacks = 0;
    for (int64_t K : {1, 16})
      EXPECT_EQ(sharded_tokens(h, ShardPlan{{0, 123, 400, vocab}}, vocab, {}, 0, p, K, &fallbacks), single)
          << "K=" << K;
  }
}

// Tiny vocabularies: V = 1, V not a multiple of 32, most shards all padding.
TEST(LmHeadSampleSharded, TinyVocabularies) {
  int fallbacks = 0;
  for (int64_t vocab : {1, 2, 33, 63})
    for (int combo : {0, 2, 3, 5})
      check_sharded_case(9650 + vocab * 8 + combo, vocab == 33, 5, vocab, vocab == 1 ? 2 : 4, combo,
                         combo == 5, 2, &fallbacks);
}

TEST(LmHeadSampleSharded, FallbackOnFlatRows) {
  int fallbacks = 0;
  for (int c = 0; c < 4; ++c)
    check_sharded_case(9700 + c, false, 4, 3000 + 17 * c, 2 + c % 3, 2 + 4 * (c % 2), false, 8, &fallbacks, true);
  EXPECT_GT(fallbacks, 0) << "no row took the fallback";
}

// Candidates planted in one shard: a handful of tokens far above the rest.
TEST(LmHeadSampleSharded, PlantedKeepSetInOneShard) {
  int fallbacks = 0;
  for (int c = 0; c < 4; ++c) {
    Rng rng(9800 + c);
    const int64_t rows = 3, vocab = 4000, hidden = 32;
    Head h = dense_head(rng, NT_F32, rows, vocab, hidden, true);
    const int64_t at = rng.integer(0, vocab - 8);
    for (int64_t t = at; t < at + 5; ++t) h.bias[size_t(t)] = 12.0f + float(t - at) * 0.25f;
    ShardPlan plan{{0, 1000, 2500, vocab}};
    const Params p = draw_params(rng, rows, vocab, 1 + c, c % 2 == 1, false);
    const std::vector<int64_t> single = run_fused(h, {}, 0, p);
    const std::vector<int64_t> sharded = sharded_tokens(h, plan, vocab, {}, 0, p, 2, &fallbacks);
    EXPECT_EQ(sharded, single) << seed_trace(rng.seed());
  }
}

// ---- logprobs --------------------------------------------------------------------

// The fused op with a logprobs request (n, mode), outputs poisoned first.
LogprobsResult run_fused_logprobs(const Head& h, const std::vector<int32_t>& mask, int64_t words,
                                  const Params& p, int n, uint32_t mode) {
  HeadArgs a = head_args(h, 0, h.vocab, 0, h.rows, mask, words, p, h.bias);
  LogprobsResult r;
  r.columns = n + 1;
  r.tokens.assign(size_t(h.rows), kPoisonI64);
  r.ids.assign(size_t(h.rows * r.columns), -7);
  r.values.assign(size_t(h.rows * r.columns), 7.0f);
  r.ranks.assign(size_t(h.rows), -7);
  auto request = [&](auto& args) {
    args.tokens = host(r.tokens.data(), NT_I64, h.rows);
    args.num_logprobs = n;
    args.logprobs_mode = mode;
    args.logprob_ids = host(r.ids.data(), NT_I32, h.rows, r.columns);
    args.logprobs = host(r.values.data(), NT_F32, h.rows, r.columns);
    args.ranks = host(r.ranks.data(), NT_I32, h.rows);
  };
  size_t bytes = 0;
  if (!h.binary) {
    request(a.dense);
    EXPECT_EQ(nt_lm_head_sample_dense_workspace_size(&a.dense, &bytes), NT_OK) << nt_last_error();
    std::vector<uint8_t> ws(bytes);
    EXPECT_EQ(nt_lm_head_sample_dense(&a.dense, ws.data(), bytes, nullptr), NT_OK) << nt_last_error();
  } else {
    request(a.binary);
    EXPECT_EQ(nt_lm_head_sample_binary_workspace_size(&a.binary, &bytes), NT_OK) << nt_last_error();
    std::vector<uint8_t> ws(bytes);
    EXPECT_EQ(nt_lm_head_sample_binary(&a.binary, ws.data(), bytes, nullptr), NT_OK) << nt_last_error();
  }
  return r;
}

// The harness's sample_logprobs case on the head's scores after the bitmask.
SampleCase masked_case(const Head& h, const std::vector<float>& scores, const std::vector<int32_t>& mask,
                       int64_t words, const Params& p) {
  SampleCase c;
  c.rows = h.rows;
  c.vocab = h.vocab;
  for (int64_t m = 0; m < h.rows; ++m) {
    const std::vector<float> row = masked_row(scores, m, h.vocab, mask, words);
    c.logits.insert(c.logits.end(), row.begin(), row.end());
  }
  c.temperature = p.per_row ? per_row(p.temperature) : scalar(p.temperature[0]);
  c.top_k = p.per_row ? per_row(p.top_k) : scalar(p.top_k[0]);
  c.top_p = p.per_row ? per_row(p.top_p) : scalar(p.top_p[0]);
  c.min_p = p.per_row ? per_row(p.min_p) : scalar(p.min_p[0]);
  c.seed = p.seeds_per_row ? per_row(p.seed) : scalar(p.seed[0]);
  c.offset = p.per_row ? per_row(p.offset) : scalar(p.offset[0]);
  c.flags = p.joint ? uint32_t(NT_SAMPLE_TOP_P_JOINT) : 0u;
  return c;
}

void check_logprobs_case(uint64_t seed, bool binary, int64_t rows, int64_t vocab, int combo, bool per_row,
                         int n, uint32_t mode, bool masked) {
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed) + " binary=" + std::to_string(binary) + " M=" + std::to_string(rows) +
               " V=" + std::to_string(vocab) + " combo=" + std::to_string(combo) + " per_row=" +
               std::to_string(per_row) + " n=" + std::to_string(n) + " mode=" + std::to_string(mode));
  Head h = binary ? binary_head(rng, rows, vocab, 256, 128, rng.coin())
                  : dense_head(rng, rng.coin() ? NT_F32 : NT_BF16, rows, vocab, 72, rng.coin());
  int64_t words = (vocab + 31) / 32;
  std::vector<int32_t> mask;
  if (masked) {  // a random mask, row 0 fully masked (its token -1)
    mask = bench_bitmask(rng, rows, vocab, MaskKind::Random50);
    std::fill(mask.begin(), mask.begin() + words, 0);
  }
  const Params p = draw_params(rng, rows, vocab, combo, per_row, false);
  const std::vector<float> scores = head_scores(h);
  const LogprobsResult got = run_fused_logprobs(h, mask, words, p, n, mode);
  const LogprobsResult want = run_sample_logprobs(cpu_device(), masked_case(h, scores, mask, words, p), n, mode);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.ids, want.ids);
  EXPECT_EQ(got.ranks, want.ranks);
  ASSERT_EQ(got.values.size(), want.values.size());
  for (size_t i = 0; i < got.values.size(); ++i)
    EXPECT_EQ(f32_bits(got.values[i]), f32_bits(want.values[i])) << "entry " << i;
  if (masked) {
    EXPECT_EQ(got.tokens[0], -1);
  }
}

TEST(LmHeadSample, LogprobsEqualSampleLogprobsOnTheScores) {
  uint64_t seed = 9600;
  for (int binary = 0; binary < 2; ++binary)
    for (uint32_t mode : {uint32_t(NT_LOGPROBS_RAW), uint32_t(NT_LOGPROBS_PROCESSED)})
      for (int n : {0, 5, 20}) {
        const int combo = int(seed % 8);
        check_logprobs_case(seed, binary != 0, 1 + n % 6, 700 + 37 * n, combo, n == 5, n, mode, n != 0);
        ++seed;
      }
  // Tiny vocabularies: columns past V (id -1, -inf).
  check_logprobs_case(9650, false, 3, 7, 0, true, 20, NT_LOGPROBS_PROCESSED, false);
  check_logprobs_case(9651, true, 2, 1, 2, false, 5, NT_LOGPROBS_RAW, true);
}

TEST(LmHeadSample, LogprobsErrors) {
  Rng rng(9700);
  Head h = dense_head(rng, NT_F32, 2, 64, 8, false);
  const Params p = draw_params(rng, 2, 64, 1, false, false);
  std::vector<int64_t> tokens(2, kPoisonI64);
  std::vector<int32_t> ids(2 * 21, -7), ranks(2, -7);
  std::vector<float> values(2 * 21, 7.0f);
  HeadArgs base = head_args(h, 0, 64, 0, 2, {}, 0, p, {});
  nt_lm_head_sample_dense_args a = base.dense;
  a.tokens = host(tokens.data(), NT_I64, 2);
  a.num_logprobs = 3;
  a.logprobs_mode = NT_LOGPROBS_RAW;
  a.logprob_ids = host(ids.data(), NT_I32, 2, 4);
  a.logprobs = host(values.data(), NT_F32, 2, 4);
  a.ranks = host(ranks.data(), NT_I32, 2);
  std::vector<uint8_t> ws(1 << 20);
  auto untouched = [&] {
    EXPECT_EQ(tokens, std::vector<int64_t>(2, kPoisonI64));
    EXPECT_EQ(ids, std::vector<int32_t>(2 * 21, -7));
    EXPECT_EQ(ranks, std::vector<int32_t>(2, -7));
    EXPECT_EQ(values, std::vector<float>(2 * 21, 7.0f));
  };
  auto expect = [&](const nt_lm_head_sample_dense_args& b, nt_status status, const char* arg) {
    size_t bytes = 0;
    EXPECT_EQ(nt_lm_head_sample_dense_workspace_size(&b, &bytes), status) << arg;
    EXPECT_EQ(nt_lm_head_sample_dense(&b, ws.data(), ws.size(), nullptr), status) << arg;
    EXPECT_NE(std::string(nt_last_error()).find(std::string("'") + arg + "'"), std::string::npos)
        << nt_last_error();
    untouched();
  };
  { auto b = a; b.num_logprobs = 21; expect(b, NT_ERROR_INVALID_ARGUMENT, "num_logprobs"); }
  { auto b = a; b.num_logprobs = -1; expect(b, NT_ERROR_INVALID_ARGUMENT, "num_logprobs"); }
  { auto b = a; b.logprobs_mode = 2; expect(b, NT_ERROR_INVALID_ARGUMENT, "logprobs_mode"); }
  { auto b = a; b.logprob_ids.shape[1] = 3; expect(b, NT_ERROR_INVALID_ARGUMENT, "logprob_ids"); }
  { auto b = a; b.logprob_ids.dtype = NT_I64; expect(b, NT_ERROR_INVALID_ARGUMENT, "logprob_ids"); }
  { auto b = a; b.logprobs.dtype = NT_F16; expect(b, NT_ERROR_INVALID_ARGUMENT, "logprobs"); }
  { auto b = a; b.logprobs = nt_tensor{}; expect(b, NT_ERROR_INVALID_ARGUMENT, "logprobs"); }
  { auto b = a; b.ranks.shape[0] = 3; expect(b, NT_ERROR_INVALID_ARGUMENT, "ranks"); }
  { auto b = a; b.logprob_ids = nt_tensor{}; expect(b, NT_ERROR_INVALID_ARGUMENT, "logprobs"); }
  // The shard ops take their request in the shard, not in these fields.
  std::vector<int64_t> summary(2 * (NT_LM_HEAD_SUMMARY_WORDS + 4), kPoisonI64);
  const nt_lm_head_shard sh = shard_of(0, 64, 0, host(summary.data(), NT_I64, 2, NT_LM_HEAD_SUMMARY_WORDS + 4));
  size_t bytes = 0;
  EXPECT_EQ(nt_lm_head_shard_dense_workspace_size(&a, &sh, &bytes), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nt_lm_head_shard_dense(&a, &sh, ws.data(), ws.size(), nullptr), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nt_last_error()).find("'logprob_ids'"), std::string::npos) << nt_last_error();
  EXPECT_EQ(summary, std::vector<int64_t>(summary.size(), kPoisonI64));
  Head hb = binary_head(rng, 2, 64, 256, 128, false);
  HeadArgs ab = head_args(hb, 0, 64, 0, 2, {}, 0, p, {});
  nt_lm_head_sample_binary_args b = ab.binary;
  b.num_logprobs = a.num_logprobs;
  b.logprob_ids = a.logprob_ids;
  b.logprobs = a.logprobs;
  b.ranks = a.ranks;
  EXPECT_EQ(nt_lm_head_shard_binary(&b, &sh, ws.data(), ws.size(), nullptr), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nt_last_error()).find("'logprob_ids'"), std::string::npos) << nt_last_error();
  // The binary single call checks the request as the dense one does.
  b.tokens = a.tokens;
  b.num_logprobs = 20;
  EXPECT_EQ(nt_lm_head_sample_binary(&b, ws.data(), ws.size(), nullptr), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nt_last_error()).find("'logprob_ids'"), std::string::npos) << nt_last_error();
  untouched();
  // A workspace of the size queried without the request may be short.
  {
    size_t with = 0, without = 0;
    auto plain = a;
    plain.logprob_ids = plain.logprobs = plain.ranks = nt_tensor{};
    ASSERT_EQ(nt_lm_head_sample_dense_workspace_size(&a, &with), NT_OK) << nt_last_error();
    ASSERT_EQ(nt_lm_head_sample_dense_workspace_size(&plain, &without), NT_OK) << nt_last_error();
    EXPECT_GE(with, without);
    std::vector<uint8_t> exact(with);
    EXPECT_EQ(nt_lm_head_sample_dense(&a, exact.data(), with - 1, nullptr), NT_ERROR_WORKSPACE);
    untouched();
  }
}

// ---- vocabulary-parallel logprobs --------------------------------------------------

// One shard call with a logprobs request: the summaries [rows, S] and the
// masked scores [rows, V_r] of shard r (written with a row stride of V_r + 2,
// the gaps poisoned and checked untouched), outputs poisoned first.
struct ShardOut {
  std::vector<int64_t> summary;
  std::vector<float> scores;  // [rows, V_r], the gaps dropped
};
constexpr int64_t kScoresGap = 2;

ShardOut shard_call_logprobs(const Head& padded, int64_t v0, int64_t v1, int64_t vocab, int64_t m0,
                             int64_t m1, const std::vector<int32_t>& mask, int64_t words,
                             const Params& p, int64_t K, int n, uint32_t mode) {
  const int64_t rows = m1 - m0, S = NT_LM_HEAD_SUMMARY_WORDS + K + NT_LM_HEAD_LOGPROBS_WORDS(n);
  ShardOut o;
  o.summary.assign(size_t(rows * S), kPoisonI64);
  const int64_t cols = v1 - v0, stride = cols + kScoresGap;
  std::vector<float> strided(size_t(rows * stride), 7.0f);
  HeadArgs a = head_args(padded, v0, v1, m0, m1, mask, words, p, padded.bias);
  nt_lm_head_shard sh{};
  sh.vocab_start = v0;
  sh.vocab_size = vocab;
  sh.first_row = m0;
  sh.summary = host(o.summary.data(), NT_I64, rows, S);
  sh.num_logprobs = n;
  sh.logprobs_mode = mode;
  sh.scores = host(strided.data(), NT_F32, rows, cols);
  sh.scores.row_stride = stride;
  run_shard(padded.binary, a, sh);
  // The scores: the head's own, -inf where the bitmask disallows and past vocab_size.
  const std::vector<float> want = head_scores(padded);
  for (int64_t m = 0; m < rows; ++m) {
    const std::vector<float> row = masked_row(want, m0 + m, padded.vocab, mask, words);
    for (int64_t i = 0; i < cols; ++i) {
      const float w = v0 + i >= vocab ? -INFINITY : row[size_t(v0 + i)];
      EXPECT_EQ(f32_bits(strided[size_t(m * stride + i)]), f32_bits(w)) << "row " << m0 + m << " id " << v0 + i;
      o.scores.push_back(strided[size_t(m * stride + i)]);
    }
    for (int64_t i = cols; i < stride; ++i) EXPECT_EQ(strided[size_t(m * stride + i)], 7.0f) << "gap";
  }
  return o;
}

// The combine with a logprobs request over shards' summaries of `rows` rows
// (stacked by shard); rank_keys out.
LogprobsResult combine_logprobs(const std::vector<int64_t>& summaries, int shards, int64_t rows,
                                int64_t vocab, int64_t m0, const Params& p, int n, uint32_t mode,
                                std::vector<int64_t>* rank_keys) {
  nt_lm_head_sample_combine_args c{};
  const int64_t S = int64_t(summaries.size()) / (shards * rows);
  c.summaries = host(summaries.data(), NT_I64, shards * rows, S);
  c.shards = shards;
  c.vocab_size = vocab;
  c.first_row = m0;
  HeadArgs shifted = head_args(Head{}, 0, 0, m0, m0 + rows, {}, 0, p, {});
  c.sampling = shifted.dense.sampling;
  LogprobsResult r;
  r.columns = n + 1;
  r.tokens.assign(size_t(rows), kPoisonI64);
  r.ids.assign(size_t(rows * r.columns), -7);
  r.values.assign(size_t(rows * r.columns), 7.0f);
  r.ranks.assign(size_t(rows), -7);
  rank_keys->assign(size_t(rows), kPoisonI64);
  c.tokens = host(r.tokens.data(), NT_I64, rows);
  c.num_logprobs = n;
  c.logprobs_mode = mode;
  c.logprob_ids = host(r.ids.data(), NT_I32, rows, r.columns);
  c.logprobs = host(r.values.data(), NT_F32, rows, r.columns);
  c.ranks = host(r.ranks.data(), NT_I32, rows);
  c.rank_keys = host(rank_keys->data(), NT_I64, rows);
  EXPECT_EQ(nt_lm_head_sample_combine(&c), NT_OK) << nt_last_error();
  return r;
}

// Fallback row m of a combine's result `got` (token -2, rank key -1): its
// combine again over every shard's summary of that row alone with every token
// a candidate (one_all, stacked by shard), which must resolve it, written into
// got and keys.
void merge_fallback_row(LogprobsResult& got, std::vector<int64_t>& keys, int64_t m,
                        const std::vector<int64_t>& one_all, int shards, int64_t vocab, const Params& p, int n,
                        uint32_t mode) {
  EXPECT_EQ(got.ids[size_t(m * got.columns)], NT_TOKEN_NEEDS_ALL_CANDIDATES) << "row " << m;
  EXPECT_EQ(keys[size_t(m)], -1) << "row " << m;
  std::vector<int64_t> one_key;
  const LogprobsResult one = combine_logprobs(one_all, shards, 1, vocab, m, p, n, mode, &one_key);
  EXPECT_NE(one.tokens[0], NT_TOKEN_NEEDS_ALL_CANDIDATES) << "row " << m;
  got.tokens[size_t(m)] = one.tokens[0];
  std::copy(one.ids.begin(), one.ids.end(), got.ids.begin() + m * got.columns);
  std::copy(one.values.begin(), one.values.end(), got.values.begin() + m * got.columns);
  got.ranks[size_t(m)] = one.ranks[0];
  keys[size_t(m)] = one_key[0];
}

std::vector<int32_t> shard_ranks(std::vector<float>& scores, int64_t rows, int64_t cols,
                                 std::vector<int64_t>& rank_keys) {
  std::vector<int32_t> counts(size_t(rows), -7);
  nt_lm_head_shard_ranks_args a{host(scores.data(), NT_F32, rows, cols),
                                host(rank_keys.data(), NT_I64, rows), host(counts.data(), NT_I32, rows)};
  EXPECT_EQ(nt_lm_head_shard_ranks(&a, nullptr), NT_OK) << nt_last_error();
  return counts;
}

// The vocabulary-parallel logprobs, as nexttok.distributed composes them: the
// shard calls, one gather, the combine, the fallback of -2 rows (every token a
// candidate, each row alone, combined again), then each shard's rank counts
// against the combine's keys, summed, added to the combine's ranks.
LogprobsResult sharded_logprobs(const Head& padded, const ShardPlan& plan, int64_t vocab,
                                const std::vector<int32_t>& mask, int64_t words, const Params& p,
                                int64_t K, int n, uint32_t mode, int* fallbacks) {
  const int shards = plan.shards();
  const int64_t rows = padded.rows;
  std::vector<ShardOut> outs;
  std::vector<int64_t> all;
  for (int r = 0; r < shards; ++r) {
    outs.push_back(shard_call_logprobs(padded, plan.cuts[size_t(r)], plan.cuts[size_t(r + 1)], vocab, 0,
                                       rows, mask, words, p, K, n, mode));
    all.insert(all.end(), outs.back().summary.begin(), outs.back().summary.end());
  }
  std::vector<int64_t> keys;
  LogprobsResult got = combine_logprobs(all, shards, rows, vocab, 0, p, n, mode, &keys);
  const int64_t widest = plan.widest();
  for (int64_t m = 0; m < rows; ++m) {
    if (got.tokens[size_t(m)] != NT_TOKEN_NEEDS_ALL_CANDIDATES) continue;
    ++*fallbacks;
    std::vector<int64_t> one_all;
    for (int r = 0; r < shards; ++r) {
      const ShardOut o = shard_call_logprobs(padded, plan.cuts[size_t(r)], plan.cuts[size_t(r + 1)], vocab, m,
                                             m + 1, mask, words, p, widest, n, mode);
      one_all.insert(one_all.end(), o.summary.begin(), o.summary.end());
    }
    merge_fallback_row(got, keys, m, one_all, shards, vocab, p, n, mode);
  }
  for (int r = 0; r < shards; ++r) {
    const std::vector<int32_t> counts = shard_ranks(outs[size_t(r)].scores, rows,
                                                    plan.cuts[size_t(r + 1)] - plan.cuts[size_t(r)], keys);
    for (int64_t m = 0; m < rows; ++m) got.ranks[size_t(m)] += counts[size_t(m)];
  }
  return got;
}

// Values within 2 ulp of the single call's, 2^-22 |ref| (plus 1e-30 for zeros;
// infinities exact), and within SEMANTICS' 1e-5 + 2^-24 |ref|: the shards'
// normalizers are fp64 sums, so only the fp32 rounding of the result may differ.
// An fp32 normalizer would not pass.
void expect_close_values(const std::vector<float>& got, const std::vector<float>& want, int64_t m,
                         int64_t columns) {
  for (int64_t c = 0; c < columns; ++c) {
    const float g = got[size_t(m * columns + c)], w = want[size_t(m * columns + c)];
    if (std::isinf(w) || std::isinf(g)) {
      EXPECT_EQ(f32_bits(g), f32_bits(w)) << "row " << m << " column " << c;
    } else {
      const double bound = std::min(1e-30 + std::ldexp(std::fabs(double(w)), -22),  // 2 ulp
                                    kLogprobAbsTol + kLogprobRelTol * std::fabs(double(w)));  // the contract
      EXPECT_LE(std::fabs(double(g) - double(w)), bound) << "row " << m << " column " << c << ": " << g << " vs " << w;
    }
  }
}

// Row m of the sharded logprobs against the single call's: token, ids and rank
// exact, values within expect_close_values' bound. Only a top-p row whose token
// differs and whose top-p cut the reference calls degenerate on `masked` (the
// masked scores the single call sampled) is excused, because the shards sum its
// mass in another order; its ids of columns 1..n (the order of the logits,
// whatever the token) are still checked. Returns whether the row was excused.
bool expect_sharded_row(const LogprobsResult& got, const LogprobsResult& want, const Params& p, int64_t m,
                        int n, const std::vector<float>& masked) {
  const RowSampleParams q = row_params(p, m);
  const int64_t vocab = int64_t(masked.size());
  const auto id = [&](const LogprobsResult& r, int64_t c) { return r.ids[size_t(m * (n + 1) + c)]; };
  if (q.top_p < 1.0f && got.tokens[size_t(m)] != want.tokens[size_t(m)]) {
    const SampleReference ref = reference_sample_row(masked.data(), vocab, q);
    if (ref.degenerate && ref.why_degenerate.rfind("top-p", 0) == 0) {
      for (int64_t c = 1; c <= n; ++c) EXPECT_EQ(id(got, c), id(want, c)) << "row " << m << " column " << c;
      return true;
    }
  }
  EXPECT_EQ(got.tokens[size_t(m)], want.tokens[size_t(m)]) << "row " << m << ": " << describe(q);
  for (int64_t c = 0; c <= n; ++c)
    EXPECT_EQ(id(got, c), id(want, c)) << "row " << m << " column " << c << ": " << describe(q);
  EXPECT_EQ(got.ranks[size_t(m)], want.ranks[size_t(m)]) << "row " << m << ": " << describe(q);
  expect_close_values(got.values, want.values, m, n + 1);
  return false;
}

// The sharded logprobs against the single call's on the real vocabulary: the
// same tokens, ids and ranks; values within the tolerance. Rows with top-p,
// whose mass the shards sum in another order, may differ only on degenerate inputs.
// Returns the number of rows whose token is -1.
int64_t check_sharded_logprobs(const Head& h, const ShardPlan& plan, int64_t vocab,
                               const std::vector<int32_t>& mask, int64_t words, const Params& p, int64_t K,
                               int n, uint32_t mode, int* fallbacks) {
  SCOPED_TRACE("n=" + std::to_string(n) + " mode=" + std::to_string(mode) + " K=" + std::to_string(K));
  Head real = h;
  real.vocab = vocab;
  if (!real.bias.empty()) real.bias.resize(size_t(vocab));
  const LogprobsResult want = run_fused_logprobs(real, mask, words, p, n, mode);
  const LogprobsResult got = sharded_logprobs(h, plan, vocab, mask, words, p, K, n, mode, fallbacks);
  const std::vector<float> scores = head_scores(real);
  int64_t excused = 0;
  for (int64_t m = 0; m < h.rows; ++m)
    excused += expect_sharded_row(got, want, p, m, n, masked_row(scores, m, vocab, mask, words));
  EXPECT_LE(excused, 1) << "rows excused as degenerate top-p cuts";
  return std::count(want.tokens.begin(), want.tokens.end(), int64_t(-1));
}

void check_sharded_logprobs_case(uint64_t seed, bool binary, int64_t rows, int64_t vocab, int shards,
                                 int combo, bool per_row, int64_t K, int n, uint32_t mode,
                                 int* fallbacks, bool flat = false, int* masked = nullptr) {
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed) + " binary=" + std::to_string(binary) + " V=" + std::to_string(vocab) +
               " R=" + std::to_string(shards) + " combo=" + std::to_string(combo));
  const int64_t padded_vocab = (vocab + 63) / 64 * 64;
  Head h = binary ? binary_head(rng, rows, padded_vocab, 256, 128, rng.coin())
                  : dense_head(rng, rng.coin() ? NT_F32 : NT_BF16, rows, padded_vocab, 48, rng.coin());
  if (flat && !h.binary) {
    for (auto& v : h.w) v = round_to(h.dtype, v * 0.01f);
    h.w_bytes = encode(h.dtype, h.w);
  }
  const ShardPlan plan = ragged_plan(rng, padded_vocab, shards);
  int64_t words = 0;
  const std::vector<int32_t> mask = draw_mask(rng, rows, vocab, &words);
  const Params p = draw_params(rng, rows, vocab, combo, per_row, combo == 3 && per_row);
  const int64_t tokens = check_sharded_logprobs(h, plan, vocab, mask, words, p, K, n, mode, fallbacks);
  if (masked != nullptr) *masked += int(tokens);
}

TEST(LmHeadSampleShardedLogprobs, EqualSingleCallEveryFilter) {
  int fallbacks = 0, masked = 0;
  uint64_t seed = 12000;
  for (int combo = 0; combo < 8; ++combo)
    for (int shards = 1; shards <= 4; ++shards)
      for (uint32_t mode : {uint32_t(NT_LOGPROBS_RAW), uint32_t(NT_LOGPROBS_PROCESSED)})
        for (int n : {0, 1, 5, 20}) {
          ++seed;
          check_sharded_logprobs_case(seed, (seed % 5) == 0, 6, 900 + 131 * combo + shards, shards, combo,
                                      (seed % 3) == 0, (seed % 4) == 0 ? 2 : 64, n, mode, &fallbacks,
                                      false, &masked);
        }
  EXPECT_GT(fallbacks, 0) << "no row took the fallback";
  EXPECT_GT(masked, 0) << "no row was fully masked";
}

TEST(LmHeadSampleShardedLogprobs, FallbackOnFlatRows) {
  int fallbacks = 0;
  for (int c = 0; c < 4; ++c)
    for (uint32_t mode : {uint32_t(NT_LOGPROBS_RAW), uint32_t(NT_LOGPROBS_PROCESSED)})
      check_sharded_logprobs_case(12500 + c, false, 4, 3000 + 17 * c, 2 + c % 3, 2 + 4 * (c % 2), false, 8,
                                  c == 0 ? 0 : 5 * c, mode, &fallbacks, true);
  EXPECT_GT(fallbacks, 0) << "no row took the fallback";
}

// V = 1, V not a multiple of 32, n past V (columns of id -1, -inf), most shards padding.
TEST(LmHeadSampleShardedLogprobs, TinyVocabularies) {
  int fallbacks = 0;
  for (int64_t vocab : {1, 2, 33, 63})
    for (int combo : {0, 2, 3, 5})
      for (uint32_t mode : {uint32_t(NT_LOGPROBS_RAW), uint32_t(NT_LOGPROBS_PROCESSED)})
        check_sharded_logprobs_case(12600 + vocab * 8 + combo, vocab == 33, 5, vocab, vocab == 1 ? 2 : 4,
                                    combo, combo == 5, 2, 20, mode, &fallbacks);
}

// Odd per-row parameters and special scores (+-inf, NaN, overflow at a small T).
TEST(LmHeadSampleShardedLogprobs, SpecialValues) {
  for (int c = 0; c < 3; ++c) {
    Rng rng(12700 + c);
    SCOPED_TRACE(seed_trace(rng.seed()));
    const int64_t rows = 9, vocab = 700;
    Head h;
    Params p;
    special_case(rng, rows, vocab, &h, &p);  // row 8: +-inf scores, greedy
    if (c == 1) {         // plain rows everywhere but the greedy ones
      std::fill(p.top_k.begin(), p.top_k.end(), 0);
      std::fill(p.top_p.begin(), p.top_p.end(), 1.0f);
      std::fill(p.min_p.begin(), p.min_p.end(), 0.0f);
    }
    int fallbacks = 0;
    for (int64_t K : {1, 16})
      for (uint32_t mode : {uint32_t(NT_LOGPROBS_RAW), uint32_t(NT_LOGPROBS_PROCESSED)})
        check_sharded_logprobs(h, ShardPlan{{0, 123, 400, vocab}}, vocab, {}, 0, p, K, 5, mode, &fallbacks);
  }
}

// Ties: scores of few distinct values (a head of one hidden unit), so that
// columns, ranks and keep-sets meet many equal scores across shards.
TEST(LmHeadSampleShardedLogprobs, Ties) {
  for (int c = 0; c < 4; ++c) {
    Rng rng(12800 + c);
    const int64_t rows = 4, vocab = 500;
    Head h = dense_head(rng, NT_F32, rows, vocab, 1, false);
    for (auto& v : h.w) v = float(rng.integer(-3, 3));
    for (auto& v : h.x) v = 1.0f;
    h.x_bytes = encode(h.dtype, h.x);
    h.w_bytes = encode(h.dtype, h.w);
    const Params p = draw_params(rng, rows, vocab, c * 2 + 1, true, false);
    int fallbacks = 0;
    for (uint32_t mode : {uint32_t(NT_LOGPROBS_RAW), uint32_t(NT_LOGPROBS_PROCESSED)})
      check_sharded_logprobs(h, ShardPlan{{0, 77, 250, 251, vocab}}, vocab, {}, 0, p, 500, 20, mode,
                             &fallbacks);
  }
}

TEST(LmHeadSampleShardedLogprobs, Errors) {
  Rng rng(12900);
  Head h = dense_head(rng, NT_F32, 2, 64, 8, false);
  const Params p = draw_params(rng, 2, 64, 1, false, false);
  const int n = 3, K = 4, S = NT_LM_HEAD_SUMMARY_WORDS + K + NT_LM_HEAD_LOGPROBS_WORDS(n);
  std::vector<int64_t> summary(2 * S, kPoisonI64);
  std::vector<float> scores(2 * 64, 7.0f);
  HeadArgs base = head_args(h, 0, 64, 0, 2, {}, 0, p, {});
  nt_lm_head_sample_dense_args a = base.dense;
  nt_lm_head_shard sh{};
  sh.vocab_start = 0;
  sh.vocab_size = 64;
  sh.summary = host(summary.data(), NT_I64, 2, S);
  sh.num_logprobs = n;
  sh.logprobs_mode = NT_LOGPROBS_PROCESSED;
  sh.scores = host(scores.data(), NT_F32, 2, 64);
  std::vector<uint8_t> ws(1 << 20);
  auto untouched = [&] {
    EXPECT_EQ(summary, std::vector<int64_t>(summary.size(), kPoisonI64));
    EXPECT_EQ(scores, std::vector<float>(scores.size(), 7.0f));
  };
  auto expect_shard = [&](const nt_lm_head_sample_dense_args& b, const nt_lm_head_shard& s, const char* arg) {
    size_t bytes = 0;
    EXPECT_EQ(nt_lm_head_shard_dense_workspace_size(&b, &s, &bytes), NT_ERROR_INVALID_ARGUMENT) << arg;
    EXPECT_EQ(nt_lm_head_shard_dense(&b, &s, ws.data(), ws.size(), nullptr), NT_ERROR_INVALID_ARGUMENT) << arg;
    EXPECT_NE(std::string(nt_last_error()).find(std::string("'") + arg + "'"), std::string::npos)
        << nt_last_error();
    untouched();
  };
  { auto s = sh; s.num_logprobs = 21; expect_shard(a, s, "shard.num_logprobs"); }
  { auto s = sh; s.num_logprobs = -1; expect_shard(a, s, "shard.num_logprobs"); }
  { auto s = sh; s.logprobs_mode = 2; expect_shard(a, s, "shard.logprobs_mode"); }
  { auto s = sh; s.scores.dtype = NT_F16; expect_shard(a, s, "shard.scores"); }
  { auto s = sh; s.scores.shape[1] = 63; expect_shard(a, s, "shard.scores"); }
  { auto s = sh; s.scores.shape[0] = 1; expect_shard(a, s, "shard.scores"); }
  { auto s = sh; s.num_logprobs = n + K; expect_shard(a, s, "summary"); }  // K = 0 left
  {  // the args' own logprobs fields: the single call's, not a shard's
    std::vector<int32_t> ids(2 * 4, -7), ranks(2, -7);
    std::vector<float> values(2 * 4, 7.0f);
    auto b = a;
    b.num_logprobs = n;
    b.logprob_ids = host(ids.data(), NT_I32, 2, 4);
    b.logprobs = host(values.data(), NT_F32, 2, 4);
    b.ranks = host(ranks.data(), NT_I32, 2);
    expect_shard(b, sh, "logprob_ids");
    auto s = sh;
    s.scores = nt_tensor{};
    expect_shard(b, s, "logprob_ids");
  }
  {  // binary, the same checks
    Head hb = binary_head(rng, 2, 64, 256, 128, false);
    HeadArgs ab = head_args(hb, 0, 64, 0, 2, {}, 0, p, {});
    auto s = sh;
    s.num_logprobs = 21;
    EXPECT_EQ(nt_lm_head_shard_binary(&ab.binary, &s, ws.data(), ws.size(), nullptr), NT_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(nt_last_error()).find("'shard.num_logprobs'"), std::string::npos) << nt_last_error();
    untouched();
  }
  // The combine: a valid summary first, then bad requests.
  size_t bytes = 0;
  ASSERT_EQ(nt_lm_head_shard_dense_workspace_size(&a, &sh, &bytes), NT_OK) << nt_last_error();
  std::vector<uint8_t> exact(bytes);
  ASSERT_EQ(nt_lm_head_shard_dense(&a, &sh, exact.data(), bytes, nullptr), NT_OK) << nt_last_error();
  std::vector<int64_t> tokens(2, kPoisonI64), keys(2, kPoisonI64);
  std::vector<int32_t> ids(2 * (n + 1), -7), ranks(2, -7);
  std::vector<float> values(2 * (n + 1), 7.0f);
  nt_lm_head_sample_combine_args c{};
  c.summaries = host(summary.data(), NT_I64, 2, S);
  c.shards = 1;
  c.vocab_size = 64;
  c.sampling = a.sampling;
  c.tokens = host(tokens.data(), NT_I64, 2);
  c.num_logprobs = n;
  c.logprobs_mode = NT_LOGPROBS_PROCESSED;
  c.logprob_ids = host(ids.data(), NT_I32, 2, n + 1);
  c.logprobs = host(values.data(), NT_F32, 2, n + 1);
  c.ranks = host(ranks.data(), NT_I32, 2);
  c.rank_keys = host(keys.data(), NT_I64, 2);
  auto expect_combine = [&](const nt_lm_head_sample_combine_args& b, const char* arg) {
    EXPECT_EQ(nt_lm_head_sample_combine(&b), NT_ERROR_INVALID_ARGUMENT) << arg;
    EXPECT_NE(std::string(nt_last_error()).find(std::string("'") + arg + "'"), std::string::npos)
        << nt_last_error();
    EXPECT_EQ(tokens, std::vector<int64_t>(2, kPoisonI64));
    EXPECT_EQ(keys, std::vector<int64_t>(2, kPoisonI64));
    EXPECT_EQ(ids, std::vector<int32_t>(ids.size(), -7));
    EXPECT_EQ(ranks, std::vector<int32_t>(2, -7));
    EXPECT_EQ(values, std::vector<float>(values.size(), 7.0f));
  };
  { auto b = c; b.num_logprobs = 21; expect_combine(b, "num_logprobs"); }
  { auto b = c; b.num_logprobs = -1; expect_combine(b, "num_logprobs"); }
  { auto b = c; b.logprobs_mode = 5; expect_combine(b, "logprobs_mode"); }
  // Another request than the summaries' (or none): their words are elsewhere.
  { auto b = c; b.logprobs_mode = NT_LOGPROBS_RAW; expect_combine(b, "summaries"); }
  { auto b = c; b.num_logprobs = 2; b.logprob_ids.shape[1] = b.logprobs.shape[1] = 3; expect_combine(b, "summaries"); }
  {
    auto b = c;
    b.logprob_ids = b.logprobs = b.ranks = b.rank_keys = nt_tensor{};
    expect_combine(b, "summaries");
  }
  { auto b = c; b.logprob_ids.shape[1] = n; expect_combine(b, "logprob_ids"); }
  { auto b = c; b.logprob_ids.dtype = NT_I64; expect_combine(b, "logprob_ids"); }
  { auto b = c; b.logprobs.dtype = NT_F16; expect_combine(b, "logprobs"); }
  { auto b = c; b.ranks.shape[0] = 3; expect_combine(b, "ranks"); }
  { auto b = c; b.rank_keys = nt_tensor{}; expect_combine(b, "rank_keys"); }
  { auto b = c; b.rank_keys.dtype = NT_I32; expect_combine(b, "rank_keys"); }
  { auto b = c; b.logprob_ids = nt_tensor{}; expect_combine(b, "logprobs"); }
  ASSERT_EQ(nt_lm_head_sample_combine(&c), NT_OK) << nt_last_error();
  // The rank counts.
  std::vector<int32_t> counts(2, -7);
  nt_lm_head_shard_ranks_args r{host(scores.data(), NT_F32, 2, 64), host(keys.data(), NT_I64, 2),
                                host(counts.data(), NT_I32, 2)};
  auto expect_ranks = [&](const nt_lm_head_shard_ranks_args& b, const char* arg) {
    EXPECT_EQ(nt_lm_head_shard_ranks(&b, nullptr), NT_ERROR_INVALID_ARGUMENT) << arg;
    EXPECT_NE(std::string(nt_last_error()).find(std::string("'") + arg + "'"), std::string::npos)
        << nt_last_error();
    EXPECT_EQ(counts, std::vector<int32_t>(2, -7));
  };
  { auto b = r; b.scores.dtype = NT_F16; expect_ranks(b, "scores"); }
  { auto b = r; b.scores = nt_tensor{}; expect_ranks(b, "scores"); }
  { auto b = r; b.rank_keys.shape[0] = 1; expect_ranks(b, "rank_keys"); }
  { auto b = r; b.counts.dtype = NT_I64; expect_ranks(b, "counts"); }
  ASSERT_EQ(nt_lm_head_shard_ranks(&r, nullptr), NT_OK) << nt_last_error();
  // A rank key of -1 counts nothing; (lo, hi) counts the keys between.
  std::vector<float> row = {1.0f, -INFINITY, NAN, 2.0f, INFINITY, -0.0f};
  std::vector<int64_t> k2 = {-1, int64_t((uint64_t(0xFF800000u - 1) << 32) | 0x80000000u)  /* [key(+0), key(+inf) - 1] */};
  std::vector<float> rows2 = row;
  rows2.insert(rows2.end(), row.begin(), row.end());
  std::vector<int32_t> c2(2, -7);
  nt_lm_head_shard_ranks_args r2{host(rows2.data(), NT_F32, 2, 6), host(k2.data(), NT_I64, 2),
                                 host(c2.data(), NT_I32, 2)};
  ASSERT_EQ(nt_lm_head_shard_ranks(&r2, nullptr), NT_OK) << nt_last_error();
  EXPECT_EQ(c2, (std::vector<int32_t>{0, 3}));  // 1, 2 and -0 (key of +0)
}

// ---- errors ------------------------------------------------------------------------

TEST(LmHeadSample, ErrorsNameTheArgument) {
  Rng rng(9900);
  Head h = dense_head(rng, NT_F32, 2, 64, 8, false);
  Params p = draw_params(rng, 2, 64, 1, false, false);
  std::vector<int64_t> tokens(2, kPoisonI64);
  auto expect = [&](nt_lm_head_sample_dense_args a, const char* arg) {
    std::vector<uint8_t> ws(1 << 20);
    EXPECT_EQ(nt_lm_head_sample_dense(&a, ws.data(), ws.size(), nullptr), NT_ERROR_INVALID_ARGUMENT) << arg;
    EXPECT_NE(std::string(nt_last_error()).find(std::string("'") + arg + "'"), std::string::npos)
        << nt_last_error();
    EXPECT_EQ(tokens, std::vector<int64_t>(2, kPoisonI64));
  };
  const HeadArgs base = head_args(h, 0, 64, 0, 2, {}, 0, p, {});
  nt_lm_head_sample_dense_args a = base.dense;
  a.tokens = host(tokens.data(), NT_I64, 2);
  { auto b = a; b.tokens = host(tokens.data(), NT_I64, 1); expect(b, "tokens"); }
  { auto b = a; b.sampling.temperature.scalar = -1.0f; expect(b, "temperature"); }
  { auto b = a; b.sampling.top_p.scalar = 0.0f; expect(b, "top_p"); }
  std::vector<int32_t> mask(3 * 2, -1);
  { auto b = a; b.bitmask = host(mask.data(), NT_I32, 3, 2); expect(b, "bitmask"); }
  { auto b = a; b.hidden.shape[1] = 7; expect(b, "hidden"); }
  std::vector<float> scores(2 * 64, 7.0f);
  { auto b = a; b.scores = host(scores.data(), NT_F32, 2, 63); expect(b, "scores"); }
  { auto b = a; b.scores = host(scores.data(), NT_I32, 2, 64); expect(b, "scores"); }
  { auto b = a; b.scores = host(scores.data(), NT_F32, 128); expect(b, "scores"); }
  EXPECT_EQ(scores, std::vector<float>(2 * 64, 7.0f));
  {  // a workspace one byte short
    size_t bytes = 0;
    ASSERT_EQ(nt_lm_head_sample_dense_workspace_size(&a, &bytes), NT_OK);
    std::vector<uint8_t> ws(bytes);
    EXPECT_EQ(nt_lm_head_sample_dense(&a, ws.data(), bytes - 1, nullptr), NT_ERROR_WORKSPACE);
    EXPECT_EQ(tokens, std::vector<int64_t>(2, kPoisonI64));
  }
  // Binary: group_size; shards: summary width, vocab_start; combine: rows.
  Head hb = binary_head(rng, 2, 64, 256, 128, false);
  HeadArgs ab = head_args(hb, 0, 64, 0, 2, {}, 0, p, {});
  ab.binary.tokens = host(tokens.data(), NT_I64, 2);
  ab.binary.group_size = 96;
  std::vector<uint8_t> ws(1 << 20);
  EXPECT_EQ(nt_lm_head_sample_binary(&ab.binary, ws.data(), ws.size(), nullptr), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nt_last_error()).find("'group_size'"), std::string::npos);
  std::vector<int64_t> summary(2 * NT_LM_HEAD_SUMMARY_WORDS, kPoisonI64);
  nt_lm_head_shard sh = shard_of(0, 64, 0, host(summary.data(), NT_I64, 2, NT_LM_HEAD_SUMMARY_WORDS));
  EXPECT_EQ(nt_lm_head_shard_dense(&a, &sh, ws.data(), ws.size(), nullptr), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nt_last_error()).find("'summary'"), std::string::npos);
  std::vector<int64_t> summary2(2 * (NT_LM_HEAD_SUMMARY_WORDS + 4), kPoisonI64);
  sh = shard_of(-1, 64, 0, host(summary2.data(), NT_I64, 2, NT_LM_HEAD_SUMMARY_WORDS + 4));
  EXPECT_EQ(nt_lm_head_shard_dense(&a, &sh, ws.data(), ws.size(), nullptr), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nt_last_error()).find("'vocab_start'"), std::string::npos);
  EXPECT_EQ(summary2, std::vector<int64_t>(summary2.size(), kPoisonI64));
  nt_lm_head_sample_combine_args c{};
  c.summaries = host(summary2.data(), NT_I64, 2, NT_LM_HEAD_SUMMARY_WORDS + 4);
  c.shards = 3;
  c.vocab_size = 64;
  c.sampling = a.sampling;
  c.tokens = host(tokens.data(), NT_I64, 2);
  EXPECT_EQ(nt_lm_head_sample_combine(&c), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nt_last_error()).find("'summaries'"), std::string::npos);
}

}  // namespace
}  // namespace ntt

namespace ntt {
namespace {

// M = 0: every entry point is a valid no-op with a zero workspace.
TEST(LmHeadSample, EmptyBatchIsANoOp) {
  Rng rng(9950);
  Head h = dense_head(rng, NT_F32, 1, 50, 8, false);
  const Params p = draw_params(rng, 1, 50, 3, false, false);
  HeadArgs a = head_args(h, 0, 50, 0, 0, {}, 0, p, {});
  int64_t token = kPoisonI64;
  a.dense.tokens = host(&token, NT_I64, 0);
  size_t bytes = 1;
  ASSERT_EQ(nt_lm_head_sample_dense_workspace_size(&a.dense, &bytes), NT_OK) << nt_last_error();
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(nt_lm_head_sample_dense(&a.dense, nullptr, 0, nullptr), NT_OK) << nt_last_error();
  int64_t word = kPoisonI64;
  nt_lm_head_shard sh = shard_of(0, 50, 0, host(&word, NT_I64, 0, NT_LM_HEAD_SUMMARY_WORDS + 4));
  EXPECT_EQ(nt_lm_head_shard_dense(&a.dense, &sh, nullptr, 0, nullptr), NT_OK) << nt_last_error();
  nt_lm_head_sample_combine_args c{};
  c.summaries = sh.summary;
  c.shards = 2;
  c.vocab_size = 50;
  c.sampling = a.dense.sampling;
  c.tokens = host(&token, NT_I64, 0);
  EXPECT_EQ(nt_lm_head_sample_combine(&c), NT_OK) << nt_last_error();
  EXPECT_EQ(token, kPoisonI64);
  EXPECT_EQ(word, kPoisonI64);
  // With a logprobs request: the shard call, the combine and the rank counts.
  float score = 7.0f;
  int32_t id = -7, rank = -7;
  int64_t key = kPoisonI64;
  sh.summary = host(&word, NT_I64, 0, NT_LM_HEAD_SUMMARY_WORDS + 4 + NT_LM_HEAD_LOGPROBS_WORDS(2));
  sh.num_logprobs = 2;
  sh.scores = host(&score, NT_F32, 0, 50);
  ASSERT_EQ(nt_lm_head_shard_dense_workspace_size(&a.dense, &sh, &bytes), NT_OK) << nt_last_error();
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(nt_lm_head_shard_dense(&a.dense, &sh, nullptr, 0, nullptr), NT_OK) << nt_last_error();
  c.summaries = sh.summary;
  c.num_logprobs = 2;
  c.logprob_ids = host(&id, NT_I32, 0, 3);
  c.logprobs = host(&score, NT_F32, 0, 3);
  c.ranks = host(&rank, NT_I32, 0);
  c.rank_keys = host(&key, NT_I64, 0);
  EXPECT_EQ(nt_lm_head_sample_combine(&c), NT_OK) << nt_last_error();
  nt_lm_head_shard_ranks_args r{host(&score, NT_F32, 0, 50), host(&key, NT_I64, 0), host(&rank, NT_I32, 0)};
  EXPECT_EQ(nt_lm_head_shard_ranks(&r, nullptr), NT_OK) << nt_last_error();
  EXPECT_EQ(token, kPoisonI64);
  EXPECT_EQ(word, kPoisonI64);
  EXPECT_EQ(score, 7.0f);
  EXPECT_EQ(id, -7);
  EXPECT_EQ(rank, -7);
  EXPECT_EQ(key, kPoisonI64);
}

}  // namespace
}  // namespace ntt

namespace ntt {
namespace {

// The fused op on every device, inputs, per-row parameters, bitmask, outputs
// and workspace on the device. Its token (and logprobs) must be the device's
// own sample (sample_logprobs) on the scores the op writes out, after the
// bitmask; those scores must be the head's own (lm_head_topk_* on the device
// reports the same values, bit for bit) and the head's product (within
// rounding of the fp64 reference). On the CPU and OpenCL, whose heads share
// the CPU's arithmetic, they must also be head_scores' and the token the
// CPU's. The shapes reach every CUDA scoring kernel on an H100: the generic
// f32 one, the staged tensor-core one (one pass and two), the warp-MMA one
// (hidden rows 4-byte aligned), the binary decode kernel (M <= 2, G >= 128),
// the binary bulk kernel (G = 128, H = 1024; two passes), the binary warp-MMA
// one (few groups, and G = 64), the binary generic one (scale rows 2-byte
// aligned); and, at V near 40,000, CTAs that walk several tiles.
class LmHeadSampleOnDevice : public DeviceTest {};

// Copies of host arguments on device d, kept alive with the uploader.
class Uploader {
 public:
  explicit Uploader(TestDevice& d) : d_(d) {}
  nt_tensor put(const nt_tensor& t) {
    if (t.data == nullptr) return t;
    const size_t elt = dtype_bytes(t.dtype);
    const int64_t count = t.ndim == 1 ? t.shape[0] : t.shape[0] * t.row_stride;
    Buffer& b = buffer(size_t(count) * elt);
    b.upload(t.data, size_t(count) * elt);
    return t.ndim == 1 ? b.vector(t.dtype, t.shape[0]) : b.matrix(t.dtype, t.shape[0], t.shape[1], t.row_stride);
  }
  nt_lm_head_sampling put(nt_lm_head_sampling s, int64_t rows) {
    auto param = [&](const void* per_row, size_t elt) -> const void* {
      if (per_row == nullptr) return nullptr;
      Buffer& b = buffer(size_t(rows) * elt);
      b.upload(per_row, size_t(rows) * elt);
      return b.handle();
    };
    s.temperature.per_row = param(s.temperature.per_row, 4);
    s.top_k.per_row = param(s.top_k.per_row, 4);
    s.top_p.per_row = param(s.top_p.per_row, 4);
    s.min_p.per_row = param(s.min_p.per_row, 4);
    s.seed.per_row = param(s.seed.per_row, 8);
    s.offset.per_row = param(s.offset.per_row, 8);
    return s;
  }
  nt_lm_head_sample_dense_args put(nt_lm_head_sample_dense_args a, int64_t rows) {
    a.hidden = put(a.hidden);
    a.weight = put(a.weight);
    a.bias = put(a.bias);
    a.bitmask = put(a.bitmask);
    a.sampling = put(a.sampling, rows);
    return a;
  }
  nt_lm_head_sample_binary_args put(nt_lm_head_sample_binary_args a, int64_t rows) {
    a.act_q = put(a.act_q);
    a.act_scale = put(a.act_scale);
    a.wq = put(a.wq);
    a.wscale = put(a.wscale);
    a.bias = put(a.bias);
    a.bitmask = put(a.bitmask);
    a.sampling = put(a.sampling, rows);
    return a;
  }
  // A device buffer of `bytes`, every byte 0xFF.
  Buffer& buffer(size_t bytes) {
    keep_.push_back(std::make_unique<Buffer>(d_, std::max<size_t>(bytes, 1)));
    const std::vector<uint8_t> poison(std::max<size_t>(bytes, 1), 0xFF);
    keep_.back()->upload(poison.data(), poison.size());
    return *keep_.back();
  }

 private:
  TestDevice& d_;
  std::vector<std::unique_ptr<Buffer>> keep_;
};

// The workspace query, then the call on a workspace of that size on d (poisoned,
// so that a value the op reads before writing shows); the first status that is not NT_OK.
template <class Args, class Shard>
nt_status query_then_run(Uploader& up, const Args& a, const Shard* shard,
                         nt_status (*query)(const Args*, const Shard*, size_t*),
                         nt_status (*run)(const Args*, const Shard*, void*, size_t, void*), void* stream) {
  size_t bytes = 0;
  nt_status st = query(&a, shard, &bytes);
  if (st != NT_OK) return st;
  void* ws = bytes ? up.buffer(bytes).handle() : nullptr;
  return run(&a, shard, ws, bytes, stream);
}
template <class Args>
nt_status query_then_run(Uploader& up, const Args& a, nt_status (*query)(const Args*, size_t*),
                         nt_status (*run)(const Args*, void*, size_t, void*), void* stream) {
  size_t bytes = 0;
  nt_status st = query(&a, &bytes);
  if (st != NT_OK) return st;
  void* ws = bytes ? up.buffer(bytes).handle() : nullptr;
  return run(&a, ws, bytes, stream);
}

// The fused single call on d: host_args' head put on the device, `outputs` fills
// the outputs of the (dense or binary) argument struct, then query_then_run.
template <class Outputs>
nt_status fused_on_device(Uploader& up, TestDevice& d, const HeadArgs& host_args, bool binary, int64_t rows,
                          Outputs outputs) {
  if (binary) {
    nt_lm_head_sample_binary_args a = up.put(host_args.binary, rows);
    outputs(a);
    return query_then_run(up, a, nt_lm_head_sample_binary_workspace_size, nt_lm_head_sample_binary, d.stream());
  }
  nt_lm_head_sample_dense_args a = up.put(host_args.dense, rows);
  outputs(a);
  return query_then_run(up, a, nt_lm_head_sample_dense_workspace_size, nt_lm_head_sample_dense, d.stream());
}

// The head as the harness's lm_head_topk case (k and the strides at their
// defaults); with magnitudes, the head of its numbers' absolute values (every
// weight sign +1; act_q lies in [-127, 127]), whose product is the sum of the
// magnitudes of the head's terms.
DenseCase dense_case(const Head& h, bool magnitudes = false) {
  DenseCase c;
  c.rows = h.rows;
  c.vocab = h.vocab;
  c.hidden = h.hidden;
  c.dtype = h.dtype;
  c.x = h.x;
  c.weight = h.w;
  c.bias = h.bias;
  if (magnitudes)
    for (std::vector<float>* v : {&c.x, &c.weight, &c.bias})
      for (float& e : *v) e = std::fabs(e);
  return c;
}

BinaryCase binary_case(const Head& h, bool magnitudes = false) {
  BinaryCase c;
  c.rows = h.rows;
  c.vocab = h.vocab;
  c.hidden = h.hidden;
  c.group = h.group;
  c.act_q = h.act_q;
  c.act_scale = h.act_scale;
  const int64_t words = h.hidden / 32;
  c.signs.resize(size_t(h.vocab * h.hidden));
  for (int64_t v = 0; v < h.vocab; ++v)
    for (int64_t j = 0; j < h.hidden; ++j)
      c.signs[size_t(v * h.hidden + j)] =
          magnitudes || ((uint32_t(h.wq[size_t(v * words + j / 32)]) >> (j % 32)) & 1u) ? 1 : -1;
  for (uint16_t w : h.wscale) c.wscale.push_back(from_half_bits(NT_F16, w));
  c.bias = h.bias;
  if (magnitudes) {
    for (int8_t& q : c.act_q) q = int8_t(std::abs(q));
    for (float& b : c.bias) b = std::fabs(b);
  }
  return c;
}

// lm_head_topk_* of the head on device d, k = min(V, 64): (values, indices);
// hidden_stride: the hidden rows' stride the fused call had (0: contiguous), which
// picks the kernel, so that both calls run the same one.
TopK head_topk(TestDevice& d, const Head& h, int64_t hidden_stride = 0) {
  const int32_t k = int32_t(std::min<int64_t>(h.vocab, 64));
  if (!h.binary) {
    DenseCase c = dense_case(h);
    c.x_stride = hidden_stride;
    c.k = k;
    return run_dense(d, c);
  }
  BinaryCase c = binary_case(h);
  c.k = k;
  return run_binary(d, c);
}

// |score - fp64 product| within 1e-4 of the sum of the product's magnitudes:
// tensor-core and fma accumulations both pass, a wrong row or column does not.
void expect_near_product(const Head& h, const std::vector<float>& scores) {
  const std::vector<double> product =
      h.binary ? reference_binary_logits(binary_case(h)) : reference_dense_logits(dense_case(h));
  const std::vector<double> magnitude =
      h.binary ? reference_binary_logits(binary_case(h, true)) : reference_dense_logits(dense_case(h, true));
  for (size_t i = 0; i < product.size(); ++i)
    ASSERT_LE(std::fabs(double(scores[i]) - product[i]), 1e-4 * magnitude[i] + 1e-6)
        << "score of row " << i / size_t(h.vocab) << ", token " << i % size_t(h.vocab) << ": " << scores[i]
        << " against " << product[i];
}

// A head shape of the fused single call's device tests.
struct OwnScoresShape {
  bool binary;
  nt_dtype dtype;
  int64_t rows_lo, rows_hi, hidden;  // dense hidden 0: any, else a multiple of 8 up to `hidden`
  int32_t group;
  int64_t vocab_lo = 1, vocab_hi = 3000, hidden_pad = 0;  // pad: hidden rows H + pad apart
};

// The fused call on d for one draw of `shape` (seeds from c; variant 1: per-row
// parameters and a logprobs request): its scores, token and logprobs.
void check_own_scores(TestDevice& d, const OwnScoresShape& shape, int c, int variant) {
  Rng rng(9990 + c);
  SCOPED_TRACE(seed_trace(rng.seed()) + " case " + std::to_string(c));
  const int64_t rows = rng.integer(shape.rows_lo, shape.rows_hi);
  const int64_t vocab = rng.integer(shape.vocab_lo, shape.vocab_hi);
  const int64_t hidden = shape.binary ? shape.hidden
                         : shape.hidden == 0 ? rng.integer(1, 70)
                                             : 8 * rng.integer(1, shape.hidden / 8);
  Head h = shape.binary ? binary_head(rng, rows, vocab, hidden, shape.group, rng.coin())
                        : dense_head(rng, shape.dtype, rows, vocab, hidden, rng.coin());
  int64_t words = 0;
  const std::vector<int32_t> mask = draw_mask(rng, rows, vocab, &words);
  // Per-row parameters (variant 1), the joint flag and the logprobs mode vary
  // apart, so that each mode meets both the per-row and the class-specific scans.
  const Params p = draw_params(rng, rows, vocab, int(rng.integer(0, 7)), variant == 1, (c / 2) % 4 == 3);
  const bool logprobs = variant == 1 || c % 3 == 0;
  const int n = logprobs ? int(rng.integer(0, 20)) : 0;
  const uint32_t mode = (c / 2 + variant) % 2 ? NT_LOGPROBS_PROCESSED : NT_LOGPROBS_RAW;

  Uploader up(d);
  HeadArgs host_args = head_args(h, 0, vocab, 0, rows, mask, words, p, h.bias);
  std::vector<uint8_t> padded;  // the hidden rows hidden_pad elements apart
  if (shape.hidden_pad > 0) {
    const size_t e = dtype_bytes(h.dtype), row = size_t(hidden) * e, stride = size_t(hidden + shape.hidden_pad) * e;
    padded.assign(size_t(rows) * stride, 0);
    for (int64_t m = 0; m < rows; ++m)
      std::copy_n(h.x_bytes.data() + size_t(m) * row, row, padded.data() + size_t(m) * stride);
    host_args.dense.hidden.data = padded.data();
    host_args.dense.hidden.row_stride = hidden + shape.hidden_pad;
  }
  // Every output poisoned (Uploader::buffer), so that an unwritten one
  // cannot pass for the expected one; the scores' rows 3 apart beyond V
  // (the gaps must stay).
  const int64_t columns = n + 1, score_stride = vocab + 3;
  Buffer& tokens = up.buffer(size_t(rows) * 8);
  Buffer& scores = up.buffer(size_t(rows * score_stride) * 4);
  Buffer& ids = up.buffer(size_t(rows * columns) * 4);
  Buffer& values = up.buffer(size_t(rows * columns) * 4);
  Buffer& ranks = up.buffer(size_t(rows) * 4);
  auto outputs = [&](auto& args) {
    args.tokens = tokens.vector(NT_I64, rows);
    args.scores = scores.matrix(NT_F32, rows, vocab, score_stride);
    if (!logprobs) return;
    args.num_logprobs = n;
    args.logprobs_mode = mode;
    args.logprob_ids = ids.matrix(NT_I32, rows, columns, columns);
    args.logprobs = values.matrix(NT_F32, rows, columns, columns);
    args.ranks = ranks.vector(NT_I32, rows);
  };
  ASSERT_EQ(fused_on_device(up, d, host_args, shape.binary, rows, outputs), NT_OK) << nt_last_error();
  d.sync();

  // The scores: the gaps untouched, then the head's own and its product.
  const std::vector<float> strided = from_device<float>(scores, size_t(rows * score_stride));
  std::vector<float> own(size_t(rows * vocab));
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t v = 0; v < score_stride; ++v) {
      const float x = strided[size_t(m * score_stride + v)];
      if (v < vocab) own[size_t(m * vocab + v)] = x;
      else ASSERT_EQ(f32_bits(x), 0xFFFFFFFFu) << "row " << m << " gap " << v << " was written";
    }
  // lm_head_topk's winners are the written scores' top k, with the same values.
  const TopK topk = head_topk(d, h, shape.hidden_pad > 0 ? hidden + shape.hidden_pad : 0);
  for (int64_t m = 0; m < rows; ++m) {
    const std::vector<double> row(own.begin() + m * vocab, own.begin() + (m + 1) * vocab);
    const std::vector<int64_t> best = reference_topk(row.data(), vocab, topk.k);
    for (int64_t i = 0; i < topk.k; ++i) {
      const int64_t v = topk.indices[size_t(m * topk.k + i)];
      ASSERT_EQ(v, best[size_t(i)]) << "row " << m << " rank " << i << ": not the written scores' top k";
      ASSERT_EQ(f32_bits(topk.values[size_t(m * topk.k + i)]), f32_bits(own[size_t(m * vocab + v)]))
          << "row " << m << " token " << v << ": lm_head_topk's value is not the written score";
    }
  }
  ASSERT_NO_FATAL_FAILURE(expect_near_product(h, own));
  if (d.type() != NT_DEVICE_CUDA) {
    EXPECT_EQ(own, head_scores(h)) << "the CPU heads' arithmetic";
    EXPECT_EQ(from_device<int64_t>(tokens, size_t(rows)), run_fused(h, mask, words, p)) << "the CPU's token";
  }

  // The token (and logprobs): the device's own ops on those scores.
  const SampleCase on_scores = masked_case(h, own, mask, words, p);
  const std::vector<int64_t> got = from_device<int64_t>(tokens, size_t(rows));
  // The call as a caller makes it, without the scores or logprobs outputs:
  // the same tokens.
  Buffer& bare_tokens = up.buffer(size_t(rows) * 8);
  ASSERT_EQ(fused_on_device(up, d, host_args, shape.binary, rows,
                            [&](auto& args) { args.tokens = bare_tokens.vector(NT_I64, rows); }),
            NT_OK)
      << nt_last_error();
  d.sync();
  EXPECT_EQ(from_device<int64_t>(bare_tokens, size_t(rows)), got) << "without the scores output";
  if (!logprobs) {
    EXPECT_EQ(got, run_sample(d, on_scores)) << "M=" << rows << " V=" << vocab;
    return;
  }
  const LogprobsResult want = run_sample_logprobs(d, on_scores, n, mode);
  EXPECT_EQ(got, want.tokens) << "M=" << rows << " V=" << vocab;
  EXPECT_EQ(from_device<int32_t>(ids, size_t(rows * columns)), want.ids);
  EXPECT_EQ(from_device<int32_t>(ranks, size_t(rows)), want.ranks);
  const std::vector<float> lp = from_device<float>(values, size_t(rows * columns));
  for (size_t i = 0; i < lp.size(); ++i)
    EXPECT_EQ(f32_bits(lp[i]), f32_bits(want.values[i])) << "logprob entry " << i;
}

TEST_P(LmHeadSampleOnDevice, TokenIsSampleOnItsOwnScores) {
  const OwnScoresShape shapes[] = {
      {false, NT_F32, 1, 6, 0, 0},
      {false, NT_BF16, 1, 8, 512, 0},
      {false, NT_F16, 65, 70, 256, 0},
      {false, NT_BF16, 2, 9, 256, 0, 1, 3000, 2},
      {false, NT_BF16, 1, 3, 64, 0, 34000, 40000},
      {true, NT_F32, 1, 2, 1024, 128},
      {true, NT_F32, 1, 2, 1024, 128, 34000, 40000},
      {true, NT_F32, 3, 70, 1024, 128},
      {true, NT_F32, 3, 40, 512, 256},
      {true, NT_F32, 1, 6, 256, 64},
      {true, NT_F32, 3, 6, 192, 64},
  };
  int c = 0;
  for (const OwnScoresShape& shape : shapes)
    for (int variant = 0; variant < 2; ++variant, ++c) check_own_scores(dev(), shape, c, variant);
}

// The same on model-sized heads, on CUDA (the CPU and OpenCL heads are covered at
// the sizes above): the vocabulary of W1/W2 at H = 512 (the decode kernel's
// cp.async fill, H % 1024 != 0), and H = 5,120 (its tensor-copy fill; the
// batched kernels at M = 16-24).
TEST_P(LmHeadSampleOnDevice, ModelSizedHeadsAreSampleOnTheirOwnScores) {
  if (dev().type() != NT_DEVICE_CUDA) GTEST_SKIP() << "model-sized heads run on CUDA";
  const OwnScoresShape shapes[] = {
      {true, NT_F32, 1, 2, 512, 128, 240000, 248320},
      {true, NT_F32, 1, 2, 5120, 128, 8192, 12000},
      {true, NT_F32, 16, 24, 5120, 128, 8192, 9000},
      {false, NT_BF16, 1, 4, 512, 0, 240000, 248320},
      {false, NT_BF16, 1, 24, 5120, 0, 8192, 12000},
  };
  int c = 100;
  for (const OwnScoresShape& shape : shapes)
    for (int variant = 0; variant < 2; ++variant, ++c) check_own_scores(dev(), shape, c, variant);
}

// The shard summaries on the device equal the CPU's, word for word (the mass,
// a double summed in another order, within 1e-12 of it): a dense f32 head with
// H = 1, whose scores are one rounded product plus the bias on every backend,
// with +-inf and NaN weights among them; random shards of a padded vocabulary,
// bitmasks (fully masked rows among them), every filter combination, per-row
// parameters, K from 1 to past the shard (the fallback's "every token"). Then
// planted cases: a shard of padding only, a bitmask a word short that ends
// inside the shard, +inf scores in plain rows, and weights in {-1, 0, 1}
// (ties everywhere). OpenCL refuses the shard ops.
TEST_P(LmHeadSampleOnDevice, ShardSummariesAreTheCpus) {
  TestDevice& d = dev();
  if (d.type() == NT_DEVICE_CPU) GTEST_SKIP() << "the CPU's summaries are the expectation here";
  enum Planted { kRandom, kPaddingOnly, kShortMask, kPlainPosInf, kTies };
  for (int c = 0; c < 24; ++c) {
    const Planted planted = c < 16 ? kRandom : Planted(1 + (c - 16) % 4);
    Rng rng(9700 + c);
    SCOPED_TRACE(seed_trace(rng.seed()) + " planted " + std::to_string(int(planted)));
    const int64_t rows = rng.integer(1, 5), total = c % 8 == 7 ? rng.integer(34000, 40000) : rng.integer(64, 5000);
    int64_t vocab = total - rng.integer(0, std::min<int64_t>(total - 1, 70));  // padding past vocab
    Head h = dense_head(rng, NT_F32, rows, total, 1, planted != kTies && rng.coin());
    for (int s = 0; s < 3 && planted == kRandom; ++s) {
      const float special[] = {INFINITY, -INFINITY, NAN};
      if (rng.coin(0.3)) h.w[size_t(rng.integer(0, total - 1))] = special[s];
    }
    if (planted == kTies)
      for (float& w : h.w) w = float(rng.integer(-1, 1));
    int64_t v0 = rng.integer(0, total - 1), v1 = rng.integer(v0 + 1, total);
    if (planted == kPaddingOnly) {
      vocab = std::max<int64_t>(1, total / 2);
      v0 = rng.integer(vocab, total - 1);
      v1 = rng.integer(v0 + 1, total);
    }
    if (c % 9 == 4) v1 = std::min(total, v0 + rng.integer(1, 12));  // fewer tokens than n_lp
    if (planted == kPlainPosInf) {  // row 0 scores +inf there; row 1, with x = 0, NaN
      for (int i = 0; i < 3; ++i) h.w[size_t(rng.integer(v0, v1 - 1))] = INFINITY;
      h.x[0] = std::fabs(h.x[0]) + 0.5f;
      if (rows > 1) h.x[1] = 0.0f;
      h.x_bytes = encode(NT_F32, h.x);
    }
    h.w_bytes = encode(NT_F32, h.w);
    int64_t words = 0;
    std::vector<int32_t> mask = draw_mask(rng, rows, vocab, &words);
    if (planted == kShortMask) {  // words end at a multiple of 32 inside the shard
      const int64_t end = std::min(vocab, (v0 + v1) / 2);
      words = std::max<int64_t>(1, end / 32);
      mask = bench_bitmask(rng, rows, words * 32, MaskKind::Random50);
    }
    Params p = draw_params(rng, rows, vocab, planted == kPlainPosInf ? 0 : c % 8, c >= 8 && c < 16, false);
    if (planted == kTies) std::fill(p.temperature.begin(), p.temperature.end(), 1.0f);
    const int64_t K = c % 4 == 3 ? v1 - v0 + rng.integer(0, 3) : rng.integer(1, 64);
    const int64_t S = NT_LM_HEAD_SUMMARY_WORDS + K;
    const int64_t first_row = rng.integer(0, 1000);
    SCOPED_TRACE("M=" + std::to_string(rows) + " shard [" + std::to_string(v0) + ", " + std::to_string(v1) +
                 ") of V=" + std::to_string(vocab) + " K=" + std::to_string(K));

    // Every third case with a logprobs request (raw and processed in turn; n = 0,
    // and n past the shard's tokens, among them): its words after the candidates,
    // and the masked scores, which the rank counts then read.
    const bool lp = c % 3 == 1;
    const int32_t n_lp = !lp || c % 9 == 1 ? 0 : c % 9 == 4 ? 20 : int32_t(rng.integer(1, 20));
    const uint32_t lp_mode = (c / 3) % 2 ? NT_LOGPROBS_PROCESSED : NT_LOGPROBS_RAW;
    const int64_t W = S + (lp ? NT_LM_HEAD_LOGPROBS_WORDS(int64_t(n_lp)) : 0), V_r = v1 - v0;
    HeadArgs host_args = head_args(h, v0, v1, 0, rows, mask, words, p, h.bias);
    std::vector<int64_t> want(size_t(rows * W), kPoisonI64);
    std::vector<float> want_masked(size_t(rows * V_r), 7.0f);
    nt_lm_head_shard sh = shard_of(v0, vocab, first_row, host(want.data(), NT_I64, rows, W));
    if (lp) {
      sh.num_logprobs = n_lp;
      sh.logprobs_mode = lp_mode;
      sh.scores = host(want_masked.data(), NT_F32, rows, V_r);
    }
    ASSERT_NO_FATAL_FAILURE(run_shard(false, host_args, sh));

    Uploader up(d);
    Buffer& summary = up.buffer(size_t(rows * W) * 8);
    Buffer& masked = up.buffer(size_t(rows * V_r) * 4);
    const std::vector<float> finite_poison(size_t(rows * V_r), 7.0f);  // a NaN poison would pass for a NaN score
    masked.upload(finite_poison.data(), finite_poison.size() * 4);
    const nt_lm_head_sample_dense_args a = up.put(host_args.dense, rows);
    nt_lm_head_shard on_device = shard_of(v0, vocab, first_row, summary.matrix(NT_I64, rows, W));
    if (lp) {
      on_device.num_logprobs = n_lp;
      on_device.logprobs_mode = lp_mode;
      on_device.scores = masked.matrix(NT_F32, rows, V_r);
    }
    const nt_status st = query_then_run(up, a, &on_device, nt_lm_head_shard_dense_workspace_size,
                                        nt_lm_head_shard_dense, d.stream());
    if (d.type() == NT_DEVICE_OPENCL) {
      EXPECT_EQ(st, NT_ERROR_UNSUPPORTED) << nt_last_error();
      return;
    }
    ASSERT_EQ(st, NT_OK) << nt_last_error();
    d.sync();
    const std::vector<int64_t> got = from_device<int64_t>(summary, size_t(rows * W));
    // A NaN's bits are the backend's own (CUDA's arithmetic gives the canonical
    // NaN, x86 keeps the operand's payload): NaN scores compare as NaN.
    auto same_float = [](uint32_t a, uint32_t b) {
      return a == b || (std::isnan(f32_from_bits(a)) && std::isnan(f32_from_bits(b)));
    };
    auto expect_word = [&](int64_t m, int64_t w, bool mass) {
      const int64_t g = got[size_t(m * W + w)], e = want[size_t(m * W + w)];
      if (w >= S + 2 && g != e && (uint64_t(g) >> 32) == (uint64_t(e) >> 32) &&
          same_float(uint32_t(g), uint32_t(e)))
        return;  // an (x, id) word whose x is NaN on both
      if (mass && g != e) {  // a double summed in another order
        double zg, ze;
        std::memcpy(&zg, &g, 8);
        std::memcpy(&ze, &e, 8);
        EXPECT_NEAR(zg, ze, 1e-12 * ze) << "row " << m << " word " << w << ": a mass";
        return;
      }
      EXPECT_EQ(g, e) << "row " << m << " word " << w;
    };
    for (int64_t m = 0; m < rows; ++m) {
      const int64_t n = want[size_t(m * W + 6)];  // the candidates written (words past them are not compared)
      for (int64_t w = 0; w < NT_LM_HEAD_SUMMARY_WORDS + n; ++w) expect_word(m, w, w == 2);
      for (int64_t w = S; w < W; ++w) expect_word(m, w, w == S);
    }
    if (!lp) continue;
    const std::vector<float> got_masked = from_device<float>(masked, size_t(rows * V_r));
    for (size_t i = 0; i < got_masked.size(); ++i)
      EXPECT_TRUE(same_float(f32_bits(got_masked[i]), f32_bits(want_masked[i])))
          << "masked score " << i << ": " << got_masked[i] << " vs " << want_masked[i];
    // The rank counts of random key ranges (and -1) on the device's masked scores.
    std::vector<int64_t> keys(static_cast<size_t>(rows));
    for (auto& k : keys) {
      const uint32_t lo = uint32_t(rng.bits()), hi = uint32_t(rng.bits());
      k = rng.coin(0.2) ? -1 : rng.coin(0.2) ? int64_t((uint64_t(hi) << 32) | lo)  // lo > hi at times
                                             : int64_t((uint64_t(std::max(lo, hi)) << 32) | std::min(lo, hi));
    }
    std::vector<int32_t> want_counts(size_t(rows), -7);
    nt_lm_head_shard_ranks_args r{host(want_masked.data(), NT_F32, rows, V_r), host(keys.data(), NT_I64, rows),
                                  host(want_counts.data(), NT_I32, rows)};
    ASSERT_EQ(nt_lm_head_shard_ranks(&r, nullptr), NT_OK) << nt_last_error();
    Buffer& counts = up.buffer(size_t(rows) * 4);
    nt_lm_head_shard_ranks_args rd{masked.matrix(NT_F32, rows, V_r), up.put(r.rank_keys), counts.vector(NT_I32, rows)};
    ASSERT_EQ(nt_lm_head_shard_ranks(&rd, d.stream()), NT_OK) << nt_last_error();
    d.sync();
    EXPECT_EQ(from_device<int32_t>(counts, size_t(rows)), want_counts) << "the rank counts";
  }
}

// The vocabulary-parallel path on the device, end to end: every shard's summary
// on the device, gathered and combined on the host (the fallback rows summarized
// again with every token a candidate), gives the device's single call's tokens,
// for dense bf16 and binary heads (their tensor-core kernels), 2 and 3 ragged
// shards of a padded vocabulary, bitmasks and per-row parameters of every class.
// Rows with top-p may differ only where a cut falls within the rounding between
// the shards' masses and the single call's, which these random inputs avoid.
TEST_P(LmHeadSampleOnDevice, ShardTokensAreTheSingleCalls) {
  TestDevice& d = dev();
  if (d.type() == NT_DEVICE_CPU) GTEST_SKIP() << "LmHeadSampleSharded covers the CPU";
  int fallbacks = 0;
  for (int c = 0; c < 8; ++c) {
    Rng rng(9800 + c);
    SCOPED_TRACE(seed_trace(rng.seed()));
    const bool binary = c % 2 == 1;
    const int64_t rows = rng.integer(1, 6), vocab = rng.integer(3000, 20000), total = (vocab + 63) / 64 * 64;
    const int shards = 2 + c % 3 / 2;
    Head h = binary ? binary_head(rng, rows, total, 1024, 128, rng.coin())
                    : dense_head(rng, NT_BF16, rows, total, 64, rng.coin());
    int64_t words = 0;
    const std::vector<int32_t> mask = draw_mask(rng, rows, vocab, &words);
    const Params p = draw_params(rng, rows, vocab, c % 8, true, false);
    const ShardPlan plan = ragged_plan(rng, total, shards);
    const std::vector<int64_t>& cuts = plan.cuts;

    // Rows [m0, m1) of every shard, K candidates each, on the device; the host's copy.
    auto summaries = [&](int64_t m0, int64_t m1, int64_t K) {
      const int64_t n = m1 - m0, S = NT_LM_HEAD_SUMMARY_WORDS + K;
      std::vector<int64_t> all;
      for (int r = 0; r < shards; ++r) {
        const int64_t v0 = cuts[size_t(r)], v1 = cuts[size_t(r + 1)];
        HeadArgs host_args = head_args(h, v0, v1, m0, m1, mask, words, p, h.bias);
        Uploader up(d);
        Buffer& summary = up.buffer(size_t(n * S) * 8);
        const nt_lm_head_shard sh = shard_of(v0, vocab, m0, summary.matrix(NT_I64, n, S));
        const nt_status st = binary
            ? query_then_run(up, up.put(host_args.binary, n), &sh, nt_lm_head_shard_binary_workspace_size,
                             nt_lm_head_shard_binary, d.stream())
            : query_then_run(up, up.put(host_args.dense, n), &sh, nt_lm_head_shard_dense_workspace_size,
                             nt_lm_head_shard_dense, d.stream());
        if (st != NT_OK) return std::make_pair(st, all);
        d.sync();
        const std::vector<int64_t> one = from_device<int64_t>(summary, size_t(n * S));
        all.insert(all.end(), one.begin(), one.end());
      }
      return std::make_pair(NT_OK, all);
    };
    auto first = summaries(0, rows, 16);
    if (d.type() == NT_DEVICE_OPENCL) {
      EXPECT_EQ(first.first, NT_ERROR_UNSUPPORTED) << nt_last_error();
      return;
    }
    ASSERT_EQ(first.first, NT_OK) << nt_last_error();
    std::vector<int64_t> tokens = combine(first.second, shards, rows, vocab, 0, p);
    for (int64_t m = 0; m < rows; ++m) {
      if (tokens[size_t(m)] != NT_TOKEN_NEEDS_ALL_CANDIDATES) continue;
      ++fallbacks;
      auto again = summaries(m, m + 1, plan.widest());
      ASSERT_EQ(again.first, NT_OK) << nt_last_error();
      tokens[size_t(m)] = combine(again.second, shards, 1, vocab, m, p)[0];
    }

    // The single call on the device over the unpadded head.
    Uploader up(d);
    HeadArgs host_args = head_args(h, 0, vocab, 0, rows, mask, words, p, h.bias);
    Buffer& single = up.buffer(size_t(rows) * 8);
    ASSERT_EQ(fused_on_device(up, d, host_args, binary, rows, [&](auto& a) { a.tokens = single.vector(NT_I64, rows); }),
              NT_OK)
        << nt_last_error();
    d.sync();
    EXPECT_EQ(tokens, from_device<int64_t>(single, size_t(rows)))
        << (binary ? "binary" : "dense") << " M=" << rows << " V=" << vocab << " shards=" << shards;
  }
  EXPECT_GT(fallbacks, 0) << "no row took the fallback";
}

// The vocabulary-parallel logprobs on the device, as nexttok.distributed composes
// them on one GPU a rank: the shard calls with a logprobs request (summaries and
// masked scores on the device), the combine, the fallback of -2 rows, then each
// shard's rank counts on the device against the combine's keys; against the
// device's own single call with the same request: tokens, ids and ranks exact,
// values within expect_close_values' bound.
TEST_P(LmHeadSampleOnDevice, ShardLogprobsAreTheSingleCalls) {
  TestDevice& d = dev();
  if (d.type() == NT_DEVICE_CPU) GTEST_SKIP() << "LmHeadSampleSharded covers the CPU";
  int fallbacks = 0;
  int64_t excused = 0;
  for (int c = 0; c < 6; ++c) {
    Rng rng(9900 + c);
    SCOPED_TRACE(seed_trace(rng.seed()));
    const bool binary = c % 2 == 1;
    const int n = c < 2 ? 5 : c < 4 ? 20 : 0;
    const uint32_t mode = (c / 2) % 2 ? NT_LOGPROBS_PROCESSED : NT_LOGPROBS_RAW;
    const int64_t rows = rng.integer(2, 6), vocab = rng.integer(3000, 20000), total = (vocab + 63) / 64 * 64;
    const int shards = 2 + c % 3;
    Head h = binary ? binary_head(rng, rows, total, 1024, 128, rng.coin())
                    : dense_head(rng, NT_BF16, rows, total, 64, rng.coin());
    int64_t words = 0;
    const std::vector<int32_t> mask = draw_mask(rng, rows, vocab, &words);
    Params p = draw_params(rng, rows, vocab, c == 5 ? 0 : 2 + c % 5, c % 2 == 0, false);
    const ShardPlan plan = ragged_plan(rng, total, shards);
    const int64_t widest = plan.widest();
    Uploader up(d);

    // Rows [m0, m1) of every shard with K candidates: the summaries (host copy,
    // stacked by shard) and each shard's masked scores on the device.
    auto shard_calls = [&](int64_t m0, int64_t m1, int64_t K, std::vector<Buffer*>* scores) {
      const int64_t count = m1 - m0, S = NT_LM_HEAD_SUMMARY_WORDS + K + NT_LM_HEAD_LOGPROBS_WORDS(n);
      std::vector<int64_t> all;
      for (int r = 0; r < shards; ++r) {
        const int64_t v0 = plan.cuts[size_t(r)], v1 = plan.cuts[size_t(r + 1)];
        HeadArgs host_args = head_args(h, v0, v1, m0, m1, mask, words, p, h.bias);
        Buffer& summary = up.buffer(size_t(count * S) * 8);
        Buffer& masked = up.buffer(size_t(count * (v1 - v0)) * 4);
        nt_lm_head_shard sh = shard_of(v0, vocab, m0, summary.matrix(NT_I64, count, S));
        sh.num_logprobs = n;
        sh.logprobs_mode = mode;
        sh.scores = masked.matrix(NT_F32, count, v1 - v0);
        const nt_status st = binary
            ? query_then_run(up, up.put(host_args.binary, count), &sh, nt_lm_head_shard_binary_workspace_size,
                             nt_lm_head_shard_binary, d.stream())
            : query_then_run(up, up.put(host_args.dense, count), &sh, nt_lm_head_shard_dense_workspace_size,
                             nt_lm_head_shard_dense, d.stream());
        if (d.type() == NT_DEVICE_OPENCL) {  // no shard ops there
          EXPECT_EQ(st, NT_ERROR_UNSUPPORTED) << nt_last_error();
          return std::vector<int64_t>{};
        }
        EXPECT_EQ(st, NT_OK) << nt_last_error();
        if (st != NT_OK) return std::vector<int64_t>{};
        d.sync();
        const std::vector<int64_t> one = from_device<int64_t>(summary, size_t(count * S));
        all.insert(all.end(), one.begin(), one.end());
        if (scores) scores->push_back(&masked);
      }
      return all;
    };
    std::vector<Buffer*> scores;
    const std::vector<int64_t> all = shard_calls(0, rows, 16, &scores);
    if (d.type() == NT_DEVICE_OPENCL) return;
    ASSERT_FALSE(all.empty());
    std::vector<int64_t> keys;
    LogprobsResult got = combine_logprobs(all, shards, rows, vocab, 0, p, n, mode, &keys);
    for (int64_t m = 0; m < rows; ++m) {
      if (got.tokens[size_t(m)] != NT_TOKEN_NEEDS_ALL_CANDIDATES) continue;
      ++fallbacks;
      const std::vector<int64_t> one_all = shard_calls(m, m + 1, widest, nullptr);
      ASSERT_FALSE(one_all.empty());
      merge_fallback_row(got, keys, m, one_all, shards, vocab, p, n, mode);
    }
    Buffer& device_keys = up.buffer(size_t(rows) * 8);
    device_keys.upload(keys.data(), size_t(rows) * 8);
    for (int r = 0; r < shards; ++r) {
      Buffer& counts = up.buffer(size_t(rows) * 4);
      nt_lm_head_shard_ranks_args ra{scores[size_t(r)]->matrix(NT_F32, rows, plan.cuts[size_t(r + 1)] - plan.cuts[size_t(r)]),
                                     device_keys.vector(NT_I64, rows), counts.vector(NT_I32, rows)};
      ASSERT_EQ(nt_lm_head_shard_ranks(&ra, d.stream()), NT_OK) << nt_last_error();
      d.sync();
      const std::vector<int32_t> one = from_device<int32_t>(counts, size_t(rows));
      for (int64_t m = 0; m < rows; ++m) got.ranks[size_t(m)] += one[size_t(m)];
    }

    // The single call on the device over the unpadded head, with the same request.
    HeadArgs host_args = head_args(h, 0, vocab, 0, rows, mask, words, p, h.bias);
    Buffer& tokens = up.buffer(size_t(rows) * 8);
    Buffer& ids = up.buffer(size_t(rows * (n + 1)) * 4);
    Buffer& values = up.buffer(size_t(rows * (n + 1)) * 4);
    Buffer& ranks = up.buffer(size_t(rows) * 4);
    Buffer& scores_out = up.buffer(size_t(rows * vocab) * 4);  // the scores it sampled, for expect_sharded_row
    auto request = [&](auto& a) {
      a.tokens = tokens.vector(NT_I64, rows);
      a.scores = scores_out.matrix(NT_F32, rows, vocab);
      a.num_logprobs = n;
      a.logprobs_mode = mode;
      a.logprob_ids = ids.matrix(NT_I32, rows, n + 1);
      a.logprobs = values.matrix(NT_F32, rows, n + 1);
      a.ranks = ranks.vector(NT_I32, rows);
    };
    ASSERT_EQ(fused_on_device(up, d, host_args, binary, rows, request), NT_OK) << nt_last_error();
    d.sync();
    LogprobsResult want;
    want.columns = n + 1;
    want.tokens = from_device<int64_t>(tokens, size_t(rows));
    want.ids = from_device<int32_t>(ids, size_t(rows * (n + 1)));
    want.values = from_device<float>(values, size_t(rows * (n + 1)));
    want.ranks = from_device<int32_t>(ranks, size_t(rows));
    const std::vector<float> sampled = from_device<float>(scores_out, size_t(rows * vocab));
    SCOPED_TRACE(std::string(binary ? "binary" : "dense") + " n=" + std::to_string(n) + " mode=" + std::to_string(mode));
    for (int64_t m = 0; m < rows; ++m)
      excused += expect_sharded_row(got, want, p, m, n, masked_row(sampled, m, vocab, mask, words));
  }
  EXPECT_LE(excused, 1) << "rows excused as degenerate top-p cuts";
  EXPECT_GT(fallbacks, 0) << "no row took the fallback";
}

NTT_INSTANTIATE_ON_DEVICES(LmHeadSampleOnDevice);

}  // namespace
}  // namespace ntt
