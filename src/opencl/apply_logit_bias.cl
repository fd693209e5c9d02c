/* apply_logit_bias: one work-group per row. The row's valid entries go into a
 * table in the workspace, each slot a key (id + 1), the first entry position of
 * the token (atomic_min) and its entry count; then each occupied slot adds its
 * token's values one after the other in entry order, walking from the first
 * position, and writes the token once. */

/* Adds the c entries of token id, from position `first` of the row on, one
 * after the other in entry order, and writes the token once; a NaN logit keeps
 * its bits. */
static inline void nt_bias_token(__global nt_elem* row, __global const int* row_ids,
                                 __global const float* row_values, int id, ulong first, uint c) {
  float x = nt_widen(row, (ulong)id);
  if (nt_f32_is_nan(x)) return;
  uint found = 0u;
  for (ulong j = first; found < c; ++j) {
    if (row_ids[j] != id) continue;
    x = nt_bias_logit(x, row_values[j], NT_ELEM);
    ++found;
  }
  nt_store_logit(row, (ulong)id, x);
}

__kernel void nt_apply_logit_bias(__global nt_elem* logits, ulong logits_off, ulong stride,
                                  uint vocab, ulong rows, __global const uchar* offsets,
                                  ulong offsets_off, int mode, __global const int* ids,
                                  ulong ids_off, ulong n_ids, __global const float* values,
                                  ulong values_off, __global uint* table, ulong table_slots) {
  __local uint bad;
  const ulong b = get_group_id(0);
  const uint lid = get_local_id(0), wg = get_local_size(0);
  long lo, hi;
  nt_list_range(offsets, offsets_off, mode, b, n_ids, &lo, &hi);
  const ulong n = (ulong)(hi - lo);
  __global const int* row_ids = ids + ids_off + (ulong)lo;
  __global const float* row_values = values + values_off + (ulong)lo;

  if (lid == 0u) bad = 0u;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (n != 0ul && !nt_list_share_valid(offsets, offsets_off, mode, rows, n_ids)) atomic_or(&bad, 1u);
  barrier(CLK_LOCAL_MEM_FENCE);
  const int valid = bad == 0u;

  const uint cap = (valid && n != 0ul) ? (uint)(2ul * n) : 0u;
  const ulong base = cap ? 2ul * nt_list_start(offsets, offsets_off, mode, b) : 0ul;
  volatile __global uint* keys = table + base;
  volatile __global uint* first = table + table_slots + base;
  volatile __global uint* count = table + 2ul * table_slots + base;
  for (uint s = lid; s < cap; s += wg) {
    keys[s] = 0u;
    first[s] = 0xFFFFFFFFu;
    count[s] = 0u;
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  for (ulong i = lid; cap != 0u && i < n; i += wg) {
    const int id = row_ids[i];
    if (id < 0 || (uint)id >= vocab) continue;
    const uint s = nt_table_claim(keys, cap, (uint)id + 1u);
    atomic_min(first + s, (uint)i);
    atomic_inc(count + s);
  }
  barrier(CLK_GLOBAL_MEM_FENCE);

  __global nt_elem* row = logits + logits_off + b * stride;
  for (uint s = lid; s < cap; s += wg) {
    const uint key = keys[s];
    if (key != 0u) nt_bias_token(row, row_ids, row_values, (int)(key - 1u), first[s], count[s]);
  }

  /* Lists that are not a valid CSR: each token at its first position counts its
   * entries in the rest of the row, then adds them. */
  for (ulong q = lid; !valid && q < n; q += wg) {
    const int id = row_ids[q];
    if (id < 0 || (uint)id >= vocab) continue;
    int is_first = 1;
    for (ulong j = 0; j < q && is_first; ++j) is_first = row_ids[j] != id;
    if (!is_first) continue;
    uint c = 0u;
    for (ulong j = q; j < n; ++j) c += row_ids[j] == id;
    nt_bias_token(row, row_ids, row_values, id, q, c);
  }
}
