/* pack_weights: one work-item per output word; bit j is (signs[32w + j] > 0). */
__kernel void nt_pack_weights(__global const char* signs, ulong signs_off, ulong signs_stride,
                              ulong rows, uint words, __global uint* wq, ulong wq_off,
                              ulong wq_stride) {
  const ulong item = get_global_id(0);
  if (item >= rows * words) return;
  const ulong v = item / words;
  const uint w = (uint)(item - v * words);
  __global const char* s = signs + signs_off + v * signs_stride + 32u * w;
  uint bits = 0;
  for (uint j = 0; j < 32u; ++j) bits |= (uint)(s[j] > 0) << j;
  wq[wq_off + v * wq_stride + w] = bits;
}
