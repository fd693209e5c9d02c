// Brute-force references of apply_penalties and apply_logit_bias, written from
// docs/SEMANTICS.md: vLLM's dense formulation (a [V] bincount of the output ids
// and a [V] mask of the prompt ids per row, then masked arithmetic over the whole
// row) and the logit bias entry by entry. Only the exact f16/bf16 conversions
// come from the core, through the harness's encoding (harness/data.h over
// core/half.h, tested in tests/core).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "harness/data.h"
#include "harness/reference.h"

namespace ntt {
namespace {

// Writes x (a value of dtype) as element i of an encoded buffer.
void put(std::vector<uint8_t>& buf, nt_dtype dtype, size_t i, float x) {
  if (dtype == NT_F32) {
    std::memcpy(&buf[i * 4], &x, 4);
  } else {
    const uint16_t h = half_bits(dtype, x);
    std::memcpy(&buf[i * 2], &h, 2);
  }
}

// One arithmetic step's result as the logits' dtype holds it; NaN as the
// canonical quiet NaN (0x7FC00000, f16 0x7E00, bf16 0x7FC0).
float step(float y, nt_dtype dtype) {
  if (std::isnan(y)) {
    const uint32_t canonical = 0x7FC00000u;
    std::memcpy(&y, &canonical, 4);
  }
  return round_to(dtype, y);
}

// Row b's range [first, second): [offsets[b], offsets[b+1]) clamped to [0, N],
// empty if decreasing.
std::pair<int64_t, int64_t> row_range(const CsrIds& l, int64_t b) {
  const int64_t n = int64_t(l.ids.size());
  const int64_t lo = std::min(std::max<int64_t>(l.offsets[size_t(b)], 0), n);
  const int64_t hi = std::min(std::max<int64_t>(l.offsets[size_t(b + 1)], lo), n);
  return {lo, hi};
}

std::vector<int32_t> row_ids(const CsrIds& l, int64_t b) {
  if (!l.present) return {};
  const auto [lo, hi] = row_range(l, b);
  return std::vector<int32_t>(l.ids.begin() + lo, l.ids.begin() + hi);
}

}  // namespace

std::vector<uint8_t> reference_penalties(nt_dtype dtype, int64_t rows, int64_t vocab,
                                         int64_t stride, const std::vector<uint8_t>& logits,
                                         const CsrIds& prompt, const CsrIds& output,
                                         const std::vector<float>& repetition,
                                         const std::vector<float>& presence,
                                         const std::vector<float>& frequency) {
  std::vector<uint8_t> out = logits;
  for (int64_t b = 0; b < rows; ++b) {
    // Per-row values take the documented meanings: r not finite or <= 0 -> 1,
    // p and f not finite -> 0.
    float r = repetition[size_t(b)], p = presence[size_t(b)], f = frequency[size_t(b)];
    if (!(std::isfinite(r) && r > 0)) r = 1.0f;
    if (!std::isfinite(p)) p = 0.0f;
    if (!std::isfinite(f)) f = 0.0f;
    // bincount into [V] and the prompt mask, as vLLM's get_token_bin_counts_and_mask
    std::vector<int64_t> counts(size_t(vocab), 0);
    std::vector<bool> prompt_mask(size_t(vocab), false);
    for (int32_t id : row_ids(output, b))
      if (id >= 0 && id < vocab) ++counts[size_t(id)];
    for (int32_t id : row_ids(prompt, b))
      if (id >= 0 && id < vocab) prompt_mask[size_t(id)] = true;
    for (int64_t t = 0; t < vocab; ++t) {
      const size_t at = size_t(b * stride + t);
      float x = decode(dtype, logits, at);
      if (std::isnan(x)) continue;  // NaN logits keep their bits
      const bool output_mask = counts[size_t(t)] > 0;
      // torch.where(prompt_mask | output_mask, r, 1): x > 0 ? x / r : x * r
      if ((prompt_mask[size_t(t)] || output_mask) && r != 1.0f) x = step(x > 0 ? x / r : x * r, dtype);
      // logits -= f * counts; logits -= p * output_mask (masked: count-0 tokens keep their bits)
      if (output_mask && f != 0.0f) x = step(x - f * float(counts[size_t(t)]), dtype);
      if (output_mask && p != 0.0f) x = step(x - p, dtype);
      if (prompt_mask[size_t(t)] || output_mask) put(out, dtype, at, x);
    }
  }
  return out;
}

std::vector<uint8_t> reference_logit_bias(nt_dtype dtype, int64_t rows, int64_t vocab,
                                          int64_t stride, const std::vector<uint8_t>& logits,
                                          const CsrIds& tokens, const std::vector<float>& values) {
  std::vector<uint8_t> out = logits;
  for (int64_t b = 0; b < rows; ++b) {
    const auto [lo, hi] = row_range(tokens, b);
    std::vector<float> x(static_cast<size_t>(vocab));
    std::vector<bool> touched(size_t(vocab), false);
    for (int64_t t = 0; t < vocab; ++t) x[size_t(t)] = decode(dtype, logits, size_t(b * stride + t));
    for (int64_t i = lo; i < hi; ++i) {
      const int32_t id = tokens.ids[size_t(i)];
      if (id < 0 || id >= vocab) continue;
      if (std::isnan(decode(dtype, logits, size_t(b * stride + id)))) continue;
      x[size_t(id)] = step(x[size_t(id)] + values[size_t(i)], dtype);
      touched[size_t(id)] = true;
    }
    for (int64_t t = 0; t < vocab; ++t)
      if (touched[size_t(t)]) put(out, dtype, size_t(b * stride + t), x[size_t(t)]);
  }
  return out;
}

}  // namespace ntt
