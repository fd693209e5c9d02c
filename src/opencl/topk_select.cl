/* Exact top-k of the LM heads, with no barrier anywhere: a work-item owns a
 * contiguous range of vocabulary rows and, per hidden row, a buffer of
 * candidates in the workspace (the CPU backend's TopkSelector: a running
 * threshold rejects almost every score with one key compare). The merge
 * kernel then folds the items' lists together, a few per work-item, and the
 * last stage sorts the k best and writes them. */

/* A candidate: the score's bits (a NaN stays a NaN) and its token. */
static inline ulong nt_candidate(float v, uint t) { return ((ulong)as_uint(v) << 32) | t; }
static inline float nt_candidate_value(ulong c) { return as_float((uint)(c >> 32)); }
static inline uint nt_candidate_index(ulong c) { return (uint)c; }
/* Larger ranks first: score descending (NaN as -inf), then index ascending. */
static inline ulong nt_rank(ulong c) {
  return nt_composite(nt_order_key(nt_candidate_value(c)), nt_candidate_index(c));
}

static inline void nt_swap(__global ulong* a, uint i, uint j) {
  const ulong t = a[i];
  a[i] = a[j];
  a[j] = t;
}

/* Reorders a[0, n) so that a[0, k) holds the k best (1 <= k <= n), the k-th
 * best at a[k - 1]: quickselect with median-of-three pivots (ranks are
 * distinct, so no run of equal keys can degrade it). */
void nt_select_best(__global ulong* a, uint n, uint k) {
  uint lo = 0, hi = n - 1u;
  const uint want = k - 1u;
  while (lo < hi) {
    const uint mid = lo + (hi - lo) / 2u;
    const ulong rl = nt_rank(a[lo]), rm = nt_rank(a[mid]), rh = nt_rank(a[hi]);
    const uint median = (rl > rm) == (rm > rh) ? mid : (rm > rl) == (rl > rh) ? lo : hi;
    nt_swap(a, median, hi);
    const ulong pivot = nt_rank(a[hi]);
    uint store = lo;
    for (uint i = lo; i < hi; ++i)
      if (nt_rank(a[i]) > pivot) nt_swap(a, i, store++);
    nt_swap(a, store, hi);
    if (store == want) return;
    if (store < want) lo = store + 1u;
    else hi = store - 1u;
  }
}

/* Heap below `root` in a[0, end), smallest rank on top. */
void nt_sift_down(__global ulong* a, uint root, uint end) {
  for (;;) {
    uint child = 2u * root + 1u;
    if (child >= end) return;
    if (child + 1u < end && nt_rank(a[child + 1u]) < nt_rank(a[child])) ++child;
    if (nt_rank(a[child]) >= nt_rank(a[root])) return;
    nt_swap(a, root, child);
    root = child;
  }
}

/* Sorts a[0, n) best first (heapsort: in place, no recursion). */
void nt_sort_best_first(__global ulong* a, uint n) {
  for (uint i = n / 2u; i-- > 0u;) nt_sift_down(a, i, n);
  for (uint end = n; end > 1u; --end) {
    nt_swap(a, 0, end - 1u);
    nt_sift_down(a, 0, end - 1u);
  }
}

/* One selector: buf holds *count candidates (capacity cap = 2k); scores whose
 * key is at most *threshold cannot enter the top k. Tokens arrive in
 * increasing order, so a later score with the k-th best's key ranks after it. */
static inline void nt_push(__global ulong* buf, uint* count, uint* threshold, uint cap, uint k,
                           float v, uint t) {
  if (nt_order_key(v) <= *threshold) return;
  buf[(*count)++] = nt_candidate(v, t);
  if (*count == cap) {
    nt_select_best(buf, cap, k);
    *count = k;
    *threshold = nt_order_key(nt_candidate_value(buf[k - 1u]));
  }
}

/* An item's scoring done: each row's buffer cut to its k best, and its count
 * stored for the merge. */
static inline void nt_store_counts(__global ulong* cand, __global uint* counts, uint* count,
                                   uint rows, uint items, uint item, uint cap, uint k) {
  for (uint m = 0; m < rows; ++m) {
    if (count[m] > k) {
      nt_select_best(cand + ((ulong)m * items + item) * cap, count[m], k);
      count[m] = k;
    }
    counts[m * items + item] = count[m];
  }
}

/* Sum of 8 lanes in the CPU backend's fixed tree, so both round alike. */
static inline float nt_lane_sum(float8 a) {
  return ((a.s0 + a.s4) + (a.s2 + a.s6)) + ((a.s1 + a.s5) + (a.s3 + a.s7));
}

/* Workspace: counts[m * items + item] at counts_at, then the buffers
 * cand[(m * items + item) * cap ...] at cand_at. One
 * merge stage: work-item (m, g) folds lists base + j * stride (0 < j < fan_in)
 * of row m into list base = g * stride * fan_in, k at a time (k + k <= cap).
 * On the last stage one list is left per row: sorted, written to row_base + m. */
__kernel void nt_topk_merge(__global uchar* ws, ulong counts_at, ulong cand_at, uint items,
                            uint cap, uint k, uint rows, uint stride, uint fan_in, int last,
                            __global float* values, ulong values_off, ulong values_stride,
                            __global long* indices, ulong indices_off, ulong indices_stride,
                            uint row_base) {
  __global uint* counts = (__global uint*)(ws + counts_at);
  __global ulong* cand = (__global ulong*)(ws + cand_at);
  const uint span = stride * fan_in;
  const uint groups = (items + span - 1u) / span;
  const uint id = get_global_id(0);
  if (id >= rows * groups) return;
  const uint m = id / groups, base = (id % groups) * span;
  __global ulong* dst = cand + ((ulong)m * items + base) * cap;
  uint n = counts[m * items + base];
  for (uint j = 1; j < fan_in && base + j * stride < items; ++j) {
    const uint src = base + j * stride;
    const __global ulong* from = cand + ((ulong)m * items + src) * cap;
    const uint add = counts[m * items + src];
    for (uint i = 0; i < add; ++i) dst[n + i] = from[i];
    n += add;
    if (n > k) {
      nt_select_best(dst, n, k);
      n = k;
    }
  }
  counts[m * items + base] = n;
  if (!last) return;
  nt_sort_best_first(dst, n);
  const ulong r = row_base + m;
  for (uint j = 0; j < n; ++j) {
    values[values_off + r * values_stride + j] = nt_candidate_value(dst[j]);
    indices[indices_off + r * indices_stride + j] = nt_candidate_index(dst[j]);
  }
}
