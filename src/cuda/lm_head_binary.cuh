// The K orders shared by the binary head's activation layouts (written by
// the prep kernel of cuda/lm_head_topk_binary.cu) and its sign expansion in
// the pass kernels, and the float trick that reads their integer sums.
//
// The int8 MMA m16n8k32 wants, per lane (g, t), A bytes for 4+4 K positions
// of rows g and g+8. (w << (7 - c)) & 0x80808080 turns the bits c, c+8,
// c+16, c+24 of a sign word w into bytes 0/128 with one shift and one AND. So a
// "class" c of a word is a register of 4 A bytes, each worth 128 * bit, and the
// MMA (unsigned A, signed B) yields 128 * sum_{bit set} a. The K order of the
// MMA is free as long as A and B agree, so the activations are permuted once
// per pass into the order the classes produce.
//
// Within a group of G = 32W columns, k-step j (0 <= j < W) of lane t uses word
// word_of(j, t) of the group and the classes c0 = class_of(j, t), c0 + 1 (for
// A registers a0/a1 and a2/a3). The permuted activations hold, for each group
// and k-step, 4 lanes x 8 bytes: lane t's b0 (class c0, bytes i = 0..3 from
// columns 32*word + c0 + 8i) then b1 (class c0 + 1).
#pragma once

#include <cstdint>

namespace nt::cuda::lm_head {

__host__ __device__ __forceinline__ int binary_word_of(int words_per_group, int j, int t) {
  if (words_per_group >= 4) return t + 4 * (j >> 2);
  if (words_per_group == 2) return t >> 1;
  return 0;
}

__host__ __device__ __forceinline__ int binary_class_of(int words_per_group, int j, int t) {
  if (words_per_group >= 4) return 2 * (j & 3);
  if (words_per_group == 2) return 4 * (t & 1) + 2 * j;
  return 2 * t;
}

// Source column (within its group) of byte `p` of a group's permuted layout.
__host__ __device__ __forceinline__ int binary_permuted_column(int words_per_group, int p) {
  const int j = p >> 5, t = (p >> 3) & 3, half = (p >> 2) & 1, i = p & 3;
  const int word = binary_word_of(words_per_group, j, t);
  const int c = binary_class_of(words_per_group, j, t) + half;
  return 32 * word + c + 8 * i;
}

// Source column (within its group) of byte `q` of a group's layout in the
// MMA's own K order, which the warpgroup MMA reads from shared memory: within
// each k-step, lane t's first class at k = 4t..4t+3 and its second at
// k = 16 + 4t.. (the register-fragment order of A), where the permuted layout
// above puts them side by side for one 8-byte load.
__host__ __device__ __forceinline__ int binary_k_order_column(int words_per_group, int q) {
  const int j = q >> 5, half = (q >> 4) & 1, t = (q >> 2) & 3, i = q & 3;
  return binary_permuted_column(words_per_group, 32 * j + 8 * t + 4 * half + i);
}

// The weights and a pass's activations, strides 0 for a single row; every
// binary kernel's parameter struct extends it.
struct BinaryOperands {
  const uint32_t* wq;
  int64_t wq_stride;  // words
  const uint16_t* wscale;
  int64_t wscale_stride;  // halves
  const int8_t* act_q;
  int64_t act_stride;
  const float* act_scale;
  int cols, vocab, rows, group;
};

// The int32 MMA accumulators start at this bias: then, while |x| < 2^22, the
// bits of (kMagic + x) read as a float are exactly 12582912 + x.
constexpr int32_t kMagicBits = 0x4B400000;
constexpr float kMagicValue = 12582912.0f;

}  // namespace nt::cuda::lm_head
