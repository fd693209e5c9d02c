// The portable grammar-mask row kernel (cpu/row_mask.h) and the run-time
// choice among it, AVX2 and AVX-512.
#include "cpu/row_mask.h"

#include <algorithm>

#include "core/half.h"
#include "cpu/row_io.h"

namespace nt::cpu {
namespace {

// Bit j of a mask word as a lane constant: `(word & kLane[j]) == kLane[j]`
// vectorises with SSE2 (a shift by j does not: 5x slower).
constexpr uint32_t kLane[32] = {
    1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,  1u << 7,
    1u << 8,  1u << 9,  1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15,
    1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21, 1u << 22, 1u << 23,
    1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30, 1u << 31};

// Tokens [0, span) of x: branch-free selects on the bit patterns, allowed lanes
// written back as read.
template <class T, int Span>
inline void blend_word(T* x, uint32_t allowed, uint32_t neg_inf, int span = Span) {
  for (int j = 0; j < (Span > 0 ? Span : span); ++j) {
    const uint32_t keep = (allowed & kLane[j]) == kLane[j] ? ~0u : 0u;
    x[j] = T((x[j] & keep) | (neg_inf & ~keep));
  }
}

template <class T>
void mask_row_words(T* x, uint32_t neg_inf, const uint32_t* mask, int64_t words, int64_t t0,
                    int64_t t1) {
  const int64_t masked_end = std::min(t1, 32 * words);
  int64_t t = t0;
  for (; t + 32 <= t1; t += 32) {
    const uint32_t allowed = t < masked_end ? mask[t / 32] : 0u;
    if (allowed != 0xFFFFFFFFu) blend_word<T, 32>(x + t, allowed, neg_inf);
  }
  if (t < t1) blend_word<T, 0>(x + t, t < masked_end ? mask[t / 32] : 0u, neg_inf, int(t1 - t));
}

}  // namespace

void mask_row_portable(void* row, nt_dtype dtype, const uint32_t* mask, int64_t words,
                       int64_t t0, int64_t t1) {
  if (dtype == NT_F32) {
    mask_row_words(static_cast<uint32_t*>(row), NT_F32_NEG_INF, mask, words, t0, t1);
  } else {
    mask_row_words(static_cast<uint16_t*>(row), dtype == NT_F16 ? NT_F16_NEG_INF : NT_BF16_NEG_INF,
                   mask, words, t0, t1);
  }
}

MaskRowFn mask_row_kernel() {
  static const MaskRowFn chosen = use_avx512() && mask_row_avx512() ? mask_row_avx512()
                                  : use_avx2() && mask_row_avx2()   ? mask_row_avx2()
                                                                    : &mask_row_portable;
  return chosen;
}

}  // namespace nt::cpu
