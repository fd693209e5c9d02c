// The combine of vocabulary-parallel summaries (nt_lm_head_sample_combine):
// every shard's summary of a row (core/lm_head_summary.h) in, the row's token
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
//
// With a logprobs request the row's keep-set (the outcome of the above) and
// the summaries' logprobs words give cpu/sample_logprobs.cpp's values: the
// normalizer rescaled from the shards' (raw; processed plain rows) or summed
// over the merged keep-set (processed filtered rows), columns 1..n from the
// shards' first n tokens merged. A rank the summaries cannot settle becomes a
// rank key that every shard counts its scores against (lm_head_shard_ranks).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend.h"
#include "core/check.h"
#include "core/lm_head_summary.h"
#include "core/logprobs.h"
#include "core/portable_exp.h"
#include "core/sampling.h"
#include "cpu/row_io.h"
#include "cpu/sample_row.h"
#include "cpu/top_list.h"

namespace nt {
namespace {

using cpu::row_param;
using namespace summary;

struct Entry {
  uint32_t key;  // of s
  int32_t id;
  float s;
  float x;
};

bool before(const Entry& a, const Entry& b) { return nt_ranks_before(a.key, a.id, b.key, b.id); }

// The shards' masses (word mass_at of each row, fp64 bits) rescaled from each
// shard's maximum (the key in word max_at) to `max` and summed; a shard whose
// maximum is not finite (none: -inf) adds nothing.
double rescaled_mass(const int64_t* const* rows, int shards, int64_t max_at, int64_t mass_at, double max) {
  double z = 0.0;
  for (int r = 0; r < shards; ++r) {
    const float m_r = nt_key_to_float(low(rows[r][max_at]));
    if (std::isfinite(m_r)) z += word_double(rows[r][mass_at]) * std::exp(double(m_r) - max);
  }
  return z;
}

constexpr int64_t kBeyond = INT64_MAX;  // a prefix length past the exact prefix

// A row's token and what the logprobs need of it: the keep-set it was drawn
// from (core/logprobs.h; NT_KEEP_PREFIX of a filtered row: merged[0, len)),
// and the token's x with the shard that holds it (for the x of a plain or
// +inf draw, read from that shard's logprobs words).
struct Outcome {
  int64_t token = -1;
  nt_keep_set keep{NT_KEEP_EMPTY, 0.0f, 0u, 0u};
  float x = -INFINITY;  // the token's x (greedy and filtered rows)
  int word = -1;        // kPlain or kPosInf: the token's x is in shard `shard`'s words
  int shard = -1;
  int64_t len = 0;      // filtered rows: the keep-set's length in `merged`
};

Outcome combine_row(const int64_t* const* rows, int shards, nt_row_params p, bool joint,
                    uint64_t seed, uint64_t offset, uint32_t tag, std::vector<Entry>& merged) {
  const int row_class = nt_row_class(p, 0);
  Outcome o;
  o.keep.temperature = p.temperature;
  if (row_class == NT_ROW_GREEDY) {
    uint32_t key = NT_KEY_NEG_INF;
    int32_t best = kNoId;
    for (int r = 0; r < shards; ++r) {
      const int32_t i = id(rows[r][kGreedy]);
      if (i == kNoId) continue;
      const uint32_t k = low(rows[r][kGreedy]);
      if (best == kNoId || nt_ranks_before(k, i, key, best)) { key = k; best = i; }
    }
    if (best == kNoId || key == NT_KEY_NEG_INF) return o;
    o.token = best;
    o.keep.kind = NT_KEEP_ONE;
    o.x = nt_key_to_float(key);
    return o;
  }

  uint32_t s_max_key = NT_KEY_NEG_INF;
  for (int r = 0; r < shards; ++r) s_max_key = std::max(s_max_key, low(rows[r][kSMax]));
  if (s_max_key == NT_KEY_NEG_INF) return o;
  if (s_max_key == NT_KEY_POS_INF || row_class == NT_ROW_PLAIN) {
    const int word = s_max_key == NT_KEY_POS_INF ? kPosInf : kPlain;
    Best b{0.0f, kNoId};
    for (int r = 0; r < shards; ++r)
      if (id(rows[r][word]) != kNoId) {
        const int32_t before = b.id;
        b.offer(nt_as_f32(low(rows[r][word])), id(rows[r][word]));
        if (b.id != before) o.shard = r;
      }
    if (b.id == kNoId) return o;
    o.token = b.id;
    o.word = word;
    // Plain rows keep every finite score: the prefix down to the first finite key.
    if (word == kPosInf) o.keep.kind = NT_KEEP_POS_INF;
    else o.keep = nt_keep_set{NT_KEEP_PREFIX, p.temperature, NT_KEY_FIRST_FINITE, uint32_t(INT32_MAX)};
    return o;
  }

  // Filtered: merge the candidates; find the exact prefix.
  const float t = p.temperature, s_max = nt_key_to_float(s_max_key);
  merged.clear();
  int64_t n_total = 0;
  bool any_short = false;
  Entry limit{0u, 0, 0.0f, 0.0f};  // the earliest last candidate of a shard that listed fewer than its tokens
  for (int r = 0; r < shards; ++r) {
    const int64_t* w = rows[r];
    const int64_t n = w[kCandidates];
    n_total += w[kFinite];
    for (int64_t c = 0; c < n; ++c) {
      const int64_t word = w[NT_LM_HEAD_SUMMARY_WORDS + c];
      const float x = nt_as_f32(low(word));
      const float s = nt_scaled_score(x, t);
      merged.push_back(Entry{nt_order_key(s), id(word), s, x});
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
    const uint32_t threshold = cpu::sampling::minp_key(s_max_key, s_max, p.min_p);
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
        z = rescaled_mass(rows, shards, kSMax, kMass, double(s_max));
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
  if (len == kBeyond) {
    o.token = NT_TOKEN_NEEDS_ALL_CANDIDATES;
    return o;
  }

  // The first entry scores s_max: it draws first, and scores that cannot beat
  // it even with the largest noise skip theirs.
  Best b{-INFINITY, kNoId};
  float x = -INFINITY;
  for (int64_t i = 0; i < len; ++i) {
    const Entry& e = merged[size_t(i)];
    if (b.id != kNoId && e.s + NT_GUMBEL_MAX < b.value) continue;
    const int32_t before = b.id;
    b.offer(e.s + nt_token_gumbel(seed, offset, tag, uint32_t(e.id)), e.id);
    if (b.id != before) x = e.x;
  }
  if (b.id == kNoId) return o;
  o.token = b.id;
  o.x = x;
  o.len = len;
  const Entry& last = merged[size_t(len - 1)];
  o.keep = nt_keep_set{NT_KEEP_PREFIX, p.temperature, last.key, uint32_t(last.id)};
  return o;
}

constexpr float kNegInf = -INFINITY;

// One row's logprobs (docs/SEMANTICS.md, "Vocabulary-parallel"): the same
// values as cpu/sample_logprobs.cpp computes over the whole row, from the
// shards' normalizers (rescaled to the largest maximum in fp64), the merged
// first n tokens, and for a filtered row in processed mode its keep-set.
void row_logprobs(const int64_t* const* rows, int shards, int64_t lp_at, int32_t n, bool processed,
                  const Outcome& o, const std::vector<Entry>& merged, int32_t* ids, float* values,
                  int32_t* rank, int64_t* key_out) {
  // Columns 1..n: the first n tokens of the shards' lists (x key desc, id asc).
  struct Top { uint32_t key; int32_t id; float x; };
  std::vector<Top> top;
  for (int r = 0; r < shards; ++r)
    for (int32_t c = 0; c < n; ++c) {
      const int64_t w = rows[r][lp_at + kLpTop + c];
      if (id(w) == kNoId) break;
      const float x = nt_as_f32(low(w));
      top.push_back(Top{nt_order_key(x), id(w), x});
    }
  std::sort(top.begin(), top.end(),
            [](const Top& a, const Top& b) { return nt_ranks_before(a.key, a.id, b.key, b.id); });
  for (int32_t c = 0; c < n; ++c) ids[1 + c] = size_t(c) < top.size() ? top[size_t(c)].id : -1;
  *key_out = -1;
  *rank = 0;
  if (o.token < 0) {
    ids[0] = int32_t(o.token);  // -1, or NT_TOKEN_NEEDS_ALL_CANDIDATES (its fallback writes the row)
    for (int32_t c = 0; c <= n; ++c) values[c] = kNegInf;
    return;
  }
  const float x_tok = o.word >= 0 ? nt_as_f32(low(rows[o.shard][lp_at + (o.word == kPlain ? kLpPlainX
                                                                                           : kLpPosInfX)]))
                                  : o.x;

  // The normalizer: max and log Z of the values (core/logprobs.h nt_logprob_base).
  cpu::RowValues rv{processed, o.keep, o.token};
  int32_t settled = -1;  // the rank, when the summaries settle it
  if (!processed) {
    uint32_t max_key = NT_KEY_NEG_INF;
    int64_t n_inf = 0;
    for (int r = 0; r < shards; ++r) {
      if (id(rows[r][kGreedy]) != kNoId) max_key = std::max(max_key, low(rows[r][kGreedy]));
      n_inf += rows[r][lp_at + kLpPosInfCount];
    }
    if (n_inf > 0) {
      rv.set_pos_inf(n_inf);
    } else {
      rv.max = double(nt_key_to_float(max_key));
      rv.log_z = std::log(rescaled_mass(rows, shards, kGreedy, lp_at + kLpMass, rv.max));
    }
    *key_out = rank_key(nt_order_key(x_tok), NT_KEY_POS_INF);
  } else if (o.keep.kind == NT_KEEP_ONE) {
    settled = 1;  // one-hot: max 0, Z 1
  } else if (o.keep.kind == NT_KEEP_POS_INF) {
    int64_t n_inf = 0;
    for (int r = 0; r < shards; ++r) n_inf += rows[r][lp_at + kLpPosInfCount];
    rv.set_pos_inf(n_inf);
    settled = int32_t(n_inf);
  } else if (o.len == 0) {  // plain: every finite score, Z from the shards
    uint32_t s_max_key = NT_KEY_NEG_INF;
    for (int r = 0; r < shards; ++r) s_max_key = std::max(s_max_key, low(rows[r][kSMax]));
    rv.max = double(nt_key_to_float(s_max_key));
    rv.log_z = std::log(rescaled_mass(rows, shards, kSMax, lp_at + kLpMass, rv.max));
    const uint32_t s_tok = nt_order_key(nt_scaled_score(x_tok, o.keep.temperature));
    // x -> x / T is monotone: the finite x whose score key reaches the token's.
    *key_out = rank_key(cpu::sampling::x_threshold(s_tok, o.keep.temperature, NT_KEY_POS_INF - 1),
                        NT_KEY_POS_INF - 1);
  } else {  // filtered: the keep-set is merged[0, len)
    rv.max = double(merged[0].s);
    double z = 0.0;
    const uint32_t s_tok = nt_order_key(nt_scaled_score(x_tok, o.keep.temperature));
    settled = 0;
    for (int64_t i = 0; i < o.len; ++i) {
      z += std::exp(double(merged[size_t(i)].s) - rv.max);
      settled += merged[size_t(i)].key >= s_tok;
    }
    rv.log_z = std::log(z);
  }
  ids[0] = int32_t(o.token);
  values[0] = rv.value(rv.base(x_tok, int32_t(o.token)));
  for (int32_t c = 0; c < n; ++c)
    values[1 + c] = size_t(c) < top.size() ? rv.value(rv.base(top[size_t(c)].x, top[size_t(c)].id)) : kNegInf;
  if (settled >= 0) *rank = settled;
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
  const bool logprobs = a.logprob_ids.data != nullptr;
  const int64_t lp_at = logprobs ? NT_LM_HEAD_SUMMARY_WORDS +
                                       summary_candidates(a.summaries, NT_LM_HEAD_LOGPROBS_WORDS(int64_t(a.num_logprobs)))
                                 : 0;
  for (int64_t m = 0; m < rows; ++m) {
    for (int r = 0; r < shards; ++r)
      row_words[size_t(r)] = reinterpret_cast<const int64_t*>(cpu::row_address(a.summaries, r * rows + m));
    const nt_row_params p = cpu::row_params(s, m, a.vocab_size);
    const Outcome o = combine_row(row_words.data(), shards, p, joint, row_param(s.seed, m),
                                  row_param(s.offset, m),
                                  nt_row_tag(seeds_per_row, uint32_t(a.first_row + m)), merged);
    if (a.tokens.dtype == NT_I32) static_cast<int32_t*>(a.tokens.data)[m] = int32_t(o.token);
    else static_cast<int64_t*>(a.tokens.data)[m] = o.token;
    if (logprobs)
      row_logprobs(row_words.data(), shards, lp_at, a.num_logprobs,
                   a.logprobs_mode == NT_LOGPROBS_PROCESSED, o, merged,
                   reinterpret_cast<int32_t*>(cpu::row_address(a.logprob_ids, m)),
                   reinterpret_cast<float*>(cpu::row_address(a.logprobs, m)),
                   static_cast<int32_t*>(a.ranks.data) + m, static_cast<int64_t*>(a.rank_keys.data) + m);
  }
}

}  // namespace nt
