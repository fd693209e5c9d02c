// The combine of vocabulary-parallel summaries (nt_lm_head_sample_combine):
// every shard's summary of a row (cpu/lm_head_summary.h) in, the row's token
// out, computed on the host by the same code on every rank, so every rank gets
// the same token.
//
// Per row, with the parameters resolved for the whole vocabulary:
//   greedy: the largest x key over the shards, lowest id;
//   no finite score: -1; a +inf score: the best +inf draw (uniform among them);
//   plain: the best s + G over the shards (noise keyed by the global id);
//   filtered: the shards' candidates merged in the order (s desc, id asc).
//     The merge is the global order up to the first place where a shard that
//     listed fewer than its finite tokens could hide one (after its last
//     candidate): its exact prefix. The keep-set is the prefix of length
//     min(n_k, n_p, n_m) (docs/SEMANTICS.md); each length is found inside the
//     exact prefix or known to lie beyond it, and when every one lies beyond,
//     the row is NT_TOKEN_NEEDS_ALL_CANDIDATES. The draw is Gumbel-max over the
//     keep-set.
// Top-p's mass Z over every finite token is sum_r Z_r * exp(s_max_r - s_max)
// in double (each Z_r relative to its shard's own maximum); over a top-k set it
// is the sum of the set's probabilities in id order, as the CPU sampler forms it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend.h"
#include "core/check.h"
#include "core/portable_exp.h"
#include "core/sampling.h"
#include "cpu/lm_head_summary.h"
#include "cpu/row_io.h"

namespace nt {
namespace {

using cpu::row_param;
using namespace cpu::summary;

struct Entry {
  uint32_t key;  // of s
  int32_t id;
  float s;
};

bool before(const Entry& a, const Entry& b) { return nt_ranks_before(a.key, a.id, b.key, b.id); }

// The smallest score key whose probability exp(s - s_max) reaches min_p: the
// CPU sampler's bisection (cpu/sample_row.cpp minp_key).
uint32_t minp_key(uint32_t s_max_key, float s_max, float min_p) {
  uint32_t lo = NT_KEY_FIRST_FINITE, up = s_max_key;
  while (lo < up) {
    const uint32_t mid = lo + (up - lo) / 2;
    if (nt_portable_exp(nt_key_to_float(mid) - s_max) >= min_p) up = mid; else lo = mid + 1;
  }
  return lo;
}

constexpr int64_t kBeyond = INT64_MAX;  // a prefix length past the exact prefix

int64_t combine_row(const int64_t* const* rows, int shards, nt_row_params p, bool joint,
                    uint64_t seed, uint64_t offset, uint32_t tag, std::vector<Entry>& merged) {
  const int row_class = nt_row_class(p, 0);
  if (row_class == NT_ROW_GREEDY) {
    uint32_t key = NT_KEY_NEG_INF;
    int32_t best = kNoId;
    for (int r = 0; r < shards; ++r) {
      const int32_t i = id(rows[r][kGreedy]);
      if (i == kNoId) continue;
      const uint32_t k = low(rows[r][kGreedy]);
      if (best == kNoId || nt_ranks_before(k, i, key, best)) { key = k; best = i; }
    }
    return best == kNoId || key == NT_KEY_NEG_INF ? -1 : best;
  }

  uint32_t s_max_key = NT_KEY_NEG_INF;
  for (int r = 0; r < shards; ++r) s_max_key = std::max(s_max_key, low(rows[r][kSMax]));
  if (s_max_key == NT_KEY_NEG_INF) return -1;
  if (s_max_key == NT_KEY_POS_INF || row_class == NT_ROW_PLAIN) {
    const int word = s_max_key == NT_KEY_POS_INF ? kPosInf : kPlain;
    Best b{0.0f, kNoId};
    for (int r = 0; r < shards; ++r)
      if (id(rows[r][word]) != kNoId) b.offer(nt_as_f32(low(rows[r][word])), id(rows[r][word]));
    return b.id == kNoId ? -1 : b.id;
  }

  // Filtered: merge the candidates; find the exact prefix.
  const float t = p.temperature, s_max = nt_key_to_float(s_max_key);
  merged.clear();
  int64_t n_total = 0;
  bool any_short = false;
  Entry limit{0u, 0, 0.0f};  // the earliest last candidate of a shard that listed fewer than its tokens
  for (int r = 0; r < shards; ++r) {
    const int64_t* w = rows[r];
    const int64_t n = w[kCandidates];
    n_total += w[kFinite];
    for (int64_t c = 0; c < n; ++c) {
      const int64_t word = w[NT_LM_HEAD_SUMMARY_WORDS + c];
      const float s = nt_scaled_score(nt_as_f32(low(word)), t);
      merged.push_back(Entry{nt_order_key(s), id(word), s});
    }
    if (n < w[kFinite]) {
      const Entry last = merged.back();  // n >= 1 whenever the shard has a finite token
      if (!any_short || before(last, limit)) limit = last;
      any_short = true;
    }
  }
  std::sort(merged.begin(), merged.end(), before);
  int64_t exact = int64_t(merged.size());
  if (any_short) {
    exact = 0;
    while (exact < int64_t(merged.size()) && !before(limit, merged[size_t(exact)])) ++exact;
  }
  // A prefix length known from the first `exact` entries, or kBeyond.
  auto known = [&](int64_t n) { return n <= exact ? n : kBeyond; };

  const int64_t n_k = known(p.top_k > 0 ? std::min<int64_t>(p.top_k, n_total) : n_total);
  int64_t len = n_k;
  if (p.min_p > 0.0f) {
    const uint32_t threshold = minp_key(s_max_key, s_max, p.min_p);
    int64_t n_m = 0;
    while (n_m < exact && merged[size_t(n_m)].key >= threshold) ++n_m;
    len = std::min(len, n_m < exact || exact == n_total ? n_m : kBeyond);
  }
  if (p.top_p < 1.0f) {
    int64_t n_p = kBeyond;
    if (p.top_p <= 0.0f) {
      n_p = 1;
    } else {
      double z = 0.0;
      bool z_known = true;
      if (p.top_k > 0 && !joint) {
        if (n_k == kBeyond) {
          z_known = false;
        } else {  // the top-k set's mass, summed in id order
          std::vector<Entry> set(merged.begin(), merged.begin() + n_k);
          std::sort(set.begin(), set.end(), [](const Entry& a, const Entry& b) { return a.id < b.id; });
          for (const Entry& e : set) z += double(nt_portable_exp(e.s - s_max));
        }
      } else {
        for (int r = 0; r < shards; ++r) {
          const uint32_t k = low(rows[r][kSMax]);
          if (rows[r][kFinite] == 0 || k == NT_KEY_NEG_INF) continue;
          z += word_double(rows[r][kMass]) * std::exp(double(nt_key_to_float(k)) - double(s_max));
        }
      }
      if (z_known) {
        const double target = double(p.top_p) * z;
        const int64_t reach = std::min(exact, n_k == kBeyond ? exact : n_k);
        double mass = 0.0;
        for (int64_t i = 0; i < reach; ++i) {
          mass += double(nt_portable_exp(merged[size_t(i)].s - s_max));
          if (mass >= target) { n_p = i + 1; break; }
        }
        // Short of the target through rounding over the whole set: all of it.
        if (n_p == kBeyond && reach == (n_k == kBeyond ? n_total : n_k)) n_p = reach;
      }
    }
    len = std::min(len, n_p);
  }
  if (len == kBeyond) return NT_TOKEN_NEEDS_ALL_CANDIDATES;

  // The first entry scores s_max: it draws first, and scores that cannot beat
  // it even with the largest noise skip theirs.
  Best b{-INFINITY, kNoId};
  for (int64_t i = 0; i < len; ++i) {
    const Entry& e = merged[size_t(i)];
    if (b.id != kNoId && e.s + NT_GUMBEL_MAX < b.value) continue;
    b.offer(e.s + nt_token_gumbel(seed, offset, tag, uint32_t(e.id)), e.id);
  }
  return b.id == kNoId ? -1 : b.id;
}

}  // namespace

void lm_head_sample_combine(const nt_lm_head_sample_combine_args& a) {
  const int shards = a.shards;
  const int64_t rows = a.summaries.shape[0] / shards;
  const nt_lm_head_sampling& s = a.sampling;
  const bool seeds_per_row = s.seed.per_row != nullptr;
  const bool joint = (s.flags & NT_SAMPLE_TOP_P_JOINT) != 0;
  std::vector<const int64_t*> row_words(size_t(shards), nullptr);
  std::vector<Entry> merged;
  for (int64_t m = 0; m < rows; ++m) {
    for (int r = 0; r < shards; ++r)
      row_words[size_t(r)] = reinterpret_cast<const int64_t*>(cpu::row_address(a.summaries, r * rows + m));
    const nt_row_params p = nt_resolve_row_params(row_param(s.temperature, m), row_param(s.top_k, m),
                                                  row_param(s.top_p, m), row_param(s.min_p, m),
                                                  int32_t(a.vocab_size));
    const int64_t token = combine_row(row_words.data(), shards, p, joint, row_param(s.seed, m),
                                      row_param(s.offset, m),
                                      nt_row_tag(seeds_per_row, uint32_t(a.first_row + m)), merged);
    if (a.tokens.dtype == NT_I32) static_cast<int32_t*>(a.tokens.data)[m] = int32_t(token);
    else static_cast<int64_t*>(a.tokens.data)[m] = token;
  }
}

}  // namespace nt
