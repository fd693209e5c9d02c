// Hidden -> token on the CPU (docs/SEMANTICS.md, "Fused hidden -> token").
//
// Single call: the head's scores of every row are written into the workspace
// by the LM heads' own pass (cpu/lm_head_scores.h), masked in place by the
// grammar-mask op and sampled by the sampling op, so the token is the one
// nt_sample returns on those masked scores, by construction. With a logprobs
// request the logprobs op samples them instead (same tokens, plus its
// logprobs). The [M, V] scores live in the caller's workspace, and are copied
// to the `scores` output when one is given.
//
// Shard call (vocabulary-parallel): the same scores for the shard's rows, then
// each row's summary (core/lm_head_summary.h) from one pass over them. With a
// logprobs request the scores go to the caller's `shard.scores` (masked in
// place there, for nt_lm_head_shard_ranks) and the summary rows end with the
// logprobs words.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/bitmask.h"
#include "core/check.h"
#include "core/fused_sample.h"
#include "core/lm_head_summary.h"
#include "core/portable_exp.h"
#include "core/sampling.h"
#include "cpu/lm_head_scores.h"
#include "cpu/ops.h"
#include "cpu/row_io.h"
#include "cpu/thread_pool.h"
#include "cpu/top_list.h"

namespace nt::cpu {
namespace {

using summary::Best;
using summary::kNoId;

// The scores of `rows` x `vocab` at offset 0, then one region shared by the
// scoring pass and what follows it (the sampler's workspace, or the summary's lists).
struct Layout {
  size_t shared, total;
};

// Without scores in the workspace (a shard call with a logprobs request
// writes them to the caller's tensor), the shared region starts at 0.
Layout make_layout(int64_t rows, int64_t vocab, size_t head_bytes, size_t after_bytes,
                   bool scores_in_workspace = true) {
  Layout L;
  L.shared = scores_in_workspace ? align64(size_t(rows) * size_t(vocab) * sizeof(float)) : 0;
  L.total = L.shared + std::max(head_bytes, after_bytes) + kWorkspaceSlack;
  return L;
}

// nt_sample's arguments over the scores.
nt_sample_args sample_args(void* scores, int64_t rows, int64_t vocab, const nt_lm_head_sampling& s,
                           const nt_tensor& tokens) {
  return fused_sample_args(scores_matrix(scores, rows, vocab, NT_DEVICE_CPU), s, tokens);
}

// Bytes of the summary pass: per thread, one word per token of a row.
size_t summary_bytes(int64_t vocab) { return size_t(num_threads()) * align64(size_t(vocab) * 8); }

// A finite token as one word that sorts ascending in the order (s desc, id asc).
inline uint64_t order_word(uint32_t key, int64_t local) { return (uint64_t(~key) << 32) | uint64_t(local); }
inline uint32_t word_key(uint64_t w) { return ~uint32_t(w >> 32); }
inline int64_t word_local(uint64_t w) { return int64_t(uint32_t(w)); }

// One row's summary (core/lm_head_summary.h) over x[0, n), the scores of
// global ids start + i; `list` holds n words.
void summarize_row(const float* x, int64_t n, int64_t start, int64_t vocab_size,
                   const uint32_t* mask, int64_t mask_words, nt_row_params p, uint64_t seed,
                   uint64_t offset, uint32_t tag, int64_t K, int64_t* out, uint64_t* list) {
  const int row_class = nt_row_class(p, 0);
  // Tokens of the shard: ids below vocab_size; a disallowed one scores -inf.
  const int64_t n_tokens = std::max<int64_t>(0, std::min(n, vocab_size - start));
  auto logit = [&](int64_t i) { return nt_mask_allows(mask, mask_words, start + i) ? x[i] : -INFINITY; };
  for (int w = 0; w < NT_LM_HEAD_SUMMARY_WORDS; ++w) out[w] = 0;
  out[summary::kSMax] = NT_KEY_NEG_INF;
  out[summary::kPlain] = summary::pack(0u, kNoId);
  out[summary::kPosInf] = summary::pack(0u, kNoId);

  // Greedy: the first id of the largest key of x.
  uint32_t max_key = NT_KEY_NEG_INF;
  int32_t max_id = kNoId;
  for (int64_t i = 0; i < n_tokens; ++i) {
    const uint32_t k = nt_order_key(logit(i));
    if (max_id == kNoId || k > max_key) { max_key = k; max_id = int32_t(start + i); }
  }
  out[summary::kGreedy] = summary::pack(max_key, max_id);
  if (row_class == NT_ROW_GREEDY) return;

  const float t = p.temperature;
  uint32_t s_max_key = NT_KEY_NEG_INF;
  int64_t finite = 0;
  Best pos_inf{0.0f, kNoId};
  for (int64_t i = 0; i < n_tokens; ++i) {
    const float s = nt_scaled_score(logit(i), t);
    const uint32_t k = nt_order_key(s);
    s_max_key = std::max(s_max_key, k);
    if (k == NT_KEY_POS_INF) {
      const int32_t g = int32_t(start + i);
      pos_inf.offer(nt_perturbed_score(s, nt_token_gumbel(seed, offset, tag, uint32_t(g)), 1), g);
    } else if (k != NT_KEY_NEG_INF) {
      list[finite++] = order_word(k, i);
    }
  }
  out[summary::kSMax] = s_max_key;
  out[summary::kFinite] = finite;
  out[summary::kPosInf] = summary::pack(nt_as_u32(pos_inf.value), pos_inf.id);
  if (finite == 0 || s_max_key == NT_KEY_POS_INF) return;

  if (row_class == NT_ROW_PLAIN) {
    // Gumbel-max over the finite scores. A token scoring s_max draws first, so
    // that every score that cannot beat it even with the largest noise skips
    // its noise (the maximum does not depend on the order of the offers).
    Best b{-INFINITY, kNoId};
    for (int64_t f = 0; f < finite && b.id == kNoId; ++f)
      if (word_key(list[f]) == s_max_key) {
        const int32_t g = int32_t(start + word_local(list[f]));
        b.offer(nt_key_to_float(s_max_key) + nt_token_gumbel(seed, offset, tag, uint32_t(g)), g);
      }
    for (int64_t f = 0; f < finite; ++f) {
      const float s = nt_key_to_float(word_key(list[f]));
      if (b.id != kNoId && s + NT_GUMBEL_MAX < b.value) continue;
      const int32_t g = int32_t(start + word_local(list[f]));
      b.offer(s + nt_token_gumbel(seed, offset, tag, uint32_t(g)), g);
    }
    out[summary::kPlain] = summary::pack(nt_as_u32(b.value), b.id);
    return;
  }

  // Filtered: the mass for top-p (in id order: the list is still in it), then
  // the first K finite tokens in order.
  if (p.top_p < 1.0f) {
    const float s_max = nt_key_to_float(s_max_key);
    double z = 0.0;
    for (int64_t f = 0; f < finite; ++f)
      z += double(nt_portable_exp(nt_key_to_float(word_key(list[f])) - s_max));
    out[summary::kMass] = summary::double_word(z);
  }
  const int64_t c = std::min(K, finite);
  if (c < finite) std::nth_element(list, list + c, list + finite);
  std::sort(list, list + c);
  out[summary::kCandidates] = c;
  for (int64_t f = 0; f < c; ++f) {
    const int64_t i = word_local(list[f]);
    out[NT_LM_HEAD_SUMMARY_WORDS + f] = summary::pack(nt_as_u32(logit(i)), int32_t(start + i));
  }
}

// Sets the shard's tokens the bitmask disallows, and its padding ids, to -inf.
void mask_row(float* x, int64_t n, int64_t start, int64_t vocab_size, const uint32_t* mask,
              int64_t mask_words) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t g = start + i;
    if (g >= vocab_size || !nt_mask_allows(mask, mask_words, g)) x[i] = -INFINITY;
  }
}

// A row's logprobs words (core/lm_head_summary.h) over its masked scores x[0,
// n_tokens) (global ids start + i), after summarize_row wrote the header.
void summarize_logprobs(const float* x, int64_t n_tokens, int64_t start, nt_row_params p,
                        int32_t n_lp, bool processed, int64_t K, int64_t* out) {
  int64_t* lp = out + NT_LM_HEAD_SUMMARY_WORDS + K;
  const int row_class = nt_row_class(p, 0);
  out[summary::kRequest] = summary::request_word(true, n_lp, processed ? 1u : 0u);

  double z = 0.0;
  int64_t n_pos_inf = 0;
  if (!processed) {
    const float max = nt_key_to_float(summary::low(out[summary::kGreedy]));
    for (int64_t i = 0; i < n_tokens; ++i) n_pos_inf += x[i] == INFINITY;
    if (std::isfinite(max))
      for (int64_t i = 0; i < n_tokens; ++i)
        if (std::isfinite(x[i])) z += std::exp(double(x[i]) - double(max));
  } else if (row_class != NT_ROW_GREEDY) {
    const float t = p.temperature;
    const float s_max = nt_key_to_float(summary::low(out[summary::kSMax]));
    const bool mass = row_class == NT_ROW_PLAIN && std::isfinite(s_max);
    for (int64_t i = 0; i < n_tokens; ++i) {
      const float s = nt_scaled_score(x[i], t);
      n_pos_inf += s == INFINITY;
      if (mass && std::isfinite(s)) z += std::exp(double(s) - double(s_max));
    }
  }
  lp[summary::kLpMass] = summary::double_word(z);
  lp[summary::kLpPosInfCount] = n_pos_inf;
  auto x_of = [&](int64_t word) {
    const int32_t g = summary::id(word);
    return g == kNoId ? summary::pack(0u, kNoId) : summary::pack(nt_as_u32(x[g - start]), g);
  };
  lp[summary::kLpPlainX] = x_of(out[summary::kPlain]);
  lp[summary::kLpPosInfX] = x_of(out[summary::kPosInf]);

  TopList top;
  top.cap = n_lp;
  for (int64_t i = 0; i < n_tokens && n_lp > 0; ++i) top.offer(nt_order_key(x[i]), int32_t(start + i));
  for (int32_t c = 0; c < n_lp; ++c)
    lp[summary::kLpTop + c] = c < top.n ? summary::pack(nt_as_u32(x[top.index[c] - start]), top.index[c])
                                        : summary::pack(0u, kNoId);
}

// What the fused ops do once the head is known: `head_bytes` and
// write_scores(scores, stride, piece) are the head's scoring pass.
struct Fused {
  const char* op;
  int64_t rows, vocab;
  size_t head_bytes;
  const nt_tensor& bitmask;
  const nt_lm_head_sampling& sampling;
  const nt_tensor& tokens;
  const nt_lm_head_shard* shard;
  FusedLogprobs logprobs;  // requested only without a shard (checked)
  const nt_tensor& scores_copy;  // the caller's optional copy of the scores (args.scores)
};

// A shard call with a logprobs request writes its scores to shard.scores.
bool scores_in_shard(const Fused& f) { return f.shard != nullptr && shard_logprobs(*f.shard); }

size_t fused_size(CpuBackend& cpu, const Fused& f) {
  if (f.rows == 0) return 0;
  size_t after;
  if (f.shard == nullptr)
    after = cpu.fused_draw_workspace_size(
        sample_args(placeholder_scores(), f.rows, f.vocab, f.sampling, f.tokens), f.logprobs);
  else
    after = summary_bytes(f.vocab);
  return make_layout(f.rows, f.vocab, f.head_bytes, after, !scores_in_shard(f)).total;
}

template <class WriteScores>
void fused_run(CpuBackend& cpu, const Fused& f, void* workspace, size_t workspace_bytes,
               WriteScores write_scores) {
  if (f.rows == 0) return;
  const size_t needed = fused_size(cpu, f);
  check_workspace(f.op, needed, workspace, workspace_bytes);
  const bool out = scores_in_shard(f);
  const Layout L = make_layout(f.rows, f.vocab, 0, 0, !out);  // the offsets depend on the shape only
  char* base = align_workspace(workspace);
  float* scores = out ? static_cast<float*>(f.shard->scores.data) : reinterpret_cast<float*>(base);
  const int64_t stride = out ? f.shard->scores.row_stride : f.vocab;
  char* shared = base + L.shared;
  const size_t shared_bytes = needed - L.shared - kWorkspaceSlack;
  write_scores(scores, stride, shared);
  if (present(f.scores_copy))
    for (int64_t m = 0; m < f.rows; ++m)
      std::copy_n(scores + m * stride, f.vocab, reinterpret_cast<float*>(row_address(f.scores_copy, m)));

  if (f.shard == nullptr) {
    cpu.fused_draw(sample_args(scores, f.rows, f.vocab, f.sampling, f.tokens), f.bitmask,
                   f.logprobs, shared, shared_bytes, nullptr);
    return;
  }

  const nt_lm_head_shard& sh = *f.shard;
  const nt_lm_head_sampling& s = f.sampling;
  const int64_t K = summary_candidates(sh.summary, shard_logprobs_words(sh));
  const bool seeds_per_row = s.seed.per_row != nullptr;
  const int64_t mask_words = present(f.bitmask) ? f.bitmask.shape[1] : 0;
  parallel_for(f.rows, 1, [&](int64_t begin, int64_t end, int part) {
    uint64_t* list = reinterpret_cast<uint64_t*>(shared + size_t(part) * align64(size_t(f.vocab) * 8));
    for (int64_t m = begin; m < end; ++m) {
      const nt_row_params p = row_params(s, m, sh.vocab_size);
      const uint32_t* mask = present(f.bitmask)
          ? reinterpret_cast<const uint32_t*>(row_address(f.bitmask, m)) : nullptr;
      float* x = scores + m * stride;
      int64_t* words = reinterpret_cast<int64_t*>(row_address(sh.summary, m));
      if (out) mask_row(x, f.vocab, sh.vocab_start, sh.vocab_size, mask, mask_words);
      summarize_row(x, f.vocab, sh.vocab_start, sh.vocab_size, mask, mask_words, p,
                    row_param(s.seed, m), row_param(s.offset, m),
                    nt_row_tag(seeds_per_row, uint32_t(sh.first_row + m)), K, words, list);
      if (out) {
        const int64_t n_tokens = std::max<int64_t>(0, std::min(f.vocab, sh.vocab_size - sh.vocab_start));
        summarize_logprobs(x, n_tokens, sh.vocab_start, p, sh.num_logprobs,
                           sh.logprobs_mode == NT_LOGPROBS_PROCESSED, K, words);
      }
    }
  });
}

// The fused call of each head, named by the entry point it serves.
Fused dense_call(const nt_lm_head_sample_dense_args& a, const nt_lm_head_shard* shard) {
  return Fused{shard ? "lm_head_shard_dense" : "lm_head_sample_dense", a.hidden.shape[0],
               a.weight.shape[0], dense_scores_bytes(a.hidden, a.weight), a.bitmask, a.sampling,
               a.tokens, shard, fused_logprobs(a), a.scores};
}

Fused binary_call(const nt_lm_head_sample_binary_args& a, const BinaryHead& head,
                  const nt_lm_head_shard* shard) {
  return Fused{shard ? "lm_head_shard_binary" : "lm_head_sample_binary", a.act_q.shape[0],
               a.wq.shape[0], binary_scores_bytes(head), a.bitmask, a.sampling, a.tokens, shard,
               fused_logprobs(a), a.scores};
}

}  // namespace

size_t CpuBackend::lm_head_sample_dense_workspace_size(const nt_lm_head_sample_dense_args& a,
                                                       const nt_lm_head_shard* shard) {
  return fused_size(*this, dense_call(a, shard));
}

void CpuBackend::lm_head_sample_dense(const nt_lm_head_sample_dense_args& a, const nt_lm_head_shard* shard,
                                      void* workspace, size_t workspace_bytes, void*) {
  fused_run(*this, dense_call(a, shard), workspace, workspace_bytes,
            [&](float* scores, int64_t stride, char* piece) {
              dense_scores(a.hidden, a.weight, a.bias, scores, stride, piece);
            });
}

size_t CpuBackend::lm_head_sample_binary_workspace_size(const nt_lm_head_sample_binary_args& a,
                                                        const nt_lm_head_shard* shard) {
  const BinaryHead head{a.act_q, a.act_scale, a.wq, a.wscale, a.bias, a.group_size};
  return fused_size(*this, binary_call(a, head, shard));
}

void CpuBackend::lm_head_sample_binary(const nt_lm_head_sample_binary_args& a,
                                       const nt_lm_head_shard* shard, void* workspace,
                                       size_t workspace_bytes, void*) {
  const BinaryHead head{a.act_q, a.act_scale, a.wq, a.wscale, a.bias, a.group_size};
  fused_run(*this, binary_call(a, head, shard), workspace, workspace_bytes,
            [&](float* scores, int64_t stride, char* piece) { binary_scores(head, scores, stride, piece); });
}

// Per row, the scores whose order keys the row's rank key holds.
void CpuBackend::lm_head_shard_ranks(const nt_lm_head_shard_ranks_args& a, void*) {
  const int64_t rows = a.scores.shape[0], cols = a.scores.shape[1];
  parallel_for(rows, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t m = begin; m < end; ++m) {
      const summary::RankRange r = summary::rank_range(static_cast<const int64_t*>(a.rank_keys.data)[m]);
      const float* x = reinterpret_cast<const float*>(row_address(a.scores, m));
      int32_t count = 0;
      if (!r.empty())
        for (int64_t i = 0; i < cols; ++i) count += r.holds(nt_order_key(x[i]));
      static_cast<int32_t*>(a.counts.data)[m] = count;
    }
  });
}

}  // namespace nt::cpu
