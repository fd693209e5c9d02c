/* nt_sample: a short pipeline of kernels, each one work-group per row, on the
 * rows in its phase (the row's state sits in the workspace: a fixed size per
 * row, nothing that grows with V). No sort of the row, no barrier in a loop.
 *
 *  start      the largest score and its first token (greedy, s_max), the +inf
 *             and finite counts: greedy and empty rows end here.
 *  ladder     rows with a cut (top-k, top-p, min-p): a histogram of every
 *             finite score by s_max - s (counts, fixed-point masses, the
 *             min-p count), and the bin where the cut falls.
 *  level      (launched a few times) a finer histogram of that bin, over
 *             keys, or over indices for ties.
 *  list       the bin, or everything through it when that fits, is listed
 *             in local memory, ranked, and the cut found exactly; rows left
 *             unresolved by the levels refine serially first.
 *  draws      Gumbel-max or the explicit draw, from the list when it holds
 *             the keep-set, else over the row against the threshold.
 * Probabilities are the CPU backend's bit for bit (the same fma-only exp,
 * core/portable_exp.h); it sums them in fp64, these are exact sums of
 * fixed-point values, so keep-sets are equal on non-degenerate inputs, and
 * Gumbel-max tokens are bit-identical for the same keep-set. */

/* Bits of the kernels' flags argument besides common.cl's NT_PER_ROW_*. */
#define NT_HAS_UNIFORM 64u
#define NT_JOINT 128u
#define NT_TOKENS_I32 256u

/* Every kernel of the pipeline takes the same arguments. */
#define NT_SAMPLE_PARAMS                                                                           \
  __global const nt_elem *logits, ulong logits_off, ulong row_stride, uint vocab, NT_ROW_PARAMS,   \
      __global const float *uniform, ulong uniform_off, uint flags, int mass_bits,                 \
      __global uchar *tokens, ulong tokens_off, __global uchar *ws

#define NT_ROW (logits + logits_off + (ulong)get_group_id(0) * row_stride)

static inline void nt_write_token(__global uchar* tokens, ulong off, uint flags, long token) {
  const ulong r = get_group_id(0);
  if (flags & NT_TOKENS_I32) ((__global int*)tokens)[off + r] = (int)token;
  else ((__global long*)tokens)[off + r] = token;
}

/* Every item holds the same copy of the row's state and takes the same
 * decisions; item 0 writes it back. Rows in another phase run the same code
 * over nothing (n = 0) rather than return early: PoCL 3.1 miscompiles some
 * kernels that leave before a barrier. */
static inline void nt_save(__global uchar* ws, const nt_row_state* st) {
  if (get_local_id(0) == 0) *nt_state_of(ws, get_group_id(0)) = *st;
}

__kernel void nt_sample_start(NT_SAMPLE_PARAMS) {
  __local ulong red[NT_WG_MAX + 1];
  const uint r = get_group_id(0);
  nt_row_state st;
  nt_row_cfg* c = &st.c;
  const nt_row_draw d = nt_row_draw_of(r, flags, vocab, NT_ROW_PARAM_NAMES);
  c->p = d.p;
  c->joint = (flags & NT_JOINT) != 0;
  c->has_u = (flags & NT_HAS_UNIFORM) != 0;
  c->u = c->has_u ? uniform[uniform_off + r] : 0.0f;
  c->seed = d.seed;
  c->offset = d.offset;
  c->tag = nt_row_tag((flags & NT_PER_ROW_SEED) != 0, r);
  c->mass_bits = mass_bits;

  const nt_row_stats stats = nt_stats_pass(NT_ROW, vocab, c->p.temperature, red);
  st.s_max_key = nt_composite_key(stats.best);
  st.s_max = nt_key_to_float(st.s_max_key);
  st.first = nt_composite_index(stats.best);
  st.n_finite = stats.n_finite;
  st.inf_rule = 0;
  st.cut = 0;
  st.top_k_first = 0;
  st.phase = NT_PHASE_DONE;
  long token = -1; /* every score -inf or NaN */
  if (st.s_max_key != NT_KEY_NEG_INF) {
    const int k_on = c->p.top_k > 0 && (uint)c->p.top_k < st.n_finite;
    if (c->p.greedy) {
      token = st.first;
    } else if (stats.n_inf > 0) { /* before any cut, as on the CPU */
      st.inf_rule = 1;
      st.phase = NT_PHASE_DRAW_ROW;
    } else if (c->p.top_p <= 0.0f) {
      token = st.first; /* the keep-set is the top token alone */
    } else if (k_on || c->p.top_p < 1.0f || c->p.min_p > 0.0f) {
      st.phase = NT_PHASE_LADDER;
    } else {
      st.phase = NT_PHASE_DRAW_ROW;
    }
  }
  if (st.phase == NT_PHASE_DONE && get_local_id(0) == 0) nt_write_token(tokens, tokens_off, flags, token);
  nt_save(ws, &st);
}

__kernel void nt_sample_ladder(NT_SAMPLE_PARAMS) {
  __local ulong scratch[(3 * NT_BINS + 1) * NT_ROW_WG / 2 + 1]; /* ulong: the masses reuse it */
  __local uint total32[3 * NT_BINS + 1];
  __local ulong total64[NT_BINS];
  nt_row_state st = *nt_state_of(ws, get_group_id(0));
  const int active = st.phase == NT_PHASE_LADDER;
  const nt_row_cfg* c = &st.c;
  const uint finite = st.n_finite;
  const int k_on = c->p.top_k > 0 && (uint)c->p.top_k < finite;
  const int p_on = c->p.top_p < 1.0f, min_p_on = c->p.min_p > 0.0f;
  const ulong n_k = k_on ? (ulong)c->p.top_k : finite;
  /* Top-p renormalised on a top-k set that surely fits the list: the set is
   * found by counts alone, and its mass on the list. */
  const int top_k_first = p_on && !c->joint && k_on;
  const int small_top_k = top_k_first && n_k <= NT_LIST_CAP / 2;
  st.level = nt_ladder_level(st.s_max_key);
  nt_hist h;
  nt_hist_clear(&h);
  nt_level_scan(NT_ROW, active ? vocab : 0u, c, st.s_max, &st.level, p_on && !small_top_k,
                min_p_on, &h, get_local_id(0), get_local_size(0));
  nt_hist_reduce(&h, (__local uint*)scratch, total32, total64);
  st.ladder = h;
  st.keep.count_target = min(n_k, min_p_on ? (ulong)h.n_min_p : (ulong)finite);
  st.keep.mass_target = ~0ul;
  st.keep.need_mass = p_on;
  st.keep.full_only = 0;
  if (top_k_first) {
    st.top_k_first = 1;
    st.need.count_target = n_k;
    st.need.mass_target = ~0ul;
    st.need.need_mass = !small_top_k;
    st.need.full_only = small_top_k;
  } else {
    if (p_on) {
      ulong z = 0;
      for (uint b = 0; b < NT_BINS; ++b) z += h.mass[b];
      st.keep.mass_target = nt_scale_u64(z, c->p.top_p, 1);
    }
    st.need = st.keep;
  }
  if (!p_on && st.keep.count_target >= finite) {
    st.phase = NT_PHASE_DRAW_ROW; /* counts that keep every finite score cut nothing */
  } else {
    st.above_count = st.above_mass = 0;
    nt_choose_bin(&st, &h, vocab);
  }
  if (active) nt_save(ws, &st);
}

__kernel void nt_sample_level(NT_SAMPLE_PARAMS) {
  __local ulong scratch[(3 * NT_BINS + 1) * NT_ROW_WG / 2 + 1]; /* ulong: the masses reuse it */
  __local uint total32[3 * NT_BINS + 1];
  __local ulong total64[NT_BINS];
  nt_row_state st = *nt_state_of(ws, get_group_id(0));
  const int active = st.phase == NT_PHASE_LEVEL;
  nt_hist h;
  nt_hist_clear(&h);
  nt_level_scan(NT_ROW, active ? vocab : 0u, &st.c, st.s_max, &st.level, st.need.need_mass, 0, &h,
                get_local_id(0), get_local_size(0));
  nt_hist_reduce(&h, (__local uint*)scratch, total32, total64);
  nt_choose_bin(&st, &h, vocab);
  if (active) nt_save(ws, &st);
}

__kernel void nt_sample_list(NT_SAMPLE_PARAMS) {
  __local ulong red[NT_WG_MAX + 1];
  __local ulong list[NT_LIST_CAP], sorted[NT_LIST_CAP];
  __local uint count;
  const uint r = get_group_id(0);
  nt_row_state st = *nt_state_of(ws, r);
  const int active = st.phase == NT_PHASE_LEVEL || st.phase == NT_PHASE_LIST;
  /* More levels than were launched: item 0 refines alone (rare inputs). */
  if (active && st.phase == NT_PHASE_LEVEL && get_local_id(0) == 0) {
    while (st.phase == NT_PHASE_LEVEL) {
      nt_hist h;
      nt_hist_clear(&h);
      nt_level_scan(NT_ROW, vocab, &st.c, st.s_max, &st.level, st.need.need_mass, 0, &h, 0, 1);
      nt_choose_bin(&st, &h, vocab);
    }
    *nt_state_of(ws, r) = st;
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  st = *nt_state_of(ws, r);
  const nt_row_cfg* c = &st.c;
  const uint m = nt_compact_pass(NT_ROW, active ? vocab : 0u, c->p.temperature, st.list_lo,
                                 st.list_hi, list, &count);
  nt_wg_rank_sort_desc(list, m, sorted, m);
  nt_need need = st.need;
  need.need_mass |= st.top_k_first; /* the top-k set's mass comes from the list */
  nt_prefix_end end = nt_list_prefix_end(sorted, m, st.above_count, st.above_mass, &need,
                                         st.s_max, c->mass_bits, red);
  int decided = 1;
  if (st.top_k_first) {
    st.keep.mass_target = nt_scale_u64(end.mass, c->p.top_p, 1);
    st.top_k_first = 0;
    st.need = st.keep;
    if (st.list_full) {
      end = nt_list_prefix_end(sorted, m, 0, 0, &st.need, st.s_max, c->mass_bits, red);
    } else {
      nt_search_from_ladder(&st, vocab); /* the next level and list launches take it on */
      decided = 0;
    }
  }
  if (decided && st.list_full) {
    st.phase = NT_PHASE_DRAW_LIST;
    st.list_count = (uint)end.count;
    if (active) {
      __global ulong* stored = nt_stored_list(ws, r);
      for (uint i = get_local_id(0); i < st.list_count; i += get_local_size(0)) stored[i] = sorted[i];
    }
  } else if (decided) {
    st.phase = NT_PHASE_DRAW_ROW;
    st.cut = end.cut;
  }
  if (active) nt_save(ws, &st);
}

/* The draws, one kernel each: together they compile into a work-group
 * function whose size PoCL's compiler handles badly. */

/* A row's stored keep-list into local memory (both draw kernels start so). */
static inline void nt_load_list(__global uchar* ws, uint r, uint count, __local ulong* list) {
  const __global ulong* stored = nt_stored_list(ws, r);
  for (uint i = get_local_id(0); i < count; i += get_local_size(0)) list[i] = stored[i];
  barrier(CLK_LOCAL_MEM_FENCE);
}

__kernel void nt_sample_gumbel_list(NT_SAMPLE_PARAMS) {
  __local ulong red[NT_WG_MAX + 1];
  __local ulong list[NT_LIST_CAP];
  const uint r = get_group_id(0);
  const nt_row_state st = *nt_state_of(ws, r);
  const int active = st.phase == NT_PHASE_DRAW_LIST;
  const uint count = active ? st.list_count : 0u;
  nt_load_list(ws, r, count, list);
  const long token = nt_gumbel_list(list, count, &st.c, red);
  if (active && get_local_id(0) == 0) nt_write_token(tokens, tokens_off, flags, token);
}

__kernel void nt_sample_explicit_list(NT_SAMPLE_PARAMS) {
  __local ulong red[NT_WG_MAX + 1];
  __local ulong list[NT_LIST_CAP], order[NT_LIST_CAP];
  __local ulong found;
  const uint r = get_group_id(0);
  const nt_row_state st = *nt_state_of(ws, r);
  const int active = st.phase == NT_PHASE_DRAW_LIST;
  const uint count = active ? st.list_count : 0u;
  nt_load_list(ws, r, count, list);
  const long token = nt_explicit_list(list, count, order, &st.c, st.s_max, red, &found);
  if (active && get_local_id(0) == 0) nt_write_token(tokens, tokens_off, flags, token);
}

__kernel void nt_sample_gumbel_row(NT_SAMPLE_PARAMS) {
  __local ulong red[NT_WG_MAX + 1];
  __local float bounds[NT_GUMBEL_BINS];
  const nt_row_state st = *nt_state_of(ws, get_group_id(0));
  const int active = st.phase == NT_PHASE_DRAW_ROW;
  const nt_row_cfg* c = &st.c;
  /* the top token is always a member: its perturbed score bounds the rest */
  const float bound =
      st.inf_rule ? -INFINITY
                  : nt_perturbed_score(st.s_max, nt_token_gumbel(c->seed, c->offset, c->tag, st.first), 0);
  nt_gumbel_bounds(bounds);
  const long token =
      nt_gumbel_row(NT_ROW, active ? vocab : 0u, c, st.cut, st.inf_rule, bound, bounds, red);
  if (active && get_local_id(0) == 0) nt_write_token(tokens, tokens_off, flags, token);
}

__kernel void nt_sample_explicit_row(NT_SAMPLE_PARAMS) {
  __local ulong red[NT_WG_MAX + 1];
  __local ulong found;
  const nt_row_state st = *nt_state_of(ws, get_group_id(0));
  const int active = st.phase == NT_PHASE_DRAW_ROW;
  const long token =
      nt_explicit_row(NT_ROW, active ? vocab : 0u, &st.c, st.s_max, st.cut, st.inf_rule, red, &found);
  if (active && get_local_id(0) == 0) nt_write_token(tokens, tokens_off, flags, token);
}
