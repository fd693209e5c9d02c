/* bitmask_from_allowed: one work-item per output word; bit j is (byte != 0)
 * of token 32w + j, and bits past V stay 0. */
__kernel void nt_bitmask_from_allowed(__global const uchar* allowed, ulong allowed_off,
                                      ulong allowed_stride, uint vocab, ulong rows,
                                      __global uint* bitmask, ulong bitmask_off,
                                      ulong bitmask_stride) {
  const uint words = (vocab + 31u) / 32u;
  const ulong item = get_global_id(0);
  if (item >= rows * words) return;
  const ulong r = item / words;
  const uint w = (uint)(item - r * words);
  __global const uchar* a = allowed + allowed_off + r * allowed_stride + 32u * w;
  const uint span = min(32u, vocab - 32u * w);
  uint bits = 0;
  for (uint j = 0; j < span; ++j) bits |= (uint)(a[j] != 0) << j;
  bitmask[bitmask_off + r * bitmask_stride + w] = bits;
}
