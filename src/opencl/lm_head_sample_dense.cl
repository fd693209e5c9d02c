/* lm_head_sample_dense's scores written out: score[m, v] with the arithmetic of
 * lm_head_topk_dense.cl (lane h mod 8 of an fma chain in increasing h, zero-
 * padded to whole lanes, nt_lane_sum, then one add of the bias), so they are
 * that head's, and the CPU backend's, bit for bit. Built after
 * lm_head_topk_dense.cl (nt_widen8, nt_widen_tail8), after nt_dense_widen_hidden
 * wrote the widened hidden rows ([rows][H8]) at the workspace's start. One
 * work-item a score. */
__kernel void nt_dense_write_scores(__global const nt_elem* weight, ulong weight_off,
                                    ulong weight_stride, uint vocab, uint H, uint H8, uint rows,
                                    __global const uchar* bias, ulong bias_off, int bias_dtype,
                                    __global uchar* ws, ulong scores_at) {
  const ulong i = get_global_id(0);
  if (i >= (ulong)rows * vocab) return;
  const uint m = (uint)(i / vocab), v = (uint)(i % vocab);
  const __global float* x = (const __global float*)ws + (ulong)m * H8;
  __global const nt_elem* w = weight + weight_off + (ulong)v * weight_stride;
  const uint whole = H & ~7u;
  float8 acc = 0.0f;
  for (uint h = 0; h < whole; h += 8u) acc = fma(vload8(0, x + h), nt_widen8(w, h), acc);
  if (whole < H) acc = fma(vload8(0, x + whole), nt_widen_tail8(w, whole, H), acc);
  float score = nt_lane_sum(acc);
  if (bias_dtype >= 0) score += nt_widen_dtype(bias, bias_off + v, bias_dtype);
  ((__global float*)(ws + scores_at))[i] = score;
}
