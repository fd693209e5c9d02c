/* lm_head_sample_binary's scores written out: score[m, v] with the arithmetic
 * of lm_head_topk_binary.cl (lane g mod 8 of fma(wscale, float(D), lane) in
 * increasing g, nt_lane_sum, one multiply by act_scale, one add of the bias),
 * so they are that head's, and the CPU backend's, bit for bit. Built after
 * lm_head_topk_binary.cl (nt_binary_group_sum). One work-item a score. */
__kernel void nt_binary_write_scores(__global const char* act, ulong act_off, ulong act_stride,
                                     __global const float* act_scale, ulong act_scale_off,
                                     __global const uint* wq, ulong wq_off, ulong wq_stride,
                                     __global const ushort* wscale, ulong wscale_off,
                                     ulong wscale_stride, uint vocab, uint H, uint group,
                                     uint rows, __global const uchar* bias, ulong bias_off,
                                     int bias_dtype, __global uchar* ws, ulong scores_at) {
  const ulong i = get_global_id(0);
  if (i >= (ulong)rows * vocab) return;
  const uint m = (uint)(i / vocab), v = (uint)(i % vocab);
  const __global uint* signs = wq + wq_off + (ulong)v * wq_stride;
  const __global ushort* scales = wscale + wscale_off + (ulong)v * wscale_stride;
  const __global char* a = act + act_off + (ulong)m * act_stride;
  float score = act_scale[act_scale_off + m] * nt_binary_group_sum(a, signs, scales, H / group, group / 32u);
  if (bias_dtype >= 0) score += nt_widen_dtype(bias, bias_off + v, bias_dtype);
  ((__global float*)(ws + scores_at))[i] = score;
}
