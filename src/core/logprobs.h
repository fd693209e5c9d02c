/* Logprobs with sample (docs/SEMANTICS.md, "Logprobs with sample"): what
 * every backend's logprobs pass shares. A row's sampler hands the pass the
 * keep-set it drew the token from, as an nt_keep_set; the pass then needs, per
 * token, only these predicates: membership and the rank comparison (columns
 * 1..n follow the order of core/ordering.h). Written in the core's portable
 * subset (core/portable.h). */
#ifndef NEXTTOK_CORE_LOGPROBS_H
#define NEXTTOK_CORE_LOGPROBS_H

#include "ordering.h"
#include "sampling.h"

/* The most logprobs a call lists (nexttok.h defines the same). */
#ifndef NT_MAX_LOGPROBS
#define NT_MAX_LOGPROBS 20
#endif

/* The keep-set a token was drawn from. */
#define NT_KEEP_EMPTY 0   /* every score -inf or NaN: token -1 */
#define NT_KEEP_ONE 1     /* the sampled token alone (greedy rows) */
#define NT_KEEP_POS_INF 2 /* the tokens whose score is +inf, drawn uniformly */
#define NT_KEEP_PREFIX 3  /* scores ranking at or before (key, index), -inf never */

/* A prefix is given by (key, index) with members key' > key, or key' == key
 * and index' <= index (unsigned): the composite (key << 32 | ~index) order of
 * the GPU backends, so any composite threshold c is the prefix (c >> 32,
 * ~(u32)c); c = 0 keeps every score. A prefix that reaches +inf scores means
 * the +inf rule: the value rule of the logprobs pass gives the mass to those
 * tokens alone (docs/SEMANTICS.md), so "every score" also describes a row
 * drawn among its +inf scores. */
typedef struct nt_keep_set {
  int kind;
  float temperature; /* s = nt_scaled_score(x, temperature) */
  nt_u32 key;        /* NT_KEEP_PREFIX: the last member's score key ... */
  nt_u32 index;      /* ... and index: members rank at or before it */
} nt_keep_set;

/* Whether token i (logit x) belongs to a NT_KEEP_PREFIX or NT_KEEP_POS_INF set
 * (NT_KEEP_ONE is decided by the token id alone). */
NT_FN int nt_keep_member(nt_keep_set k, float x, nt_u32 i) {
  const nt_u32 key = nt_order_key(nt_scaled_score(x, k.temperature));
  if (k.kind == NT_KEEP_POS_INF) return key == NT_KEY_POS_INF;
  if (k.kind != NT_KEEP_PREFIX || key == NT_KEY_NEG_INF) return 0;
  return key > k.key || (key == k.key && i <= k.index);
}

/* The value token i's log-probability is taken of, -inf when it has none: raw,
 * the logit (NaN as -inf); processed, 0 for the sampled token of a
 * NT_KEEP_ONE set, the score of a member (+inf for a NT_KEEP_POS_INF set), -inf
 * outside the keep-set. */
NT_FN float nt_logprob_base(float x, nt_u32 i, int processed, nt_keep_set k, nt_i32 token) {
  if (!processed) return x != x ? -INFINITY : x;
  if (k.kind == NT_KEEP_ONE) return (nt_i32)i == token ? 0.0f : -INFINITY;
  if (!nt_keep_member(k, x, i)) return -INFINITY;
  return k.kind == NT_KEEP_POS_INF ? INFINITY : nt_scaled_score(x, k.temperature);
}

/* Columns 1..n list the first n tokens of the logits' order: nt_ranks_before
 * over (nt_order_key(x), index), i.e. logit descending (NaN as -inf, -0 as
 * +0), index ascending; on the GPU backends the composite (key << 32 | ~index)
 * descending, the same order. The same ids in both modes: x / T (T > 0)
 * preserves the order of the logits. */

/* Rank: the tokens whose log-probability is >= the sampled token's, compared
 * exactly through the values they are computed from (log-probabilities are
 * monotone in them): raw, the logits' ordering keys; processed, the members'
 * score keys. Every backend counts the same tokens, bit for bit. */
NT_FN int nt_logprob_at_least(nt_u32 key, nt_u32 token_key) { return key >= token_key; }

#endif /* NEXTTOK_CORE_LOGPROBS_H */
