/* lm_head_topk_dense: score[m, v] = hidden[m] . weight[v] (+ bias[v]) in fp32,
 * with the CPU backend's arithmetic: lane l = h mod 8 accumulates
 * fma(hidden[m, h], weight[v, h], lane) in increasing h (zero-padded to whole
 * lanes), the lanes are summed by nt_lane_sum, the bias is one add. So the
 * values, and the order of equal ones, are the CPU backend's bit for bit. */

/* Eight weights from h (all inside the row). */
static inline float8 nt_widen8(__global const nt_elem* w, uint h) {
#if NT_ELEM == 0
  return vload8(0, w + h);
#elif NT_ELEM == 1
  return vload_half8(0, (__global const half*)(w + h));
#else
  return as_float8(convert_uint8(vload8(0, w + h)) << 16);
#endif
}

/* The weights from `whole` to H (fewer than 8), zero-padded to whole lanes. */
static inline float8 nt_widen_tail8(__global const nt_elem* w, uint whole, uint H) {
  float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (uint e = whole; e < H; ++e) t[e - whole] = nt_widen(w, e);
  return vload8(0, t);
}

/* The hidden rows of this launch widened once, zero-padded to whole lanes
 * ([MB4][H8]), at the workspace's start. */
__kernel void nt_dense_widen_hidden(__global const nt_elem* hidden, ulong hidden_off,
                                    ulong hidden_stride, uint H, uint H8, uint rows, uint row_base,
                                    uint padded_rows, __global uchar* ws) {
  __global float* x = (__global float*)ws;
  const ulong i = get_global_id(0);
  if (i >= (ulong)padded_rows * H8) return;
  const uint m = (uint)(i / H8), h = (uint)(i % H8);
  x[i] = (m < rows && h < H) ? nt_widen(hidden, hidden_off + (ulong)(row_base + m) * hidden_stride + h)
                             : 0.0f;
}

/* Work-item `item` scores vocabulary rows [item * rows_per_item, ...) against
 * every hidden row of the launch (4 at a time where it can: each weight load
 * then serves 4) and
 * keeps each row's candidates in its buffer. */
__kernel void nt_dense_scores(__global const nt_elem* weight, ulong weight_off, ulong weight_stride,
                              uint vocab, uint H, uint H8, uint rows, __global const uchar* bias,
                              ulong bias_off, int bias_dtype, uint k, uint cap, uint items,
                              uint rows_per_item, __global uchar* ws, ulong counts_at,
                              ulong cand_at) {
  const __global float* x = (const __global float*)ws;
  __global uint* counts = (__global uint*)(ws + counts_at);
  __global ulong* cand = (__global ulong*)(ws + cand_at);
  const uint item = get_global_id(0);
  if (item >= items) return;
  uint count[NT_MB_MAX], threshold[NT_MB_MAX];
  for (uint m = 0; m < rows; ++m) count[m] = threshold[m] = 0;
  const uint v0 = min(vocab, item * rows_per_item), v1 = min(vocab, v0 + rows_per_item);
  const uint whole = H & ~7u;
  /* Vocabulary rows in pairs: two independent fma chains per hidden row. */
  for (uint v = v0; v < v1; v += 2u) {
    const uint pair = v + 1u < v1 ? 2u : 1u;
    __global const nt_elem* w[2];
    float b[2];
    float8 tail[2];
    for (uint r = 0; r < pair; ++r) {
      w[r] = weight + weight_off + (ulong)(v + r) * weight_stride;
      b[r] = bias_dtype >= 0 ? nt_widen_dtype(bias, bias_off + v + r, bias_dtype) : 0.0f;
      tail[r] = nt_widen_tail8(w[r], whole, H);
    }
    uint m = 0;
    for (; m + 4u <= rows; m += 4u) {
      __global const float* x0 = x + (ulong)m * H8;
      for (uint r = 0; r < pair; ++r) {
        float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        for (uint h = 0; h < whole; h += 8u) {
          const float8 wv = nt_widen8(w[r], h);
          a0 = fma(vload8(0, x0 + h), wv, a0);
          a1 = fma(vload8(0, x0 + H8 + h), wv, a1);
          a2 = fma(vload8(0, x0 + 2u * H8 + h), wv, a2);
          a3 = fma(vload8(0, x0 + 3u * H8 + h), wv, a3);
        }
        if (whole < H) {
          a0 = fma(vload8(0, x0 + whole), tail[r], a0);
          a1 = fma(vload8(0, x0 + H8 + whole), tail[r], a1);
          a2 = fma(vload8(0, x0 + 2u * H8 + whole), tail[r], a2);
          a3 = fma(vload8(0, x0 + 3u * H8 + whole), tail[r], a3);
        }
        const float8 acc[4] = {a0, a1, a2, a3};
        for (uint j = 0; j < 4u; ++j) {
          float score = nt_lane_sum(acc[j]);
          if (bias_dtype >= 0) score += b[r];
          nt_push(cand + ((ulong)(m + j) * items + item) * cap, &count[m + j], &threshold[m + j],
                  cap, k, score, v + r);
        }
      }
    }
    for (; m < rows; ++m) {
      __global const float* xm = x + (ulong)m * H8;
      __global const nt_elem* w1 = w[pair - 1u]; /* a lone row is computed twice */
      float8 a0 = 0.0f, a1 = 0.0f;
      for (uint h = 0; h < whole; h += 8u) {
        const float8 xv = vload8(0, xm + h);
        a0 = fma(xv, nt_widen8(w[0], h), a0);
        a1 = fma(xv, nt_widen8(w1, h), a1);
      }
      if (whole < H) {
        a0 = fma(vload8(0, xm + whole), tail[0], a0);
        a1 = fma(vload8(0, xm + whole), tail[pair - 1u], a1);
      }
      const float8 acc[2] = {a0, a1};
      for (uint r = 0; r < pair; ++r) {
        float score = nt_lane_sum(acc[r]);
        if (bias_dtype >= 0) score += b[r];
        nt_push(cand + ((ulong)m * items + item) * cap, &count[m], &threshold[m], cap, k, score,
                v + r);
      }
    }
  }
  nt_store_counts(cand, counts, count, rows, items, item, cap, k);
}
