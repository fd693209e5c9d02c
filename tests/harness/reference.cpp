#include "harness/reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "core/sampling.h"  // Philox + portable log only: nt_token_gumbel

namespace ntt {
namespace {

bool is_nan(float x) { return x != x; }

SampleReference greedy_reference(const float* x, int64_t vocab) {
  SampleReference r;
  r.greedy = true;
  for (int64_t i = 0; i < vocab; ++i) {
    if (is_nan(x[i]) || x[i] == -INFINITY) continue;
    if (r.token < 0 || x[i] > x[r.token]) r.token = i;
  }
  if (r.token >= 0) {
    r.order = {r.token};
    r.weight = {1.0};
    r.keep = {r.token};
    r.keep_by_index = {r.token};
    r.cdf = {1.0};
  }
  return r;
}

void mark_degenerate(SampleReference& r, const std::string& why) {
  if (!r.degenerate) r.why_degenerate = why;
  r.degenerate = true;
}

// The keep-set draws: explicit inverse CDF in vocabulary order, or Gumbel-max.
void draw(SampleReference& r, const std::vector<float>& s, const std::vector<double>& p,
          bool pos_inf_row, const RowSampleParams& prm) {
  r.keep_by_index = r.keep;
  std::sort(r.keep_by_index.begin(), r.keep_by_index.end());
  double mass = 0;
  std::vector<double> running;
  for (int64_t i : r.keep_by_index) running.push_back(mass += p[size_t(i)]);
  for (double c : running) r.cdf.push_back(c / mass);

  if (prm.has_uniform) {
    float u = prm.uniform;
    if (is_nan(u) || u < 0) u = 0;
    if (u >= 1) {
      r.token = r.keep_by_index.back();
      return;
    }
    const double target = double(u) * mass;
    r.token = r.keep_by_index.back();
    // u = 0 picks the first member whatever the precision, unless its mass
    // underflows in fp32; otherwise no cumulative mass may sit near u * mass.
    if (target == 0) {
      if (p[size_t(r.keep_by_index[0])] < 1e-30)
        mark_degenerate(r, "explicit draw: u = 0 and the first member's mass underflows fp32");
    } else {
      for (size_t j = 0; j < running.size(); ++j)
        if (std::fabs(running[j] - target) <= kDegenerateMargin * mass)
          mark_degenerate(r, "explicit draw: cumulative mass within the margin of u * mass");
    }
    for (size_t j = 0; j < running.size(); ++j)
      if (running[j] > target) {
        r.token = r.keep_by_index[j];
        break;
      }
    return;
  }
  float best = 0;
  r.token = -1;
  for (int64_t i : r.keep_by_index) {  // vocabulary order: '>' keeps the lower index on ties
    const float g = nt_token_gumbel(prm.seed, prm.offset, prm.row_tag, uint32_t(i));
    const float score = (pos_inf_row ? 0.0f : s[size_t(i)]) + g;
    if (r.token < 0 || score > best) {
      best = score;
      r.token = i;
    }
  }
}

}  // namespace

std::string describe(const RowSampleParams& p) {
  std::ostringstream s;
  s << "T=" << p.temperature << " top_k=" << p.top_k << " top_p=" << p.top_p
    << " min_p=" << p.min_p << " seed=" << p.seed << " offset=" << p.offset
    << " row_tag=" << p.row_tag << (p.joint ? " joint" : "");
  if (p.has_uniform) s << " u=" << p.uniform;
  return s.str();
}

SampleReference reference_sample_row(const float* x, int64_t vocab, const RowSampleParams& prm) {
  // Parameter meanings (SEMANTICS.md table), written out independently of the core.
  const float t = prm.temperature;
  if (!(t > 0) || prm.top_k == 1 || vocab == 1) return greedy_reference(x, vocab);
  const bool top_k_on = prm.top_k > 0 && prm.top_k < vocab;
  const bool top_p_on = prm.top_p < 1.0f;  // NaN compares false: off
  const double top_p = prm.top_p > 0 ? double(prm.top_p) : 0.0;
  const bool min_p_on = prm.min_p > 0;     // NaN compares false: off
  const double min_p = std::min(double(prm.min_p), 1.0);

  SampleReference r;
  std::vector<float> s(static_cast<size_t>(vocab));
  bool pos_inf_row = false;
  for (int64_t i = 0; i < vocab; ++i) {
    s[size_t(i)] = x[i] / t;
    if (is_nan(s[size_t(i)])) s[size_t(i)] = -INFINITY;
    if (s[size_t(i)] == INFINITY) pos_inf_row = true;
  }
  std::vector<double> p(size_t(vocab), 0.0);

  if (pos_inf_row) {  // S = the +inf tokens, drawn uniformly
    for (int64_t i = 0; i < vocab; ++i)
      if (s[size_t(i)] == INFINITY) {
        r.keep.push_back(i);
        p[size_t(i)] = 1.0;
      }
    r.order = r.keep;
    r.weight.assign(r.keep.size(), 1.0);
    draw(r, s, p, true, prm);
    return r;
  }

  std::vector<int64_t> order;
  for (int64_t i = 0; i < vocab; ++i)
    if (s[size_t(i)] != -INFINITY) order.push_back(i);
  if (order.empty()) return r;  // token -1
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return s[size_t(a)] > s[size_t(b)]; });
  const size_t n_fin = order.size();
  const double s_max = s[size_t(order[0])];
  for (int64_t i : order) p[size_t(i)] = std::exp(double(s[size_t(i)]) - s_max);

  const size_t n_k = top_k_on ? std::min(size_t(prm.top_k), n_fin) : n_fin;
  size_t n_p = n_k;
  if (top_p_on) {
    double z = 0;
    const size_t z_count = prm.joint ? n_fin : n_k;
    for (size_t j = 0; j < z_count; ++j) z += p[size_t(order[j])];
    if (top_p == 0) {
      n_p = 1;
    } else {
      const double target = top_p * z;
      double prefix = 0, before = 0;
      n_p = z_count;
      for (size_t j = 0; j < z_count; ++j) {
        before = prefix;
        prefix += p[size_t(order[j])];
        if (prefix >= target) {
          n_p = j + 1;
          break;
        }
      }
      if (prefix - target <= kDegenerateMargin * z ||
          (n_p > 1 && target - before <= kDegenerateMargin * z))
        mark_degenerate(r, "top-p: a prefix mass within the margin of top_p * Z");
    }
  }
  size_t n_m = n_fin;
  if (min_p_on) {
    n_m = 0;
    for (int64_t i : order) {
      if (p[size_t(i)] >= min_p) ++n_m;
      // p = 1 (the top score's ties) is exact on every backend: exp(0).
      if (p[size_t(i)] != 1.0 && std::fabs(p[size_t(i)] - min_p) <= kDegenerateMargin * min_p)
        mark_degenerate(r, "min-p: a probability within the margin of min_p");
    }
  }
  r.n_top_k = n_k;
  r.n_top_p = n_p;
  r.n_min_p = n_m;
  for (int64_t i : order) r.weight.push_back(p[size_t(i)]);
  const size_t keep = std::min({n_k, n_p, n_m});
  r.keep.assign(order.begin(), order.begin() + long(keep));
  r.order = std::move(order);
  draw(r, s, p, false, prm);
  return r;
}

std::vector<int64_t> reference_topk(const double* values, int64_t n, int64_t k) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int64_t i) { return std::isnan(values[i]) ? -INFINITY : values[i]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return key(a) > key(b); });
  order.resize(size_t(k));
  return order;
}

std::string compare_topk_row(const double* logits, int64_t vocab, int64_t k, const float* values,
                             const int64_t* indices, double tol) {
  // One extra entry: the first reference value outside the top-k bounds the last gap.
  const std::vector<int64_t> ref = reference_topk(logits, vocab, std::min(vocab, k + 1));
  auto ref_value = [&](size_t j) {
    if (j >= ref.size()) return double(-INFINITY);
    const double v = logits[ref[j]];
    return std::isnan(v) ? -INFINITY : v;
  };
  double row_max = 0;
  for (int64_t i = 0; i < vocab; ++i)
    if (std::isfinite(logits[i])) row_max = std::max(row_max, std::fabs(logits[i]));
  const double abs_tol = tol * row_max;
  std::ostringstream err;
  for (int64_t j = 0; j < k; ++j) {
    const size_t uj = size_t(j);
    const int64_t got = indices[j];
    const double want_value = logits[ref[uj]];
    if (got < 0 || got >= vocab) {
      err << "position " << j << ": index " << got << " out of [0, " << vocab << ")";
      return err.str();
    }
    if (std::isnan(want_value) || std::isnan(logits[got])) {  // NaN scores come last, as NaN
      if (got != ref[uj] || !std::isnan(values[j])) {
        err << "position " << j << ": expected the NaN score of index " << ref[uj]
            << ", got index " << got << " value " << values[j];
        return err.str();
      }
      continue;
    }
    const bool value_ok = tol == 0 ? double(values[j]) == want_value
                                   : std::fabs(double(values[j]) - want_value) <= abs_tol &&
                                         std::fabs(double(values[j]) - logits[got]) <= abs_tol;
    bool index_must_match = true;
    if (tol > 0) {
      const double gap = 2 * abs_tol;
      index_must_match = (j == 0 || ref_value(uj - 1) - want_value > gap) &&
                         want_value - ref_value(uj + 1) > gap;
    }
    if (!value_ok || (index_must_match && got != ref[uj])) {
      err << "position " << j << ": expected index " << ref[uj] << " value " << want_value
          << ", got index " << got << " value " << values[j] << " (its reference logit "
          << logits[got] << ", tolerance " << abs_tol << ")";
      return err.str();
    }
    if (j > 0 && (values[j] > values[j - 1] ||
                  (values[j] == values[j - 1] && indices[j] < indices[j - 1]))) {
      err << "position " << j << ": not in (value desc, index asc) order after position "
          << j - 1;
      return err.str();
    }
  }
  std::vector<int64_t> sorted(indices, indices + k);
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return "duplicate indices";
  return "";
}

std::vector<int32_t> reference_pack(const std::vector<int8_t>& signs, int64_t rows, int64_t cols) {
  const int64_t words = cols / 32;
  std::vector<int32_t> wq(size_t(rows * words));
  for (int64_t w = 0; w < rows * words; ++w) {
    const int8_t* s = &signs[size_t(w * 32)];  // word w % words of row w / words
    uint32_t bits = 0;
    for (int j = 0; j < 32; ++j) bits |= uint32_t(s[j] > 0) << j;
    wq[size_t(w)] = int32_t(bits);
  }
  return wq;
}

void reference_quantize_row(const float* x, int64_t n, int8_t* q, float* scale) {
  float max_abs = 0;
  for (int64_t j = 0; j < n; ++j)
    if (!is_nan(x[j])) max_abs = std::max(max_abs, std::fabs(x[j]));
  if (max_abs == 0) {
    *scale = 1.0f;
    for (int64_t j = 0; j < n; ++j) q[j] = 0;
    return;
  }
  *scale = max_abs / 127.0f;
  for (int64_t j = 0; j < n; ++j) {
    if (is_nan(x[j])) {
      q[j] = 0;
      continue;
    }
    const float r = std::nearbyint(x[j] / *scale);  // default rounding: half to even
    // A NaN quotient (inf / inf in a row holding +-inf, whose scale is inf) gives 0.
    q[j] = is_nan(r) ? int8_t(0) : int8_t(std::min(127.0f, std::max(-127.0f, r)));
  }
}

}  // namespace ntt
