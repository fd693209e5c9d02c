/* apply_token_bitmask: one work-item per (selected row, mask word). Tokens of
 * the word whose bit is 0, and every token at or past 32 W', get -inf; allowed
 * logits keep their bits. */

/* Row n of the selection: the n-th listed index (i32 or i64), or n itself;
 * -1 when the listed index lies outside [0, rows). */
static inline long nt_selected_row(__global const uchar* indices, ulong indices_off, int index_mode,
                                   ulong n, ulong rows) {
  long r = (long)n;
  if (index_mode == 1) r = ((__global const int*)indices)[indices_off + n];
  if (index_mode == 2) r = ((__global const long*)indices)[indices_off + n];
  return (r >= 0 && (ulong)r < rows) ? r : -1;
}

/* T: the logits' bits (uint or ushort); V8: 8 of them. Whole words go 8
 * tokens at a time without branches: a disallowed lane takes neg_inf, an
 * allowed one is written back with its own bits (a row listed twice thus
 * writes the same bits twice, whatever the order). */
#define NT_MASK_KERNEL(name, T, V8, load8, store8)                                               \
  __kernel void name(__global T* logits, ulong logits_off, ulong logits_stride, uint vocab,      \
                     ulong rows, __global const uint* mask, ulong mask_off, ulong mask_stride,   \
                     uint mask_words, __global const uchar* indices, ulong indices_off,          \
                     int index_mode, ulong selected, T neg_inf) {                                \
    const uint words = (vocab + 31u) / 32u;                                                      \
    const ulong item = get_global_id(0);                                                         \
    if (item >= selected * words) return;                                                        \
    const ulong n = item / words;                                                                \
    const uint w = (uint)(item - n * words);                                                     \
    const long r = nt_selected_row(indices, indices_off, index_mode, n, rows);                   \
    if (r < 0) return;                                                                           \
    uint off = ~(w < mask_words ? mask[mask_off + (ulong)r * mask_stride + w] : 0u);             \
    const uint span = min(32u, vocab - 32u * w);                                                 \
    if (span < 32u) off &= (1u << span) - 1u;                                                    \
    __global T* p = logits + logits_off + (ulong)r * logits_stride + 32u * w;                    \
    if (span < 32u) {                                                                            \
      for (uint j = 0; off != 0u; ++j, off >>= 1)                                                \
        if (off & 1u) p[j] = neg_inf;                                                            \
      return;                                                                                    \
    }                                                                                            \
    const V8 lane = (V8)(0, 1, 2, 3, 4, 5, 6, 7);                                                \
    for (uint c = 0; c < 4u; ++c) {                                                              \
      const uint bits = (off >> (8u * c)) & 0xFFu;                                               \
      if (bits == 0u) continue;                                                                  \
      const V8 disallowed = (((V8)(bits) >> lane) & (V8)(1)) * (V8)(~(T)0);                      \
      const V8 x = load8(0, p + 8u * c);                                                         \
      store8(bitselect(x, (V8)(neg_inf), disallowed), 0, p + 8u * c);                            \
    }                                                                                            \
  }

NT_MASK_KERNEL(nt_mask_32, uint, uint8, vload8, vstore8)
NT_MASK_KERNEL(nt_mask_16, ushort, ushort8, vload8, vstore8)
