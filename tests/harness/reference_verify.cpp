// The reference of speculative verification, from docs/SEMANTICS.md: each
// target row's keep-set and probabilities come from reference_sample_row (a
// full sort, fp64 softmax), acceptance is u * q < p(x) in fp64, residuals
// max(p - q, 0) in fp64. Only the core's Philox, uniform mapping and Gumbel
// noise are reused (their bits are the contract). Decisions within
// kDegenerateMargin of their boundary make the request degenerate: backends
// compute exact fixed-point masses from fp32 exps and may round the other way.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/sampling.h"  // Philox, uniform mapping, Gumbel noise
#include "harness/verify_ops.h"

namespace ntt {
namespace {

// One target row as the rules see it.
struct RefRow {
  bool greedy = false, empty = false, inf_row = false;
  int64_t argmax = -1;
  std::vector<float> s;      // scores x / T (fp32, NaN -> -inf)
  std::vector<double> p;     // normalized target probabilities, 0 outside S
  std::vector<int64_t> keep; // S in vocabulary order
  bool degenerate = false;
  std::string why;
};

RefRow reference_row(const VerifyCase& c, int64_t row, const RowSampleParams& prm) {
  std::vector<float> x(size_t(c.vocab));
  for (int64_t i = 0; i < c.vocab; ++i) x[size_t(i)] = round_to(c.dtype, c.logits[size_t(row * c.vocab + i)]);
  const SampleReference ref = reference_sample_row(x.data(), c.vocab, prm);
  RefRow r;
  r.greedy = ref.greedy;
  r.degenerate = ref.degenerate;
  r.why = ref.why_degenerate;
  if (ref.keep.empty()) {
    r.empty = true;
    return r;
  }
  r.argmax = ref.greedy ? ref.token : -1;
  r.s.resize(size_t(c.vocab));
  for (int64_t i = 0; i < c.vocab; ++i) {
    const float s = r.greedy ? x[size_t(i)] : x[size_t(i)] / prm.temperature;
    r.s[size_t(i)] = std::isnan(s) ? -INFINITY : s;
    if (!r.greedy && s == INFINITY) r.inf_row = true;
  }
  r.p.assign(size_t(c.vocab), 0.0);
  double z = 0;
  for (size_t j = 0; j < ref.keep.size(); ++j) z += ref.weight[j];  // keep is a prefix of order
  for (size_t j = 0; j < ref.keep.size(); ++j) r.p[size_t(ref.keep[j])] = ref.weight[j] / z;
  r.keep = ref.keep_by_index;
  return r;
}

void degenerate(VerifyReference& out, const std::string& why) {
  if (!out.degenerate) out.why = why;
  out.degenerate = true;
}

// u * q against p(x) (both normalized), with its margin.
bool accepts(VerifyReference& out, double u, double q, double px, const char* what) {
  const double lhs = u * q;
  if (px > 0 && std::fabs(lhs - px) <= kDegenerateMargin * std::max(lhs, px))
    degenerate(out, std::string(what) + ": u * q within the margin of p(x)");
  return lhs < px;
}

float gumbel(const RowSampleParams& prm, uint32_t tag, int64_t i) {
  return nt_gumbel_from_uniform(nt_token_uniform(prm.seed, prm.offset, tag, uint32_t(i)));
}

// Gumbel-max from p over S without `excluded` (fp32 sums, exact): -1 if empty.
int64_t draw_from_p(const RefRow& r, const RowSampleParams& prm, uint32_t tag,
                    const std::vector<int64_t>& excluded) {
  int64_t best = -1;
  float best_v = 0;
  for (int64_t i : r.keep) {
    if (std::find(excluded.begin(), excluded.end(), i) != excluded.end()) continue;
    const float v = (r.inf_row ? 0.0f : r.s[size_t(i)]) + gumbel(prm, tag, i);
    if (best < 0 || v > best_v) {
      best = i;
      best_v = v;
    }
  }
  return best;
}

// Gumbel-max over max(p - q, 0) in fp64 (log r + G); -1 if the residual is empty.
int64_t draw_residual(VerifyReference& out, const RefRow& r, const RowSampleParams& prm,
                      uint32_t tag, const float* q) {
  struct Cand { int64_t i; double key, lo, hi; };
  std::vector<Cand> cands;
  for (int64_t i : r.keep) {
    const double qi = q[i] > 0 ? double(q[i]) : 0.0;  // NaN, negative: 0
    const double pi = r.p[size_t(i)];
    const double g = gumbel(prm, tag, i);
    const double res = pi - qi, lo = pi * (1 - kDegenerateMargin) - qi, hi = pi * (1 + kDegenerateMargin) - qi;
    cands.push_back({i, res > 0 ? std::log(res) + g : -INFINITY,
                     lo > 0 ? std::log(lo) + g - 1e-5 : -INFINITY,
                     hi > 0 ? std::log(hi) + g + 1e-5 : -INFINITY});
  }
  int64_t best = -1;
  size_t at = 0;
  for (size_t j = 0; j < cands.size(); ++j)
    if (cands[j].key > -INFINITY && (best < 0 || cands[j].key > cands[at].key)) {
      best = cands[j].i;
      at = j;
    }
  if (best < 0) {
    for (const Cand& c : cands)
      if (c.hi > -INFINITY) degenerate(out, "residual: a mass within the margin of q");
    return -1;
  }
  for (size_t j = 0; j < cands.size(); ++j)
    if (j != at && cands[j].hi >= cands[at].lo)
      degenerate(out, "residual: two Gumbel keys within the margin");
  return best;
}

}  // namespace

uint32_t reference_verify_tag(bool seeds_per_request, int64_t request, int64_t position) {
  return 0x80000000u | (uint32_t(seeds_per_request ? 0 : request) << 12) | uint32_t(position);
}

double reference_accept_uniform(uint64_t seed, uint64_t offset, uint32_t tag, uint32_t k) {
  const nt_philox_block b = nt_philox4x32_10(0xFFFFFFFFu - (k >> 2), tag, uint32_t(offset),
                                             uint32_t(offset >> 32), uint32_t(seed),
                                             uint32_t(seed >> 32));
  return (double(b.v[k & 3] >> 9) + 0.5) / 8388608.0;
}

VerifyReference reference_verify(const VerifyCase& c, int64_t b) {
  VerifyReference out;
  const RowSampleParams prm = c.request_params(b);
  const bool per_request = c.seed.per_row;
  auto row_of = [&](int64_t row) {
    RefRow r = reference_row(c, row, prm);
    if (r.degenerate) degenerate(out, "keep-set: " + r.why);
    return r;
  };
  auto emit = [&](int64_t token, int64_t node) {
    out.tokens.push_back(int32_t(token));
    out.nodes.push_back(int32_t(node));
  };
  if (!c.tree) {
    const int64_t td = int64_t(c.draft_ids.size());
    const int64_t lo = std::clamp<int64_t>(c.cu[size_t(b)], 0, td);
    const int64_t n = std::clamp<int64_t>(int64_t(c.cu[size_t(b) + 1]) - lo, 0,
                                          std::min(td - lo, c.width - 1));
    for (int64_t j = 0; j <= n; ++j) {
      const uint32_t tag = reference_verify_tag(per_request, b, j);
      const RefRow r = row_of(lo + b + j);
      if (r.empty) break;
      if (r.greedy) {
        emit(r.argmax, -1);
        if (j < n && c.draft_ids[size_t(lo + j)] == r.argmax) continue;
        break;
      }
      if (j == n) {
        emit(draw_from_p(r, prm, tag, {}), -1);
        break;
      }
      const int64_t x = c.draft_ids[size_t(lo + j)];
      const bool in_vocab = x >= 0 && x < c.vocab;
      const float* q = c.draft_probs.empty() ? nullptr : &c.draft_probs[size_t((lo + j) * c.vocab)];
      const double qx = q ? (in_vocab && q[x] > 0 ? double(q[x]) : 0.0) : 1.0;
      const double px = in_vocab ? r.p[size_t(x)] : 0.0;
      const double u = reference_accept_uniform(prm.seed, prm.offset, tag, 0);
      if (accepts(out, u, qx, px, "chain")) {
        emit(x, -1);
        continue;
      }
      int64_t t = q ? draw_residual(out, r, prm, tag, q) : draw_from_p(r, prm, tag, {x});
      if (t < 0) t = draw_from_p(r, prm, tag, {});
      emit(t, -1);
      break;
    }
    return out;
  }
  const int64_t D = c.nodes;
  auto at = [&](const std::vector<int64_t>& v, int64_t d) { return v[size_t(b * D + d)]; };
  auto valid = [&](int64_t v) { return v >= 1 && v < D ? v : int64_t(-1); };
  int64_t node = 0;
  for (;;) {
    const uint32_t tag = reference_verify_tag(per_request, b, node);
    const RefRow r = row_of(b * D + node);
    if (r.empty) break;
    if (int64_t(out.tokens.size()) == c.width - 1) {
      emit(r.greedy ? r.argmax : draw_from_p(r, prm, tag, {}), -1);
      break;
    }
    std::vector<int64_t> tried;
    double rejected = 0;  // probability of the distinct rejected siblings
    int64_t accepted = -1, child = valid(at(c.next_token, node));
    for (int64_t k = 0; child >= 0 && k < D; ++k, child = valid(at(c.next_sibling, child))) {
      const int64_t x = at(c.candidates, child);
      if (r.greedy) {
        if (x == r.argmax) {
          accepted = child;
          break;
        }
        continue;
      }
      const bool repeated = std::find(tried.begin(), tried.end(), x) != tried.end();
      const double px = (repeated || x < 0 || x >= c.vocab) ? 0.0 : r.p[size_t(x)];
      const double u = reference_accept_uniform(prm.seed, prm.offset, tag, uint32_t(k));
      // u < p(x) / (1 - rejected), written as u * (1 - rejected) < p(x)
      if (accepts(out, u, 1.0 - rejected, px, "tree")) {
        accepted = child;
        break;
      }
      if (!repeated) {
        tried.push_back(x);
        rejected += px;
      }
    }
    if (accepted >= 0) {
      emit(at(c.candidates, accepted), accepted);
      node = accepted;
      continue;
    }
    int64_t t = r.greedy ? r.argmax : draw_from_p(r, prm, tag, tried);
    if (t < 0) t = draw_from_p(r, prm, tag, {});
    emit(t, -1);
    break;
  }
  return out;
}

}  // namespace ntt
