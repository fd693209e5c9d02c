#include "harness/cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "harness/run_ops.h"
#include "harness/sample_inputs.h"
#include "harness/verify_ops.h"

namespace ntt {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

nt_dtype any_float(Rng& rng) {
  const nt_dtype types[] = {NT_F32, NT_F16, NT_BF16};
  return types[rng.integer(0, 2)];
}

// A gap after each row now and then: a backend that ignores a stride reads it.
int64_t maybe_gap(Rng& rng) { return rng.coin(0.3) ? rng.integer(1, 40) : 0; }

// A vocabulary: mostly small, now and then one that long-row code paths take.
int64_t any_vocab(Rng& rng) {
  return rng.coin(0.15) ? rng.integer(20000, 80000) : rng.integer(1, 4000);
}

template <class T>
std::string first_difference(const std::vector<T>& got, const std::vector<T>& want,
                             const char* what) {
  if (got.size() != want.size()) return std::string(what) + ": sizes differ";
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      std::ostringstream o;
      o << what << " differs at element " << i << ": " << +got[i] << ", expected " << +want[i];
      return o.str();
    }
  return "";
}

// ---- grammar mask ------------------------------------------------------------

std::string check_apply_mask(TestDevice& dev, Rng& rng) {
  const int64_t rows = rng.integer(1, 5);
  const int64_t vocab = rng.coin(0.3) ? 32 * rng.integer(1, 64) : rng.integer(1, 3000);
  const nt_dtype dtype = any_float(rng);
  // W' short of the vocabulary (tokens past 32 W' are disallowed), longer, or exact.
  const int64_t full = (vocab + 31) / 32;
  const double u = rng.uniform();
  const int64_t words = u < 0.2 ? rng.integer(1, full) : u < 0.4 ? full + rng.integer(1, 3) : full;
  const int64_t logits_gap = maybe_gap(rng), mask_gap = maybe_gap(rng);
  MaskCase c = random_mask_case(rng, dtype, rows, vocab, words, logits_gap, mask_gap);
  if (rng.coin()) {  // listed rows, with repeats and out-of-range entries
    c.has_indices = true;
    c.index_dtype = rng.coin() ? NT_I32 : NT_I64;
    for (int64_t n = rng.integer(0, 2 * c.rows); n > 0; --n)
      c.indices.push_back(rng.integer(-2, c.rows + 1));
  }
  const std::vector<uint8_t> got = run_apply_mask(dev, c), want = reference_apply_mask(c);
  const size_t width = dtype_bytes(c.dtype);
  for (size_t i = 0; i < want.size() / width; ++i)
    if (raw_bits(c.dtype, got, i) != raw_bits(c.dtype, want, i)) {
      std::ostringstream o;
      o << "row " << i / size_t(c.stride()) << " column " << i % size_t(c.stride()) << " (V="
        << c.vocab << ", W'=" << c.words << ", " << dtype_label(c.dtype) << "): bits 0x"
        << std::hex << raw_bits(c.dtype, got, i) << ", expected 0x" << raw_bits(c.dtype, want, i);
      return o.str();
    }
  return "";
}

std::string check_bitmask_from_allowed(TestDevice& dev, Rng& rng) {
  const int64_t rows = rng.integer(1, 4), vocab = rng.integer(1, 2000);
  const int64_t stride = vocab + maybe_gap(rng);
  const double density = rng.uniform();
  std::vector<uint8_t> allowed(size_t(rows * stride));
  for (uint8_t& a : allowed) a = rng.coin(density) ? 1 : 0;
  return first_difference(run_bitmask_from_allowed(dev, rows, vocab, stride, allowed),
                          reference_bitmask_from_allowed(rows, vocab, stride, allowed),
                          "bitmask word");
}

// ---- sampling ------------------------------------------------------------------

// Greedy rows: temperature 0, top_k 1, and per row also NaN or negative temperatures.
RowConfig greedy_config(Rng& rng, bool odd) {
  RowConfig c;
  switch (rng.integer(0, odd ? 3 : 1)) {
    case 0: c.temperature = 0.0f; c.top_k = rng.coin() ? 0 : 50; break;
    case 1: c.temperature = 0.8f; c.top_k = 1; c.top_p = 0.9f; break;
    case 2: c.temperature = kNaN; break;
    case 3: c.temperature = -1.0f; c.min_p = 0.1f; break;
  }
  return c;
}

// A configuration that draws (random_config's greedy ones are check_greedy's).
RowConfig drawing_config(Rng& rng, int64_t vocab, bool odd) {
  RowConfig c;
  do c = random_config(rng, vocab, odd); while (!(c.temperature > 0) || c.top_k == 1);
  return c;
}

// One logits row of a BENCH.md family (sample_inputs.h), now and then with what
// every op must rank right: a fully masked row (-inf, NaN), +inf tokens, and
// NaN, -inf, -0 and exact ties sprinkled in.
void fill_special_row(Rng& rng, nt_dtype dtype, float* row, int64_t vocab) {
  fill_row(rng, rng.coin(), dtype, row, vocab);
  const double u = rng.uniform();
  auto any = [&] { return rng.integer(0, vocab - 1); };
  if (u < 0.08) {
    std::fill(row, row + vocab, -kInf);
    if (rng.coin()) row[any()] = kNaN;
  } else if (u < 0.14) {
    for (int n = 0; n < 3; ++n) row[any()] = kInf;
  } else if (u < 0.40) {
    for (int64_t n = 0; n < 1 + vocab / 20; ++n) {
      const double w = rng.uniform();
      row[any()] = w < 0.3 ? kNaN : w < 0.6 ? -kInf : w < 0.8 ? -0.0f : row[any()];
    }
  }
}

// A random case: shape, dtype, parameters (scalars or per-row arrays), seeds,
// flags, token dtype and row stride. Logits are left to fill_special_logits.
SampleCase random_sample_case(Rng& rng, bool greedy) {
  SampleCase c;
  c.rows = rng.integer(1, 6);
  c.vocab = any_vocab(rng);
  c.dtype = any_float(rng);
  c.row_stride = rng.coin(0.3) ? c.vocab + rng.integer(1, 40) : 0;
  const bool per_row = rng.coin(0.4);
  std::vector<float> t, p, m;
  std::vector<int32_t> k;
  for (int64_t r = 0; r < (per_row ? c.rows : 1); ++r) {
    const RowConfig cfg = greedy ? greedy_config(rng, per_row) : drawing_config(rng, c.vocab, per_row);
    t.push_back(cfg.temperature);
    k.push_back(cfg.top_k);
    p.push_back(cfg.top_p);
    m.push_back(cfg.min_p);
  }
  c.temperature = {per_row, t};
  c.top_k = {per_row, k};
  c.top_p = {per_row, p};
  c.min_p = {per_row, m};
  const bool seeds_per_row = rng.coin(0.4);
  std::vector<uint64_t> seeds, offsets;
  for (int64_t r = 0; r < (seeds_per_row ? c.rows : 1); ++r) {
    seeds.push_back(rng.bits());
    offsets.push_back(rng.coin() ? rng.bits() : uint64_t(rng.integer(0, 1000)));
  }
  c.seed = {seeds_per_row, seeds};
  c.offset = {seeds_per_row, offsets};
  c.flags = rng.coin(0.25) ? NT_SAMPLE_TOP_P_JOINT : 0;
  c.token_dtype = rng.coin(0.3) ? NT_I32 : NT_I64;
  return c;
}

// Every row filled, and drawn again while the reference finds it degenerate.
void fill_special_logits(SampleCase& c, Rng& rng) {
  c.logits.assign(size_t(c.rows * c.vocab), 0.0f);
  auto refill = [&](float* row) { fill_special_row(rng, c.dtype, row, c.vocab); };
  for (int64_t r = 0; r < c.rows; ++r) refill(&c.logits[size_t(r * c.vocab)]);
  redraw_degenerate_rows(c, refill);
}

std::string compare_tokens(const SampleCase& c, const std::vector<int64_t>& got) {
  for (int64_t r = 0; r < c.rows; ++r) {
    const SampleReference ref = reference_sample(c, r);
    if (got[size_t(r)] != ref.token) {
      std::ostringstream o;
      o << "row " << r << " of " << c.rows << " (V=" << c.vocab << " " << dtype_label(c.dtype)
        << ", " << describe(c.row_params(r)) << "): token " << got[size_t(r)] << ", expected "
        << ref.token << " (keep-set of " << ref.keep.size() << ")";
      return o.str();
    }
  }
  return "";
}

std::string check_greedy(TestDevice& dev, Rng& rng) {
  SampleCase c = random_sample_case(rng, true);
  fill_special_logits(c, rng);
  // The maximum twice in some rows: the first one wins.
  for (int64_t r = 0; r < c.rows; ++r)
    if (c.vocab > 2 && rng.coin()) {
      const int64_t a = rng.integer(0, c.vocab - 2), b = rng.integer(a + 1, c.vocab - 1);
      c.logits[size_t(r * c.vocab + a)] = c.logits[size_t(r * c.vocab + b)] = round_to(c.dtype, 20.0f);
    }
  return compare_tokens(c, run_sample(dev, c));
}

// Gumbel-max draws equal the reference's bit for bit; with per-row seeds a
// row's token is also the same when the batch is reversed.
std::string check_gumbel_draw(TestDevice& dev, Rng& rng) {
  SampleCase c = random_sample_case(rng, false);
  fill_special_logits(c, rng);
  const std::vector<int64_t> got = run_sample(dev, c);
  std::string e = compare_tokens(c, got);
  if (!e.empty() || !c.seed.per_row || c.rows < 2) return e;
  SampleCase rev = c;
  auto reverse_rows = [](auto& param) {
    if (param.per_row) std::reverse(param.values.begin(), param.values.end());
  };
  reverse_rows(rev.temperature);
  reverse_rows(rev.top_k);
  reverse_rows(rev.top_p);
  reverse_rows(rev.min_p);
  reverse_rows(rev.seed);
  reverse_rows(rev.offset);
  for (int64_t r = 0; r < c.rows; ++r)
    std::copy_n(&c.logits[size_t((c.rows - 1 - r) * c.vocab)], c.vocab, &rev.logits[size_t(r * c.vocab)]);
  const std::vector<int64_t> back = run_sample(dev, rev);
  for (int64_t r = 0; r < c.rows; ++r)
    if (back[size_t(c.rows - 1 - r)] != got[size_t(r)])
      return "per-row seeds: row " + std::to_string(r) + " drew " + std::to_string(got[size_t(r)]) +
             " but " + std::to_string(back[size_t(c.rows - 1 - r)]) + " at batch position " +
             std::to_string(c.rows - 1 - r);
  return "";
}

// Logprobs with sample: a random drawing case (special logits included), a
// random n and mode; tokens equal to nt_sample's, ids and ranks equal to the
// reference's, values within its tolerance (reference.h).
std::string check_sample_logprobs(TestDevice& dev, Rng& rng) {
  SampleCase c = random_sample_case(rng, rng.coin(0.2));
  fill_special_logits(c, rng);
  const int n = int(rng.integer(0, 20));
  const uint32_t mode = rng.coin() ? NT_LOGPROBS_PROCESSED : NT_LOGPROBS_RAW;
  const LogprobsResult got = run_sample_logprobs(dev, c, n, mode, rng.coin(0.3) ? 2 : 0);
  const std::vector<int64_t> tokens = run_sample(dev, c);
  for (int64_t r = 0; r < c.rows; ++r) {
    std::ostringstream where;
    where << "row " << r << " of " << c.rows << " (V=" << c.vocab << " " << dtype_label(c.dtype)
          << ", n=" << n << (mode == NT_LOGPROBS_RAW ? " raw, " : " processed, ")
          << describe(c.row_params(r)) << "): ";
    const LogprobsReference ref = reference_logprobs(c, r, n, mode == NT_LOGPROBS_PROCESSED);
    if (got.tokens[size_t(r)] != tokens[size_t(r)] || got.tokens[size_t(r)] != ref.ids[0])
      return where.str() + "token " + std::to_string(got.tokens[size_t(r)]) + ", nt_sample " +
             std::to_string(tokens[size_t(r)]) + ", reference " + std::to_string(ref.ids[0]);
    if (got.ranks[size_t(r)] != ref.rank)
      return where.str() + "rank " + std::to_string(got.ranks[size_t(r)]) + ", expected " +
             std::to_string(ref.rank);
    for (int col = 0; col <= n; ++col) {
      const size_t at = size_t(r * got.columns + col);
      if (got.ids[at] != ref.ids[size_t(col)] || !logprob_close(got.values[at], ref.values[size_t(col)])) {
        std::ostringstream o;
        o << where.str() << "column " << col << ": id " << got.ids[at] << " value " << got.values[at]
          << ", expected " << ref.ids[size_t(col)] << " " << ref.values[size_t(col)];
        return o.str();
      }
    }
  }
  return "";
}

// The keep-set member by member: one row repeated, each copy with an explicit
// draw u at the middle of one member's interval of the inverse CDF (so each of
// those members must come back), plus the edges (u = 0, NaN or < 0 give the
// first member, u >= 1 the last) and random u.
std::string check_explicit_draw(TestDevice& dev, Rng& rng) {
  SampleCase one;
  one.vocab = any_vocab(rng);
  one.dtype = any_float(rng);
  one.row_stride = rng.coin(0.3) ? one.vocab + rng.integer(1, 40) : 0;
  const RowConfig cfg = drawing_config(rng, one.vocab, false);
  one.temperature = scalar(cfg.temperature);
  one.top_k = scalar(cfg.top_k);
  one.top_p = scalar(cfg.top_p);
  one.min_p = scalar(cfg.min_p);
  one.flags = rng.coin(0.25) ? NT_SAMPLE_TOP_P_JOINT : 0;
  one.token_dtype = rng.coin(0.3) ? NT_I32 : NT_I64;
  fill_special_logits(one, rng);
  const SampleReference ref = reference_sample(one, 0);
  std::vector<float> us = {0.0f, kNaN, -0.5f, 1.0f, 2.0f};
  const size_t n = ref.keep_by_index.size();
  const size_t step = std::max<size_t>(1, n / 200);
  for (size_t j = 0; j < n; j += step) {
    const double lo = j ? ref.cdf[j - 1] : 0.0, hi = ref.cdf[j];
    if (hi - lo > 1e-4) us.push_back(float((lo + hi) / 2));
  }
  for (int i = 0; i < 8; ++i) us.push_back(float(rng.uniform()));
  SampleCase c = one;
  c.uniform.clear();
  c.logits.clear();
  SampleCase probe = one;
  for (float u : us) {  // a u within the margin of a CDF boundary decides nothing
    probe.uniform = {u};
    if (reference_sample(probe, 0).degenerate) continue;
    c.uniform.push_back(u);
    c.logits.insert(c.logits.end(), one.logits.begin(), one.logits.end());
  }
  c.rows = int64_t(c.uniform.size());
  return compare_tokens(c, run_sample(dev, c));
}

// ---- LM heads --------------------------------------------------------------------

int32_t any_k(Rng& rng, int64_t vocab) {
  return int32_t(rng.integer(1, std::min<int64_t>(vocab, rng.coin(0.8) ? 64 : 2048)));
}

std::string compare_topk(const std::vector<double>& logits, const TopK& got, int64_t rows,
                         int64_t vocab, int64_t k, double tol, const std::string& shape) {
  for (int64_t m = 0; m < rows; ++m) {
    const std::string e = compare_topk_row(&logits[size_t(m * vocab)], vocab, k,
                                           &got.values[size_t(m * k)], &got.indices[size_t(m * k)], tol);
    if (!e.empty()) return "row " + std::to_string(m) + " of " + shape + ": " + e;
  }
  return "";
}

// Grid inputs (small integers and multiples of powers of two) make every fp32
// sum exact in any order: values and indices must then match exactly, ties
// included. Continuous inputs are held to 1e-5 of the row's largest |logit|.
std::string check_dense(TestDevice& dev, Rng& rng) {
  DenseCase c;
  c.rows = rng.integer(1, 4);
  c.vocab = rng.integer(1, 3000);
  c.hidden = rng.integer(1, 300);
  c.dtype = any_float(rng);
  c.k = any_k(rng, c.vocab);
  const bool grid = rng.coin();
  c.x.resize(size_t(c.rows * c.hidden));
  c.weight.resize(size_t(c.vocab * c.hidden));
  for (float& v : c.x) v = grid ? float(rng.integer(-8, 8)) : float(rng.normal());
  const float amplitude = 1.0f / std::sqrt(float(c.hidden));
  for (float& w : c.weight) w = grid ? float(rng.integer(-8, 8)) / 16 : amplitude * float(rng.normal());
  if (rng.coin()) {
    c.bias_dtype = any_float(rng);
    c.bias.resize(size_t(c.vocab));
    for (float& b : c.bias) b = grid ? float(rng.integer(-64, 64)) / 4 : 0.5f * float(rng.normal());
  }
  c.x_stride = rng.coin(0.3) ? c.hidden + rng.integer(1, 9) : 0;
  c.weight_stride = rng.coin(0.3) ? c.hidden + rng.integer(1, 9) : 0;
  c.out_stride = rng.coin(0.3) ? c.k + rng.integer(1, 9) : 0;
  const std::string shape = "M=" + std::to_string(c.rows) + " V=" + std::to_string(c.vocab) +
                            " H=" + std::to_string(c.hidden) + " k=" + std::to_string(c.k) + " " +
                            dtype_label(c.dtype) + (grid ? " grid" : "");
  return compare_topk(reference_dense_logits(c), run_dense(dev, c), c.rows, c.vocab, c.k,
                      grid ? 0.0 : 1e-5, shape);
}

// Grid inputs as for the dense head (act_scale 2^-7, wscale multiples of 2^-6,
// bias multiples of 2^-2, H <= 768): exact. Activations quantized from N(0, 1)
// with f16 scales of either sign: within 1e-4 of the dequantized reference.
std::string check_binary(TestDevice& dev, Rng& rng) {
  BinaryCase c;
  c.rows = rng.integer(1, 4);
  c.vocab = rng.integer(1, 3000);
  const int32_t groups[] = {32, 64, 128, 256};
  c.group = groups[rng.integer(0, 3)];
  c.hidden = c.group * rng.integer(1, 512 / c.group + 1);
  c.k = any_k(rng, c.vocab);
  const bool grid = rng.coin();
  c.act_q.resize(size_t(c.rows * c.hidden));
  c.act_scale.resize(size_t(c.rows));
  if (grid) {
    for (int8_t& q : c.act_q) q = int8_t(rng.integer(-127, 127));
    std::fill(c.act_scale.begin(), c.act_scale.end(), 1.0f / 128);
  } else {
    std::vector<float> x(size_t(c.hidden));
    for (int64_t m = 0; m < c.rows; ++m) {
      for (float& v : x) v = float(rng.normal());
      reference_quantize_row(x.data(), c.hidden, &c.act_q[size_t(m * c.hidden)], &c.act_scale[size_t(m)]);
    }
  }
  c.signs = random_signs(rng, size_t(c.vocab * c.hidden));
  c.wscale.resize(size_t(c.vocab * (c.hidden / c.group)));
  for (float& w : c.wscale)
    w = grid ? float(rng.integer(1, 64)) / 64
             : round_to(NT_F16, (rng.coin(0.1) ? -1.0f : 1.0f) * float(rng.uniform(0.002, 0.05)));
  if (rng.coin()) {
    c.bias_dtype = any_float(rng);
    c.bias.resize(size_t(c.vocab));
    for (float& b : c.bias) b = grid ? float(rng.integer(-64, 64)) / 4 : float(rng.normal());
  }
  if (rng.coin(0.3)) {
    c.act_stride = c.hidden + rng.integer(1, 9);
    c.wq_stride = c.hidden / 32 + rng.integer(1, 3);
    c.wscale_stride = c.hidden / c.group + rng.integer(1, 3);
    c.out_stride = c.k + rng.integer(1, 9);
  }
  const std::string shape = "M=" + std::to_string(c.rows) + " V=" + std::to_string(c.vocab) +
                            " H=" + std::to_string(c.hidden) + " G=" + std::to_string(c.group) +
                            " k=" + std::to_string(c.k) + (grid ? " grid" : "");
  return compare_topk(reference_binary_logits(c), run_binary(dev, c), c.rows, c.vocab, c.k,
                      grid ? 0.0 : 1e-4, shape);
}

std::string check_pack(TestDevice& dev, Rng& rng) {
  const int64_t rows = rng.integer(1, 300), cols = 32 * rng.integer(1, 16);
  const std::vector<int8_t> signs = random_signs(rng, size_t(rows * cols));
  return first_difference(run_pack(dev, rows, cols, signs), reference_pack(signs, rows, cols),
                          "packed word");
}

// Rows of N(0, s) values, all-zero rows (+-0), rows with a NaN or an infinity,
// and rows whose values fall on rounding midpoints (round half to even must decide).
std::string check_quantize(TestDevice& dev, Rng& rng) {
  const int64_t rows = rng.integer(1, 5), cols = rng.integer(1, 2000);
  const nt_dtype dtype = any_float(rng);
  const int64_t stride = rng.coin(0.3) ? cols + rng.integer(1, 9) : 0;
  const double scale = 0.5 * double(rng.integer(1, 200));
  std::vector<float> x(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = &x[size_t(r * cols)];
    const double u = rng.uniform();
    for (int64_t j = 0; j < cols; ++j) {
      if (u < 0.1) row[j] = rng.coin() ? 0.0f : -0.0f;
      else if (u < 0.25) row[j] = float((double(rng.integer(-126, 126)) + 0.5) * 0.5);
      else row[j] = float(scale * rng.normal());
    }
    if (u >= 0.1 && u < 0.25) row[0] = 63.5f;  // max |x| = 63.5: scale 0.5, x / scale = n + 0.5
    if (u >= 0.25 && u < 0.4) row[rng.integer(0, cols - 1)] = kNaN;
    if (u >= 0.4 && u < 0.45) row[rng.integer(0, cols - 1)] = rng.coin() ? kInf : -kInf;
    for (int64_t j = 0; j < cols; ++j) row[j] = round_to(dtype, row[j]);
  }
  const Quantized got = run_quantize(dev, dtype, rows, cols, stride, x);
  Quantized want{std::vector<int8_t>(size_t(rows * cols)), std::vector<float>(size_t(rows))};
  for (int64_t r = 0; r < rows; ++r)
    reference_quantize_row(&x[size_t(r * cols)], cols, &want.q[size_t(r * cols)], &want.scale[size_t(r)]);
  const std::string e = first_difference(got.scale, want.scale, "act_scale");
  return e.empty() ? first_difference(got.q, want.q, "act_q") : e;
}

// Speculative verification: random requests of mixed parameters against the
// fp64 reference walk (requests it finds degenerate are skipped).
std::string check_verify(TestDevice& dev, Rng& rng, bool tree) {
  const int64_t vocab = rng.coin() ? rng.integer(1, 100) : rng.integer(100, 3000);
  const int64_t requests = rng.integer(1, 8);
  VerifyCase c = tree ? random_verify_tree(rng, requests, vocab, rng.integer(1, 9), rng.integer(1, 6))
                      : random_verify_chain(rng, requests, vocab, rng.integer(0, 4), rng.coin(),
                                            any_float(rng));
  std::vector<float> t, p, mp;
  std::vector<int32_t> k;
  std::vector<uint64_t> seed;
  for (int64_t b = 0; b < requests; ++b) {
    t.push_back(rng.coin(0.2) ? 0.0f : float(rng.uniform(0.5, 1.5)));
    k.push_back(rng.coin(0.4) ? int32_t(rng.integer(2, 20)) : 0);
    p.push_back(rng.coin(0.4) ? float(rng.uniform(0.5, 0.95)) : 1.0f);
    mp.push_back(rng.coin(0.2) ? float(rng.uniform(0.01, 0.2)) : 0.0f);
    seed.push_back(rng.bits());
  }
  c.temperature = per_row(t);
  c.top_k = per_row(k);
  c.top_p = per_row(p);
  c.min_p = per_row(mp);
  c.seed = rng.coin() ? per_row(seed) : scalar(seed[0]);
  c.offset = scalar<uint64_t>(rng.bits());
  const VerifyResult got = run_verify(dev, c);
  for (int64_t b = 0; b < requests; ++b) {
    const VerifyReference ref = reference_verify(c, b);
    if (ref.degenerate) continue;
    const int32_t n = got.num_emitted[size_t(b)];
    if (n < 0 || n > c.width)
      return "request " + std::to_string(b) + ": num_emitted " + std::to_string(n) + " outside [0, " +
             std::to_string(c.width) + "]";
    const std::vector<int32_t> tokens(got.out_ids.begin() + b * c.width,
                                      got.out_ids.begin() + b * c.width + n);
    if (tokens != ref.tokens)
      return "request " + std::to_string(b) + " (V=" + std::to_string(vocab) + ", " +
             describe(c.request_params(b)) + "): " + std::to_string(tokens.size()) +
             " tokens, the reference emits " + std::to_string(ref.tokens.size()) +
             (tokens.empty() || ref.tokens.empty() ? "" : ", first " + std::to_string(tokens[0]) +
                                                          " vs " + std::to_string(ref.tokens[0]));
    for (int64_t j = n; j < c.width; ++j)
      if (got.out_ids[size_t(b * c.width + j)] != -1)
        return "request " + std::to_string(b) + ": position " + std::to_string(j) + " is not -1";
    if (c.with_nodes && !got.out_nodes.empty() &&
        std::vector<int32_t>(got.out_nodes.begin() + b * c.width,
                             got.out_nodes.begin() + b * c.width + n) != ref.nodes)
      return "request " + std::to_string(b) + ": accepted nodes differ from the reference walk";
  }
  return "";
}

std::string check_verify_chain(TestDevice& dev, Rng& rng) { return check_verify(dev, rng, false); }
std::string check_verify_tree(TestDevice& dev, Rng& rng) { return check_verify(dev, rng, true); }

}  // namespace

const std::vector<CaseCheck>& case_checks() {
  static const std::vector<CaseCheck> checks = {
      {"apply_token_bitmask", "the bit rule, every byte incl. row gaps", check_apply_mask},
      {"bitmask_from_allowed", "the bit rule, padding bits 0", check_bitmask_from_allowed},
      {"sample: greedy", "the first argmax", check_greedy},
      {"sample: Gumbel draw", "Philox + portable log over the sorted keep-set; batch position",
       check_gumbel_draw},
      {"sample: explicit draw", "the inverse CDF at every keep-set member", check_explicit_draw},
      {"sample_logprobs", "ids and ranks exact, fp64 log-softmax within 1e-5 + 2^-24 |v|",
       check_sample_logprobs},
      {"lm_head_topk_dense", "fp64 logits (exact on grid inputs, else 1e-5)", check_dense},
      {"lm_head_topk_binary", "exact integer dots (exact on grid inputs, else 1e-4)", check_binary},
      {"pack_weights", "the bit rule", check_pack},
      {"quantize_activations", "max|x|/127 and round-half-even, bit for bit", check_quantize},
      {"verify_draft", "the fp64 reference walk over sorted keep-sets", check_verify_chain},
      {"verify_tree", "the fp64 reference walk over sorted keep-sets", check_verify_tree},
  };
  return checks;
}

}  // namespace ntt
