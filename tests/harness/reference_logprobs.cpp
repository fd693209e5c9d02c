// Reference of nt_sample_logprobs, written from docs/SEMANTICS.md ("Logprobs"):
// a full sort for the listed ids, fp64 log-softmax, the keep-set of the
// sampling reference (reference_sample_row) for processed values.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "harness/reference.h"

namespace ntt {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A logit as the order sees it: NaN as -inf (and -0 == +0 as doubles compare).
double ordered(float x) { return std::isnan(x) ? -kInf : double(x); }

// log_softmax over the values v (-inf: no mass); +inf values share the mass.
std::vector<double> log_softmax(const std::vector<double>& v) {
  std::vector<double> out(v.size(), -kInf);
  const int64_t n_inf = std::count(v.begin(), v.end(), kInf);
  if (n_inf > 0) {
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i] == kInf) out[i] = -std::log(double(n_inf));
    return out;
  }
  const double m = *std::max_element(v.begin(), v.end());
  if (m == -kInf) return out;
  double z = 0.0;
  for (double x : v)
    if (x != -kInf) z += std::exp(x - m);
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != -kInf) out[i] = (v[i] - m) - std::log(z);
  return out;
}

}  // namespace

bool logprob_close(float got, double ref) {
  if (std::isinf(ref) || std::isnan(ref)) return double(got) == ref;
  return std::isfinite(got) &&
         std::fabs(double(got) - ref) <= kLogprobAbsTol + kLogprobRelTol * std::fabs(ref);
}

LogprobsReference reference_logprobs_row(const float* x, int64_t vocab, const RowSampleParams& p,
                                         const SampleReference& sample, int n, bool processed) {
  LogprobsReference r;
  std::vector<int64_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return ordered(x[a]) > ordered(x[b]); });
  r.ids.assign(size_t(n) + 1, -1);
  for (int c = 0; c < n && c < vocab; ++c) r.ids[size_t(c) + 1] = order[size_t(c)];
  r.values.assign(size_t(n) + 1, -kInf);
  const int64_t token = sample.token;
  if (token < 0) return r;  // rank 0, every value -inf
  r.ids[0] = token;

  // The values log-probabilities are taken of: the logits (raw), or the scores
  // of the keep-set's members (processed; 0 for a greedy row's token alone).
  std::vector<double> v(static_cast<size_t>(vocab), -kInf);
  if (!processed) {
    for (int64_t i = 0; i < vocab; ++i) v[size_t(i)] = ordered(x[i]);
  } else if (sample.greedy) {
    v[size_t(token)] = 0.0;
  } else {
    for (int64_t i : sample.keep) {
      const float s = x[i] / p.temperature;  // fp32 IEEE division, as SEMANTICS.md defines s
      v[size_t(i)] = double(s);
    }
  }
  const std::vector<double> lp = log_softmax(v);
  for (int c = 0; c <= n; ++c)
    if (r.ids[size_t(c)] >= 0) r.values[size_t(c)] = lp[size_t(r.ids[size_t(c)])];
  for (int64_t i = 0; i < vocab; ++i)
    if (v[size_t(i)] != -kInf && v[size_t(i)] >= v[size_t(token)]) ++r.rank;
  return r;
}

}  // namespace ntt
