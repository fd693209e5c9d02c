/* nt_sample_logprobs: one work-group per row, after nt_sample's pipeline on
 * the same queue. The keep-set comes from the row state the pipeline left in
 * the workspace (sample_state.cl): the composite cut of a row drawn over the
 * row, the last entry of a stored keep-list, the +inf rule, or a row decided
 * in the start kernel (its token alone). Two passes over the row: the largest
 * value, the +inf count, the rank and each item's first n tokens of the
 * logits' order; then the normalizer as an exact fixed-point sum of the
 * core's exp (the sampler's masses), so it does not depend on the order of
 * the sum. The log is the core's portable log. */

/* The keep-set of row r, whose token is `token` (core/logprobs.h). */
static inline nt_keep_set nt_drawn_keep_set(const nt_row_state* st, __global uchar* ws, uint r,
                                            long token) {
  nt_keep_set k;
  k.kind = NT_KEEP_EMPTY;
  k.temperature = st->c.p.temperature;
  k.key = 0u;
  k.index = 0u;
  if (token < 0) return k;
  ulong cut = st->cut;
  if (st->phase == NT_PHASE_DONE) {
    k.kind = NT_KEEP_ONE; /* greedy, or top_p <= 0: the top token alone */
    return k;
  }
  if (st->inf_rule) {
    k.kind = NT_KEEP_POS_INF;
    return k;
  }
  if (st->phase == NT_PHASE_DRAW_LIST && st->list_count > 0u)
    cut = nt_stored_list(ws, r)[st->list_count - 1u]; /* sorted: the last member */
  k.kind = NT_KEEP_PREFIX;
  k.key = nt_composite_key(cut);
  k.index = nt_composite_index(cut);
  return k;
}

static inline float nt_logprob_value(float v, uint n_pos_inf, float v_max, float log_z) {
  if (n_pos_inf > 0u) return v == INFINITY ? -nt_portable_log((float)n_pos_inf) : -INFINITY;
  return v == -INFINITY ? -INFINITY : (v - v_max) - log_z;
}

__kernel void nt_sample_logprobs(__global const nt_elem* logits, ulong logits_off, ulong row_stride,
                                 uint vocab, __global const uchar* tokens, ulong tokens_off,
                                 int tokens_i32, __global uchar* ws, int n, int processed,
                                 int mass_bits, __global int* ids, ulong ids_off, ulong ids_stride,
                                 __global float* values, ulong values_off, ulong values_stride,
                                 __global int* ranks, ulong ranks_off) {
  __local ulong red[NT_WG_MAX + 1];
  __local ulong cand[NT_ROW_WG * NT_MAX_LOGPROBS];
  __local ulong top[NT_MAX_LOGPROBS];
  const uint r = get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
  __global const nt_elem* row = logits + logits_off + (ulong)r * row_stride;
  const nt_row_state st = *nt_state_of(ws, r);
  const long token = tokens_i32 ? (long)((__global const int*)tokens)[tokens_off + r]
                                : ((__global const long*)tokens)[tokens_off + r];
  const nt_keep_set k = nt_drawn_keep_set(&st, ws, r, token);
  const float token_base =
      token >= 0 ? nt_logprob_base(nt_widen(row, (ulong)token), (uint)token, processed, k, (int)token)
                 : -INFINITY;
  const uint token_key = nt_order_key(token_base);

  /* Pass 1: largest value, +inf count, rank, and this item's first n tokens
   * of the logits' order (composites, largest first; 0 = empty). */
  ulong mine[NT_MAX_LOGPROBS];
  for (int j = 0; j < NT_MAX_LOGPROBS; ++j) mine[j] = 0ul;
  uint best_key = NT_KEY_NEG_INF, n_pos_inf = 0u, rank = 0u;
  for (uint i = lid; i < vocab; i += size) {
    const float x = nt_widen(row, i);
    const float v = nt_logprob_base(x, i, processed, k, (int)token);
    const uint key = nt_order_key(v);
    best_key = max(best_key, key);
    n_pos_inf += v == INFINITY;
    rank += v != -INFINITY && nt_logprob_at_least(key, token_key);
    const ulong c = nt_composite(nt_order_key(x), i);
    if (n > 0 && c > mine[n - 1]) {
      int at = n - 1;
      while (at > 0 && c > mine[at - 1]) {
        mine[at] = mine[at - 1];
        --at;
      }
      mine[at] = c;
    }
  }
  const float v_max = nt_key_to_float((uint)nt_wg_max_u64(red, best_key));
  const uint total_pos_inf = (uint)nt_wg_sum_u64(red, n_pos_inf);
  const uint total_rank = (uint)nt_wg_sum_u64(red, rank);

  /* Pass 2: the normalizer, sum of p * 2^mass_bits, exact in any order. */
  ulong z = 0ul;
  const int need_z = token >= 0 && total_pos_inf == 0u;
  for (uint i = need_z ? lid : vocab; i < vocab; i += size) {
    const float v = nt_logprob_base(nt_widen(row, i), i, processed, k, (int)token);
    if (v != -INFINITY) z += nt_mass_of(v, v_max, mass_bits);
  }
  const ulong z_total = nt_wg_sum_u64(red, z);
  /* z_total >= 2^mass_bits (the largest value's mass is 1): log of a normal float */
  const float log_z = need_z ? nt_portable_log(ldexp((float)z_total, -mass_bits)) : 0.0f;

  /* The row's first n: each item's list into local memory, ranked. The empty
   * entries (0) rank after every token and write 0 where top holds 0. */
  for (int j = 0; j < n; ++j) cand[lid * (uint)n + (uint)j] = mine[j];
  if (lid < (uint)NT_MAX_LOGPROBS) top[lid] = 0ul;
  barrier(CLK_LOCAL_MEM_FENCE);
  nt_wg_rank_sort_desc(cand, size * (uint)n, top, (uint)n);

  if (lid == 0u) {
    __global int* id_row = ids + ids_off + (ulong)r * ids_stride;
    __global float* value_row = values + values_off + (ulong)r * values_stride;
    id_row[0] = token >= 0 ? (int)token : -1;
    value_row[0] = token >= 0 ? nt_logprob_value(token_base, total_pos_inf, v_max, log_z) : -INFINITY;
    for (int j = 0; j < n; ++j) {
      const ulong c = top[j];
      const uint id = nt_composite_index(c);
      id_row[1 + j] = c != 0ul ? (int)id : -1;
      value_row[1 + j] =
          c != 0ul && token >= 0
              ? nt_logprob_value(nt_logprob_base(nt_widen(row, id), id, processed, k, (int)token),
                                 total_pos_inf, v_max, log_z)
              : -INFINITY;
    }
    ranks[ranks_off + r] = token >= 0 ? (int)total_rank : 0;
  }
}
