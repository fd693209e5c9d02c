/* apply_penalties: one work-group per row. The row's ids (the prompt's only when
 * its repetition penalty is on) go into a table in the workspace, each slot a key
 * (id + 1) and the token's output count (a key alone: a prompt token); then each
 * occupied slot updates its token once (core/penalties.h). Per-row parameters:
 * bit 0 of per_row = repetition, bit 1 = presence, bit 2 = frequency. */

/* Token id of the row penalized once, with its output count; a NaN logit keeps
 * its bits. */
static inline void nt_penalize_token(__global nt_elem* row, ulong id, uint count, float r,
                                     float f, float p) {
  const float x = nt_widen(row, id);
  if (nt_f32_is_nan(x)) return;
  nt_store_logit(row, id, nt_penalize_logit(x, count, r, f, p, NT_ELEM));
}

/* The id at position q of the row's combined list (prompt first, then output). */
#define NT_POSITION_ID(q) \
  ((q) < np ? p_ids[p_ids_off + (ulong)plo + (q)] : o_ids[o_ids_off + (ulong)olo + (q) - np])

__kernel void nt_apply_penalties(
    __global nt_elem* logits, ulong logits_off, ulong stride, uint vocab, ulong rows,
    __global const uchar* p_offsets, ulong p_offsets_off, int p_mode, __global const int* p_ids,
    ulong p_ids_off, ulong p_n, __global const uchar* o_offsets, ulong o_offsets_off, int o_mode,
    __global const int* o_ids, ulong o_ids_off, ulong o_n, int per_row,
    __global const float* repetition, float repetition_scalar, __global const float* presence,
    float presence_scalar, __global const float* frequency, float frequency_scalar,
    __global uint* table, ulong table_slots) {
  __local uint bad;
  const ulong b = get_group_id(0);
  const uint lid = get_local_id(0), wg = get_local_size(0);
  const float r = nt_resolve_repetition((per_row & 1) ? repetition[b] : repetition_scalar);
  const float p = nt_resolve_additive_penalty((per_row & 2) ? presence[b] : presence_scalar);
  const float f = nt_resolve_additive_penalty((per_row & 4) ? frequency[b] : frequency_scalar);
  const int active = !(r == 1.0f && f == 0.0f && p == 0.0f);
  long plo, phi, olo, ohi;
  nt_list_range(p_offsets, p_offsets_off, p_mode, b, p_n, &plo, &phi);
  nt_list_range(o_offsets, o_offsets_off, o_mode, b, o_n, &olo, &ohi);
  /* the prompt only matters to the repetition penalty */
  const ulong np = (active && r != 1.0f) ? (ulong)(phi - plo) : 0ul;
  const ulong no = active ? (ulong)(ohi - olo) : 0ul;
  const ulong n = np + no;

  if (lid == 0u) bad = 0u;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (n != 0ul && (!nt_list_share_valid(p_offsets, p_offsets_off, p_mode, rows, p_n) ||
                   !nt_list_share_valid(o_offsets, o_offsets_off, o_mode, rows, o_n)))
    atomic_or(&bad, 1u);
  barrier(CLK_LOCAL_MEM_FENCE);
  const int valid = bad == 0u;

  /* the table: 2n slots at twice the row's CSR position (disjoint when valid) */
  const uint cap = (valid && n != 0ul) ? (uint)(2ul * n) : 0u;
  const ulong base = cap ? 2ul * (nt_list_start(p_offsets, p_offsets_off, p_mode, b) +
                                  nt_list_start(o_offsets, o_offsets_off, o_mode, b))
                         : 0ul;
  volatile __global uint* keys = table + base;
  volatile __global uint* counts = table + table_slots + base;
  for (uint s = lid; s < cap; s += wg) {
    keys[s] = 0u;
    counts[s] = 0u;
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  for (ulong i = lid; cap != 0u && i < n; i += wg) {
    const int id = NT_POSITION_ID(i);
    if (id < 0 || (uint)id >= vocab) continue;
    const uint s = nt_table_claim(keys, cap, (uint)id + 1u);
    if (i >= np) atomic_inc(counts + s);
  }
  barrier(CLK_GLOBAL_MEM_FENCE);

  __global nt_elem* row = logits + logits_off + b * stride;
  for (uint s = lid; s < cap; s += wg) {
    const uint key = keys[s];
    if (key != 0u) nt_penalize_token(row, key - 1u, counts[s], r, f, p);
  }

  /* Lists that are not a valid CSR: each token at its first position in the row
   * counts its output occurrences from there (none can come earlier). */
  for (ulong q = lid; !valid && q < n; q += wg) {
    const int id = NT_POSITION_ID(q);
    if (id < 0 || (uint)id >= vocab) continue;
    int first = 1;
    for (ulong j = 0; j < q && first; ++j) first = NT_POSITION_ID(j) != id;
    if (!first) continue;
    uint count = 0u;
    for (ulong j = max(q, np); j < n; ++j) count += NT_POSITION_ID(j) == id;
    nt_penalize_token(row, (ulong)id, count, r, f, p);
  }
}

#undef NT_POSITION_ID
