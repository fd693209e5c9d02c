/* lm_head_topk_binary: score[m, v] = act_scale[m] * sum_g wscale[v, g] * D[m, v, g]
 * (+ bias[v]), D the exact integer dot of act_q[m] with the signs (bit 1 = +1)
 * of group g. The CPU backend's arithmetic: lane g mod 8 accumulates
 * fma(wscale, float(D), lane) in increasing g (zero groups pad to whole
 * lanes), nt_lane_sum, then one multiply by act_scale and one add of the bias,
 * so values and ties come out as the CPU backend's, bit for bit. */

/* Integer dot of 32 activations with the signs of one packed word. */
static inline int nt_sign_dot32(__global const char* a, uint bits) {
  const int16 shift = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const int16 lo = convert_int16(vload16(0, a)), hi = convert_int16(vload16(0, a + 16));
  const int16 sign_lo = ((((int16)((int)bits)) >> shift) & 1) * 2 - 1;
  const int16 sign_hi = ((((int16)((int)(bits >> 16))) >> shift) & 1) * 2 - 1;
  const int16 t = lo * sign_lo + hi * sign_hi;
  const int8 u = t.lo + t.hi;
  const int4 w = u.lo + u.hi;
  const int2 x = w.lo + w.hi;
  return x.x + x.y;
}

/* sum_g wscale[g] * D[g] of one activation row `a` against one vocabulary
 * row (signs, scales), in the lane order above, before act_scale and bias. */
static inline float nt_binary_group_sum(__global const char* a, const __global uint* signs,
                                        const __global ushort* scales, uint groups, uint words) {
  const uint padded = (groups + 7u) & ~7u;
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (uint g = 0; g < padded; ++g) {
    float scale = 0.0f;
    int d = 0;
    if (g < groups) {
      scale = nt_f16_to_f32(scales[g]);
      for (uint w = g * words; w < (g + 1u) * words; ++w) d += nt_sign_dot32(a + 32u * w, signs[w]);
    }
    lanes[g & 7u] = fma(scale, (float)d, lanes[g & 7u]);
  }
  return nt_lane_sum(vload8(0, lanes));
}

/* Work-item `item` scores vocabulary rows [item * rows_per_item, ...) against
 * the launch's activation rows [row_base, row_base + rows). */
__kernel void nt_binary_scores(__global const char* act, ulong act_off, ulong act_stride,
                               __global const float* act_scale, ulong act_scale_off,
                               __global const uint* wq, ulong wq_off, ulong wq_stride,
                               __global const ushort* wscale, ulong wscale_off,
                               ulong wscale_stride, uint vocab, uint H, uint group, uint rows,
                               uint row_base, __global const uchar* bias, ulong bias_off,
                               int bias_dtype, uint k, uint cap, uint items, uint rows_per_item,
                               __global uchar* ws, ulong counts_at, ulong cand_at) {
  __global uint* counts = (__global uint*)(ws + counts_at);
  __global ulong* cand = (__global ulong*)(ws + cand_at);
  const uint item = get_global_id(0);
  if (item >= items) return;
  uint count[NT_MB_MAX], threshold[NT_MB_MAX];
  for (uint m = 0; m < rows; ++m) count[m] = threshold[m] = 0;
  const uint v0 = min(vocab, item * rows_per_item), v1 = min(vocab, v0 + rows_per_item);
  const uint groups = H / group, words = group / 32u;
  for (uint v = v0; v < v1; ++v) {
    const __global uint* signs = wq + wq_off + (ulong)v * wq_stride;
    const __global ushort* scales = wscale + wscale_off + (ulong)v * wscale_stride;
    const float b = bias_dtype >= 0 ? nt_widen_dtype(bias, bias_off + v, bias_dtype) : 0.0f;
    for (uint m = 0; m < rows; ++m) {
      const __global char* a = act + act_off + (ulong)(row_base + m) * act_stride;
      float score = act_scale[act_scale_off + row_base + m] * nt_binary_group_sum(a, signs, scales, groups, words);
      if (bias_dtype >= 0) score += b;
      nt_push(cand + ((ulong)m * items + item) * cap, &count[m], &threshold[m], cap, k, score, v);
    }
  }
  nt_store_counts(cand, counts, count, rows, items, item, cap, k);
}
