/* What the penalty and logit-bias programs share: CSR rows of ids as the device
 * reads them (clamped, core/penalties.h), the check that a list is a valid CSR,
 * an open-addressing table of ids in global memory, and stores of the logits'
 * dtype (NT_ELEM). One work-group handles one row.
 *
 * A row's table lives in the workspace at twice its CSR position, so rows never
 * share slots when every list is a valid CSR (offsets[0] >= 0, non-decreasing,
 * offsets[B] <= N). Otherwise rows could overlap, and a row takes the exact
 * table-free path instead (O(n^2) in its ids: meant for broken inputs only). */

/* Offset i of a list: mode 1 = i32, 2 = i64 (0 = absent). */
static inline long nt_list_offset(__global const uchar* offsets, ulong off, int mode, ulong i) {
  if (mode == 1) return (long)((__global const int*)offsets)[off + i];
  return ((__global const long*)offsets)[off + i];
}

/* Row b's clamped range [*lo, *hi) of a list of n ids; empty when absent. */
static inline void nt_list_range(__global const uchar* offsets, ulong off, int mode, ulong b,
                                 ulong n, long* lo, long* hi) {
  *lo = 0;
  *hi = 0;
  if (mode == 0) return;
  *lo = nt_csr_clamp(nt_list_offset(offsets, off, mode, b), 0, (long)n);
  *hi = nt_csr_clamp(nt_list_offset(offsets, off, mode, b + 1ul), *lo, (long)n);
}

/* This work-item's share of the check that a list is a valid CSR of n ids. */
static inline int nt_list_share_valid(__global const uchar* offsets, ulong off, int mode,
                                      ulong rows, ulong n) {
  if (mode == 0) return 1;
  for (ulong i = get_local_id(0); i <= rows; i += get_local_size(0)) {
    const long v = nt_list_offset(offsets, off, mode, i);
    if (i == 0ul && v < 0) return 0;
    if (i == rows) {
      if (v > (long)n) return 0;
    } else if (nt_list_offset(offsets, off, mode, i + 1ul) < v) {
      return 0;
    }
  }
  return 1;
}

/* The row's unclamped CSR start in a list (0 when absent); only used when valid. */
static inline ulong nt_list_start(__global const uchar* offsets, ulong off, int mode, ulong b) {
  return mode == 0 ? 0ul : (ulong)nt_list_offset(offsets, off, mode, b);
}

/* The slot of key (id + 1) in keys[0, cap), claimed if new; the table holds
 * fewer distinct keys than slots, so the probe ends. */
static inline uint nt_table_claim(volatile __global uint* keys, uint cap, uint key) {
  uint s = nt_table_home(key, cap);
  for (;;) {
    const uint k = atomic_cmpxchg(keys + s, 0u, key);
    if (k == 0u || k == key) return s;
    s = (s + 1u == cap) ? 0u : s + 1u;
  }
}

/* Writes y (already rounded to the dtype) as element i of a row. */
static inline void nt_store_logit(__global nt_elem* row, ulong i, float y) {
#if NT_ELEM == 0
  row[i] = y;
#elif NT_ELEM == 1
  row[i] = (ushort)nt_f32_to_f16(y);
#else
  row[i] = (ushort)nt_f32_to_bf16(y);
#endif
}
