/* quantize_activations: one work-group per row. scale = max|x| / 127 over the
 * non-NaN entries (1 when that max is 0), q = clamp(rint(x / scale), +-127)
 * with IEEE division, a NaN quotient giving 0. */
__kernel void nt_quantize_activations(__global const nt_elem* x, ulong x_off, ulong x_stride,
                                      uint cols, __global char* q, ulong q_off, ulong q_stride,
                                      __global float* scale, ulong scale_off) {
  __local ulong red[NT_WG_MAX + 1];
  const uint lid = get_local_id(0), wg = get_local_size(0);
  const ulong r = get_group_id(0);
  __global const nt_elem* row = x + x_off + r * x_stride;
  /* |x| of non-NaN entries orders like its bits; NaN entries count as 0. */
  uint amax_bits = 0;
  for (uint j = lid; j < cols; j += wg) {
    const float a = fabs(nt_widen(row, j));
    if (a == a) amax_bits = max(amax_bits, as_uint(a));
  }
  const float amax = as_float((uint)nt_wg_max_u64(red, amax_bits));
  const float s = amax == 0.0f ? 1.0f : amax / 127.0f;
  __global char* out = q + q_off + r * q_stride;
  for (uint j = lid; j < cols; j += wg) {
    const float y = nt_widen(row, j) / s;
    out[j] = (char)(y != y ? 0.0f : rint(clamp(y, -127.0f, 127.0f)));
  }
  if (lid == 0) scale[scale_off + r] = s;
}
