/* Finding the cut of nt_sample by histogram refinement, and the draws from
 * the list. The cut is the end of the shortest prefix of the order (score
 * descending, index ascending) meeting a need; each level's histogram names
 * the bin where it falls, a finer level splits that bin, until the bin (or
 * everything through it) fits the local list, where it is found exactly. */

/* The end of a prefix of the order: its last token (composite), the prefix
 * length and its mass. */
typedef struct {
  ulong cut, count, mass;
} nt_prefix_end;

/* Smallest key of [klo, khi] whose ladder rung is <= b (the rung is monotone
 * in the score, so each rung is a range of keys). */
uint nt_rung_low_key(uint klo, uint khi, float s_max, uint b) {
  uint lo = klo, up = khi + 1u;
  while (lo < up) {
    const uint mid = lo + (up - lo) / 2u;
    if (nt_ladder_rung(s_max - nt_key_to_float(mid)) <= b) up = mid;
    else lo = mid + 1u;
  }
  return lo;
}

/* Picks, in histogram h of the row's level (ranked after st->above_*), the
 * bin where the prefix reaches st->need, and sets the next phase: list that
 * bin (with everything before it when that fits), or split it again. */
void nt_choose_bin(nt_row_state* st, const nt_hist* h, uint n) {
  uint chosen = NT_BINS, last = 0;
  ulong count = st->above_count, mass = st->above_mass, last_count = 0, last_mass = 0;
  for (uint b = 0; b < NT_BINS; ++b) {
    if (h->count[b] == 0) continue;
    last = b;
    last_count = count;
    last_mass = mass;
    if (count + h->count[b] >= st->need.count_target ||
        (st->need.need_mass && mass + h->mass[b] >= st->need.mass_target)) {
      chosen = b;
      break;
    }
    count += h->count[b];
    mass += h->mass[b];
  }
  if (chosen == NT_BINS) { /* exact sums never fall short; kept for safety */
    chosen = last;
    count = last_count;
    mass = last_mass;
  }
  nt_level inner;
  ulong lo, hi;
  uint klo = h->lo[chosen], khi = h->hi[chosen];
  if (st->level.kind == NT_LEVEL_LADDER) {
    klo = nt_rung_low_key(st->level.klo, st->level.khi, st->s_max, chosen);
    khi = chosen == 0 ? st->level.khi
                      : nt_rung_low_key(st->level.klo, st->level.khi, st->s_max, chosen - 1u) - 1u;
  }
  if (st->level.kind == NT_LEVEL_INDICES) {
    inner = st->level;
    inner.ilo = h->lo[chosen];
    inner.ihi = h->hi[chosen];
    lo = nt_composite(inner.klo, inner.ihi);
    hi = nt_composite(inner.klo, inner.ilo);
  } else {
    inner.kind = klo == khi ? NT_LEVEL_INDICES : NT_LEVEL_KEYS;
    inner.klo = klo;
    inner.khi = khi;
    inner.ilo = 0;
    inner.ihi = n - 1u;
    lo = nt_composite(inner.klo, 0xFFFFFFFFu);
    hi = nt_composite(inner.khi, 0u);
  }
  if (count + h->count[chosen] <= NT_LIST_CAP) {
    st->phase = NT_PHASE_LIST;
    st->list_lo = lo;
    st->list_hi = ~0ul;
    st->list_full = 1;
    st->above_count = st->above_mass = 0;
    return;
  }
  st->above_count = count;
  st->above_mass = mass;
  if (h->count[chosen] <= NT_LIST_CAP && !st->need.full_only) {
    st->phase = NT_PHASE_LIST;
    st->list_lo = lo;
    st->list_hi = hi;
    st->list_full = 0;
  } else {
    st->phase = NT_PHASE_LEVEL;
    st->level = inner;
  }
}

static inline nt_level nt_ladder_level(uint s_max_key) {
  nt_level L;
  L.kind = NT_LEVEL_LADDER;
  L.klo = NT_KEY_FIRST_FINITE;
  L.khi = s_max_key;
  L.ilo = L.ihi = 0;
  return L;
}

/* A new search for st->need, from the ladder's histogram. */
void nt_search_from_ladder(nt_row_state* st, uint n) {
  st->level = nt_ladder_level(st->s_max_key);
  st->above_count = st->above_mass = 0;
  const nt_hist ladder = st->ladder;
  nt_choose_bin(st, &ladder, n);
}

/* Over the sorted list[0, n), ranked after `above_count` tokens of mass
 * `above_mass`: the first position where the prefix meets `need` (the last
 * when it never does). Each item takes a contiguous run of positions. */
nt_prefix_end nt_list_prefix_end(__local const ulong* list, uint n, ulong above_count,
                                 ulong above_mass, const nt_need* need, float s_max, int bits,
                                 __local ulong* red) {
  const uint lid = get_local_id(0), wg = get_local_size(0);
  const uint run = (n + wg - 1u) / wg;
  const uint a = min(n, lid * run), b = min(n, a + run);
  ulong run_mass = 0;
  if (need->need_mass)
    for (uint i = a; i < b; ++i) run_mass += nt_composite_mass(list[i], s_max, bits);
  ulong total = 0;
  ulong mass = above_mass + nt_wg_exclusive_sum_u64(red, run_mass, &total);
  ulong first = ~0ul;
  for (uint i = a; i < b; ++i) {
    if (need->need_mass) mass += nt_composite_mass(list[i], s_max, bits);
    if (above_count + i + 1ul >= need->count_target ||
        (need->need_mass && mass >= need->mass_target)) {
      first = i;
      break;
    }
  }
  /* n = 0 only in rows that take no part (the chosen bin always holds tokens) */
  first = min(nt_wg_min_u64(red, first), (ulong)(n ? n - 1u : 0u));
  ulong through = 0;
  if (need->need_mass)
    for (uint i = a; i < b && i <= first; ++i) through += nt_composite_mass(list[i], s_max, bits);
  nt_prefix_end e;
  e.cut = n ? list[first] : ~0ul;
  e.count = above_count + first + 1ul;
  e.mass = above_mass + nt_wg_sum_u64(red, through);
  return e;
}

/* Gumbel-max over list[0, count): bit-exact, since the score read back from
 * its key is the score itself (-0 and +0 add alike). */
long nt_gumbel_list(__local const ulong* list, uint count, const nt_row_cfg* c, __local ulong* red) {
  ulong best = 0;
  for (uint i = get_local_id(0); i < count; i += get_local_size(0)) {
    const uint t = nt_composite_index(list[i]);
    const float s = nt_key_to_float(nt_composite_key(list[i]));
    const float v = nt_perturbed_score(s, nt_token_gumbel(c->seed, c->offset, c->tag, t), 0);
    best = max(best, nt_composite(nt_order_key(v), t));
  }
  best = nt_wg_max_u64(red, best);
  return (long)nt_composite_index(best);
}

/* Inverse CDF over list[0, count) in vocabulary order: re-keyed to
 * (~index, score key) and ranked into `order`, then scanned like a row. */
long nt_explicit_list(__local ulong* list, uint count, __local ulong* order, const nt_row_cfg* c,
                      float s_max, __local ulong* red, __local ulong* found) {
  const uint lid = get_local_id(0), wg = get_local_size(0);
  for (uint i = lid; i < count; i += wg)
    list[i] = ((ulong)(~nt_composite_index(list[i])) << 32) | nt_composite_key(list[i]);
  barrier(CLK_LOCAL_MEM_FENCE);
  nt_wg_rank_sort_desc(list, count, order, count);
  const uint run = (count + wg - 1u) / wg;
  const uint a = min(count, lid * run), b = min(count, a + run);
  ulong mass = 0;
  for (uint i = a; i < b; ++i) mass += nt_mass_of(nt_key_to_float((uint)order[i]), s_max, c->mass_bits);
  const ulong last = count ? ~(uint)(order[count - 1u] >> 32) : ~0ul;
  ulong running, target;
  if (nt_explicit_target(c, mass, last, red, found, &running, &target)) {
    for (uint i = a; i < b; ++i) {
      running += nt_mass_of(nt_key_to_float((uint)order[i]), s_max, c->mass_bits);
      if (running > target) {
        *found = ~(uint)(order[i] >> 32);
        break;
      }
    }
  }
  return nt_explicit_found(found);
}
