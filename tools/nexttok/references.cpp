#include "references.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/half.h"
#include "core/sampling.h"

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void store(void* data, nt_dtype t, size_t i, float x) { narrow(&x, static_cast<unsigned char*>(data) + i * dtype_size(t), t, 1); }

}  // namespace

std::vector<unsigned char> reference_mask(const MaskCase& c) {
  std::vector<unsigned char> out = c.logits;
  std::vector<bool> selected(static_cast<size_t>(c.b), c.index_type == kNoTensor);
  for (int64_t r : c.indices)
    if (r >= 0 && r < c.b) selected[r] = true;
  for (int64_t r = 0; r < c.b; ++r) {
    if (!selected[r]) continue;
    for (int64_t t = 0; t < c.v; ++t) {
      bool allowed = t < 32 * c.words &&
                     ((static_cast<uint32_t>(c.mask[r * c.words + t / 32]) >> (t % 32)) & 1u);
      if (!allowed) store(out.data(), c.dtype, static_cast<size_t>(r * c.stride + t), kNegInf);
    }
  }
  return out;
}

std::vector<int32_t> reference_allowed(const AllowedCase& c) {
  int64_t words = (c.v + 31) / 32;
  std::vector<uint32_t> out(static_cast<size_t>(c.b * words), 0);
  for (int64_t r = 0; r < c.b; ++r)
    for (int64_t t = 0; t < c.v; ++t)
      if (c.allowed[r * c.v + t]) out[r * words + t / 32] |= 1u << (t % 32);
  return std::vector<int32_t>(out.begin(), out.end());
}

int64_t reference_inverse_cdf(const baseline::Chain& chain, float u, bool* decided) {
  std::vector<std::pair<int32_t, double>> members;  // (token, mass) in vocabulary order
  for (int64_t i = 0; i < chain.kept; ++i) members.emplace_back(chain.order[i].second, chain.prob[i]);
  std::sort(members.begin(), members.end());
  if (members.empty()) return -1;
  double total = 0;
  for (auto& m : members) total += m.second;
  if (!(u >= 0)) u = 0;  // NaN and negatives draw as 0
  if (u >= 1) return members.back().first;
  double threshold = static_cast<double>(u) * total, cum = 0;
  for (auto& m : members) {
    cum += m.second;
    if (std::fabs(cum - threshold) <= 1e-5 * total && cum < total * (1 - 1e-9)) *decided = false;
    if (cum > threshold) return m.first;
  }
  return members.back().first;
}

SampleReference reference_sample(const SampleCase& c) {
  SampleReference ref;
  std::vector<float> row(static_cast<size_t>(c.v));
  baseline::Chain chain;
  for (int64_t r = 0; r < c.b; ++r) {
    for (int64_t t = 0; t < c.v; ++t) row[t] = c.logit(r, t);
    baseline::ChainParams p = c.row_params(r);
    // Per-row values outside the scalar ranges take the meanings SEMANTICS.md gives.
    baseline::sort_chain(row.data(), c.v, p, chain);
    bool decided = !chain.degenerate;
    int64_t token = -1;
    if (chain.kept > 0 && chain.greedy) {
      token = chain.order[0].second;
    } else if (chain.kept > 0 && !c.uniform.empty()) {
      token = reference_inverse_cdf(chain, c.uniform[r], &decided);
    } else if (chain.kept > 0) {
      uint64_t seed = c.seeds_per_row ? c.seeds[r] : c.seeds[0];
      uint32_t tag = nt_row_tag(c.seeds_per_row, static_cast<uint32_t>(r));
      float best = 0;
      for (int64_t i = 0; i < chain.kept; ++i) {
        int32_t t = chain.order[i].second;
        float g = nt_token_gumbel(seed, c.offset, tag, static_cast<uint32_t>(t));
        float score = nt_perturbed_score(chain.order[i].first, g, chain.pos_inf);
        if (token < 0 || score > best || (score == best && t < token)) {
          best = score;
          token = t;
        }
      }
    }
    ref.tokens.push_back(token);
    ref.decided.push_back(decided);
  }
  return ref;
}

std::vector<double> reference_dense_scores(const DenseCase& c) {
  std::vector<double> s(static_cast<size_t>(c.m * c.v));
  for (int64_t r = 0; r < c.m; ++r)
    for (int64_t v = 0; v < c.v; ++v) {
      double acc = 0;
      for (int64_t j = 0; j < c.h; ++j)
        acc += static_cast<double>(widen(c.hidden.data(), c.dtype, r * c.h + j)) *
               widen(c.weight.data(), c.dtype, v * c.h + j);
      if (c.bias_type != kNoTensor) acc += widen(c.bias.data(), c.bias_type, v);
      s[r * c.v + v] = acc;
    }
  return s;
}

std::vector<double> reference_binary_scores(const BinaryCase& c) {
  int64_t groups = c.h / c.g;
  std::vector<double> s(static_cast<size_t>(c.m * c.v));
  for (int64_t r = 0; r < c.m; ++r)
    for (int64_t v = 0; v < c.v; ++v) {
      double acc = 0;
      for (int64_t g = 0; g < groups; ++g) {
        int32_t d = 0;
        for (int64_t j = g * c.g; j < (g + 1) * c.g; ++j) {
          bool plus = (static_cast<uint32_t>(c.wq[(v * c.h + j) / 32]) >> (j % 32)) & 1u;
          d += plus ? c.act_q[r * c.h + j] : -c.act_q[r * c.h + j];
        }
        acc += static_cast<double>(nt_f16_to_f32(c.wscale[v * groups + g])) * d;
      }
      acc *= c.act_scale[r];
      if (c.bias_type != kNoTensor) acc += widen(c.bias.data(), c.bias_type, v);
      s[r * c.v + v] = acc;
    }
  return s;
}

namespace {

// The first k+1 entries of a row in (score desc, index asc) order, and the
// tolerance that separates "clearly ordered" from "a rounding may swap them".
struct RankedRow {
  std::vector<int32_t> order;
  double tol = 0;
};

RankedRow rank_row(const double* s, int64_t v, int32_t k, double rel_tol) {
  RankedRow rr;
  rr.order.resize(static_cast<size_t>(v));
  std::iota(rr.order.begin(), rr.order.end(), 0);
  int64_t n = std::min<int64_t>(v, k + 1);
  std::partial_sort(rr.order.begin(), rr.order.begin() + n, rr.order.end(),
                    [s](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
  rr.order.resize(static_cast<size_t>(n));
  double biggest = 0;
  for (int64_t i = 0; i < v; ++i) biggest = std::max(biggest, std::fabs(s[i]));
  rr.tol = rel_tol * std::max(biggest, 1e-30);
  return rr;
}

// Position i of the top-k is decided when its score is apart from both neighbours.
bool separated(const double* s, const RankedRow& rr, int32_t i) {
  double x = s[rr.order[i]];
  if (i > 0 && std::fabs(s[rr.order[i - 1]] - x) <= rr.tol) return false;
  if (i + 1 < static_cast<int32_t>(rr.order.size()) && std::fabs(s[rr.order[i + 1]] - x) <= rr.tol)
    return false;
  return true;
}

std::string where(int64_t r, int32_t i) { return "row " + std::to_string(r) + " position " + std::to_string(i); }

}  // namespace

std::string compare_topk(const std::vector<double>& scores, int64_t m, int64_t v, int32_t k,
                         const TopK& got, double tol) {
  for (int64_t r = 0; r < m; ++r) {
    const double* s = scores.data() + r * v;
    RankedRow rr = rank_row(s, v, k, tol);
    for (int32_t i = 0; i < k; ++i) {
      int64_t idx = got.indices[r * k + i];
      float val = got.values[r * k + i];
      if (idx < 0 || idx >= v) return where(r, i) + ": index " + std::to_string(idx) + " out of range";
      if (std::fabs(val - s[idx]) > rr.tol)
        return where(r, i) + ": value " + std::to_string(val) + " but the score of token " +
               std::to_string(idx) + " is " + std::to_string(s[idx]);
      if (separated(s, rr, i) && idx != rr.order[i])
        return where(r, i) + ": index " + std::to_string(idx) + ", expected " + std::to_string(rr.order[i]);
    }
  }
  return "";
}

std::string compare_topk_pair(const std::vector<double>& scores, int64_t m, int64_t v, int32_t k,
                              const TopK& a, const TopK& b, double tol) {
  for (int64_t r = 0; r < m; ++r) {
    const double* s = scores.data() + r * v;
    RankedRow rr = rank_row(s, v, k, tol);
    for (int32_t i = 0; i < k; ++i) {
      if (std::fabs(a.values[r * k + i] - b.values[r * k + i]) > rr.tol)
        return where(r, i) + ": values " + std::to_string(a.values[r * k + i]) + " vs " +
               std::to_string(b.values[r * k + i]);
      if (separated(s, rr, i) && a.indices[r * k + i] != b.indices[r * k + i])
        return where(r, i) + ": indices " + std::to_string(a.indices[r * k + i]) + " vs " +
               std::to_string(b.indices[r * k + i]);
    }
  }
  return "";
}

std::vector<int32_t> reference_pack(const PackCase& c) {
  std::vector<uint32_t> out(static_cast<size_t>(c.v * c.h / 32), 0);
  for (int64_t v = 0; v < c.v; ++v)
    for (int64_t j = 0; j < c.h; ++j)
      if (c.signs[v * c.h + j] > 0) out[(v * c.h + j) / 32] |= 1u << (j % 32);
  return std::vector<int32_t>(out.begin(), out.end());
}

Quantized reference_quantize(const QuantizeCase& c) {
  Quantized out;
  out.q.resize(static_cast<size_t>(c.m * c.h));
  for (int64_t r = 0; r < c.m; ++r) {
    float biggest = 0;
    for (int64_t j = 0; j < c.h; ++j) {
      float x = widen(c.x.data(), c.dtype, r * c.h + j);
      if (x == x) biggest = std::max(biggest, std::fabs(x));
    }
    float scale = biggest == 0 ? 1.0f : biggest / 127.0f;
    out.scale.push_back(scale);
    for (int64_t j = 0; j < c.h; ++j) {
      float x = widen(c.x.data(), c.dtype, r * c.h + j);
      float q = x == x ? std::nearbyint(x / scale) : 0.0f;  // default rounding: half to even
      out.q[r * c.h + j] = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
    }
  }
  return out;
}
