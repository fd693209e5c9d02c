/* The passes of nt_sample over one logits row. A work-group owns the row and
 * walks it in groups of 4 tokens (item i takes groups i, i + wg, ...; the
 * serial fallback passes start 0, stride 1), so one Philox block serves a
 * group's four draws. s = x / T with IEEE division (the programs build with
 * -cl-fp32-correctly-rounded-divide-sqrt); keys and Gumbel noise come from
 * the core headers, so every decision matches the CPU backend's. */

/* ---- the largest score (first index), +inf and finite counts ---- */

typedef struct {
  ulong best; /* composite of the largest score and its first token */
  uint n_inf, n_finite;
} nt_row_stats;

nt_row_stats nt_stats_pass(__global const nt_elem* row, uint n, float t, __local ulong* red) {
  const uint groups = (n + 3u) / 4u;
  /* per lane: the largest key and its first token (indices grow along a lane) */
  uint4 best_key = 0, best_index = 0, n_inf = 0, n_finite = 0;
  for (uint g = get_local_id(0); g < groups; g += get_local_size(0)) {
    const uint4 key = nt_order_key4(nt_scores4(nt_load4(row, 4u * g, n), t));
    const int4 better = key > best_key;
    best_key = select(best_key, key, better);
    best_index = select(best_index, 4u * g + (uint4)(0, 1, 2, 3), better);
    n_inf -= as_uint4(key == NT_KEY_POS_INF);
    n_finite -= as_uint4(nt_finite_key4(key));
  }
  ulong best = max(max(nt_composite(best_key.s0, best_index.s0), nt_composite(best_key.s1, best_index.s1)),
                   max(nt_composite(best_key.s2, best_index.s2), nt_composite(best_key.s3, best_index.s3)));
  nt_row_stats r;
  r.best = nt_wg_max_u64(red, best);
  /* both counts in one sum: each < 2^31 */
  const ulong counts = nt_wg_sum_u64(
      red, ((ulong)(n_inf.s0 + n_inf.s1 + n_inf.s2 + n_inf.s3) << 32) |
               (n_finite.s0 + n_finite.s1 + n_finite.s2 + n_finite.s3));
  r.n_inf = (uint)(counts >> 32);
  r.n_finite = (uint)counts;
  return r;
}

/* ---- histograms ---- */

/* 0 below 2^-9, one rung per half-octave up to 2^6, the last beyond: fine
 * where the mass is, coarse in the tail. Monotone in d. */
static inline uint nt_ladder_rung(float d) {
  const uint half_octave = as_uint(d) >> 22;
  const uint first = (127u - 9u) << 1;
  return half_octave < first ? 0u : min(half_octave - first + 1u, (uint)NT_BINS - 1u);
}

void nt_hist_clear(nt_hist* h) {
  for (uint b = 0; b < NT_BINS; ++b) {
    h->count[b] = 0;
    h->lo[b] = 0xFFFFFFFFu;
    h->hi[b] = 0;
    h->mass[b] = 0;
  }
  h->n_min_p = 0;
}

/* Adds the groups start, start + stride, ... of the row to h (no barrier). */
void nt_level_scan(__global const nt_elem* row, uint n, const nt_row_cfg* c, float s_max,
                   const nt_level* L, int need_mass, int count_min_p, nt_hist* h, uint start,
                   uint stride) {
  const uint groups = (n + 3u) / 4u;
  const int ladder = L->kind == NT_LEVEL_LADDER, need_p = need_mass || count_min_p;
  for (uint g = start; g < groups; g += stride) {
    float s[4], p[4];
    const float4 s4 = nt_scores4(nt_load4(row, 4u * g, n), c->p.temperature);
    const uint4 key4 = nt_order_key4(s4);
    if (!any((key4 >= L->klo) & (key4 <= L->khi) & nt_finite_key4(key4)))
      continue; /* finer levels see few tokens: most groups leave here */
    uint keys[4];
    vstore4(s4, 0, s);
    vstore4(key4, 0, keys);
    if (need_p) vstore4(nt_exp4(s4 - s_max), 0, p);
    for (uint j = 0; j < 4u; ++j) {
      const uint key = keys[j], t = 4u * g + j;
      if (!nt_finite_key(key) || key < L->klo || key > L->khi) continue;
      uint b, at;
      if (ladder) {
        /* rung ranges come from bisection (nt_rung_low_key): no min / max */
        b = nt_ladder_rung(s_max - s[j]);
        h->count[b] += 1;
        if (need_mass) h->mass[b] += nt_fixed_mass(p[j], c->mass_bits);
        if (count_min_p) h->n_min_p += p[j] >= c->p.min_p;
        continue;
      } else if (L->kind == NT_LEVEL_KEYS) {
        b = (uint)(((ulong)(L->khi - key) * NT_BINS) / ((ulong)(L->khi - L->klo) + 1ul));
        at = key;
      } else {
        if (t < L->ilo || t > L->ihi) continue;
        b = (uint)(((ulong)(t - L->ilo) * NT_BINS) / ((ulong)(L->ihi - L->ilo) + 1ul));
        at = t;
      }
      h->count[b] += 1;
      h->lo[b] = min(h->lo[b], at);
      h->hi[b] = max(h->hi[b], at);
      if (need_mass) h->mass[b] += nt_fixed_mass(p[j], c->mass_bits);
    }
  }
}

/* Combines every item's h into all of them. scratch: 3 NT_BINS + 1 uints per
 * item (the 64-bit masses take the same space in a second round). */
void nt_hist_reduce(nt_hist* h, __local uint* scratch, __local uint* total32, __local ulong* total64) {
  const uint lid = get_local_id(0), wg = get_local_size(0);
  const uint n32 = 3u * NT_BINS + 1u;
  for (uint b = 0; b < NT_BINS; ++b) {
    scratch[b * wg + lid] = h->count[b];
    scratch[(NT_BINS + b) * wg + lid] = h->lo[b];
    scratch[(2u * NT_BINS + b) * wg + lid] = h->hi[b];
  }
  scratch[3u * NT_BINS * wg + lid] = h->n_min_p;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint v = lid; v < n32; v += wg) {
    const int is_lo = v >= NT_BINS && v < 2u * NT_BINS, is_hi = v >= 2u * NT_BINS && v < 3u * NT_BINS;
    uint acc = is_lo ? 0xFFFFFFFFu : 0u;
    for (uint i = 0; i < wg; ++i) {
      const uint x = scratch[v * wg + i];
      acc = is_lo ? min(acc, x) : is_hi ? max(acc, x) : acc + x;
    }
    total32[v] = acc;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  __local ulong* wide = (__local ulong*)scratch;
  for (uint b = 0; b < NT_BINS; ++b) wide[b * wg + lid] = h->mass[b];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint b = lid; b < NT_BINS; b += wg) {
    ulong acc = 0;
    for (uint i = 0; i < wg; ++i) acc += wide[b * wg + i];
    total64[b] = acc;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint b = 0; b < NT_BINS; ++b) {
    h->count[b] = total32[b];
    h->lo[b] = total32[NT_BINS + b];
    h->hi[b] = total32[2u * NT_BINS + b];
    h->mass[b] = total64[b];
  }
  h->n_min_p = total32[3u * NT_BINS];
  barrier(CLK_LOCAL_MEM_FENCE);
}

/* ---- the list ---- */

/* The finite tokens whose composite lies in [lo, hi] go to list (in the order
 * the atomics land: it is sorted next); returns their number. */
uint nt_compact_pass(__global const nt_elem* row, uint n, float t, ulong lo, ulong hi,
                     __local ulong* list, __local uint* count) {
  if (get_local_id(0) == 0) *count = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint groups = (n + 3u) / 4u;
  for (uint g = get_local_id(0); g < groups; g += get_local_size(0)) {
    const uint4 key = nt_order_key4(nt_scores4(nt_load4(row, 4u * g, n), t));
    const uint4 index = 4u * g + (uint4)(0, 1, 2, 3);
    int4 in = nt_member4(key, index, lo, 0);
    if (hi != ~0ul) in &= ~nt_at_or_before4(key, index, hi + 1ul);
    if (!any(in)) continue;
    uint k[4];
    vstore4(key, 0, k);
    for (uint j = 0; j < 4u; ++j) {
      const ulong cv = nt_composite(k[j], 4u * g + j);
      if (!nt_finite_key(k[j]) || cv < lo || cv > hi) continue;
      const uint slot = atomic_inc(count);
      if (slot < NT_LIST_CAP) list[slot] = cv;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint m = min(*count, (uint)NT_LIST_CAP);
  barrier(CLK_LOCAL_MEM_FENCE);
  return m;
}

/* ---- draws over the whole row ---- */

/* Bounds of the Gumbel value per 1/64 of the Philox words (G grows with the
 * word: the largest word of each bin gives its bound; the margin covers any
 * last-ulp wobble of the portable log). */
#define NT_GUMBEL_BINS 64
void nt_gumbel_bounds(__local float* bounds) {
  for (uint i = get_local_id(0); i < NT_GUMBEL_BINS; i += get_local_size(0))
    bounds[i] = nt_gumbel_from_uniform(nt_uniform_from_bits(((i + 1u) << 26) - 1u)) + 1e-3f;
  barrier(CLK_LOCAL_MEM_FENCE);
}

/* Gumbel-max over the members. `bound` is the perturbed score of a member (or
 * -inf), and so is the best value an item has seen: a token whose
 * s + NT_GUMBEL_MAX stays below either cannot win, so its Philox block is
 * skipped, and one whose word's bin bound keeps it below skips the logs;
 * neither ever changes the argmax. */
long nt_gumbel_row(__global const nt_elem* row, uint n, const nt_row_cfg* c, ulong cut,
                   int inf_rule, float bound, __local const float* bounds, __local ulong* red) {
  const uint groups = (n + 3u) / 4u;
  ulong best = 0;
  float reach = bound; /* a perturbed score some member reached */
  for (uint g = get_local_id(0); g < groups; g += get_local_size(0)) {
    const float4 s4 = nt_scores4(nt_load4(row, 4u * g, n), c->p.temperature);
    const uint4 key = nt_order_key4(s4);
    const int4 member = nt_member4(key, 4u * g + (uint4)(0, 1, 2, 3), cut, inf_rule);
    const int4 live4 = member & (s4 + NT_GUMBEL_MAX >= reach);
    if (!any(live4)) continue;
    float s[4];
    int live[4];
    vstore4(s4, 0, s);
    vstore4(live4, 0, live);
    const nt_philox_block b = nt_token_block(c->seed, c->offset, c->tag, g);
    for (uint j = 0; j < 4u; ++j) {
      const float base = inf_rule ? 0.0f : s[j];
      if (!live[j] || base + bounds[b.v[j] >> 26] < reach) continue;
      const float v = nt_perturbed_score(s[j], nt_gumbel_from_uniform(nt_uniform_from_bits(b.v[j])),
                                         inf_rule);
      best = max(best, nt_composite(nt_order_key(v), 4u * g + j));
      reach = fmax(reach, v);
    }
  }
  best = nt_wg_max_u64(red, best);
  return best ? (long)nt_composite_index(best) : -1l;
}

/* The explicit draw's target, floor(u * total) of the members' mass, where
 * each item brings the mass of its run of members (runs in the members'
 * order). *found gets `fallback`, the draw when u >= 1 or there is no mass;
 * returns whether the target falls in this item's run, [*before, *before +
 * mass), which the item then walks again to set *found. */
static int nt_explicit_target(const nt_row_cfg* c, ulong mass, ulong fallback, __local ulong* red,
                              __local ulong* found, ulong* before, ulong* target) {
  ulong total = 0;
  *before = nt_wg_exclusive_sum_u64(red, mass, &total);
  if (get_local_id(0) == 0) *found = fallback;
  barrier(CLK_LOCAL_MEM_FENCE);
  const float u = nt_explicit_u(c);
  if (!(u < 1.0f && total > 0)) return 0;
  *target = nt_scale_u64(total, u, 0);
  return *before <= *target && *target < *before + mass;
}

/* The token *found holds once the walk is done, in every item. */
static long nt_explicit_found(__local ulong* found) {
  barrier(CLK_LOCAL_MEM_FENCE);
  const long token = (long)*found;
  barrier(CLK_LOCAL_MEM_FENCE);
  return token;
}

/* Inverse CDF in vocabulary order: the first member whose running mass
 * exceeds floor(u * total), the last member when u >= 1. Each item sums a
 * contiguous segment; the segments' sums are scanned in order, and the item
 * whose segment holds the crossing walks it again. */
long nt_explicit_row(__global const nt_elem* row, uint n, const nt_row_cfg* c, float s_max,
                     ulong cut, int inf_rule, __local ulong* red, __local ulong* found) {
  const uint lid = get_local_id(0), wg = get_local_size(0);
  const uint seg = ((n + 4u * wg - 1u) / (4u * wg)) * 4u;
  const uint lo = min(n, lid * seg), hi = min(n, lo + seg);
  ulong mass = 0;
  uint last = 0; /* last member + 1 */
  for (uint t = lo; t < hi; t += 4u) {
    float s[4], p[4];
    const float4 s4 = nt_scores4(nt_load4(row, t, n), c->p.temperature);
    vstore4(s4, 0, s);
    vstore4(nt_exp4(s4 - s_max), 0, p);
    for (uint j = 0; j < 4u && t + j < hi; ++j) {
      if (!nt_member(s[j], t + j, cut, inf_rule)) continue;
      mass += inf_rule ? 1ul : nt_fixed_mass(p[j], c->mass_bits);
      last = t + j + 1u;
    }
  }
  const ulong last_member = nt_wg_max_u64(red, last);
  ulong run, target;
  if (nt_explicit_target(c, mass, last_member - 1ul, red, found, &run, &target)) {
    for (uint t = lo; t < hi; ++t) {
      const float s = nt_scaled_score(nt_widen(row, t), c->p.temperature);
      if (!nt_member(s, t, cut, inf_rule)) continue;
      run += inf_rule ? 1ul : nt_mass_of(s, s_max, c->mass_bits);
      if (run > target) {
        *found = t;
        break;
      }
    }
  }
  return nt_explicit_found(found);
}
